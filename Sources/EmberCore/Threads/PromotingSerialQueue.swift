import Foundation
import _CEmberThreads

/// A serial queue on a thread of its own — one job at a time, in order, as
/// on a neural engine — whose thread runs each job at the highest QoS that
/// is waiting on it.
///
/// Following Apple's rule, when a job of higher QoS is enqueued, the running
/// job and every job ahead of it run at that QoS until the higher job
/// starts; then each job runs at its own class again. Promotion needs the
/// right to raise priorities (`QoSMapping.canRaise`).
public final class PromotingSerialQueue: @unchecked Sendable {
    private struct Job {
        let qos: QoSClass
        let body: () -> Void
        /// Signalled after the queue has dropped `body` (so a `sync` caller's closure never outlives its call).
        var done: DispatchSemaphore?
    }

    /// The queue's name, also given to its thread.
    public let label: String
    /// The QoS-to-priority table the queue's thread is moved with.
    public let mapping: QoSMapping
    /// Whether waiting jobs promote the running one (off only to measure what promotion buys).
    public let promotes: Bool

    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var runningQoS: QoSClass?
    private var threadQoS: QoSClass = .unspecified
    private var threadID: Int32 = 0
    private var promotionCount = 0
    private var stopping = false
    private var exited = false
    /// Keeps jobs run on their callers after the thread ended one at a time, as the queue promises.
    private let afterStop = NSLock()

    /// Starts the queue's thread, named `label`, with a stack of `stackBytes` (0: the system's default); returns once
    /// it runs. Promotion is on unless `promotes` is false. A thread the system cannot create leaves the queue
    /// running jobs on their callers (``startFailure`` says why).
    public init(label: String, mapping: QoSMapping = .current, promotes: Bool = true, stackBytes: Int = 0) {
        self.label = label
        self.mapping = mapping
        self.promotes = promotes
        let started = DispatchSemaphore(value: 0)
        do {
            try OSThread.start(name: label, stackBytes: stackBytes) { [self] in
                condition.withLock { threadID = currentThreadID }
                started.signal()
                serve()
            }
            started.wait()
        } catch {
            // No thread: jobs run on their callers, one at a time, as after stop() — never queued for nobody.
            startFailure = "\(error)"
            exited = true
        }
    }

    /// Why the queue has no thread of its own (jobs then run on their callers), nil when it has one.
    public private(set) var startFailure: String?

    /// Times the running job was promoted while it ran.
    public var promotions: Int { condition.withLock { promotionCount } }

    /// Enqueues `body` at `qos` and returns at once.
    public func async(qos: QoSClass, _ body: @escaping @Sendable () -> Void) {
        enqueue(Job(qos: qos.resolved, body: body, done: nil))
    }

    private func enqueue(_ job: Job) {
        let qos = job.qos
        let inline = condition.withLock { () -> Bool in
            // After stop() the thread drains what it holds, then ends; a later job runs on the caller, so
            // `sync` never waits for a thread that is gone.
            if exited { return true }
            jobs.append(job)
            // A higher job behind the running one lifts it now, not when its turn comes.
            if promotes, let running = runningQoS, qos.resolved > max(running, threadQoS) { setThreadQoS(qos.resolved, promotion: true) }
            condition.signal()
            return false
        }
        if inline {
            afterStop.withLock {
                // As on the queue's thread, work the job splits goes to its class's workers; the caller's own class comes back after.
                let callers = et_current_qos()
                et_set_current_qos(job.qos.rawValue)
                job.body()
                et_set_current_qos(callers)
            }
            job.done?.signal()
        }
    }

    /// Enqueues `body` at `qos` and waits for it to finish.
    /// After ``stop()``, once the queue's thread has ended, `body` runs on the caller's thread.
    public func sync<Result>(qos: QoSClass, _ body: () throws -> Result) rethrows -> Result {
        try withoutActuallyEscaping(body) { body in
            var result: Result?
            var failure: Error?
            let done = DispatchSemaphore(value: 0)
            enqueue(Job(qos: qos.resolved, body: {
                do { result = try body() } catch { failure = error }
            }, done: done))
            done.wait()
            if let failure { try { throw failure }() }
            return result!
        }
    }

    /// Lets the thread end once the jobs already enqueued have run; returns at once.
    /// Jobs enqueued after that still run, on the thread that enqueues them.
    public func stop() {
        condition.withLock {
            stopping = true
            condition.signal()
        }
    }

    private func serve() {
        while true {
            var job: Job? = condition.withLock { () -> Job? in
                while jobs.isEmpty && !stopping { condition.wait() }
                if jobs.isEmpty {
                    exited = true
                    return nil
                }
                let job = jobs.removeFirst()
                // Run at the job's class, or higher while a higher job waits behind it.
                let effective = promotes ? max(job.qos, jobs.map(\.qos).max() ?? job.qos) : job.qos
                setThreadQoS(effective, promotion: false)
                runningQoS = job.qos
                return job
            }
            guard job != nil else { return }
            let done = run(&job)
            condition.withLock { runningQoS = nil }
            done?.signal()
        }
    }

    /// Runs the job and drops it; returns its completion semaphore. A function
    /// of its own so no reference to the body is left when `sync` is released.
    @inline(never)
    private func run(_ job: inout Job?) -> DispatchSemaphore? {
        guard let taken = job.take() else { return nil }
        et_set_current_qos(taken.qos.rawValue) // work the job splits goes to its own class's workers
        taken.body()
        return taken.done
    }

    /// Moves the queue's thread to `qos` (condition lock held). Without the
    /// right to raise priorities the thread keeps one priority: lowering it
    /// for a background job would be one-way.
    private func setThreadQoS(_ qos: QoSClass, promotion: Bool) {
        guard qos != threadQoS, mapping.canRaise else { return }
        if mapping.apply(qos, toThread: threadID) {
            threadQoS = qos
            if promotion { promotionCount += 1 }
        }
    }
}

/// Carries a value across threads where the code guarantees exclusive use.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
