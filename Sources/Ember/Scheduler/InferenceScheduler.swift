import EmberCore
import EmberModels
import Foundation

/// The one door every request goes through: it asks ``BackendPolicy`` what
/// the request may do in the current power state, runs it, defers it until
/// the state allows it, or drops it with a reason.
///
/// - Deferral: deferred requests wait in a bounded queue (overflow drops the
///   oldest lowest-tier request) and are re-evaluated on every power-state
///   change; a deadline drops one that waited too long. Cancelling the
///   caller's task ends its request at any time.
/// - Coalescing: requests with the same signature within ``coalescingWindow``
///   run once; every caller gets the result. A higher-tier joiner promotes
///   the shared request.
/// - Batching: batchable requests with the same key and decision that arrive
///   within ``batchingWindow`` run as one batch.
/// - Preemption: a running non-critical request waits at its next
///   ``RunContext/checkpoint()`` while critical work runs on its route.
/// - Memory: with a ``memoryBudget``, a run starts only when the memory the
///   running requests need (``InferenceRequest/memoryBytes``) and the models'
///   weight copies (``InferenceRequest/weightCopies``: held, and what the run's
///   route would bind) leave room for it; the others wait, highest tier first,
///   and start as runs end. A route whose copies the budget cannot hold is not
///   bound while the model has another. A request that needs more than the
///   whole budget (less the copies held) is dropped with the numbers. Memory
///   kept for later (``releasableMemory``: the runtime's prompt cache) counts
///   too, and gives way — as much as a run needs — when that lets the run
///   start; a run that would wait anyway leaves it be.
/// Every request ends exactly once: a result, an error, or a drop with a reason.
public actor InferenceScheduler {
    /// The policy settings every decision is made with.
    public nonisolated let configuration: PolicyConfiguration
    /// Seconds after a request's submission during which an identical request (same signature) shares its run or result; default 0.5.
    public let coalescingWindow: Double
    /// Seconds the first batchable request of a key waits for others to join its batch; default 0.005.
    public let batchingWindow: Double
    /// Requests the deferred queue holds at most (≥ 1, default 256); beyond it the oldest lowest-tier one is dropped.
    public let deferredCapacity: Int
    /// Bytes the running requests may need together (nil: no limit).
    public let memoryBudget: Int?
    /// Bytes the running requests need now.
    public private(set) var memoryInUse = 0
    /// Memory kept for later that the budget counts and releases for a run that needs it (nil: none).
    public nonisolated let releasableMemory: ReleasableMemory?
    /// Bytes of weight copies the models it has run hold now, and what runs in flight are predicted to bind still.
    public var weightCopyBytes: Int { heldWeightCopyBytes + bindingBytesInFlight }
    /// The latest power state (from the source or ``powerChanged(_:)``), which decisions are made against.
    public private(set) var powerState: PowerState {
        didSet { observed.publish(powerState) }
    }
    /// The same state for callers outside the actor, and its changes as streams.
    private nonisolated let observed: ObservedPowerState

    /// ``powerState`` read without awaiting the actor (for status lines, say).
    public nonisolated var latestPowerState: PowerState { observed.value }

    /// Every change of ``powerState``'s conditions from now on: one subscription
    /// to the power source serves the scheduler and everyone who watches it.
    public nonisolated func powerStates() -> AsyncStream<PowerState> { observed.stream() }
    /// Counters and per-request records since the scheduler started.
    public private(set) var metrics = SchedulerMetrics()

    private enum Phase { case pending, deferred, running }

    /// What a caller waits on: set once, by whoever comes first — the scheduler with the outcome, or
    /// the caller's own cancellation handler, at once and without waiting for the actor. The waiting
    /// happens off the actor, so a busy actor never delays a caller that has been answered.
    final class Reply: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<InferenceResult, Error>?
        private var outcome: Result<InferenceResult, Error>?

        /// Sets the outcome unless one is set already; whether this call set it.
        @discardableResult
        func resume(with result: Result<InferenceResult, Error>) -> Bool {
            let (won, waiting) = lock.withLock { () -> (Bool, CheckedContinuation<InferenceResult, Error>?) in
                guard outcome == nil else { return (false, nil) }
                outcome = result
                defer { continuation = nil }
                return (true, continuation)
            }
            waiting?.resume(with: result)
            return won
        }

        /// The caller's task was cancelled: it gets CancellationError unless it has its outcome already.
        func cancel() { resume(with: .failure(CancellationError())) }

        /// Waits for the outcome (returns at once if it is set).
        func value() async throws -> InferenceResult {
            try await withCheckedThrowingContinuation { continuation in
                let ready = lock.withLock { () -> Result<InferenceResult, Error>? in
                    if let outcome { return outcome }
                    self.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    private final class Waiter {
        let id: Int
        let tier: Tier
        let submitted: Double
        let coalesced: Bool
        let continuation: Reply
        let sink: (@Sendable (String) -> Void)?
        /// Told the reason each time the request this caller waits on is deferred.
        let onDeferred: (@Sendable (String) -> Void)?
        init(id: Int, tier: Tier, submitted: Double, coalesced: Bool, continuation: Reply,
             sink: (@Sendable (String) -> Void)?, onDeferred: (@Sendable (String) -> Void)?) {
            (self.id, self.tier, self.submitted, self.coalesced, self.continuation, self.sink, self.onDeferred) =
                (id, tier, submitted, coalesced, continuation, sink, onDeferred)
        }
    }

    private final class Job {
        let id: Int
        let request: InferenceRequest
        let submitted: Double
        var tier: Tier
        var phase: Phase = .pending
        var waiters: [Waiter] = []
        var decision: Decision?
        var task: Task<Void, Never>?
        var context: RunContext?
        var route: ComputeUnit = .cpu
        init(id: Int, request: InferenceRequest, tier: Tier, submitted: Double) {
            (self.id, self.request, self.tier, self.submitted) = (id, request, tier, submitted)
        }
    }

    private var nextID = 0
    private var jobs: [Int: Job] = [:]
    private var deferred: [Int] = []            // job ids, oldest first
    private var batchQueues: [String: [Int]] = [:]
    /// Runs waiting for memory: the jobs of each and the decision they run under, in arrival order.
    private var waitingForMemory: [(ids: [Int], decision: Decision)] = []
    private var criticalRunning: [ComputeUnit: Int] = [:]
    /// What each model's weight copies take now, by ``WeightCopyAccount/owner``.
    private var weightAccounts: [String: @Sendable () -> Int] = [:]
    /// Routes being bound by a run in flight ("owner|units|precision"): the bytes still to come — the prediction less
    /// what the model's copies grew by since the run started — counted until the run ends.
    private var bindingsInFlight: [String: () -> Int] = [:]
    private var preempted: [ComputeUnit: [CheckedContinuation<Void, Never>]] = [:]
    /// Results of recent requests by signature, kept for the coalescing window.
    private var recent: [String: (finished: Double, submitted: Double, result: InferenceResult)] = [:]
    private nonisolated(unsafe) var watcher: Task<Void, Never>?
    /// What the policy predicts from: the calibrated costs, corrected by every request that finishes alone, and the
    /// loaded models' quality profiles.
    public var costs: CostModel {
        var model = learnedCosts
        model.qualities.merge(qualities.all) { _, new in new }
        return model
    }
    private var learnedCosts: CostModel
    private let runQueueWait: @Sendable () -> [Int: Double]?
    private var runsInFlight = 0
    /// The loaded models' quality profiles (the runtime writes them as models load).
    public nonisolated let qualities: QualityRegistry

    /// Replaces the calibrated unit costs (a plugin loaded, a new calibration); learned corrections are kept.
    public func updateUnitCosts(_ units: UnitCostTable) { learnedCosts.units = units }
    private let clockStart = DispatchTime.now().uptimeNanoseconds

    /// A scheduler that reads the power state from `source` and follows its changes; windows are in seconds.
    /// `runQueueWait` reads the seconds each thread of this process has waited for a CPU other work held (tests give
    /// a fake; nil: not known).
    public init(source: any PowerSource, configuration: PolicyConfiguration = PolicyConfiguration(),
                coalescingWindow: Double = 0.5, batchingWindow: Double = 0.005, deferredCapacity: Int = 256,
                memoryBudget: Int? = nil, releasableMemory: ReleasableMemory? = nil, costs: CostModel = .reference,
                qualities: QualityRegistry = QualityRegistry(),
                runQueueWait: @escaping @Sendable () -> [Int: Double]? = { RunQueueWait.threadSeconds() }) {
        self.runQueueWait = runQueueWait
        self.releasableMemory = releasableMemory
        self.configuration = configuration
        self.learnedCosts = costs
        self.qualities = qualities
        self.memoryBudget = memoryBudget.map { max(0, $0) }
        self.coalescingWindow = coalescingWindow
        self.batchingWindow = batchingWindow
        self.deferredCapacity = max(1, deferredCapacity)
        // The stream first, then the state: a change between the two is then in the stream (at worst
        // repeated), never lost.
        let changes = source.changes()
        let initial = source.current()
        observed = ObservedPowerState(initial)
        powerState = initial
        watcher = Task { [weak self] in
            for await state in changes { await self?.powerChanged(state) }
        }
    }

    deinit { watcher?.cancel() }

    private var now: Double { Double(DispatchTime.now().uptimeNanoseconds - clockStart) / 1e9 }

    // MARK: Submitting

    /// Runs `request` at `tier` (overriding the tier in its requirements) and returns its result.
    public nonisolated func submit(_ request: InferenceRequest, tier: Tier) async throws -> InferenceResult {
        try await submit(request, tier: tier, sink: nil)
    }

    /// Runs `request` at `tier`, handing each piece it emits (a token, say) to
    /// `onPiece` as it comes, and returns its result. `onDeferred` hears the
    /// policy's reason whenever the request is put in the deferred queue. A
    /// request with an `onPiece` never coalesces (its caller wants its own stream).
    public nonisolated func submit(_ request: InferenceRequest, tier: Tier, onPiece: (@Sendable (String) -> Void)?,
                                   onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> InferenceResult {
        try await submit(request, tier: tier, sink: onPiece, onDeferred: onDeferred)
    }

    /// Runs `request` and streams what it emits; the stream ends when the request does.
    public nonisolated func stream(_ request: InferenceRequest, tier: Tier) -> AsyncThrowingStream<String, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    _ = try await self.submit(request, tier: tier, sink: { continuation.yield($0) })
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private nonisolated func submit(_ request: InferenceRequest, tier: Tier, sink: (@Sendable (String) -> Void)?,
                                    onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> InferenceResult {
        try Task.checkCancellation()
        let reply = Reply()
        let waiterID = await register(request, tier: tier, reply: reply, sink: sink, onDeferred: onDeferred)
        return try await withTaskCancellationHandler {
            try await reply.value()
        } onCancel: {
            // The caller hears CancellationError now, even if the actor or a core is busy for a while;
            // the scheduler's bookkeeping (and stopping the run) follows when the actor gets to it.
            reply.cancel()
            Task { await self.cancel(waiterID: waiterID) }
        }
    }

    /// Enqueues a caller's request; its waiter id (a cancel for it always comes after this).
    private func register(_ request: InferenceRequest, tier: Tier, reply: Reply, sink: (@Sendable (String) -> Void)?,
                          onDeferred: (@Sendable (String) -> Void)?) -> Int {
        nextID += 1
        let waiterID = nextID
        enqueue(request, tier: tier, waiterID: waiterID, continuation: reply, sink: sink, onDeferred: onDeferred)
        return waiterID
    }

    private func enqueue(_ request: InferenceRequest, tier: Tier, waiterID: Int,
                         continuation: Reply, sink: (@Sendable (String) -> Void)?,
                         onDeferred: (@Sendable (String) -> Void)?) {
        let time = now
        // Coalescing, part one: an identical request finished within the window — its result fans out.
        if sink == nil, let signature = request.signature, let hit = recent[signature] {
            if time - hit.submitted <= coalescingWindow {
                var result = hit.result
                result.coalesced = true
                result.waitSeconds = 0
                metrics.coalesced += 1
                continuation.resume(with: .success(result))
                record(tier: tier, outcome: "completed", decision: result.decision, wait: 0, run: 0, energy: result.energy)
                return
            }
            recent.removeValue(forKey: signature)
        }
        // Part two: join an identical request that is waiting or running and recent enough.
        if sink == nil, let signature = request.signature,
           let job = jobs.values.first(where: { $0.request.signature == signature && time - $0.submitted <= coalescingWindow }) {
            let waiter = Waiter(id: waiterID, tier: tier, submitted: time, coalesced: true, continuation: continuation,
                                sink: nil, onDeferred: onDeferred)
            job.waiters.append(waiter)
            metrics.coalesced += 1
            if tier > job.tier {
                job.tier = tier // a higher-tier joiner promotes the shared request
                if job.phase == .deferred { evaluate(job) }
                if job.phase == .running {
                    var requirements = job.request.requirements
                    requirements.tier = tier
                    job.context?.promote(to: BackendPolicy.decide(request: requirements, state: powerState, configuration: configuration, costs: costs).qos)
                }
            }
            if job.phase == .deferred, case let .defer(reason)? = job.decision?.action { waiter.onDeferred?(reason) }
            return
        }
        if let account = request.weightCopies { weightAccounts[account.owner] = account.held }
        nextID += 1
        let job = Job(id: nextID, request: request, tier: tier, submitted: time)
        job.waiters.append(Waiter(id: waiterID, tier: tier, submitted: time, coalesced: false, continuation: continuation,
                                  sink: sink, onDeferred: onDeferred))
        jobs[job.id] = job
        if let deadline = request.deadline {
            let delay = max(0, deadline.timeIntervalSinceNow)
            Task { [id = job.id] in
                try? await Task.sleep(for: .seconds(delay))
                self.expire(id)
            }
        }
        evaluate(job)
    }

    // MARK: Deciding

    private func evaluate(_ job: Job) {
        var requirements = job.request.requirements
        requirements.tier = job.tier
        var decision = BackendPolicy.decide(request: requirements, state: powerState, configuration: configuration, costs: costs)
        if let bound = boundRouteWithinBudget(job, requirements: requirements, instead: decision) { decision = bound }
        job.decision = decision
        switch decision.action {
        case .run:
            deferred.removeAll { $0 == job.id }
            if let batch = job.request.batch {
                queueForBatch(job, key: batch.key + "|\(decision.precision)|\(decision.computeUnits.rawValue)")
            } else {
                start([job], decision: decision)
            }
        case let .defer(reason):
            if job.phase != .deferred {
                job.phase = .deferred
                deferred.append(job.id)
                metrics.deferrals[reason, default: 0] += 1
                for waiter in job.waiters { waiter.onDeferred?(reason) }
                enforceCapacity()
            }
        case let .drop(reason):
            finish(job, with: .failure(SchedulerError.dropped(reason: reason)), reason: reason)
        }
    }

    /// With a memory budget that cannot hold the weight copies `decision` would bind (beside the running requests and
    /// the copies held), the policy's choice among the routes the model has bound; nil keeps `decision` (it binds
    /// nothing, it fits, or the model has no other route).
    private func boundRouteWithinBudget(_ job: Job, requirements: RequestRequirements, instead decision: Decision) -> Decision? {
        guard let budget = memoryBudget, case .run = decision.action, let model = requirements.workload?.model,
              !(learnedCosts.bound[model] ?? []).isEmpty else { return nil }
        let (need, binding, _) = memoryNeeded([job], decision: decision)
        guard binding > 0, memoryInUse + need + binding + weightCopyBytes > budget else { return nil }
        var boundOnly = costs
        boundOnly.switchingMargin = 1e9 // no unbound route wins
        var steered = BackendPolicy.decide(request: requirements, state: powerState, configuration: configuration, costs: boundOnly)
        guard case .run = steered.action, memoryNeeded([job], decision: steered).binding == 0 else { return nil }
        steered.explanation += "; stays on a bound route: \(decision.precisionName) on \(decision.unit) would bind "
            + "\(Self.megabytes(binding)) of weight copies the memory budget has no room for"
        return steered
    }

    /// What starting `group` under `decision` takes from the budget: its working memory, the weight copies its route
    /// would bind (0 when bound, or being bound by a run in flight; not predicted without a budget), and that route's key.
    private func memoryNeeded(_ group: [Job], decision: Decision) -> (working: Int, binding: Int, route: String?) {
        let working = group.reduce(0) { $0 + $1.request.memoryBytes }
        guard memoryBudget != nil, let account = group.first?.request.weightCopies else { return (working, 0, nil) }
        let route = "\(account.owner)|\(decision.computeUnits.rawValue)|\(decision.precisionName)"
        guard bindingsInFlight[route] == nil else { return (working, 0, route) }
        return (working, account.adding(decision), route)
    }

    /// Bytes of weight copies the models hold now (measured, not predicted).
    private var heldWeightCopyBytes: Int { weightAccounts.values.reduce(0) { $0 + $1() } }
    /// Bytes the runs binding routes now are still predicted to add.
    private var bindingBytesInFlight: Int { bindingsInFlight.values.reduce(0) { $0 + $1() } }

    /// Drops the oldest lowest-tier deferred request while the queue is over capacity.
    private func enforceCapacity() {
        while deferred.count > deferredCapacity {
            let lowest = deferred.compactMap { jobs[$0] }.map(\.tier).min() ?? .background
            guard let victim = deferred.compactMap({ jobs[$0] }).first(where: { $0.tier == lowest }) else { return }
            finish(victim, with: .failure(SchedulerError.dropped(reason: "deferred queue full")), reason: "deferred queue full")
        }
    }

    /// Re-evaluates every deferred request against the new state.
    public func powerChanged(_ state: PowerState) {
        powerState = state
        let waiting = deferred.compactMap { jobs[$0] }.sorted { $0.tier > $1.tier }
        let costs = self.costs // one merge of the quality profiles for the whole queue
        for job in waiting where job.phase == .deferred {
            var requirements = job.request.requirements
            requirements.tier = job.tier
            if case .defer = BackendPolicy.decide(request: requirements, state: state, configuration: configuration, costs: costs).action { continue }
            job.phase = .pending
            evaluate(job)
        }
    }

    private func expire(_ id: Int) {
        guard let job = jobs[id], job.phase == .deferred || job.phase == .pending else { return }
        finish(job, with: .failure(SchedulerError.dropped(reason: "deadline passed")), reason: "deadline passed")
    }

    // MARK: Running

    private func queueForBatch(_ job: Job, key: String) {
        job.phase = .pending
        let first = batchQueues[key] == nil
        batchQueues[key, default: []].append(job.id)
        guard first else { return }
        let window = batchingWindow
        Task {
            try? await Task.sleep(for: .seconds(window))
            self.flushBatch(key)
        }
    }

    private func flushBatch(_ key: String) {
        let members = (batchQueues.removeValue(forKey: key) ?? []).compactMap { jobs[$0] }.filter { $0.phase == .pending }
        guard let decision = members.first?.decision else { return }
        start(members, decision: decision)
    }

    private func start(_ group: [Job], decision: Decision) {
        guard !group.isEmpty else { return }
        let (need, binding, routeKey) = memoryNeeded(group, decision: decision)
        if let budget = memoryBudget {
            let held = heldWeightCopyBytes
            guard need + binding + held <= budget else {
                var reason = "needs \(Self.megabytes(need)) of memory"
                if binding > 0 { reason += " and \(Self.megabytes(binding)) to bind its weights at \(decision.precisionName)" }
                if held > 0 { reason += ", with \(Self.megabytes(held)) held by weight copies already" }
                reason += ", more than the budget of \(Self.megabytes(budget))"
                if binding + held > 0 { reason += " (a larger budget, a shorter request or a precision with smaller copies fits)" }
                for job in group { finish(job, with: .failure(SchedulerError.dropped(reason: reason)), reason: reason) }
                return
            }
            // Memory kept for later gives way when that lets the run start now (as much as it needs); a run that
            // would wait even without it leaves it be — emptying it would save no wait.
            let committed = memoryInUse + need + binding + held + bindingBytesInFlight
            var kept = releasableMemory?.held() ?? 0
            let over = committed + kept - budget
            if over > 0, over <= kept, let releasableMemory {
                _ = releasableMemory.release(over)
                kept = releasableMemory.held()
            }
            if committed + kept > budget {
                for job in group { job.phase = .pending }
                waitingForMemory.append((group.map(\.id), decision))
                metrics.memoryWaits += 1
                return
            }
        }
        memoryInUse += need
        let binds = binding > 0 ? routeKey : nil
        if let binds, let held = group.first?.request.weightCopies?.held {
            let before = held()
            bindingsInFlight[binds] = { max(0, binding - (held() - before)) }
        }
        let route = decision.computeUnits.searchOrder.first ?? .cpu
        let topTier = group.map(\.tier).max() ?? .background
        for job in group {
            job.phase = .running
            job.route = route
        }
        if topTier == .critical { criticalRunning[route, default: 0] += 1 }
        // A run that starts and ends with no other run of this scheduler alongside times its candidate alone: only
        // such runs teach the cost model (queueing behind each other is not a property of a unit or precision).
        if let model = group.first?.request.requirements.workload?.model, !decision.storedWeights {
            learnedCosts.markBound(model: model, unit: decision.unit, precision: decision.precision)
        }
        let alone = runsInFlight == 0
        // Read only for a run that may teach (every thread's schedstat: 0.1-0.2 ms for ten threads, not for a 3 ms embedding).
        let teaches = alone && (decision.predicted?.seconds ?? 0) >= CostModel.shortestTaught
        let queueWaitBefore = teaches ? runQueueWait() : nil
        runsInFlight += 1
        metrics.executions += 1
        let epoch = metrics.executions
        if group.count > 1 { metrics.batches += 1 }
        let ids = group.map(\.id)
        let started = now
        let sinks = group.flatMap { $0.waiters.compactMap(\.sink) }
        let context = RunContext(
            qos: decision.qos,
            yieldPoint: { [weak self] in await self?.checkpoint(tier: topTier, route: route) },
            sink: { piece in sinks.forEach { $0(piece) } })
        let requests = group.map(\.request)
        let heldMemory = need
        let task = Task.detached(priority: decision.qos.taskPriority) {
            let outcome: Result<[any Sendable], Error>
            do {
                if requests.count == 1 && requests[0].batch == nil {
                    outcome = .success([try await requests[0].run(decision, context)])
                } else {
                    let batch = requests[0].batch!
                    let outputs = try await batch.run(requests.map { $0.batch!.input }, decision, context)
                    guard outputs.count == requests.count else {
                        throw SchedulerError.dropped(reason: "batch returned \(outputs.count) outputs for \(requests.count) inputs")
                    }
                    outcome = .success(outputs)
                }
            } catch {
                outcome = .failure(error)
            }
            if heldMemory > 0 { FreedMemory.release() } // its KV cache and buffers are gone: give the pages back
            await self.completed(ids, outcome: outcome, started: started, critical: topTier == .critical, route: route,
                                 energy: context.energy, memory: heldMemory, binding: binds, alone: alone,
                                 queueWaitBefore: queueWaitBefore, epoch: epoch)
        }
        group.forEach {
            $0.task = task
            $0.context = context
        }
    }

    /// Starts the runs waiting for memory that fit now, highest tier first (then oldest); forgets the jobs that
    /// left meanwhile.
    private func admitWaiting() {
        waitingForMemory = waitingForMemory.compactMap { entry in
            let ids = entry.ids.filter { jobs[$0]?.phase == .pending }
            return ids.isEmpty ? nil : (ids, entry.decision)
        }
        let tiers = waitingForMemory.map { entry in entry.ids.compactMap { jobs[$0]?.tier }.max() ?? .background }
        let order = tiers.indices.sorted { a, b in tiers[a] != tiers[b] ? tiers[a] > tiers[b] : a < b }
        var started: Set<Int> = []
        for index in order {
            let entry = waitingForMemory[index]
            let (need, binding, _) = memoryNeeded(entry.ids.compactMap { jobs[$0] }, decision: entry.decision)
            guard let budget = memoryBudget, memoryInUse + need + binding + weightCopyBytes <= budget else { continue }
            started.insert(index)
            start(entry.ids.compactMap { jobs[$0] }, decision: entry.decision)
        }
        waitingForMemory = waitingForMemory.enumerated().filter { !started.contains($0.offset) }.map(\.element)
    }

    /// "512 MB", for messages.
    static func megabytes(_ bytes: Int) -> String { String(format: "%.0f MB", Double(bytes) / 1e6) }

    /// Runs waiting for memory now.
    public var waitingForMemoryCount: Int { waitingForMemory.count }

    private func checkpoint(tier: Tier, route: ComputeUnit) async {
        guard tier < .critical, criticalRunning[route, default: 0] > 0 else { return }
        metrics.preemptions += 1
        await withCheckedContinuation { preempted[route, default: []].append($0) }
    }

    private func completed(_ ids: [Int], outcome: Result<[any Sendable], Error>, started: Double, critical: Bool, route: ComputeUnit,
                           energy: EnergyEstimate?, memory: Int, binding: String?, alone: Bool, queueWaitBefore: [Int: Double]?,
                           epoch: Int) {
        let finished = now
        let timedAlone = alone && metrics.executions == epoch
        runsInFlight -= 1
        memoryInUse -= memory
        if let binding { bindingsInFlight.removeValue(forKey: binding) } // the model's copies count from now on
        defer { admitWaiting() }
        if let energy { metrics.energy = metrics.energy.map { $0 + energy } ?? energy }
        var predicted: Double? = nil
        // A run alone is predicted from its request's work unless it reported what it did; a batch only from what it
        // reported (the whole batch's work).
        if case .success = outcome, let job = jobs[ids[0]], let decision = job.decision, decision.predicted != nil,
           let work = job.context?.work ?? (ids.count == 1 ? job.request.requirements.workload : nil),
           let expected = costs.predict(work, unit: decision.unit, precision: decision.precision, threads: decision.threads,
                                        maxThreads: configuration.threads) {
            // What the work it really did (tokens generated, not asked for) was expected to take; then learn from it.
            predicted = expected.seconds
            if timedAlone {
                // What other programs took from the run's threads (runnable, waiting for a CPU) is the machine's load,
                // not the route's speed: the wall-clock time it lost is taken off, and a run that lost most of its
                // time that way teaches nothing.
                let lost = queueWaitBefore.flatMap { before in runQueueWait().map { RunQueueWait.lostSeconds(from: before, to: $0) } } ?? 0
                let measured = finished - started - (job.context?.setupSeconds ?? 0)
                metrics.contentionSeconds += lost
                if lost <= 0.9 * measured {
                    learnedCosts.observe(work, unit: decision.unit, precision: decision.precision, threads: decision.threads,
                                         predicted: expected.seconds, measured: measured - lost)
                }
            }
        }
        for (index, id) in ids.enumerated() {
            guard let job = jobs[id] else { continue }
            let pieces = job.context?.pieces ?? 0
            let result = outcome.map { outputs in
                InferenceResult(output: outputs[index], decision: job.decision!, waitSeconds: 0,
                                runSeconds: finished - started, coalesced: false, batchSize: ids.count,
                                piecesPerSecond: pieces > 0 ? Double(pieces) / max(finished - started, 1e-9) : nil,
                                energy: job.context?.energy, predictedSeconds: predicted)
            }
            finish(job, with: result, reason: nil, started: started)
        }
        if critical {
            criticalRunning[route, default: 1] -= 1
            if criticalRunning[route, default: 0] == 0 {
                preempted.removeValue(forKey: route)?.forEach { $0.resume() }
            }
        }
    }

    /// Ends every waiter of `job` exactly once and forgets the job.
    private func finish(_ job: Job, with result: Result<InferenceResult, Error>, reason: String?, started: Double? = nil) {
        jobs.removeValue(forKey: job.id)
        if case let .success(value) = result, let signature = job.request.signature, job.request.batch == nil {
            recent[signature] = (now, job.submitted, value)
            if recent.count > 1024 { recent = recent.filter { now - $0.value.submitted <= coalescingWindow } }
        }
        deferred.removeAll { $0 == job.id }
        if let reason { metrics.drops[reason, default: 0] += 1 }
        for waiter in job.waiters {
            // A caller whose cancellation handler answered it already (the actor had not yet heard) left.
            func left() {
                metrics.cancellations += 1
                record(tier: waiter.tier, outcome: "cancelled", decision: job.decision, wait: now - waiter.submitted, run: 0)
            }
            switch result {
            case var .success(value):
                value.waitSeconds = max(0, (started ?? now) - waiter.submitted)
                value.coalesced = waiter.coalesced
                guard waiter.continuation.resume(with: .success(value)) else { left(); continue }
                record(tier: waiter.tier, outcome: "completed", decision: value.decision, wait: value.waitSeconds, run: value.runSeconds,
                       piecesPerSecond: value.piecesPerSecond, energy: value.energy)
            case let .failure(error):
                guard waiter.continuation.resume(with: .failure(error)) else { left(); continue }
                record(tier: waiter.tier, outcome: reason.map { "dropped: \($0)" } ?? "failed: \(error)", decision: job.decision,
                       wait: now - waiter.submitted, run: 0)
            }
        }
        job.waiters.removeAll()
    }

    private func record(tier: Tier, outcome: String, decision: Decision?, wait: Double, run: Double,
                        piecesPerSecond: Double? = nil, energy: EnergyEstimate? = nil) {
        metrics.records.append(.init(tier: tier, outcome: outcome, decision: decision, waitSeconds: wait, runSeconds: run,
                                     piecesPerSecond: piecesPerSecond, energy: energy))
        if metrics.records.count > 4096 { metrics.records.removeFirst(metrics.records.count - 4096) }
    }

    // MARK: Cancelling

    private func cancel(waiterID: Int) {
        guard let job = jobs.values.first(where: { $0.waiters.contains { $0.id == waiterID } }) else {
            return // it has ended already (a cancel always comes after the caller's register)
        }
        let waiter = job.waiters.first { $0.id == waiterID }!
        job.waiters.removeAll { $0.id == waiterID }
        waiter.continuation.resume(with: .failure(CancellationError())) // usually done already by the caller's handler
        metrics.cancellations += 1
        record(tier: waiter.tier, outcome: "cancelled", decision: job.decision, wait: now - waiter.submitted, run: 0)
        guard job.waiters.isEmpty else { return }
        switch job.phase {
        case .deferred, .pending:
            jobs.removeValue(forKey: job.id)
            deferred.removeAll { $0 == job.id }
        case .running:
            // A batch's jobs share one task: it is cancelled only when no job of the batch has a caller left.
            let shared = jobs.values.contains { $0 !== job && $0.phase == .running && $0.task == job.task && !$0.waiters.isEmpty }
            if !shared {
                // It ends at its next cancellation point and its result goes nowhere. It leaves `jobs` now,
                // so an identical request arriving meanwhile runs afresh instead of joining a cancelled run.
                job.task?.cancel()
                for member in jobs.values where member === job || (job.task != nil && member.task == job.task) {
                    jobs.removeValue(forKey: member.id)
                }
            }
        }
    }

    /// How many requests are deferred now.
    public var deferredCount: Int { deferred.count }
}
