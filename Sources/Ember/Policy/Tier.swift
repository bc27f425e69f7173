import EmberCore
import EmberModels
/// How much a request matters to the user right now.
public enum Tier: String, Sendable, CaseIterable, Codable, Comparable, CustomStringConvertible {
    /// Not user-visible (indexing, prefetching embeddings).
    case background
    /// Foreground but not blocking (suggestions, summaries shown later).
    case standard
    /// Foreground, the user is waiting.
    case critical

    /// Orders by importance: background < standard < critical.
    public static func < (lhs: Tier, rhs: Tier) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    /// The raw value: "background", "standard" or "critical".
    public var description: String { rawValue }
}

/// What one request needs, beyond its tier: the host's per-request overrides.
public struct RequestRequirements: Sendable, Equatable, Codable {
    /// How much the request matters to the user right now.
    public var tier: Tier
    /// A critical request that drives what is on screen right now (→ `.userInteractive`).
    public var userInteractive: Bool
    /// A precision the request must run at ("needs fp32"); overrides the budget.
    public var precision: Precision?
    /// Units this request may use, within the host's ceiling.
    public var computeUnits: ComputeUnits?
    /// Run only on external power (e.g. re-indexing everything).
    public var requiresExternalPower: Bool
    /// Run the model's weights exactly as its file stores them — each tensor in its own type, Q4_K, Q6_K, Q5_0
    /// … ("native") — rather than converted to `precision` or to the policy's choice.
    public var storedWeights: Bool

    /// The work the request is, for the policy's predictions (nil: ``Workload/reference``).
    public var workload: Workload?

    /// Requirements for a request of `tier`; nil `precision` and `computeUnits` leave both to the policy, and every flag defaults to false.
    public init(tier: Tier, userInteractive: Bool = false, precision: Precision? = nil, computeUnits: ComputeUnits? = nil,
                requiresExternalPower: Bool = false, storedWeights: Bool = false, workload: Workload? = nil) {
        self.workload = workload
        self.storedWeights = storedWeights
        self.tier = tier
        self.userInteractive = userInteractive
        self.precision = precision
        self.computeUnits = computeUnits
        self.requiresExternalPower = requiresExternalPower
    }
}

/// What the policy decided for one request.
public struct Decision: Sendable, Equatable, Codable, CustomStringConvertible {
    /// What happens to the request: run now, defer, or drop.
    public enum Action: Sendable, Equatable, Codable {
        /// Run now, with the decision's precision, units, QoS and threads.
        case run
        /// Wait and be re-evaluated when the power state changes.
        case `defer`(reason: String)
        /// Refused: it cannot be satisfied.
        case drop(reason: String)

        /// "run", "defer" or "drop".
        public var name: String {
            switch self {
            case .run: "run"
            case .defer: "defer"
            case .drop: "drop"
            }
        }

        /// Why the request does not run now; nil when it runs.
        public var reason: String? {
            switch self {
            case .run: nil
            case let .defer(reason), let .drop(reason): reason
            }
        }
    }

    /// Run, defer or drop; the other fields are filled in either way.
    public var action: Action
    /// The precision to run at.
    public var precision: Precision
    /// The units the request may use; the CPU route is always among them.
    public var computeUnits: ComputeUnits
    /// The QoS class to run at.
    public var qos: QoSClass
    /// Threads to run on, at least 1.
    public var threads: Int
    /// The model's weights run as its file stores them ("native"); `precision` then only says the policy's budget.
    public var storedWeights = false
    /// The unit the matrix products were chosen for (``computeUnits`` is it and the CPU route, the fallback).
    public var unit: ComputeUnit = .cpu
    /// What the chosen candidate was expected to cost; nil for stored weights (not among the candidates).
    public var predicted: Prediction? = nil
    /// Why this candidate: the objective, what it beat and by how much, the quality budget
    /// ("fastest: int4 on neural-engine, 2 threads — 8.4× faster than fp32 on gpu at 12 % of its energy; +0.26 % perplexity, budget 1 %").
    public var explanation = ""

    /// "native" for stored weights, else the precision's name ("int8").
    public var precisionName: String { storedWeights ? "native" : precision.rawValue }

    /// A one-line human-readable form, e.g. "run, int8 on cpuAndNeuralEngine, utility, 2 threads" or "defer (thermal state serious), int4 on cpuAndNeuralEngine, background, 1 thread".
    public var description: String {
        let verdict = action.name + (action.reason.map { " (\($0))" } ?? "")
        return "\(verdict), \(precisionName) on \(computeUnits), \(qos), \(threads) thread\(threads == 1 ? "" : "s")"
    }
}
