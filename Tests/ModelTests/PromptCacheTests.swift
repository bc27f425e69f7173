import Foundation
import Testing
@testable import EmberModels
import EmberCore
import EmberTestSupport

/// The prompt cache: a prompt restored from a finished generation's keys and values computes what the whole prompt
/// computes, generations find the longest prefix stored for their model and settings, and the cache keeps to its
/// bytes and gives them back on demand.
@Suite("Prompt cache")
struct PromptCacheTests {
    static let fp32 = ExecutionOptions(units: .cpu, precision: .fp32, threads: 2)
    static let native = ExecutionOptions(units: .cpu, precision: nil, threads: 2)

    /// A session holding a restored prefix, fed the rest, gives the whole prompt's logits (within the rounding of
    /// matrix products over fewer rows), at fp32 and on the file's own weights — the prefix passing, as the cache
    /// keeps it, through a session of its own size: the caches of sessions of other sizes hold a key/value head's
    /// positions at other offsets.
    @Test(arguments: ["llama3", "qwen2", "qwen3"])
    func aRestoredPrefixComputesWhatTheWholePromptComputes(family: String) throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load(family).path)
        let tokens = model.tokenizer.encode("Once upon a time there was a cat who lived by the sea, and every day")
        try #require(tokens.count > 12)
        for options in [Self.fp32, Self.native] {
            let whole = try model.forward(tokens, session: model.makeSession(contextLength: 64), options: options).scalars()
            let earlier = model.makeSession(contextLength: 64)
            _ = try model.forward(Array(tokens.prefix(9)) + [7, 8, 9], session: earlier, options: options) // a longer past
            let kept = model.makeSession(contextLength: 9), restored = model.makeSession(contextLength: 48)
            #expect(kept.copyPrefix(of: earlier, tokens: 9))
            #expect(restored.copyPrefix(of: kept, tokens: 9))
            #expect(restored.position == 9)
            let rest = try model.forward(Array(tokens[9...]), session: restored, options: options).scalars()
            let scale = whole.map(abs).max() ?? 1
            let worst = zip(whole, rest).map { abs($0 - $1) }.max() ?? 0
            #expect(worst <= 1e-3 * scale, "\(family) \(options.precision.map { "\($0)" } ?? "native"): \(worst) of \(scale)")
        }
    }

    /// A copy is refused, and nothing changes, when the source holds too few tokens, the target is too small, the
    /// caches differ in precision, or the source is the target.
    @Test func aCopyThatCannotHoldIsRefused() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let source = model.makeSession(contextLength: 32)
        _ = try model.forward([1, 2, 3, 4, 5, 6], session: source, options: Self.fp32)
        let small = model.makeSession(contextLength: 4)
        #expect(!small.copyPrefix(of: source, tokens: 5))
        #expect(!model.makeSession(contextLength: 32).copyPrefix(of: source, tokens: 7))
        #expect(!model.makeSession(contextLength: 32, halfPrecisionCache: false).copyPrefix(of: source, tokens: 3))
        #expect(!source.copyPrefix(of: source, tokens: 3))
        #expect(source.position == 6 && small.position == 0)
    }

    /// The second turn of a conversation restores the first turn's prompt and reply and computes the rest; its greedy
    /// text is the text without a cache; the cache then holds one entry, the longer one replacing the one it extends.
    @Test(arguments: [false, true])
    func aLaterPromptRestoresTheLongestStoredPrefix(batched: Bool) throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let cache = PromptCache(capacityBytes: 64 << 20)
        let batcher = ContinuousBatcher()
        func run(_ prompt: String, cache: PromptCache?) throws -> Generation {
            batched
                ? try model.generate(from: .text(prompt), maxTokens: 6, options: Self.fp32, promptCache: cache, batcher: batcher, batchKey: "k")
                : try model.generate(from: .text(prompt), maxTokens: 6, options: Self.fp32, promptCache: cache)
        }
        let first = "Once upon a time there was a cat who lived by the sea"
        let one = try run(first, cache: cache)
        #expect(one.cachedPromptTokens == 0)
        #expect(cache.count == 1)
        let again = try run(first, cache: cache)
        #expect(again.cachedPromptTokens == one.promptTokenIDs.count - 1, "the last prompt token is always fed")
        #expect(again.tokenIDs == one.tokenIDs)
        let second = first + one.text + " and then"
        let two = try run(second, cache: cache)
        let alone = try run(second, cache: nil)
        #expect(two.promptTokenIDs == alone.promptTokenIDs)
        // What the first entry holds: the prompt and the reply but its last token (sampled, never fed).
        let held = one.promptTokenIDs.count + one.tokenIDs.count - 1
        let shared = zip(two.promptTokenIDs, one.promptTokenIDs + one.tokenIDs).prefix { $0 == $1 }.count
        #expect(shared >= one.promptTokenIDs.count - 1) // the text may re-tokenize across the prompt's end
        #expect(two.cachedPromptTokens == min(shared, held), "\(two.cachedPromptTokens) restored, \(shared) shared")
        #expect(two.tokenIDs == alone.tokenIDs)
        #expect(cache.count == (shared >= held ? 1 : 2), "an entry the second conversation extends is replaced")
        let statistics = cache.statistics
        #expect(statistics.hits == 2 && statistics.lookups == 3 && statistics.stored == 2)
        #expect(statistics.reusedTokens == again.cachedPromptTokens + two.cachedPromptTokens)
    }

    /// Entries are the model's and the settings': another precision, or another model of the same file, restores
    /// nothing; a common prefix shorter than the minimum restores nothing.
    @Test func entriesAreKeptPerModelAndSettings() throws {
        let path = try TinyFamilyFixture.load("llama3").path
        let model = try TestCompute.textGenerator(path: path)
        let twin = try TestCompute.textGenerator(path: path)
        let cache = PromptCache(capacityBytes: 64 << 20, minimumTokens: 8)
        let prompt = "Once upon a time there was a cat who lived by the sea"
        _ = try model.generate(from: .text(prompt), maxTokens: 2, options: Self.fp32, promptCache: cache)
        #expect(try model.generate(from: .text(prompt), maxTokens: 2, options: Self.native, promptCache: cache).cachedPromptTokens == 0)
        #expect(try twin.generate(from: .text(prompt), maxTokens: 2, options: Self.fp32, promptCache: cache).cachedPromptTokens == 0)
        let ids = model.tokenizer.encode(prompt)
        let short = Array(ids.prefix(5)) + [11, 12, 13, 14, 15]
        #expect(try model.generate(from: .tokens(short), maxTokens: 2, options: Self.fp32, promptCache: cache).cachedPromptTokens == 0)
        #expect(try model.generate(from: .tokens(short), maxTokens: 2, options: Self.fp32, promptCache: cache).cachedPromptTokens == 9)
    }

    /// Stored entries stay within the capacity (the least recently used go first) and the entry count; `release`
    /// frees at least what it is asked for; an entry bigger than the whole capacity is not kept.
    @Test func theCacheKeepsToItsBytesAndReleasesOnDemand() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        // Each entry holds its 10 prompt tokens and up to 2 of its reply's: two always fit, three never.
        let entryBytes = model.makeSession(contextLength: 10, halfPrecisionCache: true).cacheBytes
        let cache = PromptCache(capacityBytes: 2 * entryBytes + entryBytes / 2, maximumEntries: 8, minimumTokens: 2)
        for start in 0..<4 {
            let prompt = (0..<10).map { 100 + 10 * start + $0 }
            _ = try model.generate(from: .tokens(prompt), maxTokens: 3, options: Self.fp32, promptCache: cache)
            #expect(cache.bytes <= cache.capacityBytes)
        }
        #expect(cache.count == 2)
        #expect(cache.statistics.evicted == 2)
        // The oldest went: the last two prompts restore, the first does not.
        #expect(try model.generate(from: .tokens((0..<10).map { 130 + $0 }), maxTokens: 1, options: Self.fp32, promptCache: cache)
            .cachedPromptTokens == 9)
        #expect(cache.release(atLeast: 1) >= entryBytes)
        #expect(cache.count == 1)
        cache.removeAll()
        #expect(cache.count == 0 && cache.bytes == 0)
        let tiny = PromptCache(capacityBytes: entryBytes / 2, minimumTokens: 2)
        _ = try model.generate(from: .tokens((0..<10).map { 100 + $0 }), maxTokens: 3, options: Self.fp32, promptCache: tiny)
        #expect(tiny.count == 0)
        let few = PromptCache(capacityBytes: 64 << 20, maximumEntries: 2, minimumTokens: 2)
        for start in 0..<3 {
            _ = try model.generate(from: .tokens((0..<10).map { 300 + 10 * start + $0 }), maxTokens: 1, options: Self.fp32, promptCache: few)
        }
        #expect(few.count == 2)
    }

    /// A request refused for its settings looks nothing up: the cache is consulted once the request is checked.
    @Test func aRefusedRequestRestoresNothing() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let cache = PromptCache(capacityBytes: 64 << 20, minimumTokens: 2)
        let prompt = PromptInput.tokens(Array(100..<110))
        _ = try model.generate(from: prompt, maxTokens: 2, options: Self.fp32, promptCache: cache)
        let batcher = ContinuousBatcher()
        for batched in [false, true] {
            #expect(throws: (any Error).self) {
                batched
                    ? try model.generate(from: prompt, maxTokens: 2, sampler: SamplerSettings(temperature: -1), options: Self.fp32,
                                         promptCache: cache, batcher: batcher, batchKey: "k")
                    : try model.generate(from: prompt, maxTokens: 2, sampler: SamplerSettings(temperature: -1), options: Self.fp32,
                                         promptCache: cache)
            }
            #expect(throws: (any Error).self) {
                batched
                    ? try model.generate(from: prompt, maxTokens: 2, sampler: SamplerSettings(format: .jsonObject), options: Self.fp32,
                                         stop: ["}"], promptCache: cache, batcher: batcher, batchKey: "k")
                    : try model.generate(from: prompt, maxTokens: 2, sampler: SamplerSettings(format: .jsonObject), options: Self.fp32,
                                         stop: ["}"], promptCache: cache)
            }
        }
        #expect(cache.statistics.lookups == 1 && cache.statistics.hits == 0)
    }

    /// An entry goes with its model: once the model is released, the cache holds nothing of it.
    @Test func aReleasedModelsEntriesGo() throws {
        let cache = PromptCache(capacityBytes: 64 << 20, minimumTokens: 2)
        try {
            let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
            _ = try model.generate(from: .tokens(Array(100..<110)), maxTokens: 2, options: Self.fp32, promptCache: cache)
            #expect(cache.count == 1)
        }()
        #expect(cache.count == 0)
        #expect(cache.bytes == 0)
    }
}
