import EmberCore
import EmberModels
import Foundation

/// What a JSON output format costs in decode speed: the same prompt generated with and without the format, seeded
/// alike, alternating which goes first, `runs` rounds; decode rates (sampling included) and their per-round ratio,
/// medians. Each free generation is cut at the length the constrained one of its round reached, so both decode
/// the same number of tokens from the same context length. Every constrained output is parsed as JSON.
public struct StructuredOutputBenchmark: Sendable {
    /// Medians and every round's figures.
    public struct Result: Sendable, Codable {
        /// Median decode rate without a format, tokens per second.
        public var freeTokensPerSecond: Double
        /// Median decode rate with the format, tokens per second.
        public var constrainedTokensPerSecond: Double
        /// Median of the rounds' constrained / free rates.
        public var ratio: Double
        /// Every round's free rate, tokens per second.
        public var freeRuns: [Double]
        /// Every round's rate with the format, tokens per second.
        public var constrainedRuns: [Double]
        /// Constrained outputs that parsed as JSON, of `runs`.
        public var parsed: Int
        /// Mean tokens of a constrained output.
        public var meanTokens: Double
        /// One constrained output, to show.
        public var sample: String
    }

    /// The prompt, as the model reads it (special tokens parsed).
    public var prompt: String
    /// The format to measure.
    public var format: OutputFormat
    /// Sampling for both (temperature 0.8, top-k 40 by default); the seed of round r is r.
    public var sampler = SamplerSettings(temperature: 0.8)
    /// Tokens a generation may take at most.
    public var maxTokens = 256
    /// Rounds (at least 1); the first, untimed, warms up (builds the vocabulary's trie).
    public var runs = 10
    /// The units, precision, threads and QoS the passes run with.
    public var options: ExecutionOptions

    /// A benchmark of `format` on `prompt`.
    public init(prompt: String, format: OutputFormat, options: ExecutionOptions) {
        (self.prompt, self.format, self.options) = (prompt, format, options)
    }

    /// Runs the rounds on `model`.
    public func run(_ model: any TextGenerator) throws -> Result {
        var free: [Double] = [], constrained: [Double] = [], ratios: [Double] = []
        var parsed = 0, tokens = 0, sample = ""
        for round in 0...max(1, runs) {
            var withFormat = sampler
            withFormat.format = format
            withFormat.seed = UInt64(round)
            var without = sampler
            without.seed = UInt64(round)
            func constrainedRun() throws -> Generation {
                try model.generate(prompt: prompt, maxTokens: maxTokens, sampler: withFormat, options: options)
            }
            var shaped: Generation
            var plain: Generation
            if round % 2 == 0 {
                shaped = try constrainedRun()
                plain = try model.generate(prompt: prompt, maxTokens: max(2, shaped.tokenIDs.count), sampler: without, options: options)
            } else {
                // The free run first needs the length: take it from this round's constrained run, run free, then time
                // the constrained one again (the same seed gives the same tokens).
                let length = try constrainedRun().tokenIDs.count
                plain = try model.generate(prompt: prompt, maxTokens: max(2, length), sampler: without, options: options)
                shaped = try constrainedRun()
            }
            guard round > 0 else { continue } // warm-up
            func rate(_ generation: Generation) -> Double { Double(max(1, generation.tokenIDs.count - 1)) / max(generation.decodeSeconds, 1e-9) }
            free.append(rate(plain))
            constrained.append(rate(shaped))
            ratios.append(rate(shaped) / rate(plain))
            if (try? OrderedJSON.parse(shaped.text)) != nil { parsed += 1 }
            tokens += shaped.tokenIDs.count
            if sample.isEmpty { sample = shaped.text }
        }
        return Result(freeTokensPerSecond: Measurement.median(free), constrainedTokensPerSecond: Measurement.median(constrained),
                      ratio: Measurement.median(ratios), freeRuns: free, constrainedRuns: constrained, parsed: parsed,
                      meanTokens: Double(tokens) / Double(max(1, free.count)), sample: sample)
    }
}
