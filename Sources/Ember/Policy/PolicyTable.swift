/// The policy's table — the one place its numbers live (`docs/POLICY.md`
/// describes it; `ember policy` prints it). Hosts change it through
/// ``PolicyConfiguration``.
public struct PolicyTable: Sendable, Equatable, Codable {
    /// What a power situation allows.
    public struct Budget: Sendable, Equatable, Codable {
        public var name: String
        public var precision: Precision
        public var computeUnits: ComputeUnits
    }

    /// What a tier may do, state by state.
    public struct TierRule: Sendable, Equatable, Codable {
        public var qos: QoSClass
        public var runsInLowPowerMode: Bool
        public var runsOnLowBattery: Bool
        public var runsWhenThermalSerious: Bool
        public var runsWhenThermalCritical: Bool
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

    public var rules: [Tier: TierRule] = [
        .critical: TierRule(qos: .userInitiated, runsInLowPowerMode: true, runsOnLowBattery: true,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: true),
        .standard: TierRule(qos: .utility, runsInLowPowerMode: false, runsOnLowBattery: false,
                            runsWhenThermalSerious: true, runsWhenThermalCritical: false),
        .background: TierRule(qos: .background, runsInLowPowerMode: false, runsOnLowBattery: false,
                              runsWhenThermalSerious: false, runsWhenThermalCritical: false),
    ]

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
    public var table: PolicyTable
    /// Threads a request may use at most.
    public var threads: Int

    public init(computeUnits: ComputeUnits = .all, table: PolicyTable = PolicyTable(), threads: Int = KernelThreads.default) {
        self.computeUnits = computeUnits
        self.table = table
        self.threads = max(1, threads)
    }
}
