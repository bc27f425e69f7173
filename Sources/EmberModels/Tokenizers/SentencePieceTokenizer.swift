import EmberCore
import Foundation

/// SentencePiece as llama.cpp runs it from a GGUF vocabulary
/// (`tokenizer.ggml.model = llama`: Gemma, Llama 2, Mistral): special tokens
/// are split out of the text first (`SpecialTokenSplitter`); each run of
/// plain text — with a space put in front when the file says
/// `add_space_prefix` and the run follows a special token or starts the text
/// — has its spaces written as `▁`, is cut into UTF-8 characters, and pairs of
/// neighbouring pieces that form a token are merged, the pair whose token
/// scores highest first (the leftmost on ties), until no pair forms one. A
/// character that is no token becomes byte tokens `<0xXX>` (byte fallback).
public final class SentencePieceTokenizer: TextTokenizer, @unchecked Sendable {
    /// The vocabulary, indexed by token id, as the file spells it (`▁` for spaces).
    public let tokens: [String]
    /// Each token's type.
    public let types: [GGUFTokenType]
    private let scores: [Float]
    /// Token ids by their exact UTF-8 bytes.
    private let ids: ByteStringTable
    /// The id of byte token `<0xXX>` for each byte, -1 where the vocabulary has none.
    private let byteTokens: [Int]
    private let splitter: SpecialTokenSplitter
    /// The beginning-of-sequence token id, nil when the file names none.
    public let bosID: Int?
    /// The end-of-sequence token id, nil when the file names none.
    public let eosID: Int?
    /// Whether `encode` puts `bosID` first by default (`tokenizer.ggml.add_bos_token`, true when absent).
    public let addBOS: Bool
    /// Whether a space is put before the text and after each special token (`tokenizer.ggml.add_space_prefix`).
    public let addSpacePrefix: Bool
    /// The ids that end a generation: the end of sequence and of turn, and the usual end markers (`<end_of_turn>`, …).
    public let endOfGenerationIDs: Set<Int>

    /// A tokenizer from its parts (`scores` and `types` indexed like `tokens`).
    public init(tokens: [String], scores: [Float], types: [GGUFTokenType], bosID: Int?, eosID: Int?, addBOS: Bool,
                addSpacePrefix: Bool, endOfTurnID: Int? = nil) {
        let ids = ByteStringTable(tokens)
        self.ids = ids
        var named: [String: Int] = [:]
        for name in VocabularyConventions.endOfGenerationNames.union(VocabularyConventions.endOfTurnNames) {
            named[name] = ids.id(of: name)
        }
        let conventions = VocabularyConventions(ids: named, types: types, eosID: eosID, endOfTurnID: endOfTurnID)
        self.tokens = tokens
        self.scores = scores
        self.types = conventions.types
        endOfGenerationIDs = conventions.endOfGeneration
        byteTokens = (0..<256).map { byte in ids.id(of: String(format: "<0x%02X>", byte)) ?? -1 }
        splitter = SpecialTokenSplitter(tokens: tokens, types: conventions.types)
        self.bosID = bosID
        self.eosID = eosID
        self.addBOS = addBOS
        self.addSpacePrefix = addSpacePrefix
    }

    /// Reads the tokenizer from GGUF metadata; a missing or malformed field is a ``ModelFileError``.
    public convenience init(gguf: GGUFFile) throws {
        let tokenValues = try gguf.require("tokenizer.ggml.tokens").array ?? []
        let tokens = tokenValues.compactMap(\.string)
        guard !tokens.isEmpty, tokens.count == tokenValues.count else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.ggml.tokens", found: "not an array of strings",
                                              expected: "an array of strings")
        }
        let scoreValues = gguf.metadata["tokenizer.ggml.scores"]?.array ?? []
        let scores = scoreValues.compactMap { $0.number.map(Float.init) }
        guard scores.count == tokens.count, scores.allSatisfy({ !$0.isNaN }) else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.ggml.scores", found: "\(scores.count) numbers",
                                              expected: "\(tokens.count) numbers, one per token (a SentencePiece vocabulary)")
        }
        func tokenID(_ key: String) throws -> Int? {
            guard let value = gguf.metadata[key] else { return nil }
            guard let id = value.integer, tokens.indices.contains(id) else {
                throw ModelFileError.invalidField(file: gguf.path, field: key, found: "\(value)", expected: "a token id below \(tokens.count)")
            }
            return id
        }
        self.init(tokens: tokens, scores: scores,
                  types: GGUFTokenType.list(gguf.metadata["tokenizer.ggml.token_type"]?.array, count: tokens.count),
                  bosID: try tokenID("tokenizer.ggml.bos_token_id"), eosID: try tokenID("tokenizer.ggml.eos_token_id"),
                  addBOS: gguf.metadata["tokenizer.ggml.add_bos_token"]?.bool ?? true,
                  addSpacePrefix: gguf.metadata["tokenizer.ggml.add_space_prefix"]?.bool ?? true,
                  endOfTurnID: try tokenID("tokenizer.ggml.eot_token_id"))
    }

    // MARK: Encoding

    /// Token ids for `text`; with `parseSpecial` control tokens written in the text become their ids (user-defined
    /// tokens always do); `withBOS` overrides the file's `add_bos_token`.
    public func encode(_ text: String, parseSpecial: Bool = true, withBOS: Bool? = nil) -> [Int] {
        var output: [Int] = (withBOS ?? addBOS) ? bosID.map { [$0] } ?? [] : []
        let bytes = Array(text.utf8)
        var afterSpecial = true
        for fragment in splitter.split(bytes, parseSpecial: parseSpecial) {
            switch fragment {
            case let .token(id):
                output.append(id)
                afterSpecial = true
            case let .text(range):
                var piece: [UInt8] = addSpacePrefix && afterSpecial ? [0x20] : []
                piece += bytes[range]
                tokenize(piece, into: &output)
                afterSpecial = false
            }
        }
        return output
    }

    /// One symbol of the merge: a byte range of the escaped text, linked to its neighbours.
    private struct Symbol {
        var start: Int
        var length: Int
        var previous: Int
        var next: Int
    }

    /// A candidate merge of two neighbouring symbols into a token of `score`.
    private struct Bigram: Comparable {
        let left: Int, right: Int
        let score: Float
        let length: Int

        /// Higher score first; on equal scores the leftmost first.
        static func < (a: Bigram, b: Bigram) -> Bool { a.score < b.score || (a.score == b.score && a.left > b.left) }
    }

    private func tokenize(_ raw: [UInt8], into output: inout [Int]) {
        // Spaces as "▁" (E2 96 81).
        var text: [UInt8] = []
        text.reserveCapacity(raw.count + raw.count / 2)
        for byte in raw { if byte == 0x20 { text += [0xE2, 0x96, 0x81] } else { text.append(byte) } }
        guard !text.isEmpty else { return }
        // One symbol per UTF-8 character.
        var symbols: [Symbol] = []
        var offset = 0
        while offset < text.count {
            let lead = text[offset]
            let length = min(lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1, text.count - offset)
            symbols.append(Symbol(start: offset, length: length, previous: symbols.count - 1,
                                  next: offset + length == text.count ? -1 : symbols.count + 1))
            offset += length
        }
        var queue = BinaryHeap<Bigram>()
        func lookup(_ start: Int, _ length: Int) -> Int? { ids.id(of: text[start..<(start + length)]) }
        func consider(_ left: Int, _ right: Int) {
            guard left >= 0, right >= 0 else { return }
            let (start, length) = (symbols[left].start, symbols[left].length + symbols[right].length)
            guard let id = lookup(start, length) else { return }
            queue.push(Bigram(left: left, right: right, score: scores[id], length: length))
        }
        for index in 1..<symbols.count { consider(index - 1, index) }
        while let bigram = queue.pop() {
            let (left, right) = (symbols[bigram.left], symbols[bigram.right])
            guard left.length > 0, right.length > 0, left.length + right.length == bigram.length else { continue }
            symbols[bigram.left].length += right.length
            symbols[bigram.right].length = 0
            symbols[bigram.left].next = right.next
            if right.next >= 0 { symbols[right.next].previous = bigram.left }
            consider(symbols[bigram.left].previous, bigram.left)
            consider(bigram.left, symbols[bigram.left].next)
        }
        // Every merged piece is a token (a pair is only queued when it forms one); a lone character that is not
        // becomes its bytes.
        var index = 0
        while index != -1 {
            let symbol = symbols[index]
            if let id = lookup(symbol.start, symbol.length) {
                output.append(id)
            } else {
                for byte in text[symbol.start..<(symbol.start + symbol.length)] where byteTokens[Int(byte)] >= 0 {
                    output.append(byteTokens[Int(byte)])
                }
            }
            index = symbol.next
        }
    }

    // MARK: Decoding

    /// Whether `id` stands for text: a normal, byte or user-defined token.
    public func isText(_ id: Int) -> Bool {
        guard types.indices.contains(id) else { return false }
        return [.normal, .byte, .userDefined].contains(types[id])
    }

    /// The text tokens as a byte trie, built on first use.
    public var tokenTrie: TokenTrie { trieCache.value { TokenTrie(self) } }
    private let trieCache = BuiltOnce<TokenTrie>()

    /// The bytes token `id` stands for: `▁` as a space, a byte token as its byte, a special token as its text.
    public func bytes(of id: Int) -> [UInt8] {
        guard tokens.indices.contains(id) else { return [] }
        switch types[id] {
        case .normal:
            return Array(tokens[id].replacingOccurrences(of: "▁", with: " ").utf8)
        case .byte:
            let text = tokens[id]
            guard text.count == 6, let byte = UInt8(text.dropFirst(3).prefix(2), radix: 16) else { return [] }
            return [byte]
        case .control, .userDefined, .unknown, .unused:
            return Array(tokens[id].utf8)
        }
    }

    /// Number of tokens in the vocabulary.
    public var count: Int { tokens.count }

    /// The id of the token spelled `token`, if any.
    public func id(of token: String) -> Int? { ids.id(of: token) }

    /// Whether `id` ends a generation (end of sequence, end of turn, or another end marker).
    public func endsGeneration(_ id: Int) -> Bool { endOfGenerationIDs.contains(id) }
}

/// A max-heap: `pop` gives the greatest element.
struct BinaryHeap<Element: Comparable> {
    private var items: [Element] = []

    mutating func push(_ item: Element) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[parent] < items[child] else { break }
            items.swapAt(parent, child)
            child = parent
        }
    }

    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let (left, right) = (2 * parent + 1, 2 * parent + 2)
            var largest = parent
            if left < items.count, items[largest] < items[left] { largest = left }
            if right < items.count, items[largest] < items[right] { largest = right }
            guard largest != parent else { break }
            items.swapAt(parent, largest)
            parent = largest
        }
        return top
    }
}
