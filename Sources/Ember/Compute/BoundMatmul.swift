import CBLAS
import CKernels

/// How a kernel wants its activations: quantized to 8-bit blocks for the
/// SIMD kernels (one preparation serves every matmul with an equal value),
/// or read as fp32 (`nil` where a preparation is optional).
public struct ActivationPreparation: Hashable, Sendable {
    /// The weight format the blocks are made for (Q8_1-style for Q4_1, Q8_0 otherwise).
    public let format: QuantizedFormat
    /// The kernel family that quantizes the activations into these blocks and reads them.
    public let isa: KernelISA

    /// Bytes of prepared activations for `rows` rows of `columns`.
    public func byteCount(rows: Int, columns: Int) -> Int { ek_activation_size(Int64(rows), Int64(columns)) }

    /// Quantizes `rows` fp32 rows of `columns` at `x` into `out`, which holds `capacity` bytes
    /// (the kernel refuses a buffer smaller than ``byteCount(rows:columns:)``).
    func prepare(_ x: UnsafePointer<Float>, rows: Int, columns: Int, into out: UnsafeMutableRawPointer, capacity: Int) -> ek_status {
        ek_quantize_activations(isa.cValue, format.cValue, x, Int64(rows), Int64(columns),
                                out.assumingMemoryBound(to: ek_block_q8_act.self), max(0, capacity))
    }
}

/// A matmul kernel bound to one weight matrix, for callers that split the
/// work themselves: activations are prepared once per input, then any
/// thread computes any range of weight rows, Y[m × rows] = X·Wᵀ (row stride
/// `rows`). A model's forward pass calls these from inside a
/// ``WorkerPool/region(threads:qos:barrierSpinNanoseconds:_:)``. Binding does the per-weight work
/// once (packing, dequantizing), so a call costs only the kernel.
public struct BoundMatmul: @unchecked Sendable {
    /// The kernel call: x (and its preparation), m rows, into y, over a range of weight rows; 0 is success.
    public typealias Body = (_ x: UnsafePointer<Float>, _ prepared: UnsafeRawPointer?, _ m: Int,
                             _ y: UnsafeMutablePointer<Float>, _ rows: Range<Int>) -> Int32

    /// Where the registry placed this matmul: unit, kernel and why.
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
    /// Keeps the bound variant (packed or fp32 weights) alive.
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
        .rejected(kernel: placement.kernel ?? "model code", argument: "matmul \(rows)×\(columns)", status: "status \(status)")
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
                           preparation: ActivationPreparation(format: binding.matrix.format, isa: isa),
                           splittable: true, owner: binding) { _, prepared, m, y, range in
            Int32(bitPattern: ek_gemm_packed(isaValue, matrix, prepared?.assumingMemoryBound(to: ek_block_q8_act.self),
                                             Int64(m), y, n, Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// OpenBLAS (one thread per call) on the fp32 weights, a slice of rows per call.
    static func blas(_ w: WeightMatrix, placement: Placement) throws -> BoundMatmul {
        try fp32(w, placement: placement) { base, x, m, y, n, k, range in
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
    static func portable(_ w: WeightMatrix, placement: Placement) throws -> BoundMatmul {
        try fp32(w, placement: placement) { base, x, m, y, n, k, range in
            Int32(bitPattern: ek_sgemm_portable(x, base, y, Int64(m), Int64(n), Int64(k),
                                                Int64(range.lowerBound), Int64(range.upperBound)).rawValue)
        }
    }

    /// A kernel on the fp32 variant of `w` (dequantized once, cached by `w`).
    private static func fp32(
        _ w: WeightMatrix, placement: Placement,
        _ kernel: @escaping (_ weights: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ m: Int, _ y: UnsafeMutablePointer<Float>,
                             _ n: Int, _ k: Int, _ rows: Range<Int>) -> Int32
    ) throws -> BoundMatmul {
        let weights = try w.fp32()
        let base = UnsafePointer(weights.baseAddress.assumingMemoryBound(to: Float.self))
        let (n, k) = (w.rows, w.columns)
        return BoundMatmul(placement: placement, rows: n, columns: k, preparation: nil, splittable: true,
                           owner: weights.storage) { x, _, m, y, range in kernel(base, x, m, y, n, k, range) }
    }

    /// A plugin's C kernel on the GGUF bytes.
    static func plugin(_ function: ember_matmul_kernel, _ w: WeightMatrix, placement: Placement) -> BoundMatmul {
        let weights = w.bytes.baseAddress!
        let (n, k) = (Int64(w.rows), Int64(w.columns))
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: nil,
                           splittable: true, owner: w) { x, _, m, y, range in
            function(x, weights, y, Int64(m), n, k, Int64(range.lowerBound), Int64(range.upperBound))
        }
    }

    /// A kernel registered with only a whole-op body: one thread runs it on views of the buffers.
    static func whole(_ kernel: RegisteredKernel, _ w: WeightMatrix, placement: Placement) -> BoundMatmul {
        let (n, k) = (w.rows, w.columns)
        return BoundMatmul(placement: placement, rows: n, columns: k, preparation: nil, splittable: false, owner: w) { x, _, m, y, _ in
            do {
                let input = try Tensor(borrowing: x, shape: [m, k])
                var output = try Tensor(borrowing: y, shape: [m, n], mutable: true)
                try kernel.run(input, w, &output)
                return 0
            } catch {
                return -1
            }
        }
    }
}
