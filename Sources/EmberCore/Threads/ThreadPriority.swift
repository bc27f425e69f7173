import _CEmberThreads

/// A Linux thread priority: a scheduling policy and a nice value.
public struct ThreadPriority: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Linux scheduling policies a normal (non-real-time) thread can have.
    public enum Policy: String, Sendable, Codable {
        /// `SCHED_OTHER`: the default, time-shared by nice weight.
        case other
        /// `SCHED_BATCH`: CPU-bound; never preempts others on wake-up.
        case batch
        /// `SCHED_IDLE`: runs only when nothing else wants the CPU (weight below nice 19).
        case idle

        var kernelValue: Int32 {
            switch self {
            case .other: et_sched_other()
            case .batch: et_sched_batch()
            case .idle: et_sched_idle()
            }
        }

        init?(kernelValue: Int32) {
            switch kernelValue {
            case et_sched_other(): self = .other
            case et_sched_batch(): self = .batch
            case et_sched_idle(): self = .idle
            default: return nil
            }
        }
    }

    /// The Linux scheduling policy.
    public var policy: Policy
    /// −20 (most CPU) … 19 (least).
    public var nice: Int

    /// A priority of `policy` and `nice` (−20 … 19; `SCHED_IDLE` ignores nice).
    public init(policy: Policy, nice: Int) {
        self.policy = policy
        self.nice = nice
    }

    /// A one-line form, e.g. "SCHED_BATCH nice 2".
    public var description: String { "SCHED_\(policy.rawValue.uppercased()) nice \(nice)" }

    /// The priority of thread `tid` now, as the kernel reports it.
    public static func of(thread tid: Int32) -> ThreadPriority? {
        var nice: Int32 = 0
        guard et_thread_nice(tid, &nice) == 0, let policy = Policy(kernelValue: et_thread_policy(tid)) else { return nil }
        return ThreadPriority(policy: policy, nice: Int(nice))
    }

    /// Gives thread `tid` this priority: the policy first (SCHED_IDLE ignores nice), then nice.
    /// Returns the errno of the first step that failed, or nil.
    func apply(toThread tid: Int32) -> Int32? {
        let policyError = et_thread_set_policy(tid, policy.kernelValue)
        if policyError != 0 { return policyError }
        let niceError = et_thread_set_nice(tid, Int32(nice))
        return niceError == 0 ? nil : niceError
    }
}
