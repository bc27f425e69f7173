import CKernels
import Foundation

extension KernelRegistry {
    /// The built-in kernels, registered through the same path as plugins.
    func registerBuiltIns() {
        let quantized: [WeightFormat] = [.q8_0, .q4_0, .q4_1]
        let simd = KernelISA.active
        if simd != .scalar {
            register(RegisteredKernel(
                name: "ember-simd-\(simd)", op: .matmul, formats: quantized, unit: .neuralEngine, requiredISA: simd,
                score: 100, run: { x, w, y in try matmul(x, w.packed(), into: &y, isa: simd) },
                bind: { w, placement in try .packed(w, isa: simd, placement: placement) }))
        }
        register(RegisteredKernel(
            name: "openblas-sgemm", op: .matmul, formats: [.f32] + quantized, unit: .gpu, score: 100,
            conversion: "weights dequantized to fp32 once and cached",
            run: { x, w, y in try matmul(x, w.fp32(), transposeB: true, into: &y) },
            bind: { w, placement in try .blas(w, placement: placement) }))
        register(RegisteredKernel(
            name: "scalar-reference", op: .matmul, formats: quantized, unit: .cpu, requiredISA: .scalar, score: 10,
            run: { x, w, y in try matmul(x, w.packed(), into: &y, isa: .scalar) },
            bind: { w, placement in try .packed(w, isa: .scalar, placement: placement) }))
        register(RegisteredKernel(
            name: "portable-sgemm", op: .matmul, formats: [.f32], unit: .cpu, score: 10,
            run: { x, w, y in try portableMatmul(x, w.fp32(), into: &y) },
            bind: { w, placement in try .portable(w, placement: placement) }))
    }
}

/// Y = X·Wᵀ with the CPU route's portable C loop, split over the caller's workers.
func portableMatmul(_ x: Tensor, _ w: Tensor, into y: inout Tensor) throws {
    let (m, k, n) = (x.shape[0], x.shape[1], w.shape[0])
    guard w.shape[1] == k, y.shape == [m, n] else {
        throw TensorError.shapeMismatch(argument: "w", expected: "[N, \(k)]", found: w.shape)
    }
    try y.makeWritable(argument: "y")
    let (px, pw) = (x.baseAddress.assumingMemoryBound(to: Float.self), w.baseAddress.assumingMemoryBound(to: Float.self))
    let py = y.baseAddress.assumingMemoryBound(to: Float.self)
    let status = StatusCollector()
    RowSplit.run(rows: n, threads: KernelThreads.default, alignment: 16, workPerRow: m * k) { range in
        status.record(ek_sgemm_portable(px, pw, py, Int64(m), Int64(n), Int64(k), Int64(range.lowerBound), Int64(range.upperBound)))
    }
    try KernelError.check(status.first, kernel: "ek_sgemm_portable", argument: { _ in "x" })
}
