import _CEmberKernels
import EmberCore
import EmberModels
import Foundation

/// The quantized kernels measured against the machine in one run: the read
/// bandwidth of a streaming loop (what a GEMV can at best reach) and fp32
/// BLAS on the same shape (what the quantized kernels must beat).
///
/// Times are medians over rounds; each round repeats the call until it has
/// run ``minimumRoundSeconds``. A quantized call is timed end to end: the
/// activations are quantized and the rows split over threads inside it.
/// GEMV calls rotate over copies of the weights that together span at least
/// ``rotationBytes``, so no call finds its weights in the caches — as when a
/// model larger than the last-level cache decodes a token. (Timing one matrix
/// over and over lets the L3 keep part of it and overstates bandwidth.)
public struct KernelBenchmark: Sendable {
    /// What one format × kind × shape measured.
    public struct Result: Sendable, Codable {
        /// The weight type's name: "q8_0", "q4_k", "f16", …
        public var format: String
        /// "gemv" (M = 1) or "gemm".
        public var kind: String
        /// The shape: M activation rows (1 for gemv), N weight rows, K columns.
        public var m: Int, n: Int, k: Int
        /// Median seconds per call, activation quantization included.
        public var seconds: Double
        /// GGUF weight bytes read per second, GB/s.
        public var weightGBs: Double
        /// 2·M·N·K per second, in billions.
        public var gops: Double
        /// ``weightGBs`` ÷ the measured read bandwidth.
        public var bandwidthRatio: Double
        /// fp32 BLAS (sgemv for M = 1, sgemm otherwise) on the same shape.
        public var sgemmGflops: Double
        /// ``gops`` ÷ ``sgemmGflops``.
        public var sgemmRatio: Double

        enum CodingKeys: String, CodingKey {
            case format, kind, m, n, k, seconds, gops
            case weightGBs = "weight_gbs"
            case bandwidthRatio = "bandwidth_ratio"
            case sgemmGflops = "sgemm_gflops"
            case sgemmRatio = "sgemm_ratio"
        }
    }

    /// Weight shapes N×K: SmolLM2-135M's projections and output layer, and one
    /// bandwidth-bound matrix far larger than any cache.
    public static let standardShapes: [(n: Int, k: Int)] = [
        (576, 576), (1536, 576), (576, 1536), (49152, 576), (16384, 8192),
    ]

    /// The weight types `isa` multiplies with SIMD code (every type `ember bench kernels` measures): F32 too, as
    /// the GPU route runs it — its GEMV is fp32 decoding's share of the read bandwidth; its GEMM is the sgemm baseline.
    public static func simdTypes(_ isa: KernelISA) -> [TensorType] {
        TensorType.table.filter { $0.canDequantize && $0.hasSIMDKernel(isa) }
    }

    /// The few types a quick run measures: the packed 4- and 8-bit ones, Q5_0, and F32 (fp32 decoding's GEMV).
    public static func quickTypes(_ isa: KernelISA) -> [TensorType] {
        [.q4_0, .q4_1, .q8_0, .q5_0, .f32]
    }

    /// The kernel family measured.
    public var isa: KernelISA
    /// Threads per call, for the quantized kernels, the BLAS baseline and the streaming read.
    public var threads: Int
    /// Rounds per measurement; the median is reported.
    public var rounds: Int
    /// Each round repeats the call until it has run at least this many seconds.
    public var minimumRoundSeconds: Double
    /// Bytes of weight copies a GEMV rotates over: at least 8× a 32 MiB L3; `ember bench kernels` sets four times
    /// the last-level cache where that is more (`CacheSizes.coldBytes(atLeast:)` (EmberCore)).
    public var rotationBytes = 256 << 20
    /// The workers every call splits its rows over.
    public let pool: WorkerPool

    /// A benchmark of `isa` on `threads` threads of `pool`, `rounds` rounds of at least `minimumRoundSeconds` each;
    /// counts below 1 become 1.
    public init(isa: KernelISA, pool: WorkerPool, threads: Int = KernelThreads.default, rounds: Int = 5,
                minimumRoundSeconds: Double = 0.05) {
        self.isa = isa
        self.pool = pool
        self.threads = max(1, threads)
        self.rounds = max(1, rounds)
        self.minimumRoundSeconds = minimumRoundSeconds
    }

    /// The streaming-read buffer (512 MiB by default: many times any last-level cache).
    public typealias ReadBuffer = StreamingReadBuffer

    /// One streaming read of `buffer` on ``threads`` threads, GB/s.
    public func readBandwidthSample(_ buffer: ReadBuffer) -> Double {
        buffer.readGBs(isa: isa, threads: threads, pool: pool)
    }

    /// Median streaming-read bandwidth over `rounds` reads of `buffer` (after one warm-up), GB/s.
    public func readBandwidth(_ buffer: ReadBuffer) -> Double {
        _ = readBandwidthSample(buffer)
        return Measurement.median((0..<rounds).map { _ in readBandwidthSample(buffer) })
    }

    /// Median seconds per call of `body`; with `reference`, also the median
    /// over rounds of (bytes ÷ seconds per call) ÷ a reference sample taken
    /// just before each round, so a noisy neighbour hits both alike.
    func time(bytesPerCall: Double = 0, reference: (() -> Double)? = nil,
              _ body: () throws -> Void) rethrows -> (seconds: Double, ratio: Double?) {
        let calls = try Measurement.callsPerRound(lasting: minimumRoundSeconds, body)
        var perCall = [Double](), ratios = [Double]()
        for _ in 0..<rounds {
            let referenceRate = reference?()
            let seconds = try Measurement.seconds { for _ in 0..<calls { try body() } } / Double(calls)
            perCall.append(seconds)
            if let referenceRate { ratios.append(bytesPerCall / seconds / 1e9 / referenceRate) }
        }
        return (Measurement.median(perCall), ratios.isEmpty ? nil : Measurement.median(ratios))
    }

    /// Measures every format and both kinds on one weight shape. GEMV rounds
    /// alternate with streaming reads of `buffer`; the GEMM's bandwidth ratio
    /// uses `readBandwidth`.
    public func measure(n: Int, k: Int, formats: [TensorType] = [.q4_0, .q4_1, .q8_0], gemmRows: Int = 128,
                        buffer: ReadBuffer, readBandwidth: Double) throws -> [Result] {
        var generator = SplitMix64(seed: UInt64(n * 31 + k))
        let weights = try Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 })
        var results = [Result]()
        for (kind, m) in [("gemv", 1), ("gemm", gemmRows)] {
            let x = try Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 })
            var y = try Tensor(zeros: [m, n])
            let flops = 2 * Double(m) * Double(n) * Double(k)
            let sgemmSeconds = try time { try matmul(x, weights, transposeB: true, into: &y, threads: threads, pool: pool) }.seconds
            for format in formats where k % format.blockSize == 0 {
                let (bytes, call) = try kernel(format, weights: weights, generator: &generator, rotating: m == 1)
                let (seconds, pairedRatio) = try time(
                    bytesPerCall: Double(bytes), reference: m == 1 ? { readBandwidthSample(buffer) } : nil
                ) { try call(x, &y) }
                let weightGBs = Double(bytes) / seconds / 1e9
                let gops = flops / seconds / 1e9, sgemmGflops = flops / sgemmSeconds / 1e9
                results.append(Result(
                    format: format.description, kind: kind, m: m, n: n, k: k, seconds: seconds, weightGBs: weightGBs,
                    gops: gops, bandwidthRatio: pairedRatio ?? weightGBs / readBandwidth, sgemmGflops: sgemmGflops,
                    sgemmRatio: gops / sgemmGflops))
            }
        }
        return results
    }

    /// Weights of `format` for `weights`' shape and one timed call over them (rotating over copies when asked):
    /// Q8_0/Q4_0/Q4_1 quantized from `weights` and packed (where `isa` runs them packed); F16/BF16 rounded from them;
    /// the other block types (and Q4_0/Q4_1 where they run interleaved) random blocks with sane scales, bound to
    /// `isa`'s SIMD backend as a model's weights are;
    /// F32 the weights themselves, bound to the GPU route (OpenBLAS).
    private func kernel(_ format: TensorType, weights: Tensor, generator: inout SplitMix64, rotating: Bool) throws
        -> (bytes: Int, call: (Tensor, inout Tensor) throws -> Void) {
        let (n, k) = (weights.shape[0], weights.shape[1])
        let byteCount = format.byteCount(rows: n, columns: k) ?? 0
        let copies = rotating ? min(4096, max(1, (rotationBytes + byteCount - 1) / max(1, byteCount))) : 1
        if format.packedFormat != nil && !format.hasInterleavedKernel(isa) {
            let w = try QuantizedMatrix(quantizing: weights, to: format, isa: isa)
            let rotation = [w] + (1..<copies).map { _ in w.copy() }
            var next = 0
            return (w.byteCount, { x, y in
                try matmul(x, rotation[next], into: &y, isa: isa, threads: threads, pool: pool)
                next = (next + 1) % copies
            })
        }
        var bytes = [UInt8](repeating: 0, count: byteCount)
        if format == .f32 {
            try weights.withUnsafeBufferPointer { values in bytes.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(values)) } }
        } else if let blockFormat = format.blockFormat {
            _ = ek_fill_random_blocks(blockFormat, generator.next(), &bytes, Int64(byteCount / format.blockBytes))
        } else {
            try weights.withUnsafeBufferPointer { values in
                bytes.withUnsafeMutableBytes { out in
                    let halves = out.bindMemory(to: UInt16.self)
                    for index in 0..<(n * k) {
                        halves[index] = format == .bf16 ? UInt16(values[index].bitPattern >> 16) : ek_fp32_to_fp16(values[index])
                    }
                }
            }
        }
        let registry = BackendRegistry.builtIn(isa: isa)
        let bound = try bytes.withUnsafeBytes { raw in
            try (0..<copies).map { _ in
                try registry.bindMatmul(try WeightMatrix(type: format, rows: n, columns: k, copying: raw),
                                        units: format == .f32 ? .gpu : .cpuAndNeuralEngine, pool: pool)
            }
        }
        var next = 0
        return (byteCount, { x, y in
            try bound[next].multiply(x, into: &y, threads: threads, pool: pool)
            next = (next + 1) % copies
        })
    }
}
