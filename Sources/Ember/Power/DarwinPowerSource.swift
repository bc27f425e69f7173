#if canImport(Darwin)
import EmberCore
import EmberModels
import Foundation

/// The power state Apple platforms report: `ProcessInfo.thermalState` and
/// `isLowPowerModeEnabled`, with their change notifications. (Battery level
/// needs IOKit or UIKit; it is left unknown here.)
public final class DarwinPowerSource: PowerSource, @unchecked Sendable {
    public init() {}

    public func current() -> PowerState {
        let info = ProcessInfo.processInfo
        let thermal: PowerState.Thermal = switch info.thermalState {
        case .nominal: .nominal
        case .fair: .fair
        case .serious: .serious
        case .critical: .critical
        @unknown default: .nominal
        }
        return PowerState(batteryLevel: nil, charging: .unknown, externalPower: nil,
                          lowPowerMode: info.isLowPowerModeEnabled, thermal: thermal)
    }

    public func changes() -> AsyncStream<PowerState> {
        AsyncStream { continuation in
            let center = NotificationCenter.default
            let last = LastState(current())
            let emit: @Sendable (Notification) -> Void = { [self] _ in
                let now = current()
                if last.replace(with: now) { continuation.yield(now) }
            }
            let observers = [
                center.addObserver(forName: ProcessInfo.thermalStateDidChangeNotification, object: nil, queue: nil, using: emit),
                center.addObserver(forName: .NSProcessInfoPowerStateDidChange, object: nil, queue: nil, using: emit),
            ]
            continuation.onTermination = { _ in observers.forEach { center.removeObserver($0) } }
        }
    }
}
/// The last state emitted, shared by notification callbacks.
private final class LastState: @unchecked Sendable {
    private let lock = NSLock()
    private var state: PowerState
    init(_ state: PowerState) { self.state = state }
    /// Stores `new`; true when it differs from the last one (timestamps aside).
    func replace(with new: PowerState) -> Bool {
        lock.withLock {
            guard !new.sameConditions(as: state) else { return false }
            state = new
            return true
        }
    }
}
#endif
