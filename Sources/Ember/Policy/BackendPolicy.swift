import EmberCore
import EmberModels
import Foundation

/// Turns a request's tier and needs, the device's power state and the cost model into a ``Decision``: run now,
/// defer, or drop — and if it runs, at which precision, on which unit, at which QoS, with how many threads.
///
/// Whether a tier runs at all is the table's rule (``PolicyTable``). How it runs is an optimisation: every candidate
/// (unit × precision × threads) gets a predicted time, energy and quality loss from the ``CostModel``; the power
/// situation's budget keeps those within its quality loss, its energy cap and (thermal) its power cap; the tier's
/// objective picks — critical the fastest, standard the least energy within its latency target, background the least
/// energy. A pure function of its arguments.
public enum BackendPolicy {
    /// The decision for `request` in power `state` under the host's `configuration`, predicted with `costs`
    /// (the reference machine's when omitted).
    public static func decide(request: RequestRequirements, state: PowerState,
                              configuration: PolicyConfiguration = PolicyConfiguration(),
                              costs: CostModel = .reference) -> Decision {
        let table = configuration.table
        // A host table without a rule for this tier: the critical rule, else run always.
        let rule = table.rules[request.tier] ?? table.rules[.critical] ?? PolicyTable.TierRule.runsAlways
        let budget = table.budget(for: state)
        let qos = request.tier == .critical && request.userInteractive ? QoSClass.userInteractive : rule.qos
        var decision = Decision(action: .run, precision: .fp32, computeUnits: .cpu, qos: qos,
                                threads: min(configuration.threads, configuration.threadLimits[qos] ?? .max))

        // Power: what may run at all.
        if state.lowPowerMode && !rule.runsInLowPowerMode {
            decision.action = .defer(reason: "low-power mode: only \(runners(table) { $0.runsInLowPowerMode }) work runs")
        } else if budget == table.reducedBudget && !rule.runsOnLowBattery {
            decision.action = .defer(reason: "battery at or below \(Int(table.lowBatteryThreshold * 100))%")
        } else if request.requiresExternalPower && !state.onExternalPower {
            decision.action = .defer(reason: "needs external power, none connected")
        }
        var powerCap: (fraction: Double, why: String)? = nil
        switch state.thermal {
        case .critical:
            if !rule.runsWhenThermalCritical, decision.action == .run { decision.action = .defer(reason: "thermal state critical") }
            powerCap = (table.criticalPowerCap, "thermal critical")
        case .serious:
            if !rule.runsWhenThermalSerious, decision.action == .run { decision.action = .defer(reason: "thermal state serious") }
            powerCap = (table.seriousPowerCap, "thermal serious")
        case .nominal, .fair:
            break
        }

        // The host's ceiling and the request's own units always win.
        if let requested = request.computeUnits, !requested.isSubset(of: configuration.computeUnits) {
            decision.action = .drop(reason: "asks for \(requested), beyond the host's \(configuration.computeUnits)")
            return decision
        }
        let ceiling = request.computeUnits ?? configuration.computeUnits
        // A precision the request needs may use any unit the ceiling allows; otherwise the budget's units.
        let allowed = (request.precision == nil ? ceiling.intersection(budget.computeUnits) : ceiling).union(.cpu)
        let workload = request.workload ?? .reference
        let choice = CandidateSearch(workload: workload, costs: costs, units: allowed,
                                     precisions: request.precision.map { [$0] } ?? Precision.allCases,
                                     maxThreads: decision.threads)
            .choose(rule: rule, budget: budget, powerCap: powerCap, qualityBound: request.precision == nil,
                    bound: workload.model.flatMap { costs.bound[$0] } ?? [], switchingMargin: costs.switchingMargin)
        if let choice {
            decision.precision = choice.precision
            decision.unit = choice.unit
            decision.threads = choice.threads
            decision.predicted = choice.prediction
            decision.explanation = choice.explanation
        } else {
            // No unit the ceiling allows has a calibrated cost for any allowed precision: the CPU route, as asked.
            decision.precision = request.precision ?? .fp32
            decision.explanation = "no calibrated cost for this request's units and precision: the CPU route"
        }
        decision.computeUnits = ComputeUnits(decision.unit).union(.cpu)
        if request.storedWeights {
            // Stored weights are quantized or float as the file has them: the quantized kernels' route, within the ceiling.
            decision.storedWeights = true
            decision.computeUnits = ceiling.union(.cpu)
            decision.predicted = nil
            decision.explanation = "the weights as the file stores them, on \(decision.computeUnits) (asked for)"
        }
        return decision
    }

    private static func runners(_ table: PolicyTable, _ allowed: (PolicyTable.TierRule) -> Bool) -> String {
        Tier.allCases.reversed().filter { table.rules[$0].map(allowed) ?? false }.map(\.rawValue).joined(separator: "/")
    }
}
