import CBLAS
import _CEmberKernels
import Foundation

/// How a matmul wants its activations prepared (quantized to the blocks its
/// kernel reads) — Ember's SIMD kernels' Q8 blocks, or a plugin's own. Equal
/// preparations make equal bytes, so one preparation serves every matmul of a
/// stage that shares it. Bytes are laid out row after row (a row range can be
/// prepared on its own, at the offset of its first row). A class for the reason ``BoundMatmul`` is one.
public final class ActivationPreparation: Hashable, Sendable {
    /// Equal keys: equal bytes.
    let key: String
    private let bytes: @Sendable (_ rows: Int, _ columns: Int) -> Int
    private let quantize: @Sendable (_ x: UnsafePointer<Float>, _ rows: Int, _ columns: Int, _ out: UnsafeMutableRawPointer,
                                     _ capacity: Int) -> Int32

    /// Ember's Q8 activation blocks for weights of `type`, made by `isa`'s code: per 32 (Q8_1-style, with d·Σq, for
    /// Q4_1 and Q5_1; Q8_0-style otherwise) or per 256 with sums of 16 for the K-quants and IQ4_XS.
    static func ember(type: TensorType, isa: KernelISA) -> ActivationPreparation {
        let (format, isaValue) = (type.blockFormat ?? EK_FORMAT_Q8_0, isa.cValue)
        let kind = ek_format_super_activations(format) ? "q8_k" : (type == .q4_1 || type == .q5_1) ? "q8_1" : "q8_0"
        return ActivationPreparation(
            key: "ember:\(isa):\(kind)",
            bytes: { rows, columns in ek_row_activation_size(format, Int64(rows), Int64(columns)) },
            quantize: { x, rows, columns, out, capacity in
                Int32(bitPattern: ek_quantize_row_activations(isaValue, format, x, Int64(rows), Int64(columns), out,
                                                              max(0, capacity)).rawValue)
            })
    }

    /// Ember's Q8 activation blocks with one scale per row (`ek_quantize_activations_row_scaled`), each column first
    /// multiplied by its entry of `columnScales` when given, for Q8_0 weights made with one scale per row
    /// (``WeightMatrix/scalePerRow``). Matmuls whose weights share one `columnScales` tensor share the preparation.
    static func emberRowScaled(isa: KernelISA, columnScales: Tensor?) -> ActivationPreparation {
        let isaValue = isa.cValue
        let scales = UncheckedSendable(columnScales) // kept alive by the closure
        let width = columnScales?.shape.last
        let identity = columnScales.map { "\(ObjectIdentifier($0.storage).hashValue)" } ?? "none"
        return ActivationPreparation(
            key: "ember:\(isa):q8_0-row:\(identity)",
            bytes: { rows, columns in ek_activation_size(Int64(rows), Int64(columns)) },
            quantize: { x, rows, columns, out, capacity in
                guard width == nil || width == columns else { return Int32(bitPattern: EK_ERR_SHAPE.rawValue) }
                let columnScales = scales.value.map { UnsafePointer($0.baseAddress.assumingMemoryBound(to: Float.self)) }
                return Int32(bitPattern: ek_quantize_activations_row_scaled(isaValue, x, Int64(rows), Int64(columns), columnScales,
                                                                            out.assumingMemoryBound(to: ek_block_q8_act.self),
                                                                            max(0, capacity)).rawValue)
            })
    }

    /// A plugin backend's own preparation for weights of `type`. Its row size (checked linear at load) is asked once
    /// per width and kept; while the backend is disabled nothing is called (its matmul then prepares the reference's
    /// activations itself), and a failing call disables it.
    static func plugin(backend: String, type: TensorType, table: ember_backend, health: BackendHealth,
                       serializer: NSLock?) -> ActivationPreparation? {
        guard let size = table.activation_bytes, let quantize = table.quantize_activations else { return nil }
        let context = UncheckedSendable(table.context)
        let rowBytes = RowBytesCache { columns in
            health.isDisabled ? 0 : ek_guarded_activation_bytes(size, context.value, type.id, 1, Int64(columns))
        }
        return ActivationPreparation(
            key: "plugin:\(backend):\(type.id)",
            bytes: { rows, columns in
                let perRow = rowBytes.bytes(columns: columns)
                return rows * (perRow > 0 ? perRow : columns * 4) // while disabled: any consistent size, nothing is written
            },
            quantize: { x, rows, columns, out, capacity in
                guard !health.isDisabled else { return 0 }
                let call = { ek_guarded_quantize_activations(quantize, context.value, type.id, x, Int64(rows), Int64(columns), out, capacity) }
                let status = serializer.map { $0.withLock(call) } ?? call()
                if status != 0 {
                    health.disable(Int(status) == Int(EK_GUARD_CRASHED) ? "quantize_activations crashed with \(signalName(ek_guard_last_signal()))"
                                                                          : "quantize_activations returned \(status)")
                }
                return 0 // the matmul sees the backend disabled and redoes its rows with the reference
            })
    }

    private init(key: String, bytes: @escaping @Sendable (Int, Int) -> Int,
                 quantize: @escaping @Sendable (UnsafePointer<Float>, Int, Int, UnsafeMutableRawPointer, Int) -> Int32) {
        self.key = key
        self.bytes = bytes
        self.quantize = quantize
    }

    /// Bytes of prepared activations for `rows` rows of `columns`.
    public func byteCount(rows: Int, columns: Int) -> Int { bytes(rows, columns) }

    /// Prepares `rows` fp32 rows of `columns` at `x` into `out`, which holds `capacity` bytes; 0 is success.
    package func prepare(_ x: UnsafePointer<Float>, rows: Int, columns: Int, into out: UnsafeMutableRawPointer, capacity: Int) -> Int32 {
        quantize(x, rows, columns, out, capacity)
    }

    /// Equal when the keys are.
    public static func == (lhs: ActivationPreparation, rhs: ActivationPreparation) -> Bool { lhs.key == rhs.key }
    /// Hashes the key.
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
}

/// A plugin's activation bytes per row, for each width asked, asked once.
final class RowBytesCache: @unchecked Sendable {
    private let lock = NSLock()
    private var known: [Int: Int] = [:]
    private let ask: (Int) -> Int

    init(ask: @escaping (Int) -> Int) { self.ask = ask }

    func bytes(columns: Int) -> Int {
        lock.withLock {
            if let value = known[columns] { return value }
            let value = ask(columns)
            if value > 0 { known[columns] = value }
            return value
        }
    }
}

/// A matmul kernel bound to one weight matrix, for callers that split the
/// work themselves: activations are prepared once per input, then any
/// thread computes any range of weight rows, Y[m × rows] = X·Wᵀ (row stride
/// `rows`). A model's forward pass calls these from inside a
/// ``WorkerPool/region(threads:qos:barrierSpinNanoseconds:_:)``. Binding does the per-weight work
/// once (packing, dequantizing, a plugin's `bind_weights`), so a call costs only the kernel.
///
/// A class, immutable: a copy is one retain, where a struct of its references (placement names, preparation,
/// kernel, owner) took six — and a decode step's copies happen on every thread at once, on the same counts, which
/// then bounce between the cores (with ``ActivationPreparation`` a class too and the stage tables out of arrays,
/// retains and releases fell from 5.5 % to 2.4 % of a SmolLM2 int4 decode's samples on a Zen 4).
public final class BoundMatmul: @unchecked Sendable {
    /// The kernel call: x (and its preparation), m rows, into y, over a range of weight rows; 0 is success.
    public typealias Body = (_ x: UnsafePointer<Float>, _ prepared: UnsafeRawPointer?, _ m: Int,
                             _ y: UnsafeMutablePointer<Float>, _ rows: Range<Int>) -> Int32

    /// Where the registry placed this matmul: unit, backend and why.
    public let placement: Placement
    /// Weight rows N: the columns of Y and the bound of the row ranges ``run(_:prepared:m:into:rows:)`` takes.
    public let rows: Int
    /// Weight columns K: the length of each activation row.
    public let columns: Int
    /// What the kernel reads besides fp32 x; nil: fp32 x only.
    public let preparation: ActivationPreparation?
    /// Whether threads may split the rows; when false one thread runs all of them.
    public let splittable: Bool
    let body: Body
    /// Keeps the bound variant (packed or fp32 weights, a plugin's binding) alive.
    let owner: AnyObject

    /// Wraps `body`, a kernel bound to one `rows` × `columns` weight matrix; `owner` keeps what `body` reads alive.
    public init(placement: Placement, rows: Int, columns: Int, preparation: ActivationPreparation?, splittable: Bool,
                owner: AnyObject, body: @escaping Body) {
        self.placement = placement
        self.rows = rows
        self.columns = columns
        self.preparation = preparation
        self.splittable = splittable
        self.owner = owner
        self.body = body
    }

    /// Rows `range` of Y[m × rows] from x (and its preparation, when the kernel has one).
    @inline(__always)
    public func run(_ x: UnsafePointer<Float>, prepared: UnsafeRawPointer?, m: Int, into y: UnsafeMutablePointer<Float>,
                    rows range: Range<Int>) -> Int32 {
        range.isEmpty ? 0 : body(x, prepared, m, y, range)
    }

    /// The error for a non-zero status from ``run(_:prepared:m:into:rows:)``.
    public func failure(_ status: Int32) -> KernelError {
        .rejected(kernel: placement.backend, argument: "matmul \(rows)×\(columns)", status: "status \(status)")
    }

    /// Y[M×N] = X·Wᵀ for a whole `x` [M, K] into `y` [M, N], the rows split over `threads` workers of `pool`
    /// at `qos` (one thread without a pool): the bound kernel outside a forward pass.
    public func multiply(_ x: Tensor, into y: inout Tensor, threads: Int = 1, pool: WorkerPool? = nil, qos: QoSClass = .current) throws {
        guard x.dtype == .float32, x.rank == 2, x.shape[1] == columns else {
            throw TensorError.shapeMismatch(argument: "x", expected: "fp32 [M, \(columns)]", found: x.shape)
        }
        let m = x.shape[0]
        guard y.dtype == .float32, y.shape == [m, rows] else {
            throw TensorError.shapeMismatch(argument: "y", expected: "fp32 [\(m), \(rows)]", found: y.shape)
        }
        try y.makeWritable(argument: "y")
        guard m > 0, rows > 0 else { return }
        let xBase = x.baseAddress.assumingMemoryBound(to: Float.self), yBase = y.baseAddress.assumingMemoryBound(to: Float.self)
        var prepared: UnsafeMutableRawPointer?
        defer { prepared?.deallocate() }
        if let preparation {
            let bytes = preparation.byteCount(rows: m, columns: columns)
            guard bytes > 0 else { throw failure(-1) }
            prepared = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
            let status = preparation.prepare(xBase, rows: m, columns: columns, into: prepared!, capacity: bytes)
            guard status == 0 else { throw failure(status) }
        }
        let status = StatusCollector()
        let input = UnsafeRawPointer(prepared)
        let parts = splittable ? max(1, threads) : 1
        RowSplit.run(rows: rows, threads: parts, alignment: 16, workPerRow: m * columns, qos: qos, pool: pool) { range in
            let code = run(xBase, prepared: input, m: m, into: yBase, rows: range)
            if code != 0 { status.record(code) }
        }
        if status.firstCode != 0 { throw failure(status.firstCode) }
    }
}

/// The weights a binding keeps alive, and the C struct the SIMD kernels read.
final class PackedBinding: @unchecked Sendable {
    let matrix: QuantizedMatrix
    let cMatrix: UnsafeMutablePointer<ek_packed_matrix>

    init(_ matrix: QuantizedMatrix) {
        self.matrix = matrix
        cMatrix = .allocate(capacity: 1)
        cMatrix.initialize(to: matrix.cMatrix)
    }

    deinit { cMatrix.deallocate() }
}

extension BoundMatmul {
    /// The SIMD (or scalar reference) kernels of `isa` on the packed weights.
    static func packed(_ w: WeightMatrix, isa: KernelISA, placement: Placement) throws -> BoundMatmul {
        let binding = PackedBinding(try w.packed())
        let (isaValue, matrix, n) = (isa.cValue, binding.cMatrix, Int64(w.rows))
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns,
                           preparation: w.scalePerRow ? .emberRowScaled(isa: isa, columnScales: w.activationColumnScales) : .ember(type: w.type, isa: isa),
                           splittable: true, owner: binding) { _, prepared, m, y, range in
            Int32(bitPattern: ek_gemm_packed(isaValue, matrix, prepared?.assumingMemoryBound(to: ek_block_q8_act.self),
                                             Int64(m), y, n, Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// The row kernels of `isa` (SIMD where it has them, the scalar reference otherwise) on the GGUF blocks as they lie
    /// (nothing is converted; copied only onto huge pages: ``WeightMatrix/streamedBlocks()``).
    static func rows(_ w: WeightMatrix, isa: KernelISA, placement: Placement) throws -> BoundMatmul {
        guard let format = w.type.blockFormat else {
            throw KernelError.invalidArgument(argument: "type", found: "\(w.type)", expected: "a block-quantized type")
        }
        let blocks = try w.streamedBlocks()
        let (isaValue, base, n, k) = (isa.cValue, blocks.bytes.baseAddress, Int64(w.rows), Int64(w.columns))
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: .ember(type: w.type, isa: isa),
                           splittable: true, owner: blocks.owner) { _, prepared, m, y, range in
            guard let base, let prepared else { return Int32(bitPattern: EK_ERR_NULL_POINTER.rawValue) }
            return Int32(bitPattern: ek_gemm_rows(isaValue, format, base, n, k, prepared, Int64(m), y, n,
                                                  Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// `isa`'s kernels over the interleaved copy of a row-format matrix (eight rows side by side, made once per
    /// weight matrix): the same values and activations as ``rows(_:isa:placement:)``, several times fewer
    /// instructions per weight.
    static func interleaved(_ w: WeightMatrix, isa: KernelISA, placement: Placement) throws -> BoundMatmul {
        guard let format = w.type.blockFormat, ek_interleaved_available(isa.cValue, format) else {
            throw KernelError.invalidArgument(argument: "type", found: "\(w.type) on \(isa)", expected: "a type with interleaved kernels on this ISA")
        }
        let storage = try w.interleaved()
        let (isaValue, base, n, k) = (isa.cValue, UnsafeRawPointer(storage.baseAddress), Int64(w.rows), Int64(w.columns))
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: .ember(type: w.type, isa: isa),
                           splittable: true, owner: storage) { _, prepared, m, y, range in
            guard let prepared else { return Int32(bitPattern: EK_ERR_NULL_POINTER.rawValue) }
            return Int32(bitPattern: ek_gemm_interleaved(isaValue, format, base, n, k, prepared, Int64(m), y, n,
                                                         Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// fp16 or bf16 weights as stored (copied only onto huge pages: ``WeightMatrix/streamedBlocks()``), widened to
    /// fp32 in registers by `isa`'s kernel (products in fp32).
    static func half(_ w: WeightMatrix, isa: KernelISA, placement: Placement) throws -> BoundMatmul {
        guard w.type == .f16 || w.type == .bf16 else {
            throw KernelError.invalidArgument(argument: "type", found: "\(w.type)", expected: "f16 or bf16")
        }
        let blocks = try w.streamedBlocks()
        let (isaValue, bf16, n, k) = (isa.cValue, w.type == .bf16, Int64(w.rows), Int64(w.columns))
        let base = blocks.bytes.baseAddress?.assumingMemoryBound(to: UInt16.self)
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: nil,
                           splittable: true, owner: blocks.owner) { x, _, m, y, range in
            guard let base else { return Int32(bitPattern: EK_ERR_NULL_POINTER.rawValue) }
            return Int32(bitPattern: ek_gemm_half(isaValue, bf16, base, n, k, x, Int64(m), y, n,
                                                  Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// The most rows of input the fp32 route's own kernel takes when OpenBLAS runs kernels as wide as Ember's (more go
    /// to sgemm, whose packing then pays: at 128 rows the two measured equal against OpenBLAS's SkylakeX core).
    static let fewRows = 128

    /// Rows (columns) up to which the AVX2 fp32 kernel takes any number of activation rows from OpenBLAS's Haswell
    /// core: measured faster at MiniLM's and SmolLM2's rows (384-1,536) when large batches ran in L2-sized panels,
    /// and equal again (MiniLM batch 32, alternating) since 40+ rows run as packed outer products
    /// (`x86_outer_body.h`); longer rows were not measured.
    static let panelledColumns = 2048

    /// Which products the fp32 route gives to `isa`'s own kernel rather than OpenBLAS: those of up to `limit`
    /// rows of input, and those of any number of rows whose rows are at most `anyRowsUpToColumns` long.
    struct FewRows: Equatable {
        let isa: KernelISA
        let limit: Int
        let anyRowsUpToColumns: Int
    }

    /// OpenBLAS (one thread per call) on the fp32 weights, a slice of rows per call; the products `fewRows` names
    /// by its ISA's fp32 kernel. Decode's single row included: two threads of the kernel's four-row GEMV (AVX-512;
    /// AVX2 builds read one row at a time) streamed SmolLM2's matrices at 70-75 GB/s where `cblas_sgemv` (OpenBLAS's
    /// Haswell core) took 46-54, and equal to its SkylakeX core.
    static func blas(_ w: WeightMatrix, fewRows: FewRows? = nil, placement: Placement,
                     pool: WorkerPool?) throws -> BoundMatmul {
        let (kernel, limit, columns) = (fewRows?.isa.cValue, fewRows?.limit ?? 0, fewRows?.anyRowsUpToColumns ?? 0)
        return try fp32(w, placement: placement, pool: pool) { base, x, m, y, n, k, range in
            if let kernel, m <= limit || k <= columns {
                return Int32(bitPattern: ek_gemm_f32(kernel, base, Int64(n), Int64(k), x, Int64(m), y, Int64(n),
                                                     Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
            }
            let slice = base + range.lowerBound * k
            if m == 1 {
                cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(range.count), Int32(k), 1, slice, Int32(k), x, 1, 0, y + range.lowerBound, 1)
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(m), Int32(range.count), Int32(k), 1, x, Int32(k),
                            slice, Int32(k), 0, y + range.lowerBound, Int32(n))
            }
            return 0
        }
    }

    /// The CPU route's portable C loop on the fp32 weights.
    static func portable(_ w: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        try fp32(w, placement: placement, pool: pool) { base, x, m, y, n, k, range in
            Int32(bitPattern: ek_sgemm_portable(x, base, y, Int64(m), Int64(n), Int64(k),
                                                Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// A kernel on the fp32 variant of `w` (converted once, cached by `w`).
    private static func fp32(
        _ w: WeightMatrix, placement: Placement, pool: WorkerPool?,
        _ kernel: @escaping (_ weights: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ m: Int, _ y: UnsafeMutablePointer<Float>,
                             _ n: Int, _ k: Int, _ rows: Range<Int>) -> Int32
    ) throws -> BoundMatmul {
        let weights = try w.fp32()
        let base = UnsafePointer(weights.baseAddress.assumingMemoryBound(to: Float.self))
        let (n, k) = (w.rows, w.columns)
        return BoundMatmul(placement: placement, rows: n, columns: k, preparation: nil, splittable: true,
                           owner: weights.storage) { x, _, m, y, range in kernel(base, x, m, y, n, k, range) }
    }
}
