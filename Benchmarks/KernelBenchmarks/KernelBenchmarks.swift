// Quantized GEMV and GEMM (Q4_0, Q4_1, Q8_0) next to fp32 BLAS on the same
// shapes. Run with `make bench-suite`; `ember bench kernels` prints the same
// cases as ratios to the measured read bandwidth and to sgemm.

import Benchmark
import EmberCore

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput],
        warmupIterations: 2,
        maxDuration: .seconds(2),
        maxIterations: 2_000)

    let context = ComputeContext()
    let (pool, threads, isa) = (context.pool, context.maximumThreads, context.isa)
    print("kernels \(isa), \(threads) threads; BLAS core \(context.blas.coreName)")

    for (n, k) in [(576, 1536), (16384, 8192)] {
        var generator = SplitMix64(seed: 7)
        let weights = try! Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 })
        for m in [1, 128] {
            let kind = m == 1 ? "gemv" : "gemm"
            let x = try! Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 })
            for format in [TensorType.q4_0, .q4_1, .q8_0] {
                let w = try! QuantizedMatrix(quantizing: weights, to: format, isa: isa)
                Benchmark("\(kind) \(format) \(m)x\(n)x\(k)") { benchmark in
                    var y = try! Tensor(zeros: [m, n])
                    for _ in benchmark.scaledIterations { try! matmul(x, w, into: &y, isa: isa, threads: threads, pool: pool) }
                    blackHole(y)
                }
            }
            Benchmark("\(kind) fp32-blas \(m)x\(n)x\(k)") { benchmark in
                var y = try! Tensor(zeros: [m, n])
                for _ in benchmark.scaledIterations { try! matmul(x, weights, transposeB: true, into: &y, threads: threads, pool: pool) }
                blackHole(y)
            }
        }
    }
}
