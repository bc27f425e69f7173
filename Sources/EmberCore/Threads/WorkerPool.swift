import CBLAS
import Foundation
import _CEmberThreads

/// Ember's compute threads: for each QoS class, its own set of workers that
/// carry that class's OS priority from start to end.
///
/// Per-class workers rather than re-prioritising threads per job: a job
/// costs no priority system calls, and without `CAP_SYS_NICE` a thread
/// lowered once could never be raised again. Workers are started the first
/// time their class is used. A ``parallelFor(_:qos:_:)`` publishes its parts
/// and the class's workers claim them; workers spin briefly between jobs
/// (a decode step issues hundreds of small ones) and then park on a futex.
/// A caller that Ember runs at the job's class (``QoSClass/current``, or an
/// unspecified host thread asking for `.default`) claims parts too, which
/// saves a wake-up per job; any other caller only waits, so every part runs
/// at a known QoS.
/// OpenBLAS is set to one thread: Ember splits BLAS work across these
/// workers too. A ``ComputeContext`` owns one pool; everything that runs
/// under that context uses it.
///
/// Given a heterogeneous ``CoreTopology``, each class's workers pin
/// themselves to that class's cores (``CoreTopology/cores(for:)``:
/// background and utility on the efficiency cores, user-initiated and
/// user-interactive on the performance cores, default on all), and a class
/// has no more workers than its cores.
public final class WorkerPool: @unchecked Sendable {
    /// Workers per class (a pinned class has at most as many as its cores: see ``workerCount(for:)``).
    public let threadsPerClass: Int
    /// How long workers spin for the next job before parking, in nanoseconds.
    public let workerSpinNanoseconds: Int64
    /// How long a caller spins for its job to finish before parking.
    public let callerSpinNanoseconds: Int64
    /// The QoS-to-priority table each class's workers are started with.
    public let mapping: QoSMapping

    private let lock = NSLock()
    private var groups: [QoSClass: WorkerGroup] = [:]

    /// Stack size of each worker thread in bytes (0: the system's default).
    public let workerStackBytes: Int

    /// The machine's performance and efficiency cores, if the pool was given them; workers are pinned only when
    /// it is heterogeneous (see ``cores(for:)``).
    public let topology: CoreTopology?

    /// A pool of `threadsPerClass` workers per class (at least 1; default one per active core), started on first use.
    /// Spins are in nanoseconds; the caller spin defaults to 20 000; `workerStackBytes` 0 is the system's stack size.
    /// With a heterogeneous `topology` each class's workers are pinned to its cores, at most one worker per core;
    /// nil (or a homogeneous one) pins nothing.
    public init(threadsPerClass: Int = ProcessInfo.processInfo.activeProcessorCount, mapping: QoSMapping = .current,
                workerSpinNanoseconds: Int64 = 100_000, callerSpinNanoseconds: Int64? = nil, workerStackBytes: Int = 0,
                topology: CoreTopology? = nil) {
        self.threadsPerClass = max(1, threadsPerClass)
        self.workerStackBytes = max(0, workerStackBytes)
        self.topology = topology
        self.mapping = mapping
        self.workerSpinNanoseconds = workerSpinNanoseconds
        self.callerSpinNanoseconds = callerSpinNanoseconds ?? 20_000
        blasShortfall = AddressSpace.blasShortfall(threads: self.threadsPerClass + 1)
        if blasShortfall == nil { Self.singleThreadedBLAS }
    }

    /// Why OpenBLAS cannot run here (an address-space limit too tight for its buffers), nil when it can; then no
    /// BLAS call may be made — OpenBLAS would retry its allocation forever.
    public let blasShortfall: String?

    /// OpenBLAS on one thread per call, its own pool stopped (once per process). Not with too little address
    /// space: stopping joins OpenBLAS's thread, which may be retrying its buffer allocation forever.
    private static let singleThreadedBLAS: Void = {
        openblas_set_num_threads(1)
        _ = blas_thread_shutdown_()
    }()

    /// Runs `body(0) … body(count − 1)` on the workers of `qos` and returns when all are done.
    /// Called from inside a part (nested parallel work) it runs every part
    /// inline on the calling thread, which already has its place in the pool.
    public func parallelFor(_ count: Int, qos: QoSClass, _ body: (Int) -> Void) {
        guard count > 0 else { return }
        if et_pool_nesting() > 0 {
            for index in 0..<count { body(index) }
            return
        }
        group(for: qos.resolved).run(count: count, body: body)
    }

    /// Kernel thread ids of the workers of `qos` (starting them if needed).
    public func threadIDs(for qos: QoSClass) -> [Int32] { group(for: qos.resolved).threadIDs }

    /// How many workers of `qos` run (starting them if needed): ``threadsPerClass``, or as many as the class's
    /// cores when it is pinned and they are fewer (at least 1), or fewer when the system could not create them
    /// all — then the work runs on those that did, or on the caller when none did.
    public func workerCount(for qos: QoSClass) -> Int { group(for: qos.resolved).workers }

    /// The CPUs the workers of `qos` are pinned to, nil when the pool pins nothing (no topology, or a homogeneous one).
    public func cores(for qos: QoSClass) -> [Int]? {
        guard let topology, topology.isHeterogeneous else { return nil }
        let cores = topology.cores(for: qos.resolved)
        return cores.isEmpty ? nil : cores
    }

    /// Why workers of some class are missing (out of memory or threads), nil when every class started all of its own.
    public var threadStartFailure: String? {
        lock.withLock { groups.values.compactMap(\.startFailure).first }
    }

    /// Why workers of some class could not be pinned to its cores (the errno `sched_setaffinity` gave: a CPU set
    /// the process may not use, say), nil when every started worker that should be pinned is. Such workers run
    /// unpinned, at their class's priority still.
    public var pinningFailure: String? {
        lock.withLock { groups.values.compactMap(\.pinningFailure).first }
    }

    private func group(for qos: QoSClass) -> WorkerGroup {
        lock.lock()
        defer { lock.unlock() }
        if let group = groups[qos] { return group }
        let cpus = cores(for: qos)
        let count = cpus.map { max(1, min(threadsPerClass, $0.count)) } ?? threadsPerClass
        let group = WorkerGroup(qos: qos, count: count, mapping: mapping, workerSpin: workerSpinNanoseconds,
                                callerSpin: callerSpinNanoseconds, stackBytes: workerStackBytes, cpus: cpus)
        groups[qos] = group
        return group
    }

    deinit {
        for group in groups.values { group.stop() }
    }
}

/// The workers of one QoS class and the slot they take jobs from.
final class WorkerGroup: @unchecked Sendable {
    let qos: QoSClass
    private let slot: OpaquePointer?
    private let callers = NSLock() // one job at a time per class
    private let job = UnsafeMutablePointer<UnsafeRawPointer?>.allocate(capacity: 1)
    private let workerSpin: Int64, callerSpin: Int64
    private let started = DispatchSemaphore(value: 0)
    private let idLock = NSLock()
    private var ids: [Int32] = []

    private final class Job {
        let body: (Int) -> Void
        init(_ body: @escaping (Int) -> Void) { self.body = body }
    }

    /// `cpus`: the CPUs each worker pins itself to right after taking its priority (nil: not pinned).
    init(qos: QoSClass, count: Int, mapping: QoSMapping, workerSpin: Int64, callerSpin: Int64, stackBytes: Int,
         cpus: [Int]? = nil) {
        self.qos = qos
        self.workerSpin = workerSpin
        self.callerSpin = callerSpin
        // A participating caller computes too: with one spare core fewer spinning
        // workers than cores never oversubscribe the machine.
        slot = et_work_slot_create(Int32(max(1, min(count, ProcessInfo.processInfo.activeProcessorCount - 1))))
        job.initialize(to: nil)
        guard slot != nil else {
            startFailure = "cannot allocate the work slot of the \(qos) workers: out of memory"
            return
        }
        // Threads that cannot be created (out of memory or threads) are not waited for: the group runs with
        // those that started, and with none every part runs on the caller.
        let affinity = cpus.map { $0.map { Int32(clamping: $0) } }
        var launched = 0
        for index in 0..<count {
            do {
                try OSThread.start(name: "ember-\(qos)-\(index)", stackBytes: stackBytes) { [self] in
                    mapping.applyToCurrentThread(qos)
                    let pinError = affinity.map { Self.pinCurrentThread(to: $0) } ?? 0
                    idLock.lock()
                    ids.append(et_thread_id())
                    if pinError != 0 && pinningFailureValue == nil {
                        pinningFailureValue = "cannot pin the \(qos) workers to CPUs \(cpus ?? []): "
                            + "\(String(cString: strerror(pinError))) (errno \(pinError)); they run unpinned"
                    }
                    idLock.unlock()
                    started.signal()
                    work()
                }
                launched += 1
            } catch {
                startFailure = "\(error)"
                break
            }
        }
        for _ in 0..<launched { started.wait() }
        workers = launched
    }

    /// Workers that started (fewer than asked for when the system could not create them all).
    private(set) var workers = 0
    /// Why workers are missing, nil when all started.
    private(set) var startFailure: String?
    private var pinningFailureValue: String? // under idLock: workers write it as they start
    /// Why workers could not be pinned to their CPUs, nil when all that should be are.
    var pinningFailure: String? {
        idLock.lock()
        defer { idLock.unlock() }
        return pinningFailureValue
    }

    /// Confines the calling thread to `cpus`; 0 or the errno.
    private static func pinCurrentThread(to cpus: [Int32]) -> Int32 {
        cpus.withUnsafeBufferPointer { buffer in
            et_thread_set_affinity(et_thread_id(), buffer.baseAddress, Int32(buffer.count))
        }
    }

    var threadIDs: [Int32] {
        idLock.lock()
        defer { idLock.unlock() }
        return ids
    }

    func run(count: Int, body: (Int) -> Void) {
        callers.lock()
        defer { callers.unlock() }
        guard workers > 0, let slot else {
            et_pool_nesting_add(1)
            defer { et_pool_nesting_add(-1) }
            for index in 0..<count { body(index) }
            return
        }
        let participate = QoSClass.current.resolved == qos
        withoutActuallyEscaping(body) { body in
            let box = Unmanaged.passRetained(Job(body))
            job.pointee = UnsafeRawPointer(box.toOpaque())
            let generation = et_work_slot_publish(slot, Int32(count), Int32(participate ? count - 1 : count))
            if participate { et_work_slot_complete(slot, runParts(of: generation)) }
            et_work_slot_wait_done(slot, callerSpin)
            job.pointee = nil
            box.release()
        }
    }

    private func work() {
        var seen: UInt64 = 0
        while true {
            guard let slot else { return }
            let generation = et_work_slot_wait(slot, seen, workerSpin)
            if et_work_slot_stopping(slot) { return }
            seen = generation
            let done = runParts(of: generation)
            et_work_slot_complete(slot, done)
        }
    }

    /// Claims and runs parts of job `generation` until none is left; returns how many.
    /// Its own function so the reference to the job's body ends before the
    /// parts are reported complete (the caller's closure must not outlive its call).
    @inline(never)
    func runParts(of generation: UInt64) -> Int32 {
        guard let slot else { return 0 }
        var done: Int32 = 0
        var index = et_work_slot_claim(slot, generation)
        guard index >= 0, let pointer = job.pointee else {
            while index >= 0 { // cannot happen (the job is published first); never leave a part unaccounted
                done += 1
                index = et_work_slot_claim(slot, generation)
            }
            return done
        }
        let body = Unmanaged<Job>.fromOpaque(pointer).takeUnretainedValue().body
        et_pool_nesting_add(1)
        defer { et_pool_nesting_add(-1) }
        while index >= 0 {
            body(Int(index))
            done += 1
            index = et_work_slot_claim(slot, generation)
        }
        return done
    }

    func stop() { if let slot { et_work_slot_stop(slot) } }

    // Reached once every worker has returned from `work()` (each holds the group until then): nothing uses the
    // slot any more. Without it a pool's end leaked its slot and job cell (LeakSanitizer, `make sanitize`).
    deinit {
        job.deallocate()
        if let slot { et_work_slot_destroy(slot) }
    }
}
