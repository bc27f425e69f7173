import Foundation

/// A thread of Ember's own at a given QoS, for work that must run at a known
/// priority from its first instruction (benchmarks, request runners).
public enum QoSThread {
    /// Runs `body` on a new thread at `qos` and returns a semaphore signalled when it ends; throws
    /// ``OSThread/StartError`` when the system cannot create the thread (`body` then never runs).
    @discardableResult
    public static func start(qos: QoSClass, mapping: QoSMapping = .current, name: String? = nil,
                             _ body: @escaping @Sendable () -> Void) throws -> DispatchSemaphore {
        let finished = DispatchSemaphore(value: 0)
        try OSThread.start(name: name ?? "ember-\(qos)") {
            mapping.applyToCurrentThread(qos)
            body()
            finished.signal()
        }
        return finished
    }

    /// Runs `body` on a new thread at `qos` and waits for its result; throws when the thread cannot be created.
    public static func run<Result: Sendable>(qos: QoSClass, mapping: QoSMapping = .current,
                                            _ body: @escaping @Sendable () -> Result) throws -> Result {
        let box = ResultBox<Result>()
        try start(qos: qos, mapping: mapping) { box.value = body() }.wait()
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
            do {
                try start(qos: qos, mapping: mapping) { continuation.resume(with: Swift.Result { try body() }) }
            } catch {
                continuation.resume(throwing: error) // no thread: the request fails with the reason, never waits
            }
        }
    }
}

/// A value written by one thread and read by another after a semaphore hand-off.
final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
