import EmberCore
import Foundation

/// The KV caches of finished generations, kept so that a later prompt starting with the same tokens computes only
/// the tokens after them: the next turn of a conversation that an HTTP client sends whole again, a long system
/// prompt many requests share, a completion asked again.
///
/// An entry is the tokens a session held at the end of its generation (prompt and reply) and a copy of their keys
/// and values, for one model under one set of units and precision (what the values depend on). A generation looks
/// up the entry sharing the longest prefix with its prompt, copies that many tokens' keys and values into its own
/// session and feeds the rest — always at least the prompt's last token, whose logits it samples from. Entries are
/// never changed once stored, so any number of generations read one at once. The text is what a full prompt pass
/// gives up to the rounding of matrix products over fewer rows (as with ``ContinuousBatcher``).
///
/// Bounded by ``capacityBytes`` and ``maximumEntries``: the least recently used entries go first, an entry another
/// one extends (the same conversation a turn later) goes when that one comes, and ``release(atLeast:)`` gives memory
/// back on demand (the runtime's scheduler calls it when that lets a request start instead of waiting for memory).
/// An entry's model is held weakly: once it is released its entries hold nothing of it, and they are dropped at the
/// cache's next use.
public final class PromptCache: @unchecked Sendable {
    /// Most bytes of keys and values the entries hold together.
    public let capacityBytes: Int
    /// Most entries kept.
    public let maximumEntries: Int
    /// Fewest tokens worth restoring: a shorter common prefix (a BOS, a template's first marker) is computed again.
    public let minimumTokens: Int

    /// What the cache has done since it was made.
    public struct Statistics: Sendable, Equatable {
        /// Prompts looked up.
        public var lookups = 0
        /// Prompts that found a prefix of at least ``PromptCache/minimumTokens`` tokens.
        public var hits = 0
        /// Prompt tokens restored instead of computed, over every hit.
        public var reusedTokens = 0
        /// Entries stored.
        public var stored = 0
        /// Entries dropped for room (not those a longer one replaced).
        public var evicted = 0
    }

    private final class Entry {
        weak var model: AnyObject?
        let settings: String
        let tokens: [Int]
        let session: any GenerationSession
        var lastUse: UInt64
        init(model: AnyObject, settings: String, tokens: [Int], session: any GenerationSession, lastUse: UInt64) {
            (self.model, self.settings, self.tokens, self.session, self.lastUse) = (model, settings, tokens, session, lastUse)
        }
    }

    private let lock = NSLock()
    private var entries: [Entry] = []
    private var clock: UInt64 = 0
    private var counts = Statistics()

    /// A cache of at most `capacityBytes` bytes (0 keeps nothing) and `maximumEntries` entries, restoring common
    /// prefixes of at least `minimumTokens` tokens.
    public init(capacityBytes: Int, maximumEntries: Int = 64, minimumTokens: Int = 8) {
        self.capacityBytes = max(0, capacityBytes)
        self.maximumEntries = max(1, maximumEntries)
        self.minimumTokens = max(1, minimumTokens)
    }

    /// Bytes the entries' keys and values take now.
    public var bytes: Int { lock.withLock { liveEntries().reduce(0) { $0 + $1.session.cacheBytes } } }
    /// Entries held now.
    public var count: Int { lock.withLock { liveEntries().count } }
    /// What the cache has done so far.
    public var statistics: Statistics { lock.withLock { counts } }

    /// The key of what cached values depend on besides the model: its units and precision (not threads nor class).
    static func settings(_ options: ExecutionOptions) -> String {
        "\(options.units)|\(options.precision.map { "\($0)" } ?? "stored")"
    }

    /// Whether an entry of `model` is held (under any settings): when none is, no prompt of it can be restored.
    public func holdsEntries(of model: AnyObject) -> Bool {
        lock.withLock { liveEntries().contains { $0.model === model } }
    }

    /// How many leading tokens of `tokens` a generation of `model` under `options` would restore now (0: none) — what
    /// a generation's restore would copy, looked up without copying, counting or marking anything used:
    /// the policy predicts each route's prompt from it.
    public func restorableTokens(_ tokens: [Int], model: AnyObject, options: ExecutionOptions) -> Int {
        lock.withLock { longestPrefix(of: tokens, model: model, settings: Self.settings(options))?.length ?? 0 }
    }

    /// Makes the empty `session` hold the longest prefix of `tokens` an entry of `model` under `options` holds, at
    /// most all but the last token; returns how many tokens it now holds (0: nothing restored).
    func restore(into session: any GenerationSession, tokens: [Int], model: AnyObject, options: ExecutionOptions) -> Int {
        let settings = Self.settings(options)
        let found: (entry: Entry, length: Int)? = lock.withLock {
            counts.lookups += 1
            guard let best = longestPrefix(of: tokens, model: model, settings: settings) else { return nil }
            clock += 1
            best.entry.lastUse = clock
            return best
        }
        // The copy runs outside the lock: entries never change, and this one stays alive while it is read.
        guard let found, session.position == 0, session.copyPrefix(of: found.entry.session, tokens: found.length) else { return 0 }
        lock.withLock {
            counts.hits += 1
            counts.reusedTokens += found.length
        }
        return found.length
    }

    /// Keeps the first `tokens.count` tokens `session` holds (the whole of what it holds: `tokens`), copied into a
    /// session of their size made by `model`, for later prompts of `model` under `options`. Nothing is kept when
    /// they alone are over the capacity, or when an entry already holds them (or more after them).
    func store(_ session: any GenerationSession, tokens: [Int], model: any TextGenerator, options: ExecutionOptions) {
        guard capacityBytes > 0, tokens.count >= minimumTokens, tokens.count <= session.position else { return }
        let settings = Self.settings(options)
        guard !lock.withLock({ covers(tokens, model: model, settings: settings) }) else { return }
        let copy = model.makeSession(contextLength: tokens.count, halfPrecisionCache: true)
        guard copy.capacity >= tokens.count, copy.cacheBytes <= capacityBytes,
              copy.copyPrefix(of: session, tokens: tokens.count) else { return }
        lock.withLock {
            // Another generation of the same tokens may have stored them while this one copied.
            guard !covers(tokens, model: model, settings: settings) else { return }
            // An entry the new one extends is the same conversation a turn earlier: the new one answers all it did.
            entries.removeAll {
                $0.model == nil || ($0.model === model && $0.settings == settings && $0.tokens.count < tokens.count
                    && Self.commonPrefix($0.tokens, tokens, limit: $0.tokens.count) == $0.tokens.count)
            }
            clock += 1
            entries.append(Entry(model: model, settings: settings, tokens: tokens, session: copy, lastUse: clock))
            counts.stored += 1
            var held = entries.reduce(0) { $0 + $1.session.cacheBytes }
            while held > capacityBytes || entries.count > maximumEntries, let oldest = leastRecentlyUsed() {
                held -= entries[oldest].session.cacheBytes
                entries.remove(at: oldest)
                counts.evicted += 1
            }
        }
    }

    /// Stores what `session` holds after `generation`: its prompt and the reply tokens fed back (not the last one
    /// sampled, which no pass has fed).
    func keep(_ session: any GenerationSession, after generation: Generation, model: any TextGenerator, options: ExecutionOptions) {
        let prompt = generation.promptTokenIDs
        let fed = session.position - prompt.count
        guard (0...generation.tokenIDs.count).contains(fed) else { return }
        store(session, tokens: prompt + generation.tokenIDs.prefix(fed), model: model, options: options)
    }

    /// Drops the least recently used entries until at least `bytes` bytes are free again, or none is left; returns
    /// the bytes dropped.
    @discardableResult
    public func release(atLeast bytes: Int) -> Int {
        lock.withLock {
            var freed = 0
            while freed < bytes, let oldest = leastRecentlyUsed() {
                freed += entries[oldest].session.cacheBytes
                entries.remove(at: oldest)
                counts.evicted += 1
            }
            return freed
        }
    }

    /// Drops every entry.
    public func removeAll() {
        lock.withLock { entries.removeAll() }
    }

    /// The entry of `model` under `settings` sharing the longest prefix with `tokens` (at most all but their last) and
    /// that prefix's length, when it is at least ``minimumTokens`` (under the lock).
    private func longestPrefix(of tokens: [Int], model: AnyObject, settings: String) -> (entry: Entry, length: Int)? {
        var best: (entry: Entry, length: Int)?
        for entry in liveEntries() where entry.model === model && entry.settings == settings {
            let length = Self.commonPrefix(entry.tokens, tokens, limit: tokens.count - 1)
            if length > (best?.length ?? 0) { best = (entry, length) }
        }
        guard let best, best.length >= minimumTokens else { return nil }
        return best
    }

    /// Whether an entry of `model` under `settings` holds `tokens` (or more after them); marks it used (under the lock).
    private func covers(_ tokens: [Int], model: AnyObject, settings: String) -> Bool {
        guard let entry = liveEntries().first(where: {
            $0.model === model && $0.settings == settings && $0.tokens.count >= tokens.count
                && Self.commonPrefix($0.tokens, tokens, limit: tokens.count) == tokens.count
        }) else { return false }
        clock += 1
        entry.lastUse = clock
        return true
    }

    /// The entries whose model is still loaded (under the lock); those of a released model are dropped here.
    private func liveEntries() -> [Entry] {
        entries.removeAll { $0.model == nil }
        return entries
    }

    private func leastRecentlyUsed() -> Int? {
        entries.indices.min { entries[$0].lastUse < entries[$1].lastUse }
    }

    /// How many leading tokens `a` and `b` share, at most `limit`.
    private static func commonPrefix(_ a: [Int], _ b: [Int], limit: Int) -> Int {
        let end = min(a.count, b.count, max(0, limit))
        var length = 0
        while length < end, a[length] == b[length] { length += 1 }
        return length
    }
}
