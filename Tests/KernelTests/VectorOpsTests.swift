import _CEmberKernels
import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

/// The transformer block's vector ops (CKernels/ops.c) against plain Swift
/// references computed in double precision.
@Suite("Vector ops")
struct VectorOpsTests {
    static func random(_ count: Int, seed: UInt64, scale: Float = 2) -> [Float] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in (generator.nextUnitFloat() - 0.5) * scale }
    }

    static func half(_ value: Float) -> Float { ek_fp16_to_fp32(ek_fp32_to_fp16(value)) }

    /// softmax(scale·q·Kᵀ)·V in double, optionally with fp16 rounding where the fp16 form rounds.
    static func attention(q: [Float], keys: [Float], values: [Float], visible: Int, headDim: Int, stride: Int,
                          scale: Float, fp16: Bool) -> [Double] {
        let query = fp16 ? q.map(half) : q
        var scores = (0..<visible).map { p in
            Double(scale) * (0..<headDim).reduce(0.0) { $0 + Double(query[$1]) * Double(keys[p * stride + $1]) }
        }
        let maximum = scores.max()!
        scores = scores.map { exp($0 - maximum) }
        let total = scores.reduce(0, +)
        var out = [Double](repeating: 0, count: headDim)
        for p in 0..<visible {
            let weight = fp16 ? Double(half(Float(scores[p] / total))) : scores[p] / total
            for i in 0..<headDim { out[i] += weight * Double(values[p * stride + i]) }
        }
        return out
    }

    @Test(arguments: [(64, 1), (64, 7), (64, 130), (48, 9), (32, 19), (16, 5), (40, 33)]) // 40: not a multiple of 16, the portable path
    func attentionMatchesTheReference(headDim: Int, visible: Int) {
        let stride = headDim * 3 // keys of other heads sit between positions
        let q = Self.random(headDim, seed: 1)
        let keys = Self.random(visible * stride, seed: 2), values = Self.random(visible * stride, seed: 3)
        let scale = 1 / Float(headDim).squareRoot()
        var scores = [Float](repeating: 0, count: visible), out = [Float](repeating: 0, count: headDim)
        ek_attention_head_f32(q, keys, values, Int64(stride), Int64(visible), Int64(headDim), scale, &scores, &out)
        let expected = Self.attention(q: q, keys: keys, values: values, visible: visible, headDim: headDim, stride: stride,
                                      scale: scale, fp16: false)
        for i in 0..<headDim { #expect(abs(Double(out[i]) - expected[i]) < 1e-5, "fp32 \(headDim)×\(visible) [\(i)]") }

        let keys16 = keys.map { ek_fp32_to_fp16($0) }, values16 = values.map { ek_fp32_to_fp16($0) }
        ek_attention_head_f16(q, keys16, values16, Int64(stride), Int64(visible), Int64(headDim), scale, &scores, &out)
        let expected16 = Self.attention(q: q, keys: keys.map(Self.half), values: values.map(Self.half), visible: visible,
                                        headDim: headDim, stride: stride, scale: scale, fp16: true)
        for i in 0..<headDim { #expect(abs(Double(out[i]) - expected16[i]) < 2e-3, "fp16 \(headDim)×\(visible) [\(i)]") }
    }

    /// The one-pass attention (online softmax), portable and SIMD, on fp32 and fp16 caches: the exact softmax in
    /// double within fp32 rounding, head widths with and without the SIMD path, one position to many.
    @Test(arguments: [(64, 1), (64, 7), (64, 130), (256, 61), (48, 9), (40, 33), (2, 5)])
    func onlineAttentionMatchesTheExactSoftmax(headDim: Int, visible: Int) {
        let stride = headDim * 3
        let q = Self.random(headDim, seed: 11, scale: 6)
        let keys = Self.random(visible * stride, seed: 12), values = Self.random(visible * stride, seed: 13)
        let scale = 1 / Float(headDim).squareRoot()
        let keys16 = keys.map { ek_fp32_to_fp16($0) }, values16 = values.map { ek_fp32_to_fp16($0) }
        for simd in [false, true] {
            var out = [Float](repeating: .nan, count: headDim)
            #expect(ek_attention_online_with(simd, false, q, keys, values, Int64(stride), Int64(visible), Int64(headDim), scale, &out))
            let expected = Self.attention(q: q, keys: keys, values: values, visible: visible, headDim: headDim, stride: stride,
                                          scale: scale, fp16: false)
            for i in 0..<headDim { #expect(abs(Double(out[i]) - expected[i]) < 2e-6, "fp32 simd \(simd) \(headDim)×\(visible) [\(i)]") }
            #expect(ek_attention_online_with(simd, true, q, keys16, values16, Int64(stride), Int64(visible), Int64(headDim), scale, &out))
            let widened = Self.attention(q: q, keys: keys.map(Self.half), values: values.map(Self.half), visible: visible,
                                         headDim: headDim, stride: stride, scale: scale, fp16: false)
            for i in 0..<headDim { #expect(abs(Double(out[i]) - widened[i]) < 2e-6, "fp16 simd \(simd) \(headDim)×\(visible) [\(i)]") }
        }
        var out = [Float](repeating: 0, count: headDim)
        #expect(!ek_attention_online_with(true, false, q, keys, values, Int64(headDim - 1), Int64(visible), Int64(headDim), scale, &out),
                "a stride below the head width is refused")
        #expect(!ek_attention_online_with(true, false, q, keys, values, Int64(stride), -1, Int64(headDim), scale, &out))
    }

    /// An encoder's attention over a whole sequence in one call, portable (the oracle) and SIMD, fp32 and fp16
    /// keys and values: every query row against the Swift reference in double; sequences of 1 to 130 positions (the
    /// last beyond the stack scratch: allocated), head widths on and off the SIMD path, outputs written only in the
    /// head's columns, bad arguments refused.
    @Test(arguments: [(32, 1), (32, 19), (64, 7), (64, 130), (8, 3), (24, 17), (40, 33), (2, 5)])
    func sequenceAttentionMatchesTheExactSoftmaxForEveryRow(headDim: Int, rows: Int) {
        let stride = headDim * 3 + 4 // other heads' columns between rows
        let q = Self.random(rows * stride, seed: 21, scale: 6)
        let keys = Self.random(rows * stride, seed: 22), values = Self.random(rows * stride, seed: 23)
        let scale = 1 / Float(headDim).squareRoot()
        let keys16 = keys.map { ek_fp32_to_fp16($0) }, values16 = values.map { ek_fp32_to_fp16($0) }
        for simd in [false, true] {
            for half in [false, true] {
                let sentinel: Float = -7
                var out = [Float](repeating: sentinel, count: rows * stride)
                let ok = half ? ek_sequence_attention_with(simd, true, q, keys16, values16, Int64(stride), Int64(rows), Int64(headDim), scale, &out)
                    : ek_sequence_attention_with(simd, false, q, keys, values, Int64(stride), Int64(rows), Int64(headDim), scale, &out)
                #expect(ok)
                for i in 0..<rows {
                    let expected = Self.attention(q: Array(q[(i * stride)..<(i * stride + headDim)]),
                                                  keys: half ? keys.map(Self.half) : keys, values: half ? values.map(Self.half) : values,
                                                  visible: rows, headDim: headDim, stride: stride, scale: scale, fp16: false)
                    for c in 0..<headDim {
                        #expect(abs(Double(out[i * stride + c]) - expected[c]) < 2e-6,
                                "simd \(simd) half \(half) \(headDim)×\(rows) row \(i) [\(c)]: \(out[i * stride + c]) vs \(expected[c])")
                    }
                    #expect(out[(i * stride + headDim)..<(i * stride + stride)].allSatisfy { $0 == sentinel }, "only the head's columns")
                }
            }
        }
        var out = [Float](repeating: 0, count: rows * stride)
        #expect(!ek_sequence_attention_with(true, false, q, keys, values, Int64(headDim - 1), Int64(rows), Int64(headDim), scale, &out),
                "a stride below the head width is refused")
        #expect(!ek_sequence_attention_with(true, false, q, keys, values, Int64(stride), -1, Int64(headDim), scale, &out))
        #expect(!ek_sequence_attention_with(true, false, q, keys, values, Int64(stride), Int64(rows), 0, scale, &out))
    }

    @Test func onlineAttentionSurvivesScoresFarApartAndAMaximumThatGrows() {
        // Scores rising then one huge one: the running maximum grows several times; all weight ends on position 15.
        let headDim = 64, visible = 20
        let q = [Float](repeating: 1, count: headDim)
        var keys = (0..<(visible * headDim)).map { Float($0 / headDim) * 0.01 }
        for i in 0..<headDim { keys[15 * headDim + i] = 60 }
        let values = (0..<(visible * headDim)).map { Float($0 / headDim) }
        for simd in [false, true] {
            var out = [Float](repeating: 0, count: headDim)
            #expect(ek_attention_online_with(simd, false, q, keys, values, Int64(headDim), Int64(visible), Int64(headDim), 1, &out))
            #expect(out.allSatisfy { abs($0 - 15) < 1e-3 }, "simd \(simd): \(out.prefix(4))")
        }
    }

    /// GeGLU as llama.cpp computes it: the gate rounded to fp16, GELU's tanh form rounded to fp16, 0 below −10 and the
    /// gate itself above 10 — within an fp16 step of the exact function.
    @Test func gegluIsTheTanhGELUOfTheHalfGate() {
        let g = Self.random(1001, seed: 14, scale: 30) + [-10, 10, -10.5, 10.5, 0, 1e-8, -3]
        let u = Self.random(g.count, seed: 15)
        var h = [Float](repeating: 0, count: g.count)
        ek_geglu(g, u, &h, Int64(g.count))
        for i in g.indices {
            let gelu = g[i] <= -10 ? 0 : g[i] >= 10 ? g[i] : Self.half(ek_gelu_tanh(Self.half(g[i])))
            #expect(h[i] == gelu * u[i], "g \(g[i]): \(h[i]) vs \(gelu * u[i])")
            #expect(abs(Double(h[i]) - 0.5 * Double(g[i]) * (1 + erf(Double(g[i]) / 2.squareRoot())) * Double(u[i])) < 0.02 * max(1, abs(Double(g[i] * u[i]))),
                    "close to GELU itself")
        }
        // The fp32 tanh form against the formula in double.
        for x in Self.random(500, seed: 16, scale: 24) {
            let exact = 0.5 * Double(x) * (1 + tanh(0.7978845608028654 * Double(x) * (1 + 0.044715 * Double(x) * Double(x))))
            #expect(abs(Double(ek_gelu_tanh(x)) - exact) <= 1e-6 * max(1, abs(exact)), "\(x)")
        }
    }

    /// The SIMD GELUs (erf by a polynomial, a refined reciprocal; 8 and 16 lanes) against the portable erff form.
    @Test func geluMatchesErff() {
        let x = Self.random(1003, seed: 16, scale: 12) + [0, -0, 1e-8, -1e-8, 5.5, -5.5, 9, -9, 30, -30]
        var portable = x
        ek_gelu_with(false, &portable, Int64(x.count))
        for isa in [EK_ISA_AVX2, EK_ISA_AVX512] { // AVX-512 runs the AVX2 code where the CPU lacks it
            var simd = x
            ek_gelu_for(isa, &simd, Int64(x.count))
            for i in x.indices {
                #expect(abs(simd[i] - portable[i]) <= 1e-6 * max(1, abs(x[i])), "\(isa) gelu(\(x[i])): \(simd[i]) vs \(portable[i])")
            }
        }
    }

    /// x += y: the SIMD form is the portable one, bit for bit, at every length (the vector steps and the tail).
    @Test func addIsExactAtEveryLength() {
        for n in [0, 1, 7, 8, 15, 16, 17, 33, 384] {
            let x = Self.random(n, seed: UInt64(n) + 30), y = Self.random(n, seed: UInt64(n) + 31)
            var simd = x, portable = x
            ek_add_with(true, &simd, y, Int64(n))
            ek_add_with(false, &portable, y, Int64(n))
            #expect(simd == portable && simd == zip(x, y).map { $0 + $1 }, "n = \(n)")
        }
    }

    @Test func attentionSurvivesScoresFarApart() {
        // One key aligned with q at a huge score: the softmax must not overflow or produce NaN.
        let headDim = 64, visible = 20
        let q = [Float](repeating: 30, count: headDim)
        var keys = [Float](repeating: -30, count: visible * headDim)
        for i in 0..<headDim { keys[5 * headDim + i] = 30 }
        let values = (0..<(visible * headDim)).map { Float($0 / headDim) }
        var scores = [Float](repeating: 0, count: visible), out = [Float](repeating: 0, count: headDim)
        ek_attention_head_f32(q, keys, values, Int64(headDim), Int64(visible), Int64(headDim), 0.125, &scores, &out)
        #expect(out.allSatisfy { abs($0 - 5) < 1e-4 }, "all weight on position 5: \(out.prefix(4))")
    }

    @Test func swigluMatchesExpfWithinAnUlpOrTwo() {
        let g = Self.random(1003, seed: 4, scale: 40) + [-200, 200, 0, 88, -88, 1e-30]
        let u = Self.random(g.count, seed: 5)
        for isa in [EK_ISA_SCALAR, EK_ISA_AVX2, EK_ISA_AVX512] { // AVX-512 runs the AVX2 code where the CPU lacks it
            var h = [Float](repeating: 0, count: g.count)
            ek_swiglu_for(isa, g, u, &h, Int64(g.count))
            for i in g.indices {
                let expected = Double(g[i]) / (1 + exp(-Double(g[i]))) * Double(u[i])
                #expect(abs(Double(h[i]) - expected) <= 4e-7 * max(abs(expected), 1e-30) + 1e-37, "\(isa) g \(g[i]) u \(u[i]): \(h[i]) vs \(expected)")
            }
        }
    }

    @Test func rmsNormMatchesTheReference() {
        let (rows, n) = (3, 576)
        let x = Self.random(rows * n, seed: 6, scale: 10), w = Self.random(n, seed: 7)
        var out = [Float](repeating: 0, count: rows * n)
        ek_rms_norm(x, w, &out, Int64(rows), Int64(n), 1e-5)
        for r in 0..<rows {
            let mean = (0..<n).reduce(0.0) { $0 + Double(x[r * n + $1]) * Double(x[r * n + $1]) } / Double(n)
            for i in 0..<n {
                let expected = Double(x[r * n + i]) / (mean + 1e-5).squareRoot() * Double(w[i])
                #expect(abs(Double(out[r * n + i]) - expected) < 1e-5 * max(1, abs(expected)))
            }
        }
    }

    @Test func ropeRotatesPairsByTheTableAngles() {
        let (heads, headDim, position) = (3, 64, 37)
        var x = Self.random(heads * headDim, seed: 8)
        let original = x
        var table = [Float](repeating: 0, count: headDim)
        let thetaScale = pow(Float(10000), -2 / Float(headDim))
        ek_rope_table(&table, Int64(headDim / 2), Int64(position), thetaScale)
        ek_rope_apply(&x, Int64(heads), Int64(headDim), table)
        for h in 0..<heads {
            for p in 0..<(headDim / 2) {
                let angle = Double(position) * pow(10000, -2 * Double(p) / Double(headDim))
                let (a, b) = (Double(original[h * headDim + 2 * p]), Double(original[h * headDim + 2 * p + 1]))
                // The table advances the angle by fp32 multiplication, as ggml does: a small drift is expected.
                #expect(abs(Double(x[h * headDim + 2 * p]) - (a * cos(angle) - b * sin(angle))) < 1e-4)
                #expect(abs(Double(x[h * headDim + 2 * p + 1]) - (a * sin(angle) + b * cos(angle))) < 1e-4)
            }
        }
    }

    @Test func halfRowsConvertLikeTheScalarConversion() {
        let x = Self.random(1001, seed: 9, scale: 1e5) + [0, -0, 1e-8, 65504, 65520, 1e9, .infinity, -.infinity]
        var y = [UInt16](repeating: 0, count: x.count), back = [Float](repeating: 0, count: x.count)
        ek_fp32_to_fp16_row(x, &y, Int64(x.count))
        ek_fp16_to_fp32_row(y, &back, Int64(x.count))
        for i in x.indices {
            #expect(y[i] == ek_fp32_to_fp16(x[i]), "\(x[i])")
            #expect(back[i].bitPattern == ek_fp16_to_fp32(y[i]).bitPattern)
        }
    }
}

@Suite("Least-squares 4-bit scales")
struct ScaleRefinementTests {
    @Test(arguments: [TensorType.q4_1, .q4_0])
    func refinedBlocksHaveNoMoreErrorThanMinMax(format: TensorType) throws {
        var generator = SplitMix64(seed: 21)
        // Heavy-tailed values, where min/max scales waste levels.
        let values = (0..<(64 * 256)).map { _ -> Float in
            let u = generator.nextUnitFloat() - 0.5
            return u * u * u * 8
        }
        let weights = try Tensor(shape: [64, 256], values: values)
        func error(_ matrix: WeightMatrix) throws -> Double {
            zip(try matrix.fp32().scalars(), values).reduce(0.0) { $0 + Double(($1.0 - $1.1) * ($1.0 - $1.1)) }
        }
        let plain = try error(WeightMatrix(weights, as: format))
        let refined = try error(WeightMatrix(weights, as: format, refinedScales: true))
        #expect(refined <= plain)
        #expect(refined < 0.95 * plain, "\(format): refined \(refined) vs min/max \(plain)")
    }
}
