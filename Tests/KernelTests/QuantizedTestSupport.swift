import _CEmberKernels
@testable import EmberCore
import EmberTestSupport

/// Helpers shared by the quantized-kernel tests: GGUF blocks made with the
/// scalar oracle, and the ISAs this machine can run.
enum Quant {
    static let simdISAs: [KernelISA] = KernelISA.allCases.filter { $0 != .scalar && $0.isSupported() }
    static let allISAs: [KernelISA] = KernelISA.allCases.filter { $0.isSupported() }
    /// The block types the packed kernels take.
    static let blockTypes: [TensorType] = [.q8_0, .q4_0, .q4_1]

    static func randomValues(_ count: Int, _ generator: inout SplitMix64, scale: Float = 1) -> [Float] {
        (0..<count).map { _ in (generator.nextUnitFloat() * 2 - 1) * scale }
    }

    /// Quantizes rows of `values` (rows × k) to GGUF blocks with the oracle.
    static func ggufBlocks(_ format: TensorType, _ values: [Float], rows: Int, k: Int) -> [UInt8] {
        var blocks = [UInt8](repeating: 0, count: format.byteCount(rows: rows, columns: k)!)
        let rowBytes = k / 32 * format.blockBytes
        values.withUnsafeBufferPointer { x in
            blocks.withUnsafeMutableBytes { out in
                for row in 0..<rows {
                    let source = x.baseAddress! + row * k, target = out.baseAddress! + row * rowBytes
                    let status: ek_status = switch format {
                    case .q8_0: ek_quantize_row_q8_0_ref(source, target.assumingMemoryBound(to: ek_block_q8_0.self), Int64(k))
                    case .q4_0: ek_quantize_row_q4_0_ref(source, target.assumingMemoryBound(to: ek_block_q4_0.self), Int64(k))
                    case .q4_1: ek_quantize_row_q4_1_ref(source, target.assumingMemoryBound(to: ek_block_q4_1.self), Int64(k))
                    default: EK_ERR_FORMAT
                    }
                    precondition(status == EK_OK)
                }
            }
        }
        return blocks
    }

    /// Y = X·Wᵀ by the oracle (GGUF blocks, reference activation quantizer).
    static func referenceGEMM(_ format: TensorType, _ blocks: [UInt8], _ x: [Float], m: Int, n: Int, k: Int) -> [Float] {
        var y = [Float](repeating: .nan, count: m * n)
        let status = blocks.withUnsafeBytes { w in
            ek_gemm_ref(format.blockFormat!, w.baseAddress!, x, &y, Int64(m), Int64(n), Int64(k), 0, Int64(n))
        }
        precondition(status == EK_OK)
        return y
    }

    /// Dequantizes GGUF rows with the oracle.
    static func dequantize(_ format: TensorType, _ blocks: [UInt8], rows: Int, k: Int) -> [Float] {
        var y = [Float](repeating: 0, count: rows * k)
        let status = blocks.withUnsafeBytes { b in
            ek_dequantize_row(EK_ISA_SCALAR, format.blockFormat!, b.baseAddress!, &y, Int64(rows * k))
        }
        precondition(status == EK_OK)
        return y
    }

    /// Activations as the oracle quantizes them (Q8_0 or Q8_1), dequantized.
    static func quantizedActivations(_ format: TensorType, _ x: [Float]) -> [Float] {
        var out = [Float](repeating: 0, count: x.count)
        let blocks = x.count / 32
        if format == .q4_1 {
            var q = [ek_block_q8_1](repeating: ek_block_q8_1(), count: blocks)
            _ = ek_quantize_row_q8_1_ref(x, &q, Int64(x.count))
            for b in 0..<blocks {
                let d = ek_fp16_to_fp32(q[b].d)
                withUnsafeBytes(of: q[b].qs) { qs in for j in 0..<32 { out[b * 32 + j] = Float(Int8(bitPattern: qs[j])) * d } }
            }
        } else {
            var q = [ek_block_q8_0](repeating: ek_block_q8_0(), count: blocks)
            _ = ek_quantize_row_q8_0_ref(x, &q, Int64(x.count))
            for b in 0..<blocks {
                let d = ek_fp16_to_fp32(q[b].d)
                withUnsafeBytes(of: q[b].qs) { qs in for j in 0..<32 { out[b * 32 + j] = Float(Int8(bitPattern: qs[j])) * d } }
            }
        }
        return out
    }

    /// Per output, Σ|w|·|x| over the quantized values (plus |m|·|x| for Q4_1): the scale of the rounding error.
    static func magnitudes(_ format: TensorType, _ blocks: [UInt8], _ x: [Float], m: Int, n: Int, k: Int) -> [Double] {
        let w = dequantize(format, blocks, rows: n, k: k)
        var minimums = [Double](repeating: 0, count: n * k / 32)
        if format == .q4_1 {
            blocks.withUnsafeBytes { raw in
                for block in 0..<(n * k / 32) {
                    let bits = raw.loadUnaligned(fromByteOffset: block * 20 + 2, as: UInt16.self)
                    minimums[block] = Double(abs(ek_fp16_to_fp32(bits)))
                }
            }
        }
        var result = [Double](repeating: 0, count: m * n)
        for i in 0..<m {
            let xq = quantizedActivations(format, Array(x[(i * k)..<((i + 1) * k)]))
            for r in 0..<n {
                var sum = 0.0
                for j in 0..<k { sum += (Double(abs(w[r * k + j])) + 2 * minimums[(r * k + j) / 32]) * Double(abs(xq[j])) }
                result[i * n + r] = sum
            }
        }
        return result
    }

    static func bytes<T>(of value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
}
