import EmberCore
import EmberModels
import Foundation

/// Text-generation speed the way llama-bench measures it: prompt
/// processing of `promptTokens` tokens in one batch (pp128) and generation
/// of `generatedTokens` tokens one at a time from an empty context (tg64),
/// each from a fresh session, after one untimed warm-up, median of `runs`.
/// Token ids are a fixed pseudo-random sequence, so every run does the same
/// work; only the forward passes are timed (no sampling).
/// Time to first token is separate: open the file, load, bind, prefill a
/// 20-token prompt and pick the first token, all timed.
public struct GenerationBenchmark: Sendable {
    /// Median prefill and decode rates, and every run's.
    public struct Result: Sendable, Codable {
        /// Median prompt-processing rate (pp), tokens per second.
        public var prefillTokensPerSecond: Double
        /// Median generation rate (tg), tokens per second.
        public var decodeTokensPerSecond: Double
        /// Every timed run, in order.
        public var prefillRuns: [Double]
        /// Every timed decode run, tokens per second, in order.
        public var decodeRuns: [Double]
        /// With ``GenerationBenchmark/sequences`` above 1: median tokens per second of that many sequences decoding
        /// together (one batched pass per step, summed over the sequences), and every run's.
        public var batchedDecodeTokensPerSecond: Double?
        /// Every timed batched decode run, in order.
        public var batchedDecodeRuns: [Double] = []
    }

    /// Tokens prefilled in one batch; default 128 (pp128).
    public var promptTokens = 128
    /// Tokens decoded one at a time; default 64 (tg64).
    public var generatedTokens = 64
    /// Tokens already in each test's context before it is timed (llama-bench's `-d`): prefilled untimed, so that
    /// "tg64 @ d1024" decodes 64 tokens after 1,024 and attends over them; default 0.
    public var depth = 0
    /// Timed runs of each after the warm-up (default 5; fewer than 1 counts as 1).
    public var runs = 5
    /// The units, precision, threads and QoS class the passes run with (`.userInitiated` by default).
    public var options: ExecutionOptions
    /// Sequences that also decode `generatedTokens` together, one batched pass per step (continuous batching);
    /// 1 (the default): no batched test.
    public var sequences = 1

    /// A pp128/tg64 benchmark of 5 runs with these options.
    public init(options: ExecutionOptions) {
        self.options = options
    }

    /// Measures prefill and decode on `model`: one untimed warm-up of each, then `runs` timed runs of each, alternating.
    public func run(_ model: any TextGenerator) throws -> Result {
        var generator = SplitMix64(seed: 42)
        let tokens = (0..<max(promptTokens, generatedTokens)).map { _ in Int(generator.next() % UInt64(model.vocabularySize)) }
        let context = (0..<depth).map { _ in Int(generator.next() % UInt64(model.vocabularySize)) }
        let options = self.options
        // A session of room for `tokens` more after the depth's, the depth's tokens already in it (not timed).
        func session(room: Int) throws -> any GenerationSession {
            let session = model.makeSession(contextLength: context.count + room)
            if !context.isEmpty { _ = try model.forward(context, session: session, options: options) }
            return session
        }
        func prefill() throws -> Double {
            let session = try session(room: promptTokens)
            let seconds = try Measurement.seconds {
                _ = try model.forward(Array(tokens.prefix(promptTokens)), session: session, options: options)
            }
            return Double(promptTokens) / seconds
        }
        func decode() throws -> Double {
            let session = try session(room: generatedTokens)
            let seconds = try Measurement.seconds {
                for token in tokens.prefix(generatedTokens) {
                    _ = try model.forward([token], session: session, options: options)
                }
            }
            return Double(generatedTokens) / seconds
        }
        let sequences = max(1, self.sequences)
        func batchedDecode() throws -> Double {
            let sessions = try (0..<sequences).map { _ in try session(room: generatedTokens) }
            let seconds = try Measurement.seconds {
                for step in 0..<generatedTokens {
                    let stepTokens = (0..<sequences).map { tokens[(step + $0 * 7) % tokens.count] }
                    _ = try model.forwardBatch(stepTokens, sessions: sessions, options: options)
                }
            }
            return Double(generatedTokens * sequences) / seconds
        }
        _ = try prefill()
        _ = try decode()
        if sequences > 1 { _ = try batchedDecode() }
        var prefillRuns: [Double] = [], decodeRuns: [Double] = [], batchedRuns: [Double] = []
        for _ in 0..<max(1, runs) { // alternating, so slow spells of a shared machine hit both
            prefillRuns.append(try prefill())
            decodeRuns.append(try decode())
            if sequences > 1 { batchedRuns.append(try batchedDecode()) }
        }
        return Result(prefillTokensPerSecond: Measurement.median(prefillRuns), decodeTokensPerSecond: Measurement.median(decodeRuns),
                      prefillRuns: prefillRuns, decodeRuns: decodeRuns,
                      batchedDecodeTokensPerSecond: sequences > 1 ? Measurement.median(batchedRuns) : nil, batchedDecodeRuns: batchedRuns)
    }

    /// Milliseconds from opening the file (`load` opens and reads it) to the first token of a `promptTokens`-token
    /// prompt, median of `runs`.
    public func timeToFirstToken(load: () throws -> any TextGenerator, promptTokens: Int = 20, runs: Int = 5) throws -> (median: Double, runs: [Double]) {
        var times: [Double] = []
        for _ in 0..<max(1, runs) {
            var first = -1
            let seconds = try Measurement.seconds {
                let model = try load()
                try model.prepare(options)
                var generator = SplitMix64(seed: 7)
                let prompt = (0..<promptTokens).map { _ in Int(generator.next() % UInt64(model.vocabularySize)) }
                let logits = try model.forward(prompt, session: model.makeSession(contextLength: promptTokens + 1), options: options)
                var sampler = Sampler(SamplerSettings())
                first = sampler.next(logits: try logits.scalars(), history: prompt)
            }
            precondition(first >= 0)
            times.append(seconds * 1000)
        }
        return (Measurement.median(times), times)
    }
}
