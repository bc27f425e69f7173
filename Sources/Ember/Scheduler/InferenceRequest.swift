import Foundation

/// One piece of inference work as the scheduler sees it: what it needs, how
/// to recognise a duplicate, how to run it (alone or batched).
public struct InferenceRequest: Sendable {
    /// Requests that may run together as one batch (e.g. several embeddings).
    public struct Batch: Sendable {
        /// Requests with the same key (and the same decision) are batched.
        public var key: String
        public var input: any Sendable
        /// Runs every input at once; returns one output per input, in order.
        public var run: @Sendable (_ inputs: [any Sendable], _ decision: Decision, _ context: RunContext) async throws -> [any Sendable]

        public init(key: String, input: any Sendable,
                    run: @escaping @Sendable ([any Sendable], Decision, RunContext) async throws -> [any Sendable]) {
            self.key = key
            self.input = input
            self.run = run
        }
    }

    public var requirements: RequestRequirements
    /// Model + input + parameters: equal signatures within the coalescing window run once.
    public var signature: String?
    /// After this, a request still deferred is dropped with a reason.
    public var deadline: Date?
    public var batch: Batch?
    /// Runs the request alone, at the decision's precision, units and QoS.
    public var run: @Sendable (_ decision: Decision, _ context: RunContext) async throws -> any Sendable

    public init(requirements: RequestRequirements, signature: String? = nil, deadline: Date? = nil, batch: Batch? = nil,
                run: @escaping @Sendable (Decision, RunContext) async throws -> any Sendable) {
        self.requirements = requirements
        self.signature = signature
        self.deadline = deadline
        self.batch = batch
        self.run = run
    }
}

/// What a caller gets back.
public struct InferenceResult: Sendable {
    public var output: any Sendable
    public var decision: Decision
    /// From submission to the start of the run.
    public var waitSeconds: Double
    public var runSeconds: Double
    /// Whether this caller joined another caller's identical request.
    public var coalesced: Bool
    /// How many requests ran in the same batch (1 when alone).
    public var batchSize: Int
    /// Pieces (tokens) emitted per second of run time, for streaming requests.
    public var piecesPerSecond: Double?
    /// The energy the run reported, labelled measured or modelled.
    public var energy: EnergyEstimate?
}

/// Why the scheduler did not return a result.
public enum SchedulerError: Error, Equatable, CustomStringConvertible {
    /// The policy refused it, it waited past its deadline, or the deferred queue overflowed.
    case dropped(reason: String)

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

    var pieces: Int { lock.withLock { emitted } }
    var energy: EnergyEstimate? { lock.withLock { energyReported } }
}

/// Counters and per-request records (`scheduler.metrics`).
public struct SchedulerMetrics: Sendable {
    public struct Record: Sendable {
        public var tier: Tier
        public var outcome: String
        public var decision: Decision?
        public var waitSeconds: Double
        public var runSeconds: Double
        public var piecesPerSecond: Double?
        public var energy: EnergyEstimate?
    }

    public var records: [Record] = []
    public var deferrals: [String: Int] = [:]
    public var drops: [String: Int] = [:]
    public var executions = 0
    public var coalesced = 0
    public var batches = 0
    public var preemptions = 0
    public var cancellations = 0
}
