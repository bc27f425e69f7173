/// How much a request matters to the user right now.
public enum Tier: String, Sendable, CaseIterable, Codable, Comparable, CustomStringConvertible {
    /// Not user-visible (indexing, prefetching embeddings).
    case background
    /// Foreground but not blocking (suggestions, summaries shown later).
    case standard
    /// Foreground, the user is waiting.
    case critical

    public static func < (lhs: Tier, rhs: Tier) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    public var description: String { rawValue }
}

/// What one request needs, beyond its tier: the host's per-request overrides.
public struct RequestRequirements: Sendable, Equatable, Codable {
    public var tier: Tier
    /// A critical request that drives what is on screen right now (→ `.userInteractive`).
    public var userInteractive: Bool
    /// A precision the request must run at ("needs fp32"); overrides the budget.
    public var precision: Precision?
    /// Units this request may use, within the host's ceiling.
    public var computeUnits: ComputeUnits?
    /// Run only on external power (e.g. re-indexing everything).
    public var requiresExternalPower: Bool

    public init(tier: Tier, userInteractive: Bool = false, precision: Precision? = nil, computeUnits: ComputeUnits? = nil,
                requiresExternalPower: Bool = false) {
        self.tier = tier
        self.userInteractive = userInteractive
        self.precision = precision
        self.computeUnits = computeUnits
        self.requiresExternalPower = requiresExternalPower
    }
}

/// What the policy decided for one request.
public struct Decision: Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Action: Sendable, Equatable, Codable {
        case run
        /// Wait and be re-evaluated when the power state changes.
        case `defer`(reason: String)
        /// Refused: it cannot be satisfied.
        case drop(reason: String)
    }

    public var action: Action
    public var precision: Precision
    public var computeUnits: ComputeUnits
    public var qos: QoSClass
    public var threads: Int

    public var description: String {
        let verdict: String = switch action {
        case .run: "run"
        case let .defer(reason): "defer (\(reason))"
        case let .drop(reason): "drop (\(reason))"
        }
        return "\(verdict), \(precision) on \(computeUnits), \(qos), \(threads) thread\(threads == 1 ? "" : "s")"
    }
}
