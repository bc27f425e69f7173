import _CEmberAPI
import Ember
import Foundation

// The objects behind the C API's opaque handles. A handle is a retained
// reference (`Unmanaged`) handed to C; releasing the handle balances it.

/// Behind `ember_runtime_t`: the runtime and the requests still running, so
/// releasing the runtime can cancel them.
final class CRuntime: @unchecked Sendable {
    let runtime: Runtime
    private let lock = NSLock()
    private var running: [ObjectIdentifier: CRequest] = [:]

    init(_ runtime: Runtime) { self.runtime = runtime }

    func track(_ request: CRequest) { lock.withLock { running[ObjectIdentifier(request)] = request } }
    func untrack(_ request: CRequest) { lock.withLock { running[ObjectIdentifier(request)] = nil } }
    func cancelAll() { lock.withLock { Array(running.values) }.forEach { $0.cancel() } }
}

/// Behind `ember_model_t`: a loaded model of either kind.
enum CModel: @unchecked Sendable {
    case language(any TextGenerator)
    case embedding(any Embedder)

    final class Box: @unchecked Sendable {
        let model: CModel
        init(_ model: CModel) { self.model = model }
    }
}

/// Behind `ember_request_t`: one generation or embedding running as a task,
/// its outcome, and a condition to wait on.
final class CRequest: @unchecked Sendable {
    /// What a request that ended well produced.
    enum Output: Sendable {
        case generation(Completion<Generation>)
        case embeddings(Completion<[[Float]]>)
    }

    private let condition = NSCondition()
    private var finished = false
    private var status = EMBER_ERROR_PENDING
    private var message = ""
    private var task: Task<Void, Never>?
    /// The decision the request ran under, once it ended well.
    private(set) var decision: ember_decision_t?
    /// The generated text as a C string, kept for the request's lifetime (generation only).
    private(set) var text: UnsafeMutablePointer<CChar>?
    /// The vectors, one per text (embedding only).
    private(set) var vectors: [[Float]]?
    /// The host's token callback; closed when the host releases the request.
    let callback: CCallback

    init(callback: CCallback) { self.callback = callback }

    deinit { free(text) }

    func start(_ work: @escaping @Sendable () async throws -> Output, then: @escaping @Sendable () -> Void) {
        condition.withLock {
            task = Task {
                let outcome: Result<Output, Error>
                do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
                self.finish(outcome)
                then()
            }
        }
    }

    private func finish(_ outcome: Result<Output, Error>) {
        condition.withLock {
            switch outcome {
            case let .success(.generation(completion)):
                decision = CConversions.decision(completion)
                text = strdup(completion.output.text)
                status = EMBER_OK
            case let .success(.embeddings(completion)):
                decision = CConversions.decision(completion)
                vectors = completion.output
                status = EMBER_OK
            case let .failure(error):
                (status, message) = CStatus.from(error)
            }
            finished = true
            condition.broadcast()
        }
    }

    func cancel() { condition.withLock { task }?.cancel() }

    /// Blocks until the request ends; its status and error message.
    func wait() -> (ember_status_t, String) {
        condition.withLock {
            while !finished { condition.wait() }
            return (status, message)
        }
    }

    /// The status now, without waiting (`EMBER_ERROR_PENDING` while it runs).
    var current: (ember_status_t, String) { condition.withLock { (status, message) } }
}

extension Unmanaged {
    /// The object behind a C handle, without changing its retain count.
    static func object(_ handle: OpaquePointer?) -> Instance? {
        handle.map { Unmanaged<Instance>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
    }
}
