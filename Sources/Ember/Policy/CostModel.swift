import EmberCore
import EmberModels
import Foundation

/// How much work one request is: what the policy predicts time and energy for.
public struct Workload: Sendable, Equatable, Codable {
    /// What runs: "generate" or "embed" (the cost model learns each kind apart).
    public var kind: String
    /// Billions of operations done on many rows at once (a prompt, a batch of sentences).
    public var batchedGigaOps: Double
    /// Billions of operations done one row at a time (decoded tokens).
    public var sequentialGigaOps: Double
    /// The model's file: whose ``QualityProfile`` applies (nil: the unmeasured default).
    public var model: String?
    /// Route ("unit/precision", as ``CostModel/bound``) → billions of the batched operations that route would not do:
    /// the prompt tokens a generation on it restores from the prompt cache (the same conversation a turn earlier ran
    /// there), copied rather than computed. Empty by default; not encoded.
    public var restoredBatchedGigaOps: [String: Double] = [:]

    /// A workload of `batchedGigaOps` and `sequentialGigaOps`.
    public init(kind: String, batchedGigaOps: Double, sequentialGigaOps: Double, model: String? = nil) {
        self.kind = kind
        self.batchedGigaOps = max(0, batchedGigaOps)
        self.sequentialGigaOps = max(0, sequentialGigaOps)
        self.model = model
    }

    /// Billions of operations one token costs a model multiplying `parameters` weights per token.
    public static func gigaOpsPerToken(parameters: Int) -> Double { 2 * Double(parameters) / 1e9 }

    /// Generating `newTokens` after a prompt of `promptTokens` with a model multiplying `parameters` weights per token.
    public static func generation(parameters: Int, promptTokens: Int, newTokens: Int, model: String? = nil) -> Workload {
        let perToken = gigaOpsPerToken(parameters: parameters)
        return Workload(kind: "generate", batchedGigaOps: perToken * Double(max(1, promptTokens)),
                        sequentialGigaOps: perToken * Double(max(0, newTokens - 1)), model: model)
    }

    /// Embedding texts of `tokens` tokens in all with a model multiplying `parameters` weights per token.
    public static func embedding(parameters: Int, tokens: Int, model: String? = nil) -> Workload {
        Workload(kind: "embed", batchedGigaOps: 2 * Double(parameters) / 1e9 * Double(max(1, tokens)), sequentialGigaOps: 0, model: model)
    }

    enum CodingKeys: String, CodingKey {
        case kind, model
        case batchedGigaOps = "batched_giga_ops"
        case sequentialGigaOps = "sequential_giga_ops"
    }

    /// What `ember policy` decides for when no model is named: a 135M-parameter generator (SmolLM2's size)
    /// answering a 32-token prompt with 64 tokens.
    public static let reference = Workload.generation(parameters: 135_000_000, promptTokens: 32, newTokens: 64)
}

/// What the policy expects one candidate to cost.
public struct Prediction: Sendable, Equatable, Codable {
    /// Seconds from start to end.
    public var seconds: Double
    /// Joules the busy cores draw.
    public var joules: Double
    /// The quality lost against fp32 (``QualityProfile``).
    public var qualityLoss: Double

    /// Average power while it runs, in watts.
    public var watts: Double { seconds > 0 ? joules / seconds : 0 }

    enum CodingKeys: String, CodingKey {
        case seconds, joules
        case qualityLoss = "quality_loss"
    }
}

/// The policy's numbers: every unit's cost per precision (calibration), corrected online by what requests measured,
/// and each model's quality per precision. An ``InferenceScheduler`` keeps one, updated as requests finish.
public struct CostModel: Sendable {
    /// The calibrated costs.
    public var units: UnitCostTable
    /// Model file → its measured quality per precision.
    public var qualities: [String: QualityProfile]
    /// The quality assumed for a request without a measured model (``QualityProfile/unmeasured`` unless set).
    public var defaultQuality = QualityProfile.unmeasured
    /// "unit/precision/kind/threads" → measured ÷ predicted time, a moving average over finished requests (1 until one ends).
    public private(set) var corrections: [String: Double] = [:]
    /// Observations behind each correction.
    public private(set) var observations: [String: Int] = [:]
    /// How far each observation moves a correction once it has a few (an exponential moving average's weight); the
    /// first observations weigh 1/2, 1/3, 1/4 … down to this (a running mean with the calibration as the first value).
    /// Runs predicted under 20 ms do not count.
    public var learningRate = 0.3
    /// The most one observation may say against a correction: its ratio is taken within ×/÷ this of the correction it
    /// updates. On a shared host one run can take 1.5–2× its time for no route's reason (a neighbour's burst);
    /// unclipped, the first such run moved its route's correction halfway there, and a route never run, predicted a
    /// few per cent behind, then won by the ``switchingMargin`` — the next request of the same text ran at another
    /// precision. A real slowdown shows in run after run and is learned a few runs later (3× slower: 2.94 after
    /// twelve runs, 2.98 unclipped; one run at 2× moves a correction to 1.25, three to 1.62).
    public var largestObservationFactor = 1.5

    /// A model of `units` costs and `qualities`.
    public init(units: UnitCostTable, qualities: [String: QualityProfile] = [:]) {
        self.units = units
        self.qualities = qualities
    }

    /// Model file → the routes ("unit/precision") its requests have run on, so their weights are bound: a route not
    /// bound yet must win by ``switchingMargin`` to be chosen.
    public private(set) var bound: [String: Set<String>] = [:]
    /// How much better (time or energy, by the tier's objective) a route must be predicted to be before a model is
    /// bound on it as well as on the ones it runs on: binding costs memory (a 135M model's int8 copy is 150 MB) and
    /// a conversion, and an unobserved route only looks better for lack of corrections. 1.25: 25 % better.
    public var switchingMargin = 1.25

    /// Records that requests of `model` run on `unit` at `precision`.
    public mutating func markBound(model: String, unit: ComputeUnit, precision: Precision) {
        bound[model, default: []].insert("\(unit.rawValue)/\(precision.rawValue)")
    }

    /// The reference machine's costs, no model measured: what `BackendPolicy.decide` uses when given none.
    public static let reference = CostModel(units: .reference)

    /// The quality profile of `workload`'s model (the unmeasured default without one).
    public func quality(for workload: Workload) -> QualityProfile {
        workload.model.flatMap { qualities[$0] } ?? defaultQuality
    }

    /// The correction of time and energy for `precision` on `unit` with `threads` for work of `kind`.
    /// A thread count never observed takes what the other thread counts of the same unit, precision and kind taught:
    /// what slows a route (a kernel's real speed, memory traffic) slows it on any number of threads, and an unobserved
    /// count must not look better merely for being unobserved.
    public func correction(_ unit: ComputeUnit, _ precision: Precision, kind: String, threads: Int) -> Double {
        let route = "\(unit.rawValue)/\(precision.rawValue)/\(kind)"
        return corrections["\(route)/\(threads)"] ?? corrections[route] ?? 1
    }

    /// Predicted seconds, joules and quality loss of `workload` at `precision` on `unit` with `threads` of `maxThreads`;
    /// nil when the unit does not run the precision. Time: dispatch + batched work (less what this route restores from
    /// the prompt cache) at the calibrated rate + sequential
    /// work at its decode rate (``UnitCost/decodeGops``, bound by memory), stretched when fewer threads run; energy: the unit's power over the core-seconds
    /// (the same whatever the thread count); both scaled by what requests of this kind measured.
    public func predict(_ workload: Workload, unit: ComputeUnit, precision: Precision, threads: Int, maxThreads: Int) -> Prediction? {
        guard let cost = units.cost(unit, precision), cost.gops > 0 else { return nil }
        let batched = max(0, workload.batchedGigaOps - (workload.restoredBatchedGigaOps["\(unit.rawValue)/\(precision.rawValue)"] ?? 0))
        let busy = batched / cost.gops + workload.sequentialGigaOps / max(cost.decodeGops, 1e-6)
        let correction = correction(unit, precision, kind: workload.kind, threads: threads)
        let stretch = Double(max(1, maxThreads)) / Double(max(1, min(threads, maxThreads)))
        return Prediction(seconds: (cost.dispatchMicroseconds * 1e-6 + busy * stretch) * correction,
                          joules: busy * cost.watts * correction,
                          qualityLoss: quality(for: workload).loss(at: precision))
    }

    /// Seconds a run must be predicted to take at least to teach the model anything (shorter ones are mostly the fixed
    /// costs it does not count).
    public static let shortestTaught = 0.02

    /// Learns from a finished request: it ran `workload` at `precision` on `unit` with `threads` in `measured` seconds,
    /// where `predicted` was expected (with the correction then in force), at most ``largestObservationFactor`` off the correction.
    /// Ignores runs too short to time (under a millisecond).
    public mutating func observe(_ workload: Workload, unit: ComputeUnit, precision: Precision, threads: Int, predicted: Double,
                                 measured: Double) {
        // Runs predicted under 20 ms are mostly fixed costs the model does not count (tokenizing, a session, the first
        // token's sampling): their ratios would mislead the larger requests the corrections are for.
        guard predicted >= Self.shortestTaught, measured > 1e-3, measured.isFinite else { return }
        let route = "\(unit.rawValue)/\(precision.rawValue)/\(workload.kind)"
        let old = correction(unit, precision, kind: workload.kind, threads: threads)
        let ratio = min(100, max(0.01, measured / predicted * old)) // what the correction should have been
        // The thread count's own correction and the route's over every thread count, each a running mean that counts
        // the calibration as its first value (the first measurement moves it halfway to what it measured, taken within
        // ×/÷ largestObservationFactor), then a moving average.
        let factor = max(1, largestObservationFactor)
        for key in ["\(route)/\(threads)", route] {
            let current = corrections[key] ?? (key == route ? 1 : old)
            let count = (observations[key] ?? 0) + 1
            observations[key] = count
            let taken = min(current * factor, max(current / factor, ratio))
            corrections[key] = current + max(learningRate, 1 / Double(count + 1)) * (taken - current)
        }
    }
}
