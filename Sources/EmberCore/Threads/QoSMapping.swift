import _CEmberThreads
import Foundation

/// How each ``QoSClass`` becomes an OS thread priority (see `docs/QOS.md`).
///
/// On Linux: a nice value and a scheduling policy per class. When this
/// process may raise priorities (`CAP_SYS_NICE`, or `RLIMIT_NICE` reaching
/// −8) the table follows Chromium's and Android's (user-interactive −8 …
/// background idle); otherwise the order is kept by *lowering* the lower
/// classes instead, and promotion above a thread's own class is unavailable.
/// On Darwin the class goes straight to `pthread_set_qos_class_self_np`.
public struct QoSMapping: Sendable, Equatable, Codable {
    /// The priority of every concrete class.
    public var priorities: [String: ThreadPriority]
    /// Whether threads may be raised above nice 0 (and so promoted).
    public var canRaise: Bool
    /// A short account of why this table was chosen.
    public var reason: String

    enum CodingKeys: String, CodingKey {
        case priorities, reason
        case canRaise = "can_raise"
    }

    /// With the right to raise priorities.
    public static let privileged = QoSMapping(
        table: [
            .userInteractive: ThreadPriority(policy: .other, nice: -8),
            .userInitiated: ThreadPriority(policy: .other, nice: -4),
            .default: ThreadPriority(policy: .other, nice: 0),
            .utility: ThreadPriority(policy: .batch, nice: 2),
            .background: ThreadPriority(policy: .idle, nice: 19),
        ], canRaise: true, reason: "may raise priorities (CAP_SYS_NICE or RLIMIT_NICE)")

    /// Without it: the same order, shifted so nothing is above nice 0.
    public static let unprivileged = QoSMapping(
        table: [
            .userInteractive: ThreadPriority(policy: .other, nice: 0),
            .userInitiated: ThreadPriority(policy: .other, nice: 2),
            .default: ThreadPriority(policy: .other, nice: 4),
            .utility: ThreadPriority(policy: .batch, nice: 6),
            .background: ThreadPriority(policy: .idle, nice: 19),
        ], canRaise: false,
        reason: "may not raise priorities (no CAP_SYS_NICE, RLIMIT_NICE too low): lower classes are lowered instead")

    init(table: [QoSClass: ThreadPriority], canRaise: Bool, reason: String) {
        priorities = Dictionary(uniqueKeysWithValues: table.map { ($0.key.description, $0.value) })
        self.canRaise = canRaise
        self.reason = reason
    }

    /// The table for this process, chosen once by trying nice −8 on a throwaway thread.
    public static let current: QoSMapping = {
        #if os(Linux)
        return et_can_set_nice(-8) ? .privileged : .unprivileged
        #else
        return QoSMapping(table: [:], canRaise: true, reason: "Darwin: pthread_set_qos_class_self_np")
        #endif
    }()

    /// The OS priority of `qos` (`.unspecified` as `.default`).
    public func priority(for qos: QoSClass) -> ThreadPriority? { priorities[qos.resolved.description] }

    /// Gives the calling thread `qos`; remembers it as ``QoSClass/current``.
    @discardableResult
    public func applyToCurrentThread(_ qos: QoSClass) -> Bool {
        et_set_current_qos(qos.resolved.rawValue)
        #if canImport(Darwin)
        return et_set_qos_class_self(qos.resolved.rawValue) == 0
        #else
        return apply(qos, toThread: et_thread_id())
        #endif
    }

    /// Gives thread `tid` the priority of `qos`. False when the OS refused
    /// (raising without the right to); the thread keeps what it had.
    @discardableResult
    public func apply(_ qos: QoSClass, toThread tid: Int32) -> Bool {
        guard let priority = priority(for: qos) else { return false }
        return priority.apply(toThread: tid) == nil
    }

    /// The table as lines, most urgent first.
    public var lines: [String] {
        QoSClass.concrete.compactMap { qos in priority(for: qos).map { "\(qos.description.padding(toLength: 16, withPad: " ", startingAt: 0)) \($0)" } }
    }
}

/// The kernel thread id of the calling thread (0 off Linux).
public var currentThreadID: Int32 { et_thread_id() }
