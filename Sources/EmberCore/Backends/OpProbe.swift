import _CEmberKernels
import Foundation

/// One op on deterministic inputs, run on a backend: how Ember checks a
/// plugin's op against the scalar reference before placing anything on it,
/// and how calibration times each backend's ops.
///
/// Every output buffer is surrounded by guard values that the call must leave
/// alone, and inputs that the op only reads are compared with a copy after
/// the call, so a backend that writes out of bounds or into its inputs is
/// caught; a plugin's calls go through the fault guard.
struct OpProbe {
    /// What a probe found wrong.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let support: OpSupport
    /// Rows (or items) of the shapes used: a few for checks, more for timing.
    let rows: Int
    /// Weight rows and columns of the matmul probed.
    var matmulShape: (n: Int, k: Int) = (40, 96)
    /// The RoPE mode probed (0 adjacent pairs, 2 NeoX).
    var ropeMode: UInt32 = 0

    /// The probe's shapes: widths whose tails exercise the vector loops.
    static let width = 200, headDim = 64, heads = 3, visible = 37
    private static let guardCount = 16
    private static let guardBits: UInt32 = 0x7fc0_dead

    /// Work units one call does (2 per multiply-add for matmul, elements otherwise): what costs are per.
    var work: Double {
        switch support.op {
        case .matmul: 2 * Double(rows * matmulShape.n * matmulShape.k)
        case .rope: Double(rows * Self.heads * Self.headDim)
        case .attentionScores, .attentionValues: Double(rows * Self.visible * Self.headDim)
        case .attention: 2 * Double(rows * Self.visible * Self.headDim)
        case .sequenceAttention: 2 * Double(rows * Self.visible * Self.visible * Self.headDim)
        case .embedding: 192
        default: Double(rows * Self.width)
        }
    }

    /// What one run gave: the outputs of the last call, and the seconds each call took (the median of the
    /// repetitions' mean, setup excluded).
    struct Outcome {
        let values: [Float]
        let secondsPerCall: Double
    }

    /// The op's outputs on `backend`, or what was wrong with the call. `repetitions` > 1 runs the call that many
    /// times (timing); matmul's rows are split over `threads` workers of `pool`.
    func run(on backend: any Backend, repetitions: Int = 1, pool: WorkerPool? = nil, threads: Int = 1) -> Result<Outcome, Failure> {
        if support.op == .matmul { return runMatmul(on: backend, repetitions: repetitions, pool: pool, threads: threads) }
        if support.op == .quantizeActivations { return .success(Outcome(values: [], secondsPerCall: 0)) } // checked and timed with its matmul
        var generator = SplitMix64(seed: UInt64(support.op.abiValue) * 7919 + UInt64(support.type.id))
        func values(_ count: Int, scale: Float = 2) -> [Float] { (0..<count).map { _ in (generator.nextUnitFloat() - 0.5) * scale } }
        let table = backend.opTable
        let (w, d, h, v) = (Self.width, Self.headDim, Self.heads, Self.visible)
        switch support.op {
        case .embedding:
            let columns = 256 // a whole number of every block type's elements
            let source = values(columns)
            guard let row = try? Self.row(source, as: support.type) else {
                return .failure(Failure(description: "Ember cannot make \(support.type) rows to check embedding with"))
            }
            return call(table, outputs: columns, inputs: [], repeating: repetitions) { out, _ in
                table.embedding.map { f in
                    table.guarded ? ek_guarded_embedding(f, table.context, support.type.id, row.bytes.baseAddress, Int64(columns), out)
                        : f(table.context, support.type.id, row.bytes.baseAddress, Int64(columns), out)
                }
            }
        case .rmsNorm:
            return call(table, outputs: rows * w, inputs: [values(rows * w, scale: 10), values(w)], repeating: repetitions) { out, i in
                table.rmsNorm.map { f in
                    table.guarded ? ek_guarded_rms_norm(f, table.context, i[0], i[1], out, Int64(rows), Int64(w), 1e-5)
                        : f(table.context, i[0], i[1], out, Int64(rows), Int64(w), 1e-5)
                }
            }
        case .layerNorm:
            return call(table, outputs: rows * w, inputs: [values(rows * w, scale: 10), values(w), values(w)], repeating: repetitions) { out, i in
                table.layerNorm.map { f in
                    table.guarded ? ek_guarded_layer_norm(f, table.context, i[0], i[1], i[2], out, Int64(rows), Int64(w), 1e-5)
                        : f(table.context, i[0], i[1], i[2], out, Int64(rows), Int64(w), 1e-5)
                }
            }
        case .rope:
            var angles = [Float](repeating: 0, count: d)
            ek_rope_table(&angles, Int64(d / 2), 11, pow(10000, -2 / Float(d)))
            return call(table, outputs: rows * h * d, initial: values(rows * h * d), inputs: [angles], repeating: repetitions) { out, i in
                table.rope.map { f in
                    table.guarded ? ek_guarded_rope(f, table.context, out, Int64(rows * h), Int64(d), i[0], ropeMode)
                        : f(table.context, out, Int64(rows * h), Int64(d), i[0], ropeMode)
                }
            }
        case .attentionScores, .attentionValues:
            let half = support.type == .f16
            let cache = values(v * d * rows)
            let cacheBytes: [Float] = half ? Self.packHalves(cache) : cache
            let query = support.op == .attentionScores ? values(d) : Self.normalized(values(v))
            return call(table, outputs: support.op == .attentionScores ? v : d, inputs: [query, cacheBytes], repeating: repetitions) { out, i in
                let stride = Int64(d * rows)
                if support.op == .attentionScores {
                    return table.attentionScores.map { f in
                        table.guarded
                            ? ek_guarded_attention_scores(f, table.context, support.type.id, i[0], i[1], stride, Int64(v), Int64(d), 0.125, out)
                            : f(table.context, support.type.id, i[0], i[1], stride, Int64(v), Int64(d), 0.125, out)
                    }
                }
                return table.attentionValues.map { f in
                    table.guarded
                        ? ek_guarded_attention_values(f, table.context, support.type.id, i[0], i[1], stride, Int64(v), Int64(d), out)
                        : f(table.context, support.type.id, i[0], i[1], stride, Int64(v), Int64(d), out)
                }
            }
        case .attention:
            let half = support.type == .f16
            let keys = values(v * d * rows), cached = values(v * d * rows)
            let (keyBytes, valueBytes) = half ? (Self.packHalves(keys), Self.packHalves(cached)) : (keys, cached)
            return call(table, outputs: d, inputs: [values(d, scale: 6), keyBytes, valueBytes], repeating: repetitions) { out, i in
                let stride = Int64(d * rows)
                return table.attention.map { f in
                    table.guarded
                        ? ek_guarded_attention(f, table.context, support.type.id, i[0], i[1], i[2], stride, Int64(v), Int64(d), 0.125, out)
                        : f(table.context, support.type.id, i[0], i[1], i[2], stride, Int64(v), Int64(d), 0.125, out)
                }
            }
        case .sequenceAttention:
            // `rows` heads of a sequence of `visible` positions, side by side in each row as an encoder's are.
            let half = support.type == .f16
            let stride = d * rows, element = half ? 2 : 4
            let keys = values(v * stride), cached = values(v * stride)
            let (keyBytes, valueBytes) = half ? (Self.packHalves(keys), Self.packHalves(cached)) : (keys, cached)
            return call(table, outputs: v * stride, inputs: [values(v * stride, scale: 6), keyBytes, valueBytes],
                        repeating: repetitions) { out, i in
                var status: Int32? = 0
                for head in 0..<rows where status == 0 {
                    let (k, x) = (UnsafeRawPointer(i[1]) + head * d * element, UnsafeRawPointer(i[2]) + head * d * element)
                    status = table.sequenceAttention.map { f in
                        table.guarded
                            ? ek_guarded_sequence_attention(f, table.context, support.type.id, i[0] + head * d, k, x, Int64(stride),
                                                            Int64(v), Int64(d), 0.125, out + head * d)
                            : f(table.context, support.type.id, i[0] + head * d, k, x, Int64(stride), Int64(v), Int64(d), 0.125,
                                out + head * d)
                    }
                }
                return status
            }
        case .softmax:
            return call(table, outputs: rows * w, initial: values(rows * w, scale: 20), inputs: [], repeating: repetitions) { out, _ in
                table.softmax.map { f in
                    table.guarded ? ek_guarded_softmax(f, table.context, out, Int64(rows), Int64(w)) : f(table.context, out, Int64(rows), Int64(w))
                }
            }
        case .silu, .gelu:
            let function = support.op == .silu ? table.silu : table.gelu
            return call(table, outputs: rows * w, initial: values(rows * w, scale: 12), inputs: [], repeating: repetitions) { out, _ in
                function.map { f in
                    table.guarded ? ek_guarded_unary(f, table.context, out, Int64(rows * w)) : f(table.context, out, Int64(rows * w))
                }
            }
        case .swiglu, .geglu:
            let function = support.op == .swiglu ? table.swiglu : table.geglu
            return call(table, outputs: rows * w, inputs: [values(rows * w, scale: 12), values(rows * w)], repeating: repetitions) { out, i in
                function.map { f in
                    table.guarded ? ek_guarded_swiglu(f, table.context, i[0], i[1], out, Int64(rows * w))
                        : f(table.context, i[0], i[1], out, Int64(rows * w))
                }
            }
        case .add, .mul:
            let function = support.op == .add ? table.add : table.mul
            return call(table, outputs: rows * w, initial: values(rows * w), inputs: [values(rows * w)], repeating: repetitions) { out, i in
                function.map { f in
                    table.guarded ? ek_guarded_binary(f, table.context, out, i[0], Int64(rows * w)) : f(table.context, out, i[0], Int64(rows * w))
                }
            }
        case .matmul, .quantizeActivations:
            return .success(Outcome(values: [], secondsPerCall: 0))
        }
    }

    /// One row of `values` in `type`.
    static func row(_ values: [Float], as type: TensorType) throws -> WeightMatrix { try matrix(values, rows: 1, as: type) }

    /// `values` as `rows` rows of `type`: made by Ember for f32, f16, bf16, Q8_0, Q4_0 and Q4_1; the block types Ember
    /// cannot quantize into get seeded random blocks of the same shape (the probe compares backends on the same
    /// weights, whatever they are).
    static func matrix(_ values: [Float], rows: Int, as type: TensorType) throws -> WeightMatrix {
        let columns = values.count / max(rows, 1)
        if type.canQuantize { return try WeightMatrix(try Tensor(shape: [rows, columns], values: values), as: type) }
        guard let format = type.blockFormat else {
            throw KernelError.invalidArgument(argument: "type", found: "\(type)", expected: "a type Ember can write")
        }
        guard let bytes = type.byteCount(rows: rows, columns: columns) else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(columns)", expected: "a multiple of \(type.blockSize)")
        }
        var blocks = [UInt8](repeating: 0, count: bytes)
        try KernelError.check(ek_fill_random_blocks(format, UInt64(values.count) &* 31 &+ UInt64(type.id), &blocks,
                                                    Int64(bytes / type.blockBytes)),
                              kernel: "ek_fill_random_blocks", argument: { _ in "type" })
        return try blocks.withUnsafeBytes { try WeightMatrix(type: type, rows: rows, columns: columns, copying: $0) }
    }

    /// fp32 values stored as fp16 bit patterns, two per float slot (the buffer a half-precision cache is).
    private static func packHalves(_ values: [Float]) -> [Float] {
        let halves = values.map { ek_fp32_to_fp16($0) } + (values.count.isMultiple(of: 2) ? [] : [0])
        return halves.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    private static func normalized(_ values: [Float]) -> [Float] {
        let positive = values.map { abs($0) + 0.01 }
        let sum = positive.reduce(0, +)
        return positive.map { $0 / sum }
    }

    /// Calls `body` with a guarded output buffer (starting as `initial` or zeros) and the inputs; checks the
    /// status, the guard values and that the inputs are unchanged.
    private func call(_ table: OpTable, outputs count: Int, initial: [Float]? = nil, inputs: [[Float]], repeating repetitions: Int,
                      _ body: (UnsafeMutablePointer<Float>, [UnsafePointer<Float>]) -> Int32?) -> Result<Outcome, Failure> {
        let guardCount = Self.guardCount
        var buffer = [Float](repeating: Float(bitPattern: Self.guardBits), count: count + 2 * guardCount)
        let start = initial ?? [Float](repeating: 0, count: count)
        var copies = inputs
        var status: Int32? = 0
        var seconds = 0.0
        buffer.withUnsafeMutableBufferPointer { out in
            Self.withPointers(&copies) { pointers in
                let output = out.baseAddress! + guardCount
                seconds = Measurement.seconds {
                    for _ in 0..<max(1, repetitions) {
                        start.withUnsafeBufferPointer { output.update(from: $0.baseAddress!, count: count) }
                        status = body(output, pointers)
                        if status != 0 { break }
                    }
                }
            }
        }
        guard let status else { return .failure(Failure(description: "declares \(support) but gives no function for it")) }
        if Int(status) == Int(EK_GUARD_CRASHED) { return .failure(Failure(description: "\(support) crashed with \(signalName(ek_guard_last_signal()))")) }
        guard status == 0 else { return .failure(Failure(description: "\(support) returned \(status)")) }
        let intact = (0..<guardCount).allSatisfy { buffer[$0].bitPattern == Self.guardBits && buffer[guardCount + count + $0].bitPattern == Self.guardBits }
        guard intact else { return .failure(Failure(description: "\(support) wrote outside its \(count)-value output")) }
        guard copies == inputs else { return .failure(Failure(description: "\(support) changed an input it may only read")) }
        return .success(Outcome(values: Array(buffer[guardCount..<(guardCount + count)]), secondsPerCall: seconds / Double(max(1, repetitions))))
    }

    private static func withPointers<R>(_ arrays: inout [[Float]], _ body: ([UnsafePointer<Float>]) -> R) -> R {
        var pointers: [UnsafePointer<Float>] = []
        func next(_ index: Int) -> R {
            if index == arrays.count { return body(pointers) }
            return arrays[index].withUnsafeBufferPointer { buffer in
                pointers.append(buffer.baseAddress!)
                return next(index + 1)
            }
        }
        return next(0)
    }

    private func runMatmul(on backend: any Backend, repetitions: Int, pool: WorkerPool?, threads: Int) -> Result<Outcome, Failure> {
        prepareMatmul(on: backend).flatMap { $0.run(repetitions: repetitions, pool: pool, threads: threads) }
    }

    /// A matmul probe's weights made and bound on a backend once, with its input and output, so that calibration's
    /// rounds time the calls alone (making and packing the weights took longer than timing them) and the warm-up
    /// call runs once.
    final class PreparedMatmul {
        private let support: OpSupport
        private let bound: BoundMatmul
        private let input: Tensor
        private var output: Tensor
        private var warmed = false

        fileprivate init(support: OpSupport, bound: BoundMatmul, input: Tensor, output: Tensor) {
            (self.support, self.bound, self.input, self.output) = (support, bound, input, output)
        }

        /// `repetitions` calls (after one warm-up call the first time: caches, a plugin's first call); the outputs of
        /// the last and the seconds each call took.
        func run(repetitions: Int, pool: WorkerPool?, threads: Int) -> Result<Outcome, Failure> {
            do {
                if !warmed {
                    try bound.multiply(input, into: &output, threads: threads, pool: pool)
                    warmed = true
                }
                let seconds = try Measurement.seconds {
                    for _ in 0..<max(1, repetitions) { try bound.multiply(input, into: &output, threads: threads, pool: pool) }
                }
                return .success(Outcome(values: try output.scalars(), secondsPerCall: seconds / Double(max(1, repetitions))))
            } catch {
                return .failure(Failure(description: "matmul/\(support.type): \(error)"))
            }
        }
    }

    /// This probe's matmul weights made and bound on `backend`, ready to be called.
    func prepareMatmul(on backend: any Backend) -> Result<PreparedMatmul, Failure> {
        let (n, k) = matmulShape
        var generator = SplitMix64(seed: 4242 + UInt64(support.type.id))
        let x = (0..<(rows * k)).map { _ in generator.nextUnitFloat() * 2 - 1 }
        let w = (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 }
        guard let weights = try? Self.matrix(w, rows: n, as: support.type) else {
            return .failure(Failure(description: "Ember cannot make \(support.type) weights to check matmul with"))
        }
        let placement = Placement(op: .matmul, type: support.type, unit: backend.descriptor.unit, backend: backend.descriptor.name,
                                  plugin: backend.descriptor.source.isPlugin, fallbackReason: nil)
        do {
            let bound = try backend.bindMatmul(weights, placement: placement, pool: nil)
            return .success(PreparedMatmul(support: support, bound: bound, input: try Tensor(shape: [rows, k], values: x),
                                           output: try Tensor(zeros: [rows, n])))
        } catch {
            return .failure(Failure(description: "matmul/\(support.type): \(error)"))
        }
    }

    /// Whether `got` matches the reference's `expected` for this op: close in value (a plugin may round
    /// differently), both finite where the reference is.
    func agrees(_ got: [Float], with expected: [Float]) -> Bool {
        guard got.count == expected.count else { return false }
        let scale = Double(expected.map { abs($0) }.max() ?? 0)
        let (relative, absolute): (Double, Double) = switch support.op {
        case .matmul: (0.02, 0.02 * scale + 1e-3)           // activations may be quantized differently
        case .attentionScores, .attentionValues, .attention, .sequenceAttention: (2e-3, 1e-3)
        default: (1e-3, 1e-5)
        }
        return zip(got, expected).allSatisfy { a, b in
            guard b.isFinite else { return true }
            guard a.isFinite else { return false }
            return abs(Double(a) - Double(b)) <= absolute + relative * abs(Double(b))
        }
    }
}
