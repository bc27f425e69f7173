import Foundation

/// Everything Ember computes with, in one object a `Runtime` owns and passes
/// down: the CPU's features and the kernel ISA chosen, the BLAS library, the
/// worker threads, the routes' queues, the backends (built-in and plugins)
/// with their placement, the calibrated costs, and the energy counter.
/// Nothing below it reads the environment or a process-wide singleton; two
/// contexts in one process are independent.
public final class ComputeContext: @unchecked Sendable {
    /// How a context is set up; the CLI fills it from the environment, a host from its own settings.
    public struct Configuration: Sendable {
        /// A kernel family to force ("scalar", "avx2", "avx512", "neon", "avx2-novnni", "avx512-noamx", "avx512-novnni"); nil or "auto" picks the best.
        public var isaOverride: String?
        /// Worker threads per QoS class; default one per active core.
        public var threadsPerClass: Int
        /// How QoS classes become OS priorities.
        public var qosMapping: QoSMapping
        /// The machine's performance and efficiency cores, each class's workers pinned to its own (see
        /// ``WorkerPool/cores(for:)``); the CLI reads it from /sys (``CoreTopology/read(sysfsRoot:)``); nil pins nothing.
        public var coreTopology: CoreTopology? = nil
        /// The package energy counter's file (RAPL); measured energy where it is readable.
        public var energyCounterPath: String
        /// Hears what happens to backends while they run: one line when one is disabled, with the reason
        /// (the CLI prints these to standard error). Also kept in ``BackendRegistry/events``.
        public var log: @Sendable (String) -> Void

        /// A configuration; every argument has the default a host usually wants.
        public init(isaOverride: String? = nil, threadsPerClass: Int = ProcessInfo.processInfo.activeProcessorCount,
                    qosMapping: QoSMapping = .current, energyCounterPath: String = EnergyCounter.defaultPath,
                    log: @escaping @Sendable (String) -> Void = { _ in }) {
            self.isaOverride = isaOverride
            self.threadsPerClass = threadsPerClass
            self.qosMapping = qosMapping
            self.energyCounterPath = energyCounterPath
            self.log = log
        }
    }

    /// The configuration the context was made with.
    public let configuration: Configuration
    /// The CPU's SIMD features.
    public let features: CPUFeatures
    /// The kernel family the built-in backends run.
    public let isa: KernelISA
    /// Why ``Configuration/isaOverride`` was refused (the best family runs instead), if it was.
    public let isaOverrideError: KernelError?
    /// The compute threads, per QoS class.
    public let pool: WorkerPool
    /// The performance and efficiency cores the pool was given (``Configuration/coreTopology``); nil when none was.
    public var coreTopology: CoreTopology? { configuration.coreTopology }
    /// The neural-engine and GPU routes' queues.
    public let routes: ComputeRoutes
    /// The backends ops are placed on.
    public let backends: BackendRegistry
    /// The package energy counter, if the machine exposes one.
    public let energyCounter: EnergyCounter
    private let lock = NSLock()
    private var calibrationValue: Calibration

    /// A context with the built-in backends and default costs (no calibration yet: see ``calibrate()``).
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        features = .current
        let override = configuration.isaOverride.flatMap { $0.isEmpty || $0 == "auto" ? nil : $0 }
        do {
            isa = try KernelISA.select(override: override, features: features)
            isaOverrideError = nil
        } catch let error as KernelError {
            isa = .best(for: features)
            isaOverrideError = error
        } catch {
            isa = .best(for: features)
            isaOverrideError = nil
        }
        pool = WorkerPool(threadsPerClass: configuration.threadsPerClass, mapping: configuration.qosMapping,
                          topology: configuration.coreTopology)
        routes = ComputeRoutes()
        backends = .builtIn(isa: isa)
        backends.log = configuration.log
        energyCounter = EnergyCounter(path: configuration.energyCounterPath)
        calibrationValue = Calibration(key: "", costs: [:])
        calibrationValue = defaultCalibration()
    }

    /// Why this context cannot compute at all (an address-space limit too tight for OpenBLAS's buffers, the
    /// workers' threads impossible to start), nil when it can. A `Runtime` (Ember) refuses to start with it.
    public var startupError: KernelError? {
        pool.blasShortfall.map { KernelError.outOfMemory(reason: $0) }
    }

    /// The BLAS library as loaded in this process.
    public var blas: BLASLibrary { .current }

    /// Threads a request may use at most: the pool's per class.
    public var maximumThreads: Int { pool.threadsPerClass }

    // MARK: Costs

    /// The costs in force: measured by ``calibrate()`` or adopted from a cache, else the documented defaults.
    public var calibration: Calibration { lock.withLock { calibrationValue } }

    /// What a calibration must hold for to be used here: CPU, kernel ISA, BLAS core, cores, built-in backends and
    /// the version of what they run (v5: the GPU route keeps F16/BF16 weights 16-bit).
    public var calibrationKey: String {
        let builtIns = backends.all.filter { !$0.descriptor.source.isPlugin }.map(\.descriptor.name).joined(separator: ",")
        return "\(CPUFeatures.modelName)|\(isa)|\(blas.coreName)|\(pool.threadsPerClass)|\(builtIns)|v5"
    }

    /// Uses `calibration`'s costs of the built-in backends if its key is this context's (a cache from an earlier run;
    /// plugins are measured when they load, never taken from a cache); whether it did.
    @discardableResult
    public func adopt(_ calibration: Calibration) -> Bool {
        guard calibration.key == calibrationKey else { return false }
        let builtIns = Set(backends.all.filter { !$0.descriptor.source.isPlugin }.map(\.descriptor.name))
        lock.withLock {
            var merged = calibrationValue
            for (name, costs) in calibration.costs where builtIns.contains(name) { merged.costs[name] = costs }
            merged.key = calibration.key
            merged.measuredAt = calibration.measuredAt
            merged.readGBs = calibration.readGBs ?? merged.readGBs
            calibrationValue = merged
        }
        return true
    }

    /// The costs of the built-in backends only: what may be cached for the next run on this machine.
    public var cacheableCalibration: Calibration {
        var value = calibration
        let builtIns = Set(backends.all.filter { !$0.descriptor.source.isPlugin }.map(\.descriptor.name))
        value.costs = value.costs.filter { builtIns.contains($0.key) }
        return value
    }

    /// Measures every available backend's ops now (each op on a representative shape, the best of five rounds — of
    /// two calls for an op slower than 5 ms a call —: on a shared machine the median of three moved by 2×
    /// between runs, and the best is what the hardware does)
    /// and the memory's read bandwidth, and uses the result; takes about a second on 2 cores. Call it when the host asks, or
    /// at start — never inside a request.
    @discardableResult
    public func calibrate() -> Calibration {
        let key = calibrationKey
        let measured = measure(backends.available)
        let bandwidth = measureReadBandwidth()
        return lock.withLock {
            if let bandwidth { calibrationValue.readGBs = bandwidth }
            for (name, costs) in measured { calibrationValue.costs[name] = costs }
            calibrationValue.key = key
            calibrationValue.measuredAt = Date().timeIntervalSince1970
            return calibrationValue
        }
    }

    /// The cost of `support` on the backend called `backend`: measured if calibrated, else the default.
    public func cost(_ support: OpSupport, on backend: String) -> OpCost {
        if let known = calibration.cost(backend: backend, support) { return known }
        guard let descriptor = backends.backend(named: backend)?.descriptor else {
            return OpCost(throughput: 1e9, dispatchMicroseconds: 2, cores: pool.threadsPerClass, source: "default")
        }
        return defaultCost(support, on: descriptor)
    }

    /// One op of one backend being timed: `time(repetitions)` runs it that many times (a matmul's weights made and
    /// bound once, before the first round; nil for a slow op, timed already, whose binding is let go at once).
    private struct TimedOp {
        let backend: any Backend
        let support: OpSupport
        let work: Double
        let time: ((Int) -> Result<OpProbe.Outcome, OpProbe.Failure>)?
        let repetitions: Int
        var seconds: [Double] = []
        var failed = false
    }

    /// An op whose first two calls both take at least this long keeps the faster of them instead of five rounds (two,
    /// so that one call slowed by a neighbour's burst does not decide it): on the machines measured only the scalar
    /// reference's matmuls take that long (10–30 ms at the probe's shape, ten times the other backends'), their cost
    /// serves to rank them, and their rounds were most of calibration's time (with the weights made and bound anew for
    /// each round, 5.5 s of `ember info`'s first run on an Emerald Rapids VM; 1.5–2 s once made and bound once, about
    /// 1 s with the slow ones timed twice).
    static let slowCallSeconds = 0.005

    /// Every op of `backends`, timed in five rounds that each time every op once: a burst of load on a shared
    /// machine then slows one round of every op, not every round of one op (timed back to back, an op's five rounds
    /// once all fell in a burst, and a quantized route looked slower than fp32 under the test suite's load). An op
    /// slower than 5 ms a call (`slowCallSeconds`) is timed twice, not in the rounds.
    private func measure(_ backends: [any Backend]) -> [String: [String: OpCost]] {
        var result: [String: [String: OpCost]] = [:]
        let threads = pool.threadsPerClass
        var timed: [TimedOp] = []
        for backend in backends {
            result[backend.descriptor.name] = [:]
            for support in backend.descriptor.supports where support.op != .quantizeActivations {
                let probe = support.op == .matmul ? OpProbe(support: support, rows: 16, matmulShape: (576, 1536)) : OpProbe(support: support, rows: 16)
                let time: (Int) -> Result<OpProbe.Outcome, OpProbe.Failure>
                if support.op == .matmul {
                    switch probe.prepareMatmul(on: backend) {
                    case let .success(prepared): time = { prepared.run(repetitions: $0, pool: self.pool, threads: threads) }
                    case let .failure(failure):
                        (backend as? PluginBackend)?.health.disable("while timed: \(failure)")
                        continue
                    }
                } else {
                    time = { self.run(probe, support, on: backend, repetitions: $0) }
                }
                switch time(1) {
                case let .success(first):
                    var slow: [Double] = []
                    if first.secondsPerCall >= Self.slowCallSeconds, case let .success(second) = time(1),
                       second.secondsPerCall >= Self.slowCallSeconds {
                        slow = [first.secondsPerCall, second.secondsPerCall]
                    }
                    timed.append(TimedOp(backend: backend, support: support, work: probe.work, time: slow.isEmpty ? time : nil,
                                         repetitions: max(1, min(1000, Int(0.001 / max(first.secondsPerCall, 1e-9)))),
                                         seconds: slow))
                case let .failure(failure):
                    // A plugin's op that fails here failed its own check's conditions: it is disabled, not timed.
                    (backend as? PluginBackend)?.health.disable("while timed: \(failure)")
                }
            }
        }
        for _ in 0..<5 {
            for index in timed.indices where !timed[index].failed {
                let op = timed[index]
                guard let time = op.time else { continue } // a slow op, timed already
                switch time(op.repetitions) {
                case let .success(outcome): timed[index].seconds.append(outcome.secondsPerCall)
                case let .failure(failure):
                    (op.backend as? PluginBackend)?.health.disable("while timed: \(failure)")
                    timed[index].failed = true
                }
            }
        }
        for op in timed where !op.seconds.isEmpty {
            // Matmul runs on every core; the other ops were timed on one thread and a pass splits them over all.
            let parallel = op.support.op == .matmul ? 1.0 : Double(threads)
            result[op.backend.descriptor.name, default: [:]][op.support.description] = OpCost(
                throughput: op.work / (op.seconds.min() ?? 1) * parallel,
                dispatchMicroseconds: defaultCost(op.support, on: op.backend.descriptor).dispatchMicroseconds,
                cores: threads, source: "measured")
        }
        return result
    }

    /// Bytes the read-bandwidth probe streams: four times a 32 MiB last-level cache, so repeated reads find little of
    /// it there.
    public static let readProbeBytes = 128 << 20

    /// The best of six streaming reads of ``readProbeBytes`` on every thread of the pool (after one warm-up read), GB/s;
    /// nil when the memory cannot be had (`ulimit -v`). About 60 ms. The best, as for the ops: on the shared machines
    /// single reads of one buffer moved between 14 and 33 GB/s within a second.
    private func measureReadBandwidth() -> Double? {
        guard let buffer = try? StreamingReadBuffer(bytes: Self.readProbeBytes) else { return nil }
        let threads = pool.threadsPerClass
        _ = buffer.readGBs(isa: isa, threads: threads, pool: pool)
        return (0..<6).map { _ in buffer.readGBs(isa: isa, threads: threads, pool: pool) }.max()
    }

    /// One run of `probe` on `backend`, `repetitions` calls (one: the first, checked call). A plugin's ops are
    /// called straight from its table here, so one that is not concurrent is called alone; its matmul serialises its
    /// own calls (and binding), so wrapping it too would lock twice.
    private func run(_ probe: OpProbe, _ support: OpSupport, on backend: any Backend, repetitions: Int) -> Result<OpProbe.Outcome, OpProbe.Failure> {
        let threads = pool.threadsPerClass
        let serializer = support.op == .matmul ? nil : (backend as? PluginBackend)?.serializer
        let call = { probe.run(on: backend, repetitions: repetitions, pool: self.pool, threads: threads) }
        return serializer.map { $0.withLock(call) } ?? call()
    }

    private func defaultCalibration() -> Calibration {
        var costs: [String: [String: OpCost]] = [:]
        for backend in backends.all {
            costs[backend.descriptor.name] = Dictionary(uniqueKeysWithValues: backend.descriptor.supports.map {
                ($0.description, defaultCost($0, on: backend.descriptor))
            })
        }
        return Calibration(key: calibrationKey, costs: costs,
                           readGBs: Calibration.defaultReadGBs(cores: pool.threadsPerClass))
    }

    /// Documented defaults (this project's machine kind, 2 cores, medians of `ember bench kernels` / `bench blas`),
    /// scaled to the cores here: used until calibration measures.
    private func defaultCost(_ support: OpSupport, on backend: BackendDescriptor) -> OpCost {
        let cores = pool.threadsPerClass
        let perCore = Double(cores) / 2
        let dispatch = backend.unit == .cpu ? 2.0 : 20.0
        func cost(_ throughput: Double) -> OpCost { OpCost(throughput: throughput * perCore, dispatchMicroseconds: dispatch, cores: cores, source: "default") }
        guard support.op == .matmul else {
            return cost(backend.source.isPlugin || backend.name == "scalar-reference" ? 1e9 : 4e9)
        }
        let precision = support.type.precision ?? .fp32
        switch (backend.unit, precision) {
        case (.neuralEngine, .int4): return cost(800e9)
        case (.neuralEngine, _): return cost(700e9)
        case (.gpu, _): return cost(190e9)
        case (.cpu, .fp32), (.cpu, .fp16): return cost(16e9)
        case (.cpu, .int8): return cost(10e9)
        case (.cpu, .int4): return cost(6e9)
        }
    }

    /// Each route as its backends make it: resource, backends, ops, and the matmul cost per precision of its best
    /// backend (for F32, F16, Q8_0 and Q4_1 weights).
    public var unitProfiles: [UnitProfile] {
        let available = backends.available
        return ComputeUnit.preference.map { unit in
            let onUnit = available.filter { $0.descriptor.unit == unit }.sorted { $0.descriptor.score > $1.descriptor.score }
            let ops = Set(onUnit.flatMap { $0.descriptor.supports.map(\.op.rawValue) }).sorted()
            var costs: [String: OpCost] = [:]
            var weightBytes: [String: Double] = [:]
            for precision in Precision.allCases {
                let type = TensorType.derived(for: precision)
                let support = OpSupport(.matmul, type)
                if let best = onUnit.first(where: { $0.descriptor.supports.contains(support) }) {
                    costs[precision.rawValue] = cost(support, on: best.descriptor.name)
                    // A backend's conversion holds the weights as fp32 (`BackendDescriptor.conversion`).
                    weightBytes[precision.rawValue] = best.descriptor.convertedTypes.contains(type)
                        ? 4 : Double(type.blockBytes) / Double(type.blockSize)
                }
            }
            return UnitProfile(unit: unit, resource: UnitProfile.resource(of: unit), backends: onUnit.map(\.descriptor.name),
                               ops: ops, costs: costs, weightBytes: weightBytes)
        }
    }

    // MARK: Plugins and running

    /// Loads the plugin library at `path` (ABI 2, `ember_plugin.h`), checks every field of its table, runs each
    /// declared op of each backend against the scalar reference, registers the backends that pass (one that fails
    /// is registered disabled, with its reason) and measures their ops. Throws a ``PluginError`` naming the field
    /// at fault when the table itself is wrong; nothing is registered then.
    @discardableResult
    public func loadPlugin(at path: String) throws -> LoadedPlugin {
        do {
            let plugin = try PluginLoader(registry: backends, features: features).load(at: path)
            let measured = measure(plugin.backends.compactMap { backends.backend(named: $0) })
            lock.withLock { for (name, costs) in measured { calibrationValue.costs[name] = costs } }
            return plugin
        } catch {
            backends.recordFailure("\(error)")
            throw error
        }
    }

    /// A meter for one piece of work, on this context's energy counter.
    public func energyMeter() -> EnergyMeter { EnergyMeter(counter: energyCounter) }

    /// Y[M×N] = X[M×K]·Wᵀ placed under `units` (the weights' variant at `precision` when given), on the placed
    /// backend's route at `qos`, its rows split over the pool's workers; with the time and energy it took.
    public func matmul(_ x: Tensor, _ w: WeightMatrix, units: ComputeUnits = .all, precision: Precision? = nil,
                       qos: QoSClass = .current) throws -> ComputeResult {
        let weights = try precision.map { try w.variant(for: $0) } ?? w
        guard x.rank == 2, x.shape[1] == weights.columns, x.dtype == .float32 else {
            throw TensorError.shapeMismatch(argument: "x", expected: "fp32 [M, \(weights.columns)] (K from w)", found: x.shape)
        }
        let bound = try backends.bindMatmul(weights, units: units, pool: pool)
        var y = try Tensor(zeros: [x.shape[0], weights.rows])
        let meter = energyMeter()
        let qos = qos.resolved
        let seconds = try Measurement.seconds {
            try routes.run(on: bound.placement.unit, qos: qos) {
                try bound.multiply(x, into: &y, threads: pool.threadsPerClass, pool: pool, qos: qos)
            }
        }
        let work = 2 * Double(x.shape[0]) * Double(weights.rows) * Double(weights.columns)
        let joules = cost(OpSupport(.matmul, weights.type), on: bound.placement.backend).estimate(work: work).joules
        return ComputeResult(output: y, placement: bound.placement, seconds: seconds, energy: meter.finish(modelledJoules: joules))
    }
}
