import EmberCore
import EmberModels
/// Turns a request's tier and needs and the device's power state into a
/// ``Decision``: run now, defer, or drop — and if it runs, at which
/// precision, on which units, at which QoS, with how many threads. A pure
/// function of its arguments; the numbers live in ``PolicyTable``.
public enum BackendPolicy {
    /// The decision for `request` in power `state` under the host's `configuration` (the default settings when omitted).
    public static func decide(request: RequestRequirements, state: PowerState,
                              configuration: PolicyConfiguration = PolicyConfiguration()) -> Decision {
        let table = configuration.table
        // A host table without a rule for this tier: the critical rule, else run always.
        let rule = table.rules[request.tier] ?? table.rules[.critical] ?? PolicyTable.TierRule.runsAlways
        let budget = table.budget(for: state)
        var decision = Decision(
            action: .run, precision: budget.precision, computeUnits: budget.computeUnits,
            qos: request.tier == .critical && request.userInteractive ? .userInteractive : rule.qos,
            threads: configuration.threads)

        // Power: what may run at all.
        if state.lowPowerMode && !rule.runsInLowPowerMode {
            decision.action = .defer(reason: "low-power mode: only \(runners(table) { $0.runsInLowPowerMode }) work runs")
        } else if budget == table.reducedBudget && !rule.runsOnLowBattery {
            decision.action = .defer(reason: "battery at or below \(Int(table.lowBatteryThreshold * 100))%")
        } else if request.requiresExternalPower && !state.onExternalPower {
            decision.action = .defer(reason: "needs external power, none connected")
        }

        // Thermal: the second signal.
        switch state.thermal {
        case .critical:
            if !rule.runsWhenThermalCritical, decision.action == .run { decision.action = .defer(reason: "thermal state critical") }
            decision.precision = .int4
            decision.threads = 1
        case .serious:
            if !rule.runsWhenThermalSerious, decision.action == .run { decision.action = .defer(reason: "thermal state serious") }
            decision.precision = stepDown(decision.precision)
            decision.threads = max(1, decision.threads / 2)
        case .nominal, .fair:
            break
        }

        // The host's ceiling and the request's own overrides always win.
        if let requested = request.computeUnits {
            guard requested.isSubset(of: configuration.computeUnits) else {
                decision.action = .drop(reason: "asks for \(requested), beyond the host's \(configuration.computeUnits)")
                return decision
            }
            decision.computeUnits = requested
        }
        let ceiling = request.computeUnits ?? configuration.computeUnits
        if let precision = request.precision {
            // A precision the request needs may use any unit the ceiling allows (fp32 → the GPU route).
            decision.precision = precision
            decision.computeUnits = units(for: precision, within: ceiling, ceiling: ceiling)
        } else {
            decision.computeUnits = units(for: decision.precision, within: decision.computeUnits, ceiling: ceiling)
        }
        if request.storedWeights {
            // Stored weights are quantized or float as the file has them: the quantized kernels' route, within the ceiling.
            decision.storedWeights = true
            decision.computeUnits = ceiling.union(.cpu)
        }
        return decision
    }

    /// The units that run `precision` well, within what is allowed (the CPU route always stays).
    static func units(for precision: Precision, within allowed: ComputeUnits, ceiling: ComputeUnits) -> ComputeUnits {
        let preferred: ComputeUnits = precision == .fp32 ? .cpuAndGPU : .cpuAndNeuralEngine
        return preferred.intersection(allowed).intersection(ceiling).union(.cpu)
    }

    static func stepDown(_ precision: Precision) -> Precision {
        switch precision {
        case .fp32: .int8
        case .int8, .int4: .int4
        }
    }

    private static func runners(_ table: PolicyTable, _ allowed: (PolicyTable.TierRule) -> Bool) -> String {
        Tier.allCases.reversed().filter { table.rules[$0].map(allowed) ?? false }.map(\.rawValue).joined(separator: "/")
    }
}
