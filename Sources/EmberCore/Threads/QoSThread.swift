import Foundation

/// A thread of Ember's own at a given QoS, for work that must run at a known
/// priority from its first instruction (benchmarks, request runners).
public enum QoSThread {
    /// Runs `body` on a new thread at `qos` and returns a semaphore signalled when it ends.
    @discardableResult
    public static func start(qos: QoSClass, mapping: QoSMapping = .current, name: String? = nil,
                             _ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            mapping.applyToCurrentThread(qos)
            body()
            finished.signal()
        }
        thread.name = name ?? "ember-\(qos)"
        thread.start()
        return finished
    }

    /// Runs `body` on a new thread at `qos` and waits for its result.
    public static func run<Result: Sendable>(qos: QoSClass, mapping: QoSMapping = .current,
                                            _ body: @escaping @Sendable () -> Result) -> Result {
        let box = ResultBox<Result>()
        start(qos: qos, mapping: mapping) { box.value = body() }.wait()
        return box.value!
    }
}

extension QoSThread {
    /// Runs blocking `body` (loading a model, a forward pass) on a new thread at
    /// `qos` and awaits its result, so Swift concurrency's few cooperative
    /// threads are never held by it.
    public static func value<Result: Sendable>(qos: QoSClass, mapping: QoSMapping = .current,
                                              _ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            start(qos: qos, mapping: mapping) { continuation.resume(with: Swift.Result { try body() }) }
        }
    }
}

/// A value written by one thread and read by another after a semaphore hand-off.
final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
