import Foundation

/// Which bound matmuls a forward pass uses: the units allowed and the precision asked for.
struct PlanKey: Hashable {
    let units: ComputeUnits
    let precision: Precision?
}

/// A model's bound plans, one per ``PlanKey``, built on first use and kept.
/// A plan is built under the lock, so two callers asking for the same new
/// plan bind the weights once, not twice.
final class PlanCache<Plan>: @unchecked Sendable {
    private let lock = NSLock()
    private var plans: [PlanKey: Plan] = [:]

    func plan(for key: PlanKey, build: () throws -> Plan) rethrows -> Plan {
        try lock.withLock {
            if let plan = plans[key] { return plan }
            let plan = try build()
            plans[key] = plan
            return plan
        }
    }
}
