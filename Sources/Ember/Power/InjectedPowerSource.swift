import Foundation

/// A power state the host application sets itself — for platforms where
/// Ember cannot read the battery, for hosts that already track it, and for
/// demos. Every ``set(_:)`` reaches every subscriber of ``changes()``.
public final class InjectedPowerSource: PowerSource, @unchecked Sendable {
    private let lock = NSLock()
    private var state: PowerState
    private var subscribers: [UUID: AsyncStream<PowerState>.Continuation] = [:]

    /// A source starting at `state` (default ``PowerState/mains``).
    public init(_ state: PowerState = .mains) { self.state = state }

    /// The state last set.
    public func current() -> PowerState { lock.withLock { state } }

    /// Every later ``set(_:)`` whose conditions differ from the state before it; the stream never finishes on its own.
    public func changes() -> AsyncStream<PowerState> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock { subscribers[id] = continuation }
            continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.subscribers.removeValue(forKey: id) } }
        }
    }

    /// Makes `newState` current and announces it (equal conditions are not repeated).
    public func set(_ newState: PowerState) {
        let targets = lock.withLock { () -> [AsyncStream<PowerState>.Continuation] in
            let changed = !state.sameConditions(as: newState)
            state = newState
            return changed ? Array(subscribers.values) : []
        }
        for target in targets { target.yield(newState) }
    }
}
