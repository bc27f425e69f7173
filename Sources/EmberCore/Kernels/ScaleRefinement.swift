import _CEmberKernels

/// Least-squares scales for 4-bit weight blocks: after the usual min/max
/// quantization, alternately re-assign each value its nearest level and
/// re-fit the block's scale (and, for Q4_1, its minimum) to minimise the
/// squared error, keeping a fit only if it lowers the error with the fp16
/// rounding the file format applies. Same block layout, lower error; used
/// for weights quantized at load, never for activations (whose rounding
/// the kernels' oracle defines).
enum ScaleRefinement {
    /// Refines every 32-value block of `values` (rows × columns) in `blocks` (that format's GGUF blocks).
    static func refine(_ format: ek_format, values: UnsafePointer<Float>, count: Int, blocks: UnsafeMutableRawPointer) {
        guard format == EK_FORMAT_Q4_0 || format == EK_FORMAT_Q4_1 else { return }
        let blockBytes = ek_format_block_bytes(format)
        for block in 0..<(count / 32) {
            let x = values + block * 32
            let out = blocks + block * blockBytes
            if format == EK_FORMAT_Q4_1 { refineQ4_1(x, out) } else { refineQ4_0(x, out) }
        }
    }

    private static func half(_ value: Float) -> UInt16 { ek_fp32_to_fp16(value) }
    private static func float(_ value: UInt16) -> Float { ek_fp16_to_fp32(value) }

    /// Squared error of x ≈ q·d + m with q the nearest level in 0…15; writes the levels to `levels`.
    private static func assign(_ x: UnsafePointer<Float>, d: Float, m: Float, bias: Float, levels: inout [Float]) -> Float {
        var error: Float = 0
        let inverse = d != 0 ? 1 / d : 0
        for i in 0..<32 {
            let q = min(15, max(0, ((x[i] - m) * inverse + bias).rounded()))
            levels[i] = q
            let difference = x[i] - ((q - bias) * d + m)
            error += difference * difference
        }
        return error
    }

    private static func refineQ4_1(_ x: UnsafePointer<Float>, _ out: UnsafeMutableRawPointer) {
        var levels = [Float](repeating: 0, count: 32)
        var d = float(out.loadUnaligned(as: UInt16.self)), m = float(out.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        var best = assign(x, d: d, m: m, bias: 0, levels: &levels)
        let initial = best
        var (bestD, bestM) = (d, m)
        for _ in 0..<6 {
            // Fit x ≈ d·q + m over the current levels.
            var (sq, sqq, sx, sqx): (Float, Float, Float, Float) = (0, 0, 0, 0)
            for i in 0..<32 { sq += levels[i]; sqq += levels[i] * levels[i]; sx += x[i]; sqx += levels[i] * x[i] }
            let determinant = 32 * sqq - sq * sq
            guard determinant > 0 else { break }
            d = float(half((32 * sqx - sq * sx) / determinant))
            m = float(half((sx - d * sq) / 32))
            guard d.isFinite, m.isFinite, d > 0 else { break }
            let error = assign(x, d: d, m: m, bias: 0, levels: &levels)
            guard error < best else { break }
            (best, bestD, bestM) = (error, d, m)
        }
        guard best < initial else { return }
        out.storeBytes(of: half(bestD), toByteOffset: 0, as: UInt16.self)
        out.storeBytes(of: half(bestM), toByteOffset: 2, as: UInt16.self)
        _ = assign(x, d: bestD, m: bestM, bias: 0, levels: &levels)
        write(levels, to: out + 4)
    }

    private static func refineQ4_0(_ x: UnsafePointer<Float>, _ out: UnsafeMutableRawPointer) {
        var levels = [Float](repeating: 0, count: 32)
        var d = float(out.loadUnaligned(as: UInt16.self))
        var best = assign(x, d: d, m: 0, bias: 8, levels: &levels)
        let initial = best
        var bestD = d
        for _ in 0..<6 {
            var (num, den): (Float, Float) = (0, 0)
            for i in 0..<32 { num += x[i] * (levels[i] - 8); den += (levels[i] - 8) * (levels[i] - 8) }
            guard den > 0 else { break }
            d = float(half(num / den))
            guard d.isFinite, d != 0 else { break }
            let error = assign(x, d: d, m: 0, bias: 8, levels: &levels)
            guard error < best else { break }
            (best, bestD) = (error, d)
        }
        guard best < initial else { return }
        out.storeBytes(of: half(bestD), toByteOffset: 0, as: UInt16.self)
        _ = assign(x, d: bestD, m: 0, bias: 8, levels: &levels)
        write(levels, to: out + 2)
    }

    /// GGUF nibble order: elements 0–15 in the low nibbles, 16–31 in the high ones.
    private static func write(_ levels: [Float], to quants: UnsafeMutableRawPointer) {
        for j in 0..<16 {
            quants.storeBytes(of: UInt8(levels[j]) | (UInt8(levels[j + 16]) << 4), toByteOffset: j, as: UInt8.self)
        }
    }
}
