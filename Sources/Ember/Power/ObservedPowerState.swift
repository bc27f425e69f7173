import EmberCore
import EmberModels
import Foundation

/// A power state kept behind a lock, with the changes of its conditions fanned
/// out to any number of streams.
final class ObservedPowerState: @unchecked Sendable {
    private let lock = NSLock()
    private var state: PowerState
    private var subscribers: [UUID: AsyncStream<PowerState>.Continuation] = [:]

    init(_ state: PowerState) { self.state = state }

    /// The value last published.
    var value: PowerState { lock.withLock { state } }

    /// Makes `new` the value; subscribers hear it only when its conditions differ from the value before.
    func publish(_ new: PowerState) {
        let listeners = lock.withLock { () -> [AsyncStream<PowerState>.Continuation] in
            guard !new.sameConditions(as: state) else { state = new; return [] }
            state = new
            return Array(subscribers.values)
        }
        for listener in listeners { listener.yield(new) }
    }

    /// Every later change of conditions; the stream never finishes on its own.
    func stream() -> AsyncStream<PowerState> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock { subscribers[id] = continuation }
            continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.subscribers.removeValue(forKey: id) } }
        }
    }
}
