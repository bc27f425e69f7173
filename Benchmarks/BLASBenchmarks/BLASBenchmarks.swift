// fp32 matmul: Ember's `matmul` and a raw `cblas_sgemm` on the same buffers,
// for each shape `ember bench blas` measures. Run with `make bench-suite`
// (package-benchmark reports percentiles, allocations and throughput; the
// Ember/raw ratio for a quick read is `ember bench blas`).

import Benchmark
import CBLAS
import EmberBenchmarks
import EmberCore

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 2,
        maxDuration: .seconds(2),
        maxIterations: 1_000)

    let context = ComputeContext()
    let (pool, threads) = (context.pool, context.maximumThreads)
    let library = context.blas
    print("BLAS core \(library.coreName) (\(library.coreLevel?.description ?? "level unknown")), \(library.threads) threads")

    for testCase in MatmulComparison.standardCases {
        let label = "\(testCase.m)x\(testCase.n)x\(testCase.k)\(testCase.transposeB ? "-Bt" : "")"
        var generator = SplitMix64(seed: 42)
        func random(_ shape: [Int]) -> Tensor {
            try! Tensor(shape: shape, values: (0..<shape.reduce(1, *)).map { _ in generator.nextUnitFloat() - 0.5 })
        }
        let a = random([testCase.m, testCase.k])
        let b = random(testCase.transposeB ? [testCase.n, testCase.k] : [testCase.k, testCase.n])

        Benchmark("matmul ember \(label)") { benchmark in
            var c = try! Tensor(zeros: [testCase.m, testCase.n])
            for _ in benchmark.scaledIterations {
                try! matmul(a, b, transposeB: testCase.transposeB, into: &c, threads: threads, pool: pool)
            }
            blackHole(c)
        }

        Benchmark("matmul raw-sgemm \(label)") { benchmark in
            let (m, n, k) = (Int32(testCase.m), Int32(testCase.n), Int32(testCase.k))
            var c = try! Tensor(zeros: [testCase.m, testCase.n])
            // The same tensors' buffers, handed straight to cblas_sgemm.
            try! a.withUnsafeBufferPointer { pa in
                try b.withUnsafeBufferPointer { pb in
                    try c.withUnsafeMutableBufferPointer { pc in
                        for _ in benchmark.scaledIterations {
                            cblas_sgemm(
                                CblasRowMajor, CblasNoTrans, testCase.transposeB ? CblasTrans : CblasNoTrans,
                                m, n, k, 1, pa.baseAddress, k, pb.baseAddress, testCase.transposeB ? k : n,
                                0, pc.baseAddress, n)
                        }
                    }
                }
            }
            blackHole(c)
        }
    }
}
