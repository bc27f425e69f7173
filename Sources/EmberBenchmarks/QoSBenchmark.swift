import EmberCore
import EmberModels
import Foundation

/// What QoS buys, measured on this machine in one run (`ember bench qos`).
///
/// *Contention*: a user-interactive job (a chain of int8 matmuls of about
/// 5 ms) repeated, alone, then with background load saturating every core
/// at `.background`, then with the same load at `.userInteractive` (no
/// differentiation). *Inversion*: a background job holds the
/// neural-engine-style serial queue while `.default` load keeps every core
/// busy, and a user-interactive job waits for the queue; its wait with
/// promotion on and off.
public struct QoSBenchmark: Sendable {
    /// The contention scenario's result: the user-interactive job's latency alone, under `.background` load, and under the same load at `.userInteractive`.
    public struct Contention: Sendable, Codable {
        /// Median and 99th-percentile latency of the job alone, milliseconds.
        public var unloadedP50Ms, unloadedP99Ms: Double
        /// Median and 99th-percentile latency with every core loaded at `.background`, milliseconds.
        public var backgroundP50Ms, backgroundP99Ms: Double
        /// Median and 99th-percentile latency with the same load at `.userInteractive`, milliseconds.
        public var sameQoSP50Ms, sameQoSP99Ms: Double
        /// Timed jobs per case (``QoSBenchmark/repetitions`` rounded up to a multiple of 4).
        public var repetitions: Int
        /// Matmuls chained per job, chosen so a job takes about 5 ms alone.
        public var chainLength: Int

        enum CodingKeys: String, CodingKey {
            case unloadedP50Ms = "unloaded_p50_ms", unloadedP99Ms = "unloaded_p99_ms"
            case backgroundP50Ms = "background_p50_ms", backgroundP99Ms = "background_p99_ms"
            case sameQoSP50Ms = "same_qos_p50_ms", sameQoSP99Ms = "same_qos_p99_ms"
            case repetitions, chainLength = "chain_length"
        }
    }

    /// The inversion scenario's result: how long a user-interactive job waits for the serial queue a background job holds, with promotion on and off.
    public struct Inversion: Sendable, Codable {
        /// Milliseconds the user-interactive job waited for the queue with promotion on.
        public var promotedWaitMs: Double
        /// Milliseconds it waited with promotion off (at most about ``loadCapMs`` plus the holder's run).
        public var unpromotedWaitMs: Double
        /// The background job's run time with the machine otherwise idle.
        public var holderAloneMs: Double
        /// How long the medium load runs at most (it bounds the unpromoted wait).
        public var loadCapMs: Double

        enum CodingKeys: String, CodingKey {
            case promotedWaitMs = "promoted_wait_ms", unpromotedWaitMs = "unpromoted_wait_ms"
            case holderAloneMs = "holder_alone_ms", loadCapMs = "load_cap_ms"
        }
    }

    /// Timed jobs per contention case; default 200, at least 10.
    public var repetitions: Int
    /// Threads the job splits over and the load runs on; default one per active core, at least 1.
    public var threads: Int
    /// How QoS classes become thread priorities; default this process's (`QoSMapping.current`).
    public var mapping: QoSMapping
    /// Seconds the inversion scenario's `.default` load runs at most (it bounds the unpromoted wait); default 2.
    public var loadCapSeconds: Double

    /// A benchmark; `repetitions` is raised to at least 10 and `threads` to at least 1.
    public init(repetitions: Int = 200, threads: Int = KernelThreads.default, mapping: QoSMapping = .current,
                loadCapSeconds: Double = 2) {
        self.repetitions = max(10, repetitions)
        self.threads = max(1, threads)
        self.mapping = mapping
        self.loadCapSeconds = loadCapSeconds
    }

    /// An int8 matmul and its operands: the unit of work both scenarios use.
    final class Work: @unchecked Sendable {
        let x: Tensor
        let w: QuantizedMatrix
        var y: Tensor
        init(m: Int, n: Int, k: Int, seed: UInt64) throws {
            var generator = SplitMix64(seed: seed)
            x = try Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 })
            w = try QuantizedMatrix(
                quantizing: try Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 }),
                to: .q8_0)
            y = try Tensor(zeros: [m, n])
        }
        func run(threads: Int, pool: WorkerPool) throws { try matmul(x, w, into: &y, threads: threads, pool: pool) }
    }

    /// Keeps `threads` threads at `qos` running `work` until stopped or the cap passes.
    final class Load: @unchecked Sendable {
        private let stopFlag = NSLock()
        private var stopped = false
        private var finished: [DispatchSemaphore] = []

        init(qos: QoSClass, parallel: Bool, threads: Int, cap: Double, mapping: QoSMapping, work: [Work]) throws {
            let pool = WorkerPool(threadsPerClass: threads, mapping: mapping)
            let deadline = Date().addingTimeInterval(cap)
            // Parallel load: one caller splitting over `threads` workers; else one single-threaded caller per core.
            for index in 0..<(parallel ? 1 : threads) {
                let unit = work[index % work.count]
                finished.append(try QoSThread.start(qos: qos, mapping: mapping, name: "ember-load-\(index)") { [self] in
                    while !isStopped && Date() < deadline {
                        try? unit.run(threads: parallel ? threads : 1, pool: pool)
                    }
                })
            }
        }

        var isStopped: Bool { stopFlag.withLock { stopped } }

        func stop() {
            stopFlag.withLock { stopped = true }
            for done in finished { done.wait() }
        }
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

    /// The contention scenario.
    public func contention() throws -> Contention {
        let job = try Work(m: 64, n: 1536, k: 1536, seed: 1)
        let loadWork = [try Work(m: 128, n: 2048, k: 2048, seed: 2)]
        let pool = WorkerPool(threadsPerClass: threads, mapping: mapping)
        let threads = self.threads
        // Chain length for ~5 ms alone.
        let single = try QoSThread.run(qos: .userInteractive, mapping: mapping) {
            (try? job.run(threads: threads, pool: pool)).map { _ in
                Measurement.median((0..<9).map { _ in Measurement.seconds { try? job.run(threads: threads, pool: pool) } })
            } ?? 0.001
        }
        let chain = max(1, Int((0.005 / max(single, 1e-6)).rounded()))
        func latencies(_ count: Int) throws -> [Double] {
            try QoSThread.run(qos: .userInteractive, mapping: mapping) {
                (0..<count).map { _ in
                    Measurement.seconds { for _ in 0..<chain { try? job.run(threads: threads, pool: pool) } } * 1000
                }
            }
        }
        // The three cases alternate in blocks, so drift and noisy neighbours hit each alike.
        var unloaded = [Double](), background = [Double](), same = [Double]()
        let blocks = 4, perBlock = (repetitions + blocks - 1) / blocks
        func loaded(at qos: QoSClass) throws -> [Double] {
            let load = try Load(qos: qos, parallel: true, threads: threads, cap: 60, mapping: mapping, work: loadWork)
            Thread.sleep(forTimeInterval: 0.05) // let the load get going
            let result = try latencies(perBlock)
            load.stop()
            return result
        }
        for _ in 0..<blocks {
            unloaded += try latencies(perBlock)
            background += try loaded(at: .background)
            same += try loaded(at: .userInteractive)
        }
        return Contention(
            unloadedP50Ms: Self.percentile(unloaded, 0.5), unloadedP99Ms: Self.percentile(unloaded, 0.99),
            backgroundP50Ms: Self.percentile(background, 0.5), backgroundP99Ms: Self.percentile(background, 0.99),
            sameQoSP50Ms: Self.percentile(same, 0.5), sameQoSP99Ms: Self.percentile(same, 0.99),
            repetitions: unloaded.count, chainLength: chain)
    }

    /// The inversion scenario.
    public func inversion() throws -> Inversion {
        let holderWork = try Work(m: 32, n: 1536, k: 1536, seed: 3)
        let loadWork = (0..<threads).map { try! Work(m: 32, n: 1024, k: 1024, seed: 10 + UInt64($0)) }
        let mapping = self.mapping
        let pool = WorkerPool(threadsPerClass: 1, mapping: mapping)
        // The holder's job: single-threaded int8 matmuls, ~40 ms on an idle machine.
        let single = try QoSThread.run(qos: .background, mapping: mapping) {
            Measurement.median((0..<5).map { _ in Measurement.seconds { try? holderWork.run(threads: 1, pool: pool) } })
        }
        let steps = max(1, Int((0.04 / max(single, 1e-6)).rounded()))
        let holderAlone = try QoSThread.run(qos: .background, mapping: mapping) {
            Measurement.seconds { for _ in 0..<steps { try? holderWork.run(threads: 1, pool: pool) } }
        }

        func wait(promotes: Bool) throws -> Double {
            let queue = PromotingSerialQueue(label: "ember-inversion", mapping: mapping, promotes: promotes)
            defer { queue.stop() }
            let load = try Load(qos: .default, parallel: false, threads: threads, cap: loadCapSeconds, mapping: mapping,
                            work: loadWork)
            Thread.sleep(forTimeInterval: 0.02)
            let started = DispatchSemaphore(value: 0)
            queue.async(qos: .background) {
                started.signal()
                for _ in 0..<steps { try? holderWork.run(threads: 1, pool: pool) }
            }
            started.wait()
            Thread.sleep(forTimeInterval: 0.005)
            let waited = try QoSThread.run(qos: .userInteractive, mapping: mapping) { () -> Double in
                let submitted = DispatchTime.now().uptimeNanoseconds
                let began = queue.sync(qos: .userInteractive) { DispatchTime.now().uptimeNanoseconds }
                return Double(began - submitted) / 1e6
            }
            load.stop()
            return waited
        }
        let promoted = try wait(promotes: true)
        let unpromoted = try wait(promotes: false)
        return Inversion(promotedWaitMs: promoted, unpromotedWaitMs: unpromoted, holderAloneMs: holderAlone * 1000,
                         loadCapMs: loadCapSeconds * 1000)
    }
}
