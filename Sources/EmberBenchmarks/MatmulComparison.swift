import CBLAS
import EmberCore
import EmberModels
import Foundation

/// Ember's fp32 `matmul(_:_:transposeB:into:accumulate:threads:pool:)` against a raw
/// `cblas_sgemm` call on the same buffers, measured in one run.
///
/// For every shape the two sides are timed in alternating rounds (the order
/// flips each round, so drift and a noisy neighbour hit both alike); each
/// round times enough calls to last ``minimumRoundSeconds``. Reported figures
/// are medians over rounds, and the ratio is the median of the per-round
/// ratios Ember / raw (≥ 1 means Ember is at least as fast).
///
/// Both sides get the same number of threads: Ember splits the product over
/// its `WorkerPool` with OpenBLAS at one thread; the raw call runs with
/// OpenBLAS's own threading set to that many threads for its rounds.
public struct MatmulComparison: Sendable {
    /// One product to measure.
    public struct Case: Sendable, Equatable {
        /// The product Y[M×N] = A[M×K]·B.
        public var m: Int, n: Int, k: Int
        /// B is used transposed ([N, K], the layout of a weight matrix).
        public var transposeB: Bool
        /// The product of A[m×k] and B, stored [k×n], or [n×k] with `transposeB`.
        public init(m: Int, n: Int, k: Int, transposeB: Bool = false) {
            (self.m, self.n, self.k, self.transposeB) = (m, n, k, transposeB)
        }
    }

    /// What one shape measured.
    public struct Result: Sendable, Codable, Equatable {
        /// The shape measured: Y[M×N] = A[M×K]·B.
        public var m: Int, n: Int, k: Int
        /// Whether B was [N, K] and used transposed.
        public var transposeB: Bool
        /// The BLAS routine Ember's matmul called ("sgemm" or "sgemv").
        public var emberRoute: String
        /// Median GFLOP/s (2·M·N·K per call) of Ember's matmul.
        public var emberGflops: Double
        /// Median GFLOP/s (2·M·N·K per call) of the raw `cblas_sgemm` call.
        public var rawGflops: Double
        /// Median over rounds of (Ember GFLOP/s ÷ raw sgemm GFLOP/s).
        public var ratio: Double
        /// Extra time per call Ember's matmul took over the raw call, from the
        /// medians (argument checks, routing); negative when Ember was faster.
        public var overheadNanoseconds: Double
        /// Rounds timed on each side.
        public var rounds: Int
        /// Calls per round on each side, sized from the raw call.
        public var callsPerRound: Int

        enum CodingKeys: String, CodingKey {
            case m, n, k
            case transposeB = "transpose_b"
            case emberRoute = "ember_route"
            case emberGflops = "ember_gflops"
            case rawGflops = "raw_gflops"
            case ratio, rounds
            case overheadNanoseconds = "overhead_ns_per_call"
            case callsPerRound = "calls_per_round"
        }
    }

    /// Square sizes 64…2048 (B as [K, N]) and SmolLM2-135M's projections
    /// (M tokens × N outputs × K inputs, weights as [N, K]).
    public static let standardCases: [Case] =
        [64, 128, 256, 512, 1024, 2048].map { Case(m: $0, n: $0, k: $0) } + [
            Case(m: 1, n: 576, k: 1536, transposeB: true),
            Case(m: 128, n: 576, k: 1536, transposeB: true),
            Case(m: 128, n: 1536, k: 576, transposeB: true),
        ]

    /// Rounds per shape; the median of these is reported.
    public var rounds: Int
    /// Each round repeats the call until it has run at least this long.
    public var minimumRoundSeconds: Double
    /// Threads on both sides.
    public var threads: Int
    /// The workers Ember's side splits its products over.
    public let pool: WorkerPool
    /// Pause after a raw round while OpenBLAS's spinning threads go to sleep.
    static let openBLASSettleSeconds = 0.15

    /// A comparison of `rounds` rounds of at least `minimumRoundSeconds` each, on `threads` threads per side (Ember's
    /// from `pool`); counts below 1 become 1.
    public init(rounds: Int = 7, minimumRoundSeconds: Double = 0.05, threads: Int = KernelThreads.default, pool: WorkerPool) {
        self.pool = pool
        self.rounds = max(1, rounds)
        self.minimumRoundSeconds = minimumRoundSeconds
        self.threads = max(1, threads)
    }

    /// Measures one shape.
    public func measure(_ testCase: Case) throws -> Result {
        var generator = SplitMix64(seed: 0x5eed)
        func random(_ shape: [Int]) throws -> Tensor {
            try Tensor(shape: shape, values: (0..<shape.reduce(1, *)).map { _ in generator.nextUnitFloat() - 0.5 })
        }
        let a = try random([testCase.m, testCase.k])
        let b = try random(testCase.transposeB ? [testCase.n, testCase.k] : [testCase.k, testCase.n])
        var c = try Tensor(zeros: [testCase.m, testCase.n])
        let shape = try MatmulShape(a, b, transposeB: testCase.transposeB)
        let (m, n, k) = (Int32(testCase.m), Int32(testCase.n), Int32(testCase.k))
        let ldb = testCase.transposeB ? k : n
        let pa = a.baseAddress.assumingMemoryBound(to: Float.self)
        let pb = b.baseAddress.assumingMemoryBound(to: Float.self)
        let pc = c.baseAddress.assumingMemoryBound(to: Float.self)

        let threads = self.threads
        let pool = self.pool
        let ember = { try matmul(a, b, transposeB: testCase.transposeB, into: &c, threads: threads, pool: pool) }
        let rawCall = {
            cblas_sgemm(
                CblasRowMajor, CblasNoTrans, testCase.transposeB ? CblasTrans : CblasNoTrans,
                m, n, k, 1, pa, k, pb, ldb, 0, pc, n)
        }
        // OpenBLAS threads for the raw side's rounds only; Ember's own calls need it at one.
        // OpenBLAS's threads busy-wait ~2²⁸ cycles after a call before sleeping; a pause
        // after each raw round keeps them from taking cores from Ember's next round.
        func withRawThreads<R>(_ body: () throws -> R) rethrows -> R {
            openblas_set_num_threads(Int32(threads))
            defer {
                openblas_set_num_threads(1)
                if threads > 1 { Thread.sleep(forTimeInterval: Self.openBLASSettleSeconds) }
            }
            return try body()
        }
        // Warm up both (page faults, OpenBLAS thread start-up), then size a round.
        try ember()
        let calls = withRawThreads { Measurement.callsPerRound(lasting: minimumRoundSeconds, rawCall) }

        var emberRates = [Double](), rawRates = [Double](), ratios = [Double]()
        for round in 0..<rounds {
            var emberSeconds = 0.0, rawSeconds = 0.0
            let timeEmber = { emberSeconds = try Measurement.seconds { for _ in 0..<calls { try ember() } } }
            let timeRaw = { rawSeconds = withRawThreads { Measurement.seconds { for _ in 0..<calls { rawCall() } } } }
            if round.isMultiple(of: 2) { try timeEmber(); timeRaw() } else { timeRaw(); try timeEmber() }
            let emberRate = shape.flops * Double(calls) / emberSeconds / 1e9
            let rawRate = shape.flops * Double(calls) / rawSeconds / 1e9
            emberRates.append(emberRate)
            rawRates.append(rawRate)
            ratios.append(emberRate / rawRate)
        }
        let emberGflops = Measurement.median(emberRates), rawGflops = Measurement.median(rawRates)
        return Result(
            m: testCase.m, n: testCase.n, k: testCase.k, transposeB: testCase.transposeB,
            emberRoute: (testCase.m == 1 || testCase.n == 1) ? "sgemv" : "sgemm",
            emberGflops: emberGflops, rawGflops: rawGflops, ratio: Measurement.median(ratios),
            overheadNanoseconds: shape.flops / emberGflops - shape.flops / rawGflops,
            rounds: rounds, callsPerRound: calls)
    }
}
