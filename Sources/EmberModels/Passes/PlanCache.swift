import EmberCore
import Foundation

/// A model's bound plans, one per key (units, precision, …), built on first
/// use and kept. A plan is built under the lock, so two callers asking for
/// the same new plan bind the weights once, not twice.
final class PlanCache<Key: Hashable, Plan>: @unchecked Sendable {
    private let lock = NSLock()
    private var plans: [Key: Plan] = [:]

    /// The plan for `key`, built by `build` the first time; plans whose keys are `stale` are dropped when a new one is built.
    func plan(for key: Key, stale: (Key) -> Bool = { _ in false }, build: () throws -> Plan) rethrows -> Plan {
        try lock.withLock {
            if let plan = plans[key] { return plan }
            let plan = try build()
            plans = plans.filter { !stale($0.key) }
            plans[key] = plan
            return plan
        }
    }

    /// The plan for `key` if it has been built and kept.
    func cached(_ key: Key) -> Plan? { lock.withLock { plans[key] } }

    /// Every plan built and kept.
    var all: [Plan] { lock.withLock { Array(plans.values) } }

    /// Drops every plan; the next pass binds again.
    func removeAll() { lock.withLock { plans = [:] } }
}
