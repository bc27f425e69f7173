import EmberCore
import EmberModels
/// The policy's table — the one place its thresholds live (`docs/POLICY.md`
/// describes it; `ember policy` prints it). Hosts change it through
/// ``PolicyConfiguration``.
public struct PolicyTable: Sendable, Equatable, Codable {
    /// What a power situation allows: how much quality a request may give up, how much energy it may spend, and
    /// which routes it may take. Among what fits, the tier's ``TierRule/objective`` chooses from the predictions.
    public struct Budget: Sendable, Equatable, Codable {
        /// The budget's name as `ember policy` prints it: "full", "standard", "reduced" or "low-power".
        public var name: String
        /// The largest quality loss against fp32 allowed (0.01: +1 % perplexity, or cosine 0.99).
        public var maxQualityLoss: Double
        /// Energy cap as a multiple of the least-energy candidate's joules (1: the least energy only); nil: no cap.
        public var energyFactor: Double?
        /// The units work may use under this budget, within the host's ceiling.
        public var computeUnits: ComputeUnits
    }

    /// What each tier optimises among the candidates that fit the budget.
    public enum Objective: String, Sendable, Equatable, Codable {
        /// The least predicted time.
        case fastest
        /// The least predicted energy within the tier's ``TierRule/latencyTarget`` (the fastest when none meets it).
        case leastEnergy = "least-energy"
    }

    /// What a tier may do, state by state, and what it optimises.
    public struct TierRule: Sendable, Equatable, Codable {
        /// The QoS class the tier's work runs at (critical requests flagged `userInteractive` get `.userInteractive` instead).
        public var qos: QoSClass
        /// Whether the tier runs in low-power mode; false defers it.
        public var runsInLowPowerMode: Bool
        /// Whether the tier runs on battery at or below ``PolicyTable/lowBatteryThreshold``; false defers it.
        public var runsOnLowBattery: Bool
        /// Whether the tier runs at thermal state `.serious`; false defers it.
        public var runsWhenThermalSerious: Bool
        /// Whether the tier runs at thermal state `.critical`; false defers it.
        public var runsWhenThermalCritical: Bool
        /// What the tier optimises among the candidates within its budget.
        public var objective: Objective = .fastest
        /// For ``Objective/leastEnergy``: the predicted seconds a candidate must stay within; nil: no target.
        public var latencyTarget: Double? = nil

        /// Runs in every state at user-initiated QoS, fastest: what a tier without a rule (and a table without a critical rule) gets.
        public static let runsAlways = TierRule(qos: .userInitiated, runsInLowPowerMode: true, runsOnLowBattery: true,
                                                runsWhenThermalSerious: true, runsWhenThermalCritical: true)
    }

    /// Charging or full, or no battery: the tightest quality budget (+0.5 %).
    public var fullBudget = Budget(name: "full", maxQualityLoss: 0.005, energyFactor: nil, computeUnits: .all)
    /// On battery above the low threshold: +2 %.
    public var standardBudget = Budget(name: "standard", maxQualityLoss: 0.02, energyFactor: nil, computeUnits: .all)
    /// On battery at or below the low threshold: +5 %, and no more than 1.25× the least energy.
    public var reducedBudget = Budget(name: "reduced", maxQualityLoss: 0.05, energyFactor: 1.25, computeUnits: .all)
    /// Low-power mode: +5 %, the least energy.
    public var lowPowerBudget = Budget(name: "low-power", maxQualityLoss: 0.05, energyFactor: 1.0, computeUnits: .all)

    /// Average power allowed at thermal `.serious`, as a fraction of the most any candidate draws.
    public var seriousPowerCap = 0.5
    /// Average power allowed at thermal `.critical`, as a fraction of the most any candidate draws.
    public var criticalPowerCap = 0.25

    /// Battery level at or below which the budget is reduced.
    public var lowBatteryThreshold = 0.20

    /// The rule for each tier; a tier without one follows the `.critical` rule (or ``TierRule/runsAlways`` without one).
    public var rules: [Tier: TierRule] = [
        .critical: TierRule(qos: .userInitiated, runsInLowPowerMode: true, runsOnLowBattery: true,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: true),
        .standard: TierRule(qos: .utility, runsInLowPowerMode: false, runsOnLowBattery: false,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: false, objective: .leastEnergy, latencyTarget: 2),
        .background: TierRule(qos: .background, runsInLowPowerMode: false, runsOnLowBattery: false,
                              runsWhenThermalSerious: false, runsWhenThermalCritical: false, objective: .leastEnergy),
    ]

    /// The default table, as `docs/POLICY.md` lists it.
    public init() {}

    /// The budget a power state allows.
    public func budget(for state: PowerState) -> Budget {
        if state.lowPowerMode { return lowPowerBudget }
        if state.onExternalPower || state.batteryLevel == nil && state.externalPower != false { return fullBudget }
        if let level = state.batteryLevel, level <= lowBatteryThreshold { return reducedBudget }
        return standardBudget
    }
}

/// The host's settings for the policy.
public struct PolicyConfiguration: Sendable, Equatable, Codable {
    /// Units no request may go beyond (Core ML's `computeUnits`).
    public var computeUnits: ComputeUnits
    /// The budgets, the low-battery threshold and the per-tier rules; the default table unless set.
    public var table: PolicyTable
    /// Threads a request may use at most.
    public var threads: Int
    /// Threads each QoS class may use at most: the cores its workers are pinned to (performance cores for the
    /// user's classes, efficiency cores for utility and background); a class not listed may use ``threads``.
    public var threadLimits: [QoSClass: Int] = [:]

    /// Settings with a `computeUnits` ceiling (default `.all`), a `table`, and at most `threads` threads per request (default one per active core; raised to at least 1).
    public init(computeUnits: ComputeUnits = .all, table: PolicyTable = PolicyTable(), threads: Int = KernelThreads.default) {
        self.computeUnits = computeUnits
        self.table = table
        self.threads = max(1, threads)
    }
}
