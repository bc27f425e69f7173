import _CEmberAPI
import Ember
import Foundation

// The objects behind the C API's opaque handles, and the table that hands the
// handles out: a handle is an id in the table, never a pointer C could misuse.

/// The C API's handles: each is a slot of this table with the kind of object
/// behind it and a generation that changes when the handle is released, so a
/// released (double release, use after release), forged or wrong-kind handle
/// is refused with `EMBER_ERROR_INVALID_HANDLE` and a message instead of being
/// dereferenced. A lookup returns a strong reference, so an object another
/// thread releases meanwhile lives until the call using it returns. The table
/// is process-wide on purpose: C hosts hold handles as plain values.
final class CHandleTable: @unchecked Sendable {
    /// What a handle stands for.
    enum Kind: String {
        case runtime, model, request
    }

    /// The one table of this process.
    static let shared = CHandleTable()

    private struct Slot {
        var generation: UInt32 = 1
        var kind: Kind?
        var object: AnyObject?
    }

    private let lock = NSLock()
    private var slots: [Slot] = []
    private var vacant: [Int] = []

    /// A new handle for `object`.
    func insert(_ object: AnyObject, as kind: Kind) -> OpaquePointer {
        lock.withLock {
            let index = vacant.popLast() ?? { slots.append(Slot()); return slots.count - 1 }()
            slots[index].kind = kind
            slots[index].object = object
            return Self.handle(index: index, generation: slots[index].generation)
        }
    }

    /// The `T` behind a live handle of `kind`, or the refusal (its message recorded) naming `argument`.
    func lookup<T: AnyObject>(_ handle: OpaquePointer?, _ kind: Kind, as type: T.Type, argument: String) -> Result<T, CStatus.Refusal> {
        lock.withLock { find(handle, kind, argument: argument).flatMap { index in
            guard let object = slots[index].object as? T else { return .failure(Self.refuse(argument, "not a \(kind) handle")) }
            return .success(object)
        } }
    }

    /// Takes the `T` out of a live handle of `kind` (the handle is dead from then on), or the refusal.
    func remove<T: AnyObject>(_ handle: OpaquePointer?, _ kind: Kind, as type: T.Type, argument: String) -> Result<T, CStatus.Refusal> {
        lock.withLock { find(handle, kind, argument: argument).flatMap { index in
            guard let object = slots[index].object as? T else { return .failure(Self.refuse(argument, "not a \(kind) handle")) }
            slots[index] = Slot(generation: slots[index].generation &+ 1 == 0 ? 1 : slots[index].generation &+ 1)
            vacant.append(index)
            return .success(object)
        } }
    }

    private func find(_ handle: OpaquePointer?, _ kind: Kind, argument: String) -> Result<Int, CStatus.Refusal> {
        guard let handle else {
            return .failure(CStatus.Refusal(CStatus.invalid(argument, found: "NULL", expected: "a \(kind) handle")))
        }
        let bits = UInt(bitPattern: handle)
        let (index, generation) = (Int(bits >> 32) - 1, UInt32(truncatingIfNeeded: bits))
        guard slots.indices.contains(index), slots[index].generation == generation, let found = slots[index].kind else {
            return .failure(Self.refuse(argument, "a \(kind) handle that is no longer live (released already) or was never made by Ember"))
        }
        guard found == kind else { return .failure(Self.refuse(argument, "a \(found) handle, expected a \(kind) handle")) }
        return .success(index)
    }

    private static func handle(index: Int, generation: UInt32) -> OpaquePointer {
        OpaquePointer(bitPattern: UInt(index + 1) << 32 | UInt(generation))!
    }

    private static func refuse(_ argument: String, _ what: String) -> CStatus.Refusal {
        CStatus.Refusal(CStatus.fail(EMBER_ERROR_INVALID_HANDLE, "\(argument): \(what)"))
    }
}

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
    /// Usage and log-probabilities as C data (generation only).
    private(set) var report: CGenerationReport?
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
                report = CGenerationReport(completion.output)
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

