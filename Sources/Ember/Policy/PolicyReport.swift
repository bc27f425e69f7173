import EmberCore
import EmberModels
/// The policy as text: its table and its decision for representative states.
/// `ember policy` prints it and `docs/POLICY.md` quotes it (a test keeps the two equal).
public enum PolicyReport {
    /// The states every tier is shown in.
    public static let states: [(name: String, state: PowerState)] = [
        ("mains, no battery", .mains),
        ("charging 60%", PowerState(batteryLevel: 0.6, charging: .charging, externalPower: true)),
        ("battery 50%", PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false)),
        ("battery 15%", PowerState(batteryLevel: 0.15, charging: .unplugged, externalPower: false)),
        ("battery 50%, low-power", PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false, lowPowerMode: true)),
        ("charging, thermal serious", PowerState(batteryLevel: 0.8, charging: .charging, externalPower: true, thermal: .serious)),
        ("battery 50%, thermal serious", PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false, thermal: .serious)),
        ("mains, thermal critical", PowerState(batteryLevel: nil, charging: .unknown, externalPower: true, thermal: .critical)),
    ]

    /// The table and the decision matrix, as lines.
    public static func lines(configuration: PolicyConfiguration = PolicyConfiguration(threads: 2), costs: CostModel = .reference,
                             workload: Workload = .reference) -> [String] {
        let table = configuration.table
        var lines = ["budgets (battery threshold \(Int(table.lowBatteryThreshold * 100))%):"]
        for budget in [table.fullBudget, table.standardBudget, table.reducedBudget, table.lowPowerBudget] {
            let energy = budget.energyFactor.map { $0 <= 1 ? "the least energy" : String(format: "energy ≤ %g× the least", $0) } ?? "no energy cap"
            lines.append("  \(budget.name.padding(toLength: 10, withPad: " ", startingAt: 0)) quality loss ≤ \(percent(budget.maxQualityLoss)), "
                         + "\(energy), units \(budget.computeUnits)")
        }
        lines.append(String(format: "thermal power caps: serious %g%%, critical %g%% of the most any candidate draws",
                            table.seriousPowerCap * 100, table.criticalPowerCap * 100))
        lines.append("tiers:")
        for tier in Tier.allCases.reversed() {
            guard let rule = table.rules[tier] else { continue }
            func yes(_ value: Bool) -> String { value ? "runs" : "defers" }
            let objective = rule.objective == .fastest ? "fastest" : "least energy" + (rule.latencyTarget.map { String(format: " within %g s", $0) } ?? "")
            lines.append("  \(tier.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) \(objective), \(rule.qos); low-power mode: \(yes(rule.runsInLowPowerMode)); "
                + "low battery: \(yes(rule.runsOnLowBattery)); thermal serious: \(yes(rule.runsWhenThermalSerious)); "
                + "thermal critical: \(yes(rule.runsWhenThermalCritical))")
        }
        lines.append(String(format: "decisions (%@ ceiling, %d threads; a %@ of %.1f + %.1f Gop, quality %@):", configuration.computeUnits.description,
                            configuration.threads, workload.kind == "embed" ? "batch" : "generation", workload.batchedGigaOps,
                            workload.sequentialGigaOps, costs.quality(for: workload).source))
        for (name, state) in states {
            for tier in Tier.allCases.reversed() {
                let decision = BackendPolicy.decide(request: RequestRequirements(tier: tier, workload: workload), state: state, configuration: configuration,
                                                    costs: costs)
                let predicted = decision.predicted.map { String(format: " — %.3f s, %.2f J", $0.seconds, $0.joules) } ?? ""
                lines.append("  \(name.padding(toLength: 29, withPad: " ", startingAt: 0)) \(tier.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) \(decision)\(predicted)")
            }
        }
        return lines
    }

    private static func percent(_ fraction: Double) -> String { String(format: "%g%%", fraction * 100) }
}
