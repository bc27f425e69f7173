import EmberCore
import EmberModels
/// The policy's table — the one place its numbers live (`docs/POLICY.md`
/// describes it; `ember policy` prints it). Hosts change it through
/// ``PolicyConfiguration``.
public struct PolicyTable: Sendable, Equatable, Codable {
    /// What a power situation allows.
    public struct Budget: Sendable, Equatable, Codable {
        /// The budget's name as `ember policy` prints it: "full", "standard", "reduced" or "low-power".
        public var name: String
        /// The precision work runs at under this budget.
        public var precision: Precision
        /// The units work may use under this budget, within the host's ceiling.
        public var computeUnits: ComputeUnits
    }

    /// What a tier may do, state by state.
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

        /// Runs in every state at user-initiated QoS: what a tier without a rule (and a table without a critical rule) gets.
        public static let runsAlways = TierRule(qos: .userInitiated, runsInLowPowerMode: true, runsOnLowBattery: true,
                                                runsWhenThermalSerious: true, runsWhenThermalCritical: true)
    }

    /// Charging or full, or no battery: quality first (fp32 on the GPU route allowed).
    public var fullBudget = Budget(name: "full", precision: .fp32, computeUnits: .all)
    /// On battery above the low threshold: int8 on the neural-engine route.
    public var standardBudget = Budget(name: "standard", precision: .int8, computeUnits: .cpuAndNeuralEngine)
    /// On battery at or below the low threshold: int4.
    public var reducedBudget = Budget(name: "reduced", precision: .int4, computeUnits: .cpuAndNeuralEngine)
    /// Low-power mode: int4.
    public var lowPowerBudget = Budget(name: "low-power", precision: .int4, computeUnits: .cpuAndNeuralEngine)

    /// Battery level at or below which the budget is reduced.
    public var lowBatteryThreshold = 0.20

    /// The rule for each tier; a tier without one follows the `.critical` rule (or ``TierRule/runsAlways`` without one).
    public var rules: [Tier: TierRule] = [
        .critical: TierRule(qos: .userInitiated, runsInLowPowerMode: true, runsOnLowBattery: true,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: true),
        .standard: TierRule(qos: .utility, runsInLowPowerMode: false, runsOnLowBattery: false,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: false),
        .background: TierRule(qos: .background, runsInLowPowerMode: false, runsOnLowBattery: false,
                              runsWhenThermalSerious: false, runsWhenThermalCritical: false),
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

    /// Settings with a `computeUnits` ceiling (default `.all`), a `table`, and at most `threads` threads per request (default one per active core; raised to at least 1).
    public init(computeUnits: ComputeUnits = .all, table: PolicyTable = PolicyTable(), threads: Int = KernelThreads.default) {
        self.computeUnits = computeUnits
        self.table = table
        self.threads = max(1, threads)
    }
}
