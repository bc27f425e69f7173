import Foundation

/// A batch of work for the GPU route: encode ops, commit, then wait for
/// completion — command-buffer style. Ops run in order on the GPU route's
/// submission queue (using every core through the workers of `qos`).
public final class CommandBuffer: @unchecked Sendable {
    /// Where a buffer is in its life.
    public enum Status: Sendable {
        /// Taking ops; not yet committed.
        case encoding
        /// Queued or running on the GPU route.
        case committed
        /// Every op ran.
        case completed
        /// An op threw; the error is kept.
        case failed
    }

    private let queue: PromotingSerialQueue
    private let qos: QoSClass
    private var ops: [() throws -> Void] = []
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var state: Status = .encoding
    private var failure: Error?

    init(queue: PromotingSerialQueue, qos: QoSClass) {
        self.queue = queue
        self.qos = qos
    }

    /// The buffer's current state.
    public var status: Status { lock.withLock { state } }

    /// Adds an op; only before ``commit()``.
    public func encode(_ op: @escaping () throws -> Void) {
        lock.withLock {
            precondition(state == .encoding, "encode after commit")
            ops.append(op)
        }
    }

    /// Submits the batch. Only the first call submits: committing again does nothing (the ops run once).
    public func commit() {
        let batch = lock.withLock { () -> [() throws -> Void]? in
            guard state == .encoding else { return nil }
            state = .committed
            return ops
        }
        guard let batch else { return }
        let box = UncheckedSendable(batch)
        queue.async(qos: qos) { [self] in
            var error: Error?
            for op in box.value where error == nil {
                do { try op() } catch let failed { error = failed }
            }
            lock.withLock {
                failure = error
                state = error == nil ? .completed : .failed
            }
            done.signal()
        }
    }

    /// Waits for the batch; rethrows the first op's error.
    public func waitUntilCompleted() throws {
        done.wait()
        done.signal() // later waits return at once
        if let failure = lock.withLock({ failure }) { throw failure }
    }
}

/// The execution resources behind the three units: the neural-engine
/// route's one shared serial queue, and the GPU route's submission queue.
/// The CPU route runs on the caller's workers and needs no queue. A
/// ``ComputeContext`` owns one set.
public final class ComputeRoutes: @unchecked Sendable {
    /// One job at a time, as on the real engine; promotes for higher-QoS waiters.
    public let neuralEngine = PromotingSerialQueue(label: "ember-neural-engine")
    /// Command buffers run in submission order.
    public let gpuQueue = PromotingSerialQueue(label: "ember-gpu")

    /// A separate set of routes with its own neural-engine and GPU queues.
    public init() {}

    /// A new command buffer for the GPU route.
    public func makeCommandBuffer(qos: QoSClass = .current) -> CommandBuffer {
        CommandBuffer(queue: gpuQueue, qos: qos.resolved)
    }

    /// Runs `body` on `unit`'s execution resource at `qos` and returns when it
    /// has finished: as a job of the neural-engine queue, as a job of the GPU
    /// submission queue (what a one-op command buffer does), or on the calling
    /// thread for the CPU route.
    public func run(on unit: ComputeUnit, qos: QoSClass, _ body: () throws -> Void) throws {
        switch unit {
        case .neuralEngine:
            try neuralEngine.sync(qos: qos, body)
        case .gpu:
            try gpuQueue.sync(qos: qos, body) // a one-op command buffer, committed and waited for
        case .cpu:
            try body()
        }
    }
}

/// The outcome of one op run through the registry.
public struct ComputeResult: Sendable {
    /// Y, fp32 [M, N].
    public var output: Tensor
    /// The unit and kernel the op ran on, and why.
    public var placement: Placement
    /// Wall-clock seconds from handing the op to its route to its end (queue wait included).
    public var seconds: Double
    /// Joules the run took: measured from the package counter where readable, else modelled.
    public var energy: EnergyEstimate
}
