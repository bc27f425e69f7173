import CBLAS

/// The shape of one matrix product Y[M×N] = A[M×K]·B, with B stored as
/// [K×N], or as [N×K] when it is used transposed (the layout of a weight
/// matrix W[N×K] in Y = X·Wᵀ).
public struct MatmulShape: Sendable, Equatable, CustomStringConvertible {
    /// Rows of A and of Y.
    public let m: Int
    /// Columns of Y (rows of B when ``transposeB``).
    public let n: Int
    /// The inner dimension: columns of A.
    public let k: Int
    /// Whether B is stored as [N×K] and used transposed.
    public let transposeB: Bool

    /// Checks that `a` and `b` are fp32 matrices whose inner dimensions agree.
    public init(_ a: Tensor, _ b: Tensor, transposeB: Bool) throws {
        guard a.dtype == .float32 else { throw TensorError.dtypeMismatch(argument: "a", expected: .float32, found: a.dtype) }
        guard b.dtype == .float32 else { throw TensorError.dtypeMismatch(argument: "b", expected: .float32, found: b.dtype) }
        guard a.rank == 2 else { throw TensorError.shapeMismatch(argument: "a", expected: "[M, K]", found: a.shape) }
        guard b.rank == 2 else {
            throw TensorError.shapeMismatch(argument: "b", expected: transposeB ? "[N, K]" : "[K, N]", found: b.shape)
        }
        let (m, k) = (a.shape[0], a.shape[1])
        let (bk, n) = transposeB ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
        guard bk == k else {
            throw TensorError.shapeMismatch(
                argument: "b", expected: transposeB ? "[N, \(k)] (K from a)" : "[\(k), N] (K from a)", found: b.shape)
        }
        let limit = Int(Int32.max)
        if m > limit { throw TensorError.dimensionTooLarge(argument: "M", dimension: m, limit: limit) }
        if n > limit { throw TensorError.dimensionTooLarge(argument: "N", dimension: n, limit: limit) }
        if k > limit { throw TensorError.dimensionTooLarge(argument: "K", dimension: k, limit: limit) }
        (self.m, self.n, self.k, self.transposeB) = (m, n, k, transposeB)
    }

    init(m: Int, n: Int, k: Int, transposeB: Bool) {
        (self.m, self.n, self.k, self.transposeB) = (m, n, k, transposeB)
    }

    /// Multiply-adds one product takes, times two: the FLOP count GFLOP/s figures use.
    public var flops: Double { 2 * Double(m) * Double(n) * Double(k) }

    /// "M×N×K", with " (Bᵀ)" when B is transposed, e.g. "1×576×1536 (Bᵀ)".
    public var description: String { "\(m)×\(n)×\(k)\(transposeB ? " (Bᵀ)" : "")" }
}

/// Y = A·B (or A·Bᵀ with `transposeB`) in fp32 through BLAS, into a new tensor of shape [M, N].
public func matmul(_ a: Tensor, _ b: Tensor, transposeB: Bool = false) throws -> Tensor {
    let shape = try MatmulShape(a, b, transposeB: transposeB)
    var c = try Tensor(zeros: [shape.m, shape.n])
    try matmul(a, b, transposeB: transposeB, into: &c)
    return c
}

/// Y = A·B (or A·Bᵀ) in fp32 through BLAS, written into `c` ([M, N], fp32),
/// or added to what `c` holds with `accumulate`.
///
/// A one-row A (decode: one token) or a one-column result goes to
/// `cblas_sgemv`, everything else to `cblas_sgemm`; the product is split over
/// `threads` workers of `pool` at the caller's ``QoSClass/current`` (one call on
/// the calling thread without a pool). `c` must not share memory
/// with `a` or `b`: owned storage shared by value is copied first; borrowed
/// memory that overlaps is refused.
public func matmul(
    _ a: Tensor, _ b: Tensor, transposeB: Bool = false, into c: inout Tensor, accumulate: Bool = false,
    threads: Int = 1, pool: WorkerPool? = nil
) throws {
    let shape = try MatmulShape(a, b, transposeB: transposeB)
    guard c.dtype == .float32 else { throw TensorError.dtypeMismatch(argument: "c", expected: .float32, found: c.dtype) }
    guard c.rank == 2, c.shape[0] == shape.m, c.shape[1] == shape.n else {
        throw TensorError.shapeMismatch(argument: "c", expected: "[\(shape.m), \(shape.n)]", found: c.shape)
    }
    try c.makeWritable(argument: "c")
    if c.overlaps(a) { throw TensorError.overlappingMemory(argument: "c", with: "a") }
    if c.overlaps(b) { throw TensorError.overlappingMemory(argument: "c", with: "b") }
    guard shape.m > 0, shape.n > 0 else { return }
    let y = c.baseAddress.assumingMemoryBound(to: Float.self)
    guard shape.k > 0 else {
        if !accumulate { y.update(repeating: 0, count: shape.m * shape.n) }
        return
    }
    blasMultiply(
        shape, a: a.baseAddress.assumingMemoryBound(to: Float.self),
        b: b.baseAddress.assumingMemoryBound(to: Float.self), c: y, beta: accumulate ? 1 : 0,
        threads: threads, pool: pool)
}

/// The BLAS call for one validated product, split over Ember's workers
/// (OpenBLAS itself runs one thread, so every compute thread has a known QoS):
/// along M when it is the larger side, else along N.
func blasMultiply(
    _ shape: MatmulShape, a: UnsafePointer<Float>, b: UnsafePointer<Float>, c: UnsafeMutablePointer<Float>,
    beta: Float, threads: Int, pool: WorkerPool?
) {
    let splitRows = shape.m >= shape.n
    RowSplit.run(rows: splitRows ? shape.m : shape.n, threads: threads, alignment: splitRows ? 1 : 16,
                 workPerRow: (splitRows ? shape.n : shape.m) * shape.k, pool: pool) { range in
        let offset = range.lowerBound
        if splitRows {
            let part = MatmulShape(m: range.count, n: shape.n, k: shape.k, transposeB: shape.transposeB)
            blasMultiply(part, a: a + offset * shape.k, b: b, c: c + offset * shape.n, beta: beta, ldb: nil, ldc: shape.n)
        } else {
            let part = MatmulShape(m: shape.m, n: range.count, k: shape.k, transposeB: shape.transposeB)
            let columns = shape.transposeB ? b + offset * shape.k : b + offset
            blasMultiply(part, a: a, b: columns, c: c + offset, beta: beta,
                         ldb: shape.transposeB ? shape.k : shape.n, ldc: shape.n)
        }
    }
}

/// One BLAS call on row-major buffers; `ldb`/`ldc` default to the dense strides.
@inline(__always)
func blasMultiply(
    _ shape: MatmulShape, a: UnsafePointer<Float>, b: UnsafePointer<Float>, c: UnsafeMutablePointer<Float>,
    beta: Float, ldb: Int?, ldc: Int
) {
    let (m, n, k) = (Int32(shape.m), Int32(shape.n), Int32(shape.k))
    let ldb = Int32(ldb ?? (shape.transposeB ? shape.k : shape.n)), ldc = Int32(ldc)
    if shape.m == 1 {
        // y[N] = Bᵀ·a (B is [K, N]) or B·a (B is [N, K]).
        if shape.transposeB {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1, b, ldb, a, 1, beta, c, 1)
        } else {
            cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1, b, ldb, a, 1, beta, c, 1)
        }
    } else if shape.n == 1 {
        // y[M] = A·b, b's K elements at stride 1 ([N=1, K]) or ldb ([K, N=1]).
        cblas_sgemv(CblasRowMajor, CblasNoTrans, m, k, 1, a, k, b, shape.transposeB ? 1 : ldb, beta, c, ldc)
    } else {
        cblas_sgemm(
            CblasRowMajor, CblasNoTrans, shape.transposeB ? CblasTrans : CblasNoTrans,
            m, n, k, 1, a, k, b, ldb, beta, c, ldc)
    }
}
