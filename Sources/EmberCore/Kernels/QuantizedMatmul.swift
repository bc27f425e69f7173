import _CEmberKernels
import Foundation

/// Threads the kernels use by default: every core available.
public enum KernelThreads {
    /// Every core available to this process (`activeProcessorCount`).
    public static var `default`: Int { ProcessInfo.processInfo.activeProcessorCount }
}

/// Y[M×N] = X[M×K]·Wᵀ with fp32 activations and a quantized weight matrix,
/// into a new tensor. M = 1 is the GEMV of decoding one token.
public func matmul(
    _ x: Tensor, _ w: QuantizedMatrix, isa: KernelISA = .best(), threads: Int = 1, pool: WorkerPool? = nil
) throws -> Tensor {
    guard x.rank == 2 else { throw TensorError.shapeMismatch(argument: "x", expected: "[M, \(w.columns)]", found: x.shape) }
    var y = try Tensor(zeros: [x.shape[0], w.rows])
    try matmul(x, w, into: &y, isa: isa, threads: threads, pool: pool)
    return y
}

/// Y[M×N] = X[M×K]·Wᵀ into `y` ([M, N], fp32).
///
/// Each activation row is quantized per 32-block (Q8_0 for Q8_0 and Q4_0
/// weights, Q8_1 for Q4_1), then the weight rows are split across `threads`
/// in 16-row groups on `pool`'s workers of the caller's ``QoSClass/current``
/// (all on the calling thread without a pool); `isa` picks the kernel family
/// (the best this CPU runs by default).
public func matmul(
    _ x: Tensor, _ w: QuantizedMatrix, into y: inout Tensor, isa: KernelISA = .best(),
    threads: Int = 1, pool: WorkerPool? = nil
) throws {
    guard x.dtype == .float32 else { throw TensorError.dtypeMismatch(argument: "x", expected: .float32, found: x.dtype) }
    guard x.rank == 2, x.shape[1] == w.columns else {
        throw TensorError.shapeMismatch(argument: "x", expected: "[M, \(w.columns)] (K from w)", found: x.shape)
    }
    let m = x.shape[0]
    guard y.dtype == .float32 else { throw TensorError.dtypeMismatch(argument: "y", expected: .float32, found: y.dtype) }
    guard y.rank == 2, y.shape[0] == m, y.shape[1] == w.rows else {
        throw TensorError.shapeMismatch(argument: "y", expected: "[\(m), \(w.rows)]", found: y.shape)
    }
    guard isa.isSupported() else { throw KernelError.unsupportedISA(isa, features: CPUFeatures.current.names) }
    try y.makeWritable(argument: "y")
    if y.overlaps(x) { throw TensorError.overlappingMemory(argument: "y", with: "x") }
    guard m > 0, w.rows > 0 else { return }

    let k = w.columns
    let activationBytes = ek_activation_size(Int64(m), Int64(k))
    let activations = UnsafeMutableRawPointer.allocate(byteCount: max(activationBytes, 1), alignment: 64)
    defer { activations.deallocate() }
    let act = activations.assumingMemoryBound(to: ek_block_q8_act.self)
    let xBase = x.baseAddress.assumingMemoryBound(to: Float.self)
    let yBase = y.baseAddress.assumingMemoryBound(to: Float.self)
    let blocks = k / 32
    let (format, isaValue) = (w.type.packedFormat ?? EK_FORMAT_Q8_0, isa.cValue)
    let threads = max(1, threads)

    // Quantize the activations, rows split across threads when there are many.
    let quantizeStatus = StatusCollector()
    RowSplit.run(rows: m, threads: threads, alignment: 1, workPerRow: k * 8, pool: pool) { range in
        quantizeStatus.record(ek_quantize_activations(
            isaValue, format, xBase + range.lowerBound * k, Int64(range.count), Int64(k),
            act + range.lowerBound * blocks, ek_activation_size(Int64(range.count), Int64(k))))
    }
    try KernelError.check(quantizeStatus.first, kernel: "ek_quantize_activations", argument: { _ in "x" })

    // The product, weight rows split across threads in whole packed groups.
    let gemmStatus = StatusCollector()
    var matrix = w.cMatrix
    withExtendedLifetime(w) {
        RowSplit.run(rows: w.rows, threads: threads, alignment: 16, workPerRow: m * k, pool: pool) { range in
            gemmStatus.record(ek_gemm_packed(
                isaValue, &matrix, act, Int64(m), yBase, Int64(w.rows), Int64(range.lowerBound), Int64(range.upperBound)))
        }
    }
    try KernelError.check(gemmStatus.first, kernel: "ek_gemm_packed", argument: { status in
        status == EK_ERR_RANGE ? "row range" : "w"
    })
}

/// The first failing status of several threads' kernel calls.
package final class StatusCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var status = EK_OK
    private var code: Int32 = 0

    package init() {}

    package func record(_ value: ek_status) {
        guard value != EK_OK else { return }
        lock.withLock { if status == EK_OK { status = value } }
    }

    /// Records a non-zero status of an op function (the plugin ABI's int32 convention).
    package func record(_ value: Int32) {
        guard value != 0 else { return }
        lock.withLock { if code == 0 { code = value } }
    }

    package var first: ek_status { lock.withLock { status } }
    package var firstCode: Int32 { lock.withLock { code } }
}
