import Foundation

/// A vocabulary's text tokens as a byte trie laid out in depth-first order, so that finding every token a grammar
/// state allows is one forward pass over flat arrays that skips each dead subtree whole: tokens sharing a prefix
/// share its steps through the grammar. Built once per tokenizer (``TextTokenizer/tokenTrie``).
public final class TokenTrie: Sendable {
    /// Each node's byte (the root, node 0, has none).
    let nodeByte: [UInt8]
    /// Each node's depth: its distance from the root.
    let nodeDepth: [UInt16]
    /// The index just past each node's subtree.
    let subtreeEnd: [Int32]
    /// The tokens whose bytes end at each node: `endingTokens[endingStart[n]..<endingStart[n + 1]]`.
    let endingStart: [Int32]
    let endingTokens: [Int32]
    /// Every token's bytes (empty for tokens that are not text).
    let tokenBytes: [[UInt8]]
    /// Tokens that end a generation: allowed once the value is complete.
    let endOfGeneration: [Int]
    /// The vocabulary's size.
    let count: Int
    /// The longest token, in bytes.
    let maximumDepth: Int

    /// The trie of `tokenizer`'s text tokens (control and unused tokens are left out: they never stand for text).
    public convenience init(_ tokenizer: any TextTokenizer) {
        let bytes = (0..<tokenizer.count).map { tokenizer.isText($0) ? tokenizer.bytes(of: $0) : [] }
        self.init(tokenBytes: bytes, endOfGeneration: (0..<tokenizer.count).filter { tokenizer.endsGeneration($0) })
    }

    /// The trie of tokens spelled `tokenBytes` (empty: never generated inside a value).
    init(tokenBytes: [[UInt8]], endOfGeneration: [Int]) {
        self.tokenBytes = tokenBytes
        self.endOfGeneration = endOfGeneration
        count = tokenBytes.count
        let order = tokenBytes.indices.filter { !tokenBytes[$0].isEmpty }.sorted { tokenBytes[$0].lexicographicallyPrecedes(tokenBytes[$1]) }
        var bytes: [UInt8] = [0], depths: [UInt16] = [0], ends: [Int32] = [0]
        var endingCounts: [Int32] = [0]
        var endingTokens: [Int32] = []
        var path: [Int] = [0] // node index at each depth of the current token
        var previous: [UInt8] = []
        for token in order {
            let spelled = tokenBytes[token]
            var common = 0
            while common < min(previous.count, spelled.count), previous[common] == spelled[common] { common += 1 }
            // Nodes deeper than the common prefix are finished: their subtrees end here.
            while path.count - 1 > common {
                ends[path.removeLast()] = Int32(bytes.count)
            }
            for depth in common..<spelled.count {
                bytes.append(spelled[depth])
                depths.append(UInt16(min(depth + 1, Int(UInt16.max))))
                ends.append(0)
                endingCounts.append(0)
                path.append(bytes.count - 1)
            }
            endingCounts[path.last!] += 1
            endingTokens.append(Int32(token)) // tokens arrive in node order, so each node's tokens are contiguous
            previous = spelled
        }
        while let node = path.popLast() { ends[node] = Int32(bytes.count) }
        var starts = [Int32](repeating: 0, count: bytes.count + 1)
        for node in 0..<bytes.count { starts[node + 1] = starts[node] + endingCounts[node] }
        nodeByte = bytes
        nodeDepth = depths
        subtreeEnd = ends
        endingStart = starts
        self.endingTokens = endingTokens
        maximumDepth = Int(depths.max() ?? 0)
    }

    /// Nodes, root included.
    var nodeCount: Int { nodeByte.count }

    private let grammarLock = NSLock()
    nonisolated(unsafe) private var grammars: [OutputFormat: SharedGrammar] = [:]
    nonisolated(unsafe) private var grammarOrder: [OutputFormat] = []
    /// Compiled formats kept per vocabulary (the least recently used goes first).
    static let keptGrammars = 16

    /// The compiled grammar of `format` over this vocabulary, with its warm caches: generations with the same format
    /// share one, so a schema's masks are computed once, not once per request.
    func sharedGrammar(_ format: OutputFormat, compile: () throws -> Grammar) rethrows -> SharedGrammar {
        let cached: SharedGrammar? = grammarLock.withLock {
            guard let known = grammars[format], !known.isFull else { return nil }
            grammarOrder.removeAll { $0 == format }
            grammarOrder.append(format)
            return known
        }
        if let cached { return cached }
        // Compiled outside the lock: other formats' requests do not wait for this one.
        let made = SharedGrammar(matcher: GrammarMatcher(try compile()), trie: self)
        return grammarLock.withLock {
            if let raced = grammars[format], !raced.isFull { return raced }
            grammars[format] = made
            grammarOrder.removeAll { $0 == format }
            grammarOrder.append(format)
            if grammarOrder.count > Self.keptGrammars { grammars[grammarOrder.removeFirst()] = nil }
            return made
        }
    }
}

/// A value built on first use by whichever thread asks first, then shared (a tokenizer's ``TokenTrie``).
final class BuiltOnce<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var built: Value?

    /// The value, built by `make` if it is not yet.
    func value(_ make: () -> Value) -> Value {
        lock.withLock {
            if let built { return built }
            let value = make()
            built = value
            return value
        }
    }
}
