import _CEmberThreads

/// How urgent a piece of work is, in Apple's five quality-of-service classes
/// (raw values are `qos_class_t`'s), ordered from `.background` to
/// `.userInteractive`. `.unspecified` inherits: it runs as `.default` unless
/// the thread already has a class.
public enum QoSClass: UInt32, Sendable, CaseIterable, Comparable, Codable, CustomStringConvertible {
    /// No class given: runs as `.default` unless the thread already has a class.
    case unspecified = 0x00
    /// Work the user does not see (indexing, prefetching, maintenance); lowest.
    case background = 0x09
    /// Long-running work the user knows of but does not wait on (downloads, imports).
    case utility = 0x11
    /// Between `.utility` and `.userInitiated`; what unspecified work runs as.
    case `default` = 0x15
    /// Work the user started and is waiting for (opening a document, a reply).
    case userInitiated = 0x19
    /// Work that drives what is on screen right now; highest.
    case userInteractive = 0x21

    /// Orders by urgency (raw value): `.unspecified` lowest, then `.background` … `.userInteractive`.
    public static func < (lhs: QoSClass, rhs: QoSClass) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The five concrete classes, most urgent first.
    public static let concrete: [QoSClass] = [.userInteractive, .userInitiated, .default, .utility, .background]

    /// The case name, e.g. "userInitiated".
    public var description: String {
        switch self {
        case .unspecified: "unspecified"
        case .background: "background"
        case .utility: "utility"
        case .default: "default"
        case .userInitiated: "userInitiated"
        case .userInteractive: "userInteractive"
        }
    }

    /// `.unspecified` resolved to what it runs as.
    public var resolved: QoSClass { self == .unspecified ? .default : self }

    /// The class with the same raw value as a Swift task priority; values in
    /// between round down to the class below (`.low` is `.utility`, `.high` `.userInitiated`).
    public init(_ priority: TaskPriority) {
        let raw = UInt32(priority.rawValue)
        self = QoSClass.concrete.first { $0.rawValue <= raw } ?? .background
    }

    /// The Swift task priority with this class's raw value (`.default` is `.medium`).
    public var taskPriority: TaskPriority { TaskPriority(rawValue: UInt8(resolved.rawValue)) }

    /// The class Ember last gave the calling thread (`.unspecified` if none).
    public static var current: QoSClass { QoSClass(rawValue: et_current_qos()) ?? .unspecified }
}
