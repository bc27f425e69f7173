import Foundation
import Testing
@testable import Ember

@Suite("Compute units, registry and routes")
struct ComputeUnitTests {
    static func operands(m: Int, n: Int, k: Int, format: WeightFormat) throws -> (Tensor, WeightMatrix, Tensor) {
        var generator = SplitMix64(seed: 17)
        let x = try Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 })
        let wValues = try Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 })
        let w = try WeightMatrix(wValues, as: format)
        // The exact product of x and the weights as stored (dequantized), for comparisons.
        let exact = try matmul(x, try w.fp32(), transposeB: true)
        return (x, w, exact)
    }

    @Test func presetsAndSearchOrder() {
        #expect(ComputeUnits.all.searchOrder == [.neuralEngine, .gpu, .cpu])
        #expect(ComputeUnits.cpuAndGPU.searchOrder == [.gpu, .cpu])
        #expect(ComputeUnits.cpuOnly.searchOrder == [.cpu])
        #expect(ComputeUnits.gpu.searchOrder == [.gpu, .cpu], "the CPU route is always the last resort")
        #expect(ComputeUnits.cpuAndNeuralEngine.contains(.neuralEngine) && !ComputeUnits.cpuAndNeuralEngine.contains(.gpu))
    }

    /// The acceptance: Q4_1 weights land on each route by the allowed units, and agree.
    @Test func q41MatmulRunsOnTheRouteTheUnitsAllow() throws {
        let (x, w, exact) = try Self.operands(m: 5, n: 40, k: 256, format: .q4_1)
        let engine = ComputeEngine.shared
        let neural = try engine.matmul(x, w, units: .cpuAndNeuralEngine)
        #expect(neural.placement.unit == (KernelISA.active == .scalar ? .cpu : .neuralEngine))
        let gpu = try engine.matmul(x, w, units: .cpuAndGPU)
        #expect(gpu.placement.unit == .gpu)
        #expect(gpu.placement.kernel == "openblas-sgemm")
        #expect(gpu.placement.reason.contains("dequantized to fp32 once"))
        #expect(w.hasFP32Copy, "the fp32 copy is cached on the weights")
        let cpu = try engine.matmul(x, w, units: .cpuOnly)
        #expect(cpu.placement.unit == .cpu)
        #expect(cpu.placement.kernel == "scalar-reference")
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
            #expect(result.energy.source == (EnergyCounter.isAvailable ? .measured : .modelled))
            #expect(result.energy.joules > 0)
        }
        // The two quantized routes compute the same integer dot products: they agree far more closely.
        for (a, b) in zip(try neural.output.scalars(), try cpu.output.scalars()) { #expect(abs(a - b) <= 1e-3 * max(1, abs(b))) }
    }

    @Test func fallsBackOpByOpAndSaysWhy() {
        let plan = KernelRegistry.shared.plan([(.matmul, .q4_0), (.matmul, .f32), (.rmsNorm, .f32)], units: .cpuAndNeuralEngine)
        #expect(plan.placements[0].unit == (KernelISA.active == .scalar ? .cpu : .neuralEngine))
        #expect(plan.placements[1].unit == .cpu)
        #expect(plan.placements[1].kernel == "portable-sgemm")
        #expect(plan.placements[1].reason.contains("neural-engine has no matmul kernel for f32"))
        #expect(plan.placements[2].unit == .cpu)
        #expect(plan.placements[2].kernel == nil)
        let gpuOnly = KernelRegistry.shared.plan([(.matmul, .q8_0)], units: .gpu)
        #expect(gpuOnly.placements[0].unit == .gpu)
    }

    /// Jobs on the neural-engine route run one after the other; CPU-route jobs run alongside.
    @Test func neuralEngineSerializesWhileCPURunsConcurrently() throws {
        final class Log: @unchecked Sendable {
            let lock = NSLock()
            var spans: [String: [(start: UInt64, end: UInt64)]] = [:]
            func record(_ unit: String, _ body: () -> Void) {
                let start = DispatchTime.now().uptimeNanoseconds
                body()
                let end = DispatchTime.now().uptimeNanoseconds
                lock.withLock { spans[unit, default: []].append((start, end)) }
            }
        }
        let log = Log()
        let registry = KernelRegistry()
        for unit in [ComputeUnit.neuralEngine, .cpu] {
            // Fake kernels (named as such): they only sleep and log when they ran.
            registry.register(RegisteredKernel(name: "fake-sleeper-\(unit)", op: .matmul, formats: [.q8_0], unit: unit, score: 1) { _, _, _ in
                log.record(unit.rawValue) { usleep(60_000) }
            })
        }
        let engine = ComputeEngine(registry: registry, routes: ComputeRoutes())
        let (x, w, _) = try Self.operands(m: 1, n: 16, k: 32, format: .q8_0)
        // Threads of our own: Dispatch's pool may not start a thread per blocked job.
        var finished = [DispatchSemaphore]()
        for units in [ComputeUnits.cpuAndNeuralEngine, .cpuAndNeuralEngine, .cpuOnly, .cpuOnly] {
            finished.append(QoSThread.start(qos: .default) { _ = try? engine.matmul(x, w, units: units) })
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

    @Test func profilesDescribeTheUnits() {
        let profiles = Dictionary(uniqueKeysWithValues: UnitProfile.defaults().map { ($0.unit, $0) })
        #expect(profiles[.neuralEngine]!.runs(.matmul, at: .int4))
        #expect(!profiles[.neuralEngine]!.runs(.matmul, at: .fp32))
        #expect(profiles[.gpu]!.runs(.matmul, at: .fp32) && !profiles[.gpu]!.runs(.rmsNorm, at: .fp32))
        #expect(ComputeOperation.allCases.allSatisfy { profiles[.cpu]!.runs($0, at: .fp32) })
        let neural = profiles[.neuralEngine]!.estimate(operations: 1e9, precision: .int8)!
        let cpu = profiles[.cpu]!.estimate(operations: 1e9, precision: .int8)!
        #expect(neural.joules < cpu.joules, "the SIMD route costs less energy per op than the scalar one")
    }
}
