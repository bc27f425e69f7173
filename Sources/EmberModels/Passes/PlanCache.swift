import EmberCore
import Foundation

/// A model's bound plans, one per key (units, precision, …), built on first
/// use and kept. A plan is built under the lock, so two callers asking for
/// the same new plan bind the weights once, not twice.
final class PlanCache<Key: Hashable, Plan>: @unchecked Sendable {
    private let lock = NSLock()
    private var plans: [Key: Plan] = [:]

    func plan(for key: Key, build: () throws -> Plan) rethrows -> Plan {
        try lock.withLock {
            if let plan = plans[key] { return plan }
            let plan = try build()
            plans[key] = plan
            return plan
        }
    }
}
