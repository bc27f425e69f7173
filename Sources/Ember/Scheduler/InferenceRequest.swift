import EmberCore
import EmberModels
import Foundation

/// One piece of inference work as the scheduler sees it: what it needs, how
/// to recognise a duplicate, how to run it (alone or batched).
public struct InferenceRequest: Sendable {
    /// Requests that may run together as one batch (e.g. several embeddings).
    public struct Batch: Sendable {
        /// Requests with the same key (and the same decision) are batched.
        public var key: String
        /// This request's input, passed to `run` together with the other members' inputs.
        public var input: any Sendable
        /// Runs every input at once; returns one output per input, in order.
        public var run: @Sendable (_ inputs: [any Sendable], _ decision: Decision, _ context: RunContext) async throws -> [any Sendable]

        /// How to run a request batched: its batch `key`, its `input`, and the `run` that handles a whole batch.
        public init(key: String, input: any Sendable,
                    run: @escaping @Sendable ([any Sendable], Decision, RunContext) async throws -> [any Sendable]) {
            self.key = key
            self.input = input
            self.run = run
        }
    }

    /// What the request needs (precision, units, external power); the tier given to `submit` replaces its `tier`.
    public var requirements: RequestRequirements
    /// Model + input + parameters: equal signatures within the coalescing window run once.
    public var signature: String?
    /// After this, a request still deferred is dropped with a reason.
    public var deadline: Date?
    /// How to run the request as part of a batch; nil runs it alone with `run`.
    public var batch: Batch?
    /// Runs the request alone, at the decision's precision, units and QoS.
    public var run: @Sendable (_ decision: Decision, _ context: RunContext) async throws -> any Sendable
    /// Bytes of working memory the run needs at most (a generation's KV cache and buffers), known before it starts:
    /// the scheduler admits runs against its memory budget. 0: too little to count.
    public var memoryBytes: Int
    /// The weight copies of the request's model (other precisions, kernel layouts), which the scheduler's memory
    /// budget counts as well; nil: none to count.
    public var weightCopies: WeightCopyAccount?

    /// A request that `run` executes alone. `signature` lets identical requests share a run, `deadline` drops it if it
    /// has not started by then, `batch` lets it run batched (nil for each: none); `memoryBytes` is what it needs at most.
    public init(requirements: RequestRequirements, signature: String? = nil, deadline: Date? = nil, batch: Batch? = nil,
                memoryBytes: Int = 0, run: @escaping @Sendable (Decision, RunContext) async throws -> any Sendable) {
        self.requirements = requirements
        self.signature = signature
        self.deadline = deadline
        self.batch = batch
        self.memoryBytes = max(0, memoryBytes)
        self.run = run
    }
}

/// A model's weight copies as a memory budget sees them: what it holds now and what running under a decision would
/// bind. Binding a precision or a backend copies the weights once and keeps the copy as long as the model (SmolLM2's
/// int8 route: 143 MB of packed Q8_0 beside its 93 MB file), so a route bound in the middle of a burst is memory the
/// KV caches cannot have.
public struct WeightCopyAccount: Sendable {
    /// The model (one account per model the scheduler has seen, by this key).
    public var owner: String
    /// Bytes of copies the model holds now (0 once it is gone).
    public var held: @Sendable () -> Int
    /// Bytes running under a decision would add (0 when its route is bound).
    public var adding: @Sendable (Decision) -> Int

    /// The account of the model `owner` names.
    public init(owner: String, held: @escaping @Sendable () -> Int, adding: @escaping @Sendable (Decision) -> Int) {
        self.owner = owner
        self.held = held
        self.adding = adding
    }
}

/// Memory the process keeps for later use and gives back on demand — the runtime's ``PromptCache``: a memory budget
/// counts it, and has as much released as a request needs when that lets the request start instead of waiting.
public struct ReleasableMemory: Sendable {
    /// Bytes held now.
    public var held: @Sendable () -> Int
    /// Gives back at least the bytes asked for, or all it holds; returns the bytes given back.
    public var release: @Sendable (Int) -> Int

    /// Memory whose size `held` reads and which `release` gives back.
    public init(held: @escaping @Sendable () -> Int, release: @escaping @Sendable (Int) -> Int) {
        self.held = held
        self.release = release
    }
}

/// What a caller gets back.
public struct InferenceResult: Sendable {
    /// What the request's run returned (for a batch, the output for this request's input).
    public var output: any Sendable
    /// The policy decision the request ran under: precision, units, QoS and threads.
    public var decision: Decision
    /// From submission to the start of the run.
    public var waitSeconds: Double
    /// Seconds from the start of the run to its end (the whole batch's when batched).
    public var runSeconds: Double
    /// Whether this caller joined another caller's identical request.
    public var coalesced: Bool
    /// How many requests ran in the same batch (1 when alone).
    public var batchSize: Int
    /// Pieces (tokens) emitted per second of run time, for streaming requests.
    public var piecesPerSecond: Double?
    /// The energy the run reported, labelled measured or modelled.
    public var energy: EnergyEstimate?
    /// The seconds the cost model expected for the work the request did (nil when it ran in a batch or as stored
    /// weights): compare with ``runSeconds`` for the prediction's error.
    public var predictedSeconds: Double? = nil
}

/// Why the scheduler did not return a result.
public enum SchedulerError: Error, Equatable, CustomStringConvertible {
    /// The policy refused it, it waited past its deadline, or the deferred queue overflowed.
    case dropped(reason: String)

    /// A one-line human-readable form, e.g. "dropped: deadline passed".
    public var description: String {
        switch self {
        case let .dropped(reason): "dropped: \(reason)"
        }
    }
}

/// Handed to a running request: the place to let higher-priority work pass
/// (call ``checkpoint()`` at layer boundaries) and to stream pieces out.
public final class RunContext: @unchecked Sendable {
    private let yieldPoint: @Sendable () async -> Void
    private let sink: @Sendable (String) -> Void
    private let lock = NSLock()
    private var currentQoS: QoSClass
    private var emitted = 0
    private var energyReported: EnergyEstimate?
    private var workReported: Workload?
    private var setupReported = 0.0

    init(qos: QoSClass, yieldPoint: @escaping @Sendable () async -> Void, sink: @escaping @Sendable (String) -> Void) {
        currentQoS = qos
        self.yieldPoint = yieldPoint
        self.sink = sink
    }

    /// The class to run the next layer at: the decision's, or higher once a
    /// higher-tier caller has joined this request (read it at each layer).
    public var qos: QoSClass { lock.withLock { currentQoS } }

    func promote(to qos: QoSClass) { lock.withLock { currentQoS = max(currentQoS, qos) } }

    /// Waits while critical work runs on the same route, if this request is not critical.
    public func checkpoint() async { await yieldPoint() }

    /// Sends a piece of output (a token) to streaming callers.
    public func emit(_ piece: String) {
        lock.withLock { emitted += 1 }
        sink(piece)
    }

    /// The energy the run took, as the compute layer reported it (measured or modelled).
    public func report(energy: EnergyEstimate) {
        lock.withLock {
            energyReported = EnergyEstimate(joules: (energyReported?.joules ?? 0) + energy.joules,
                                            source: energyReported?.source == .modelled ? .modelled : energy.source)
        }
    }

    /// Tells the scheduler the work the request really did (a generation that stopped early did less than it asked
    /// for), so the cost model learns from the right prediction.
    public func report(work: Workload) { lock.withLock { workReported = work } }

    /// Tells the scheduler how long one-time setup inside the run took (binding weights for a precision the first
    /// time it runs): the cost model learns from the run time without it.
    public func report(setupSeconds: Double) { lock.withLock { setupReported += max(0, setupSeconds) } }

    var work: Workload? { lock.withLock { workReported } }
    var setupSeconds: Double { lock.withLock { setupReported } }
    var pieces: Int { lock.withLock { emitted } }
    var energy: EnergyEstimate? { lock.withLock { energyReported } }
}

/// Counters and per-request records (`scheduler.metrics`).
public struct SchedulerMetrics: Sendable {
    /// How one caller's request ended.
    public struct Record: Sendable {
        /// The tier the caller submitted at.
        public var tier: Tier
        /// "completed", "cancelled", "dropped: <reason>" or "failed: <error>".
        public var outcome: String
        /// The policy decision for the request, nil if none had been made.
        public var decision: Decision?
        /// Seconds from submission to the start of the run; for a request that did not complete, to its end; 0 when served from a recent identical result.
        public var waitSeconds: Double
        /// Seconds the run took; 0 when the request did not complete or was served from a recent identical result.
        public var runSeconds: Double
        /// Pieces emitted per second of run time, nil when none were emitted or the request did not complete.
        public var piecesPerSecond: Double?
        /// The energy the run reported, nil when it reported none or the request did not complete.
        /// A batch's members and the callers of a shared run all carry that run's whole energy:
        /// sum ``SchedulerMetrics/energy`` for a total, not these.
        public var energy: EnergyEstimate?
    }

    /// One record per caller, oldest first; only the latest 4096 are kept.
    public var records: [Record] = []
    /// How many times requests were deferred, by the policy's reason.
    public var deferrals: [String: Int] = [:]
    /// How many requests were dropped, by reason (the policy's, "deadline passed" or "deferred queue full").
    public var drops: [String: Int] = [:]
    /// Runs that waited for memory under the scheduler's budget before starting.
    public var memoryWaits = 0
    /// Seconds the runs the cost model learned from lost to other work holding the CPUs (``RunQueueWait``), taken
    /// off what they taught.
    public var contentionSeconds = 0.0
    /// Runs started; a batch counts once, callers coalesced onto another request not at all.
    public var executions = 0
    /// Callers served by an identical request's run instead of one of their own.
    public var coalesced = 0
    /// Runs of two or more requests as one batch.
    public var batches = 0
    /// Times a running non-critical request paused at a checkpoint for critical work on its route.
    public var preemptions = 0
    /// Callers whose task was cancelled before their request ended.
    public var cancellations = 0
    /// The energy every run reported, each run counted once (a batch or a run shared by coalesced
    /// callers is one run); measured only if every run's was. Nil until a run has reported energy.
    public var energy: EnergyEstimate?
}
