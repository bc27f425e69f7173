import Foundation
import Ember

/// A virtual clock for timelines (a fake: time moves only when the test says so).
public final class FakeManualClock: PowerClock, @unchecked Sendable {
    private let lock = NSLock()
    private var time = 0.0
    private var sleepers: [(Double, CheckedContinuation<Void, Never>)] = []

    public init() {}

    public func now() -> Double { lock.withLock { time } }

    public func sleep(until target: Double) async {
        await withCheckedContinuation { continuation in
            let ready = lock.withLock { () -> Bool in
                if time >= target { return true }
                sleepers.append((target, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    public var sleeping: Int { lock.withLock { sleepers.count } }

    public func advance(to target: Double) {
        let due = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            time = target
            let ready = sleepers.filter { $0.0 <= target }.map(\.1)
            sleepers.removeAll { $0.0 <= target }
            return ready
        }
        due.forEach { $0.resume() }
    }
}

