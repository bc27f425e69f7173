import Foundation

/// One format's matcher over one vocabulary, shared by every generation with that format: its states, transitions
/// and token masks are computed once. A lock serialises the generations that use it at once (a batch samples its
/// sequences in parallel); each holds its own state.
final class SharedGrammar: @unchecked Sendable {
    private let lock = NSLock()
    private let matcher: GrammarMatcher
    let trie: TokenTrie
    private var masks: [GrammarMatcher.State: [UInt64]] = [:]
    /// The allowed tokens of states that allow few (at most ``listedLimit``); larger lists are rebuilt from the mask.
    private var allowedLists: [GrammarMatcher.State: [Int32]] = [:]
    private var cachedBytes = 0
    /// Bytes of masks and lists one grammar keeps; past it they are dropped and recomputed as needed.
    static let cacheLimit = 64 << 20
    static let listedLimit = 4096
    /// Whole-vocabulary masks computed (cache misses), for tests and reports.
    private(set) var masksComputed = 0

    init(matcher: GrammarMatcher, trie: TokenTrie) {
        self.matcher = matcher
        self.trie = trie
    }

    var grammar: Grammar { matcher.grammar }
    /// How far from the token limit one token can matter: the most bytes a position can still require, plus the
    /// longest token.
    var budgetReach: Int { matcher.largestRest + trie.maximumDepth }
    var initial: GrammarMatcher.State { lock.withLock { matcher.initial } }
    /// Whether the matcher has grown past ``GrammarMatcher/stateLimit`` (new generations then get a fresh one).
    var isFull: Bool { lock.withLock { matcher.states.count > GrammarMatcher.stateLimit } }

    func isComplete(_ state: GrammarMatcher.State) -> Bool { lock.withLock { matcher.isAccepting(state) && !matcher.canContinue(state) } }

    /// The state after token `id`'s bytes (end-of-generation and other non-text tokens: unchanged).
    func step(_ state: GrammarMatcher.State, token id: Int) -> GrammarMatcher.State {
        guard id >= 0, id < trie.count, !trie.tokenBytes[id].isEmpty else { return state }
        return lock.withLock { matcher.step(state, trie.tokenBytes[id]) }
    }

    /// Whether token `id` may follow `state`, leaving a value that `budget` more tokens can still finish (one byte a
    /// token at worst: the vocabularies Ember reads have a token for every byte).
    func allows(_ id: Int, after state: GrammarMatcher.State, budget: Int = .max) -> Bool {
        guard id >= 0, id < trie.count else { return false }
        let bytes = trie.tokenBytes[id]
        return lock.withLock {
            if bytes.isEmpty { return matcher.isAccepting(state) && trie.endOfGeneration.contains(id) }
            let next = matcher.step(state, bytes)
            return next != GrammarMatcher.dead && matcher.shortestFinish(next) <= budget
        }
    }

    /// Fewest bytes that finish the value from `state`.
    func shortestFinish(_ state: GrammarMatcher.State) -> Int { lock.withLock { matcher.shortestFinish(state) } }

    /// The ids of every token allowed after `state`, ascending (computed once per state).
    func allowedTokens(after state: GrammarMatcher.State) -> [Int32] {
        if let known = lock.withLock({ allowedLists[state] }) { return known }
        let bits = mask(after: state)
        var list: [Int32] = []
        for (word, value) in bits.enumerated() where value != 0 {
            var rest = value
            while rest != 0 {
                list.append(Int32(word * 64 + rest.trailingZeroBitCount))
                rest &= rest - 1
            }
        }
        if list.count <= Self.listedLimit {
            lock.withLock {
                allowedLists[state] = list
                cachedBytes += list.count * 4
            }
        }
        return list
    }

    /// The allowed tokens after `state` when they were listed before (only states allowing at most
    /// ``listedLimit`` are); nil otherwise.
    func knownAllowedTokens(after state: GrammarMatcher.State) -> [Int32]? { lock.withLock { allowedLists[state] } }

    /// Every token allowed after `state`, as bits: one pass over the trie in depth-first order that skips each dead
    /// subtree whole (`path[d]` is the state after a node's first d bytes).
    func mask(after state: GrammarMatcher.State) -> [UInt64] {
        lock.withLock {
            if let known = masks[state] { return known }
            masksComputed += 1
            var mask = [UInt64](repeating: 0, count: (trie.count + 63) / 64)
            if matcher.isAccepting(state) { for id in trie.endOfGeneration { mask[id >> 6] |= 1 << UInt64(id & 63) } }
            var path = [GrammarMatcher.State](repeating: GrammarMatcher.dead, count: trie.maximumDepth + 1)
            path[0] = state
            var node = 1
            let total = trie.nodeCount
            trie.nodeByte.withUnsafeBufferPointer { bytes in
                trie.nodeDepth.withUnsafeBufferPointer { depths in
                    trie.subtreeEnd.withUnsafeBufferPointer { ends in
                        trie.endingStart.withUnsafeBufferPointer { starts in
                            while node < total {
                                let depth = Int(depths[node])
                                let next = matcher.step(path[depth - 1], bytes[node])
                                if next == GrammarMatcher.dead {
                                    node = Int(ends[node])
                                    continue
                                }
                                path[depth] = next
                                for index in Int(starts[node])..<Int(starts[node + 1]) {
                                    let id = Int(trie.endingTokens[index])
                                    mask[id >> 6] |= 1 << UInt64(id & 63)
                                }
                                node += 1
                            }
                        }
                    }
                }
            }
            if cachedBytes > Self.cacheLimit {
                masks = [:]
                allowedLists = [:]
                cachedBytes = 0
            }
            masks[state] = mask
            cachedBytes += mask.count * 8
            return mask
        }
    }
}

/// Keeps one generation inside an output format's grammar: which tokens may come next, and the state after each
/// chosen one. The sampler asks ``allows(_:)`` of its best candidates first and takes the state's list of allowed
/// tokens (``allowedTokens()``, from a whole-vocabulary pass over the trie) only when too few of them pass or the state
/// is known to allow few; lists and masks are remembered per grammar state and shared by every generation with the
/// same format over the same vocabulary.
public final class TokenConstraint: @unchecked Sendable {
    let shared: SharedGrammar
    private(set) var state: GrammarMatcher.State

    /// A constraint at the start of `shared`'s grammar.
    init(shared: SharedGrammar) {
        self.shared = shared
        state = shared.initial
    }

    /// A constraint with a matcher of its own (tests).
    convenience init(grammar: Grammar, trie: TokenTrie) {
        self.init(shared: SharedGrammar(matcher: GrammarMatcher(grammar), trie: trie))
    }

    /// Whether the bytes so far form a whole value that cannot be continued: the generation is over.
    public var isComplete: Bool { shared.isComplete(state) }
    /// Whole-vocabulary masks the shared grammar has computed so far.
    public var masksComputed: Int { shared.masksComputed }

    /// Tokens the generation may still take (its `maxTokens` or the context, whichever ends first); once few are
    /// left, only tokens after which the value can still be finished in time are allowed, so a JSON output is whole
    /// even when the limit is what ends it. `.max`: no limit.
    public var remainingTokens = Int.max {
        didSet { updateBudget() }
    }

    /// The bytes the tokens after the next one must still be able to write (nil: no limit to keep), set once per
    /// token rather than asked of the grammar for every candidate.
    private var budgetAfterNext: Int?

    private func updateBudget() {
        guard remainingTokens != .max else { return budgetAfterNext = nil }
        let budget = remainingTokens - 1
        // Far from the limit no single token can matter.
        budgetAfterNext = budget > shared.shortestFinish(state) + shared.budgetReach ? nil : budget
    }

    /// Whether token `id` may come next.
    public func allows(_ id: Int) -> Bool { shared.allows(id, after: state, budget: budgetAfterNext ?? .max) }

    /// Every token that may come next, as bits (`mask[id >> 6] >> (id & 63) & 1`), without the token limit.
    public func allowedMask() -> [UInt64] { shared.mask(after: state) }

    /// Every token that may come next, ascending.
    public func allowedTokens() -> [Int32] { withinBudget(shared.allowedTokens(after: state)) }

    /// The tokens that may come next when this state was listed before (states that allow few tokens are).
    public func knownAllowedTokens() -> [Int32]? { shared.knownAllowedTokens(after: state).map(withinBudget) }

    /// `tokens` that leave a value the remaining tokens can finish — all of them when none does (the limit is below
    /// the shortest value: the output will be cut, as free text would be).
    private func withinBudget(_ tokens: [Int32]) -> [Int32] {
        guard let budget = budgetAfterNext else { return tokens }
        let fitting = tokens.filter { shared.allows(Int($0), after: state, budget: budget) }
        return fitting.isEmpty ? tokens : fitting
    }

    /// The token to pick when no token is allowed (a vocabulary without the bytes the grammar needs): the first
    /// end-of-generation token, so the generation ends.
    public var fallbackToken: Int { shared.trie.endOfGeneration.first ?? 0 }

    /// Moves past token `id` (end-of-generation tokens leave the state as it is).
    public func accept(_ id: Int) {
        state = shared.step(state, token: id)
        updateBudget()
    }
}
