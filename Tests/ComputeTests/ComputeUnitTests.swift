import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

@Suite("Compute units, backends and routes")
struct ComputeUnitTests {
    static func operands(m: Int, n: Int, k: Int, type: TensorType) throws -> (Tensor, WeightMatrix, Tensor) {
        var generator = SplitMix64(seed: 17)
        let x = try Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 })
        let wValues = try Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 })
        let w = try WeightMatrix(wValues, as: type)
        // The exact product of x and the weights as stored (dequantized), for comparisons.
        let exact = try matmul(x, try w.fp32(), transposeB: true)
        return (x, w, exact)
    }

    static var simd: Bool { TestCompute.isa != .scalar }

    @Test func presetsAndSearchOrder() {
        #expect(ComputeUnits.all.searchOrder == [.neuralEngine, .gpu, .cpu])
        #expect(ComputeUnits.cpuAndGPU.searchOrder == [.gpu, .cpu])
        #expect(ComputeUnits.cpuOnly.searchOrder == [.cpu])
        #expect(ComputeUnits.gpu.searchOrder == [.gpu, .cpu], "the CPU route is always the last resort")
        #expect(ComputeUnits.cpuAndNeuralEngine.contains(.neuralEngine) && !ComputeUnits.cpuAndNeuralEngine.contains(.gpu))
    }

    /// Q4_1 weights land on each route by the allowed units, and agree.
    @Test func q41MatmulRunsOnTheRouteTheUnitsAllow() throws {
        let (x, w, exact) = try Self.operands(m: 5, n: 40, k: 256, type: .q4_1)
        let context = TestCompute.context
        let neural = try context.matmul(x, w, units: .cpuAndNeuralEngine)
        #expect(neural.placement.unit == (Self.simd ? .neuralEngine : .cpu))
        let gpu = try context.matmul(x, w, units: .cpuAndGPU)
        #expect(gpu.placement.unit == .gpu)
        #expect(gpu.placement.backend == "openblas")
        #expect(gpu.placement.fallbackReason?.contains("dequantized to fp32 once") == true)
        #expect(w.hasFP32Copy, "the fp32 copy is cached on the weights")
        let cpu = try context.matmul(x, w, units: .cpuOnly)
        #expect(cpu.placement.unit == .cpu)
        #expect(cpu.placement.backend == "scalar-reference")
        // All three against the exact product of the stored weights; the quantized routes
        // also round the activations (Q8_1: half a step of max|x|/127 per element).
        let exactValues = try exact.scalars()
        let xMax = try x.scalars().map(abs).max()!
        let wValues = try w.fp32().scalars()
        for result in [neural, gpu, cpu] {
            let got = try result.output.scalars()
            for (index, value) in got.enumerated() {
                let row = index % 40
                let bound = Double(xMax) / 254 * wValues[(row * 256)..<(row * 256 + 256)].reduce(0.0) { $0 + Double(abs($1)) } + 1e-3
                #expect(abs(Double(value) - Double(exactValues[index])) <= bound, "\(result.placement.unit) output \(index)")
            }
            #expect(result.energy.source == (context.energyCounter.isAvailable ? .measured : .modelled))
            #expect(result.energy.joules > 0)
        }
        // The two quantized routes compute the same integer dot products: they agree far more closely.
        for (a, b) in zip(try neural.output.scalars(), try cpu.output.scalars()) { #expect(abs(a - b) <= 1e-3 * max(1, abs(b))) }
    }

    @Test func fallsBackOpByOpAndSaysWhy() {
        let registry = TestCompute.context.backends
        let placed = registry.plan([OpSupport(.matmul, .q4_0), OpSupport(.matmul, .f32), OpSupport(.rmsNorm, .f32)], units: .cpuAndNeuralEngine)
        #expect(placed[0].unit == (Self.simd ? .neuralEngine : .cpu))
        #expect(placed[0].fallbackReason == (Self.simd ? nil : "neural-engine has no matmul for q4_0; fell back to cpu"))
        #expect(placed[1].unit == .cpu)
        #expect(placed[1].backend == "scalar-reference")
        #expect(placed[1].fallbackReason?.contains("neural-engine has no matmul for f32") == true)
        #expect(placed[2].unit == .cpu)
        #expect(placed[2].backend == (Self.simd ? "cpu-\(TestCompute.isa)" : "scalar-reference"))
        #expect(placed[2].fallbackReason?.contains("neural-engine has no rms_norm for f32") == true)
        let gpuOnly = registry.plan([OpSupport(.matmul, .q8_0)], units: .gpu)
        #expect(gpuOnly[0].unit == .gpu)
        // Every op Ember knows is placed somewhere on every unit set.
        for units in [ComputeUnits.cpuOnly, .cpuAndGPU, .cpuAndNeuralEngine, .all] {
            for op in Op.allCases where op != .quantizeActivations {
                let type: TensorType = op == .matmul || op == .embedding ? .q8_0 : .f32
                #expect(registry.place(op, type: type, units: units) != nil, "\(op) on \(units)")
            }
        }
    }

    /// A type Ember only knows the size of runs nowhere: placement says so instead of guessing.
    @Test func typesWithoutKernelsAreNotPlaced() throws {
        let iq2 = try #require(TensorType(name: "iq2_xxs"))
        #expect(!iq2.canDequantize && iq2.blockSize == 256 && iq2.blockBytes == 66)
        #expect(TestCompute.context.backends.place(.matmul, type: iq2, units: .all) == nil)
        #expect(throws: KernelError.self) { try TestCompute.context.backends.bind(.embedding, type: iq2, units: .all) }
    }

    /// A fake backend (named so): its matmul only sleeps and logs when it ran.
    final class FakeSleeperBackend: Backend, @unchecked Sendable {
        let descriptor: BackendDescriptor
        let opTable = OpTable()
        let log: SpanLog
        init(unit: ComputeUnit, log: SpanLog) {
            descriptor = BackendDescriptor(name: "fake-sleeper-\(unit)", unit: unit, score: 1000, supports: [OpSupport(.matmul, .q8_0)])
            self.log = log
        }
        func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
            let (log, unit) = (log, descriptor.unit)
            return BoundMatmul(placement: placement, rows: weights.rows, columns: weights.columns, preparation: nil, splittable: false,
                               owner: weights) { _, _, _, _, _ in
                log.record(unit.rawValue) { usleep(60_000) }
                return 0
            }
        }
    }

    final class SpanLog: @unchecked Sendable {
        let lock = NSLock()
        var spans: [String: [(start: UInt64, end: UInt64)]] = [:]
        func record(_ unit: String, _ body: () -> Void) {
            let start = DispatchTime.now().uptimeNanoseconds
            body()
            let end = DispatchTime.now().uptimeNanoseconds
            lock.withLock { spans[unit, default: []].append((start, end)) }
        }
    }

    /// Jobs on the neural-engine route run one after the other; CPU-route jobs run alongside.
    @Test func neuralEngineSerializesWhileCPURunsConcurrently() throws {
        let log = SpanLog()
        let context = ComputeContext()
        for unit in [ComputeUnit.neuralEngine, .cpu] { try context.backends.register(FakeSleeperBackend(unit: unit, log: log)) }
        let (x, w, _) = try Self.operands(m: 1, n: 16, k: 32, type: .q8_0)
        // Threads of our own: Dispatch's pool may not start a thread per blocked job.
        var finished = [DispatchSemaphore]()
        for units in [ComputeUnits.cpuAndNeuralEngine, .cpuAndNeuralEngine, .cpuOnly, .cpuOnly] {
            finished.append(try QoSThread.start(qos: .default) { _ = try? context.matmul(x, w, units: units) })
        }
        for done in finished { #expect(done.wait(timeout: .now() + 60) == .success) }
        let neural = log.spans["neural-engine"]!.sorted { $0.start < $1.start }
        let cpu = log.spans["cpu"]!.sorted { $0.start < $1.start }
        #expect(neural.count == 2 && cpu.count == 2)
        #expect(neural[1].start >= neural[0].end, "neural-engine jobs overlapped")
        #expect(cpu[1].start < cpu[0].end, "CPU-route jobs did not run alongside each other")
    }

    @Test func commandBufferRunsOpsInOrderAndReportsErrors() throws {
        let routes = ComputeRoutes()
        let order = ResultBox<[Int]>()
        order.value = []
        let buffer = routes.makeCommandBuffer()
        for index in 0..<5 { buffer.encode { order.value!.append(index) } }
        buffer.commit()
        try buffer.waitUntilCompleted()
        #expect(order.value == [0, 1, 2, 3, 4])
        #expect(buffer.status == .completed)
        let failing = routes.makeCommandBuffer()
        failing.encode { throw KernelError.invalidArgument(argument: "op", found: "1", expected: "2") }
        failing.encode { order.value!.append(99) }
        failing.commit()
        #expect(throws: KernelError.self) { try failing.waitUntilCompleted() }
        #expect(failing.status == .failed)
        #expect(order.value?.last == 4, "ops after a failure do not run")
    }

    @Test func aSecondCommitDoesNotRunTheOpsAgain() throws {
        let routes = ComputeRoutes()
        let runs = ResultBox<Int>()
        runs.value = 0
        let buffer = routes.makeCommandBuffer()
        buffer.encode { runs.value! += 1 }
        buffer.commit()
        buffer.commit()
        try buffer.waitUntilCompleted()
        routes.gpuQueue.sync(qos: .utility) {} // anything a second commit queued would have run by now
        #expect(runs.value == 1)
    }

    /// The units are views of their backends: what they run and what it costs come from the backends and the
    /// calibration, one source of truth.
    @Test func profilesAreDerivedFromTheBackends() {
        let context = TestCompute.context
        let profiles = Dictionary(uniqueKeysWithValues: context.unitProfiles.map { ($0.unit, $0) })
        if Self.simd {
            #expect(profiles[.neuralEngine]!.cost(at: .int4) != nil && profiles[.neuralEngine]!.cost(at: .fp32) == nil)
            #expect(profiles[.neuralEngine]!.backends == ["simd-\(context.isa)"])
        }
        #expect(profiles[.gpu]!.cost(at: .fp32) != nil && !profiles[.gpu]!.ops.contains("rms_norm"))
        #expect(Op.allCases.allSatisfy { profiles[.cpu]!.ops.contains($0.rawValue) }, "the CPU route runs every op")
        if Self.simd {
            let neural = profiles[.neuralEngine]!.cost(at: .int8)!.estimate(work: 1e9)
            let cpu = profiles[.cpu]!.cost(at: .int8)!.estimate(work: 1e9)
            #expect(neural.joules < cpu.joules, "the SIMD route costs less energy per op than the scalar one")
            // What decoding streams per weight: the block type's own bytes where the kernels read the blocks,
            // fp32's where the backend dequantizes once (the GPU route's BLAS).
            #expect(profiles[.neuralEngine]!.weightBytes["int8"] == 34.0 / 32)
            #expect(profiles[.neuralEngine]!.weightBytes["int4"] == 20.0 / 32)
        }
        #expect(profiles[.gpu]!.weightBytes["int8"] == 4 && profiles[.gpu]!.weightBytes["fp32"] == 4)
        #expect(profiles[.cpu]!.weightBytes["int4"] == 20.0 / 32, "the scalar reference reads Q4_1 blocks as they are")
    }

    /// Calibration measures every available backend's ops, and a cache from another machine is not used.
    @Test func calibrationMeasuresEveryBackendAndChecksItsKey() throws {
        let context = ComputeContext()
        let measured = context.calibrate()
        for backend in context.backends.available {
            for support in backend.descriptor.supports where support.op != .quantizeActivations {
                #expect(measured.cost(backend: backend.descriptor.name, support)?.source == "measured", "\(backend.descriptor.name) \(support)")
            }
        }
        #expect(measured.key == context.calibrationKey)
        // The memory's read bandwidth, which bounds decoding, is measured with the ops (any machine: 0.5 GB/s to 10 TB/s).
        let bandwidth = try #require(measured.readGBs)
        #expect((0.5...10_000).contains(bandwidth), "read bandwidth \(bandwidth) GB/s")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ember-calibration-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try measured.write(to: file)
        let read = try #require(Calibration.read(from: file))
        #expect(read == measured)
        let other = ComputeContext()
        #expect(other.adopt(read))
        #expect(other.calibration.readGBs == bandwidth)
        var foreign = read
        foreign.key = "another machine"
        #expect(!ComputeContext().adopt(foreign))
        // The JSON uses objects keyed by backend and "op/type".
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
        let costs = try #require(object?["costs"] as? [String: [String: Any]])
        #expect(costs["scalar-reference"]?["matmul/q4_1"] != nil)

        // The cache file keeps several keys side by side (measuring under EMBER_ISA=scalar must not evict this
        // machine's own calibration), newest first, the same key replaced; the one-calibration file reads as one.
        #expect(Calibration.readAll(from: file) == [measured])
        try foreign.store(in: file)
        try measured.store(in: file)
        #expect(Calibration.readAll(from: file).map(\.key) == [measured.key, "another machine"])
        #expect(Calibration.readAll(from: file).contains { ComputeContext().adopt($0) })
        for index in 0..<10 {
            var many = read
            many.key = "machine \(index)"
            try many.store(in: file, keep: 4)
        }
        #expect(Calibration.readAll(from: file).map(\.key) == ["machine 9", "machine 8", "machine 7", "machine 6"])
    }
}
