import _CEmberKernels
import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

/// Every SIMD path against the scalar oracle: rows bit for bit, matrix
/// products exactly where all arithmetic is exact and within the fp32
/// accumulation bound elsewhere.
@Suite("Quantized kernels")
struct QuantizedKernelTests {
    // MARK: fp16

    @Test func fp16ToFp32MatchesSwiftForEveryHalf() {
        for bits in 0...UInt16.max {
            let expected = Float(Float16(bitPattern: bits))
            let got = ek_fp16_to_fp32(bits)
            if expected.isNaN { #expect(got.isNaN); continue }
            if got.bitPattern != expected.bitPattern { Issue.record("half \(bits): \(got) ≠ \(expected)"); return }
        }
    }

    @Test func fp32ToFp16RoundsToNearestEven() {
        var generator = SplitMix64(seed: 11)
        var values: [Float] = [0, -0.0, 1, -1, 65504, 65519.99, 65520, 1e6, -1e6, .infinity, -.infinity,
                               Float(Float16.leastNonzeroMagnitude), Float(Float16.leastNonzeroMagnitude) / 2,
                               Float(Float16.leastNonzeroMagnitude) * 0.75, Float(Float16.leastNormalMagnitude),
                               Float(Float16.leastNormalMagnitude) * 0.999, 1e-10, .leastNonzeroMagnitude]
        for _ in 0..<200_000 {
            values.append(Float(bitPattern: UInt32(truncatingIfNeeded: generator.next())))
        }
        for value in values where !value.isNaN {
            let expected = Float16(value).bitPattern
            let got = ek_fp32_to_fp16(value)
            if got != expected { Issue.record("\(value): \(got) ≠ \(expected)"); return }
        }
        #expect(ek_fp16_to_fp32(ek_fp32_to_fp16(.nan)).isNaN)
    }

    // MARK: rows

    /// Rows of random values, plus the edge cases: zeros, large magnitudes, one huge outlier per block.
    static func testRows(k: Int, seed: UInt64) -> [[Float]] {
        var generator = SplitMix64(seed: seed)
        var rows = [Quant.randomValues(k, &generator), Quant.randomValues(k, &generator, scale: 1e-3),
                    [Float](repeating: 0, count: k), [Float](repeating: 65504, count: k),
                    (0..<k).map { $0.isMultiple(of: 2) ? 3e4 : -3e4 }]
        var outliers = Quant.randomValues(k, &generator)
        for block in 0..<(k / 32) { outliers[block * 32 + Int(generator.next() % 32)] = block.isMultiple(of: 2) ? 1e4 : -1e4 }
        rows.append(outliers)
        rows.append((0..<k).map { Float(($0 % 7) - 3) }) // ties in magnitude, both signs
        return rows
    }

    @Test(arguments: Quant.simdISAs)
    func quantizeRowEqualsOracle(isa: KernelISA) throws {
        for k in [32, 96, 576, 4096] {
            for (index, row) in Self.testRows(k: k, seed: UInt64(k)).enumerated() {
                for format in Quant.blockTypes {
                    let expected = Quant.ggufBlocks(format, row, rows: 1, k: k)
                    var got = [UInt8](repeating: 0xee, count: expected.count)
                    #expect(ek_quantize_row(isa.cValue, format.blockFormat!, row, &got, Int64(k)) == EK_OK)
                    #expect(got == expected, "\(isa) \(format) k=\(k) row \(index)")
                }
                var expected = [ek_block_q8_1](repeating: ek_block_q8_1(), count: k / 32)
                var got = expected
                _ = ek_quantize_row_q8_1_ref(row, &expected, Int64(k))
                #expect(ek_quantize_row_q8_1(isa.cValue, row, &got, Int64(k)) == EK_OK)
                #expect(got.flatMap(Quant.bytes) == expected.flatMap(Quant.bytes), "\(isa) q8_1 k=\(k) row \(index)")
            }
        }
    }

    @Test(arguments: Quant.simdISAs)
    func dequantizeRowEqualsOracle(isa: KernelISA) throws {
        var generator = SplitMix64(seed: 5)
        for format in Quant.blockTypes {
            // Random bytes are valid blocks of every format once the scales are finite.
            var blocks = (0..<(format.blockBytes * 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            for block in 0..<64 {
                blocks[block * format.blockBytes + 1] &= 0x3b // keep the fp16 exponent below infinity
                if format == .q4_1 { blocks[block * format.blockBytes + 3] &= 0x3b }
            }
            let expected = Quant.dequantize(format, blocks, rows: 1, k: 64 * 32)
            var got = [Float](repeating: .nan, count: expected.count)
            #expect(ek_dequantize_row(isa.cValue, format.blockFormat!, blocks, &got, Int64(got.count)) == EK_OK)
            #expect(got.map(\.bitPattern) == expected.map(\.bitPattern), "\(isa) \(format)")
        }
    }

    @Test(arguments: Quant.blockTypes)
    func roundTripErrorIsBounded(format: TensorType) {
        var generator = SplitMix64(seed: 21)
        let k = 4096
        let x = Quant.randomValues(k, &generator, scale: 3)
        let y = Quant.dequantize(format, Quant.ggufBlocks(format, x, rows: 1, k: k), rows: 1, k: k)
        for block in 0..<(k / 32) {
            let values = x[(block * 32)..<((block + 1) * 32)]
            let amax = values.map(abs).max()!, lo = values.min()!, hi = values.max()!
            let halfULP: Float = 1.0 / 2048 // fp16 scale rounding, relative
            let bound: Float = switch format {
            case .q8_0: amax / 127 * (0.5 + 127 * halfULP) * 1.001
            case .q4_0: amax / 8 * (1 + 8 * halfULP) * 1.001 // the positive end may clamp to 7·d
            case .q4_1: (hi - lo) / 15 * (0.5 + 15 * halfULP) * 1.001 + abs(lo) * halfULP
            default: 0
            }
            for j in values.indices where abs(y[j] - x[j]) > bound {
                Issue.record("\(format) block \(block): |\(y[j]) − \(x[j])| > \(bound)")
                return
            }
        }
    }

    // MARK: matrix products

    static let shapes: [(m: Int, n: Int, k: Int)] = [
        (1, 1, 32), (1, 15, 64), (1, 16, 96), (1, 17, 576), (1, 100, 4096), (2, 37, 64), (3, 16, 128),
        (4, 33, 96), (5, 48, 576), (7, 9, 1536), (8, 65, 256), (17, 31, 160), (33, 20, 576), (12, 3, 4096),
        // groups over 64 KB: the AVX2 decode GEMV reads both halves of a group in one pass
        (1, 40, 8192), (3, 24, 8192),
    ]

    @Test(arguments: Quant.allISAs, Quant.blockTypes)
    func gemmMatchesOracle(isa: KernelISA, format: TensorType) throws {
        for (index, shape) in Self.shapes.enumerated() {
            var generator = SplitMix64(seed: UInt64(index * 31 + format.blockBytes))
            let wValues = Quant.randomValues(shape.n * shape.k, &generator)
            var xValues = Quant.randomValues(shape.m * shape.k, &generator, scale: 4)
            if index == 3 { xValues[5] = 500 } // one outlier
            let blocks = Quant.ggufBlocks(format, wValues, rows: shape.n, k: shape.k)
            let expected = Quant.referenceGEMM(format, blocks, xValues, m: shape.m, n: shape.n, k: shape.k)
            let w = try blocks.withUnsafeBytes { try QuantizedMatrix(type: format, rows: shape.n, columns: shape.k, blocks: $0) }
            let y = try matmul(try Tensor(shape: [shape.m, shape.k], values: xValues), w, isa: isa, threads: 2)
            let got = try y.scalars()
            if isa == .scalar {
                // Same order, no fused multiply-add: the packed scalar kernel equals the oracle exactly.
                #expect(got.map(\.bitPattern) == expected.map(\.bitPattern), "\(format) \(shape)")
                continue
            }
            let magnitude = Quant.magnitudes(format, blocks, xValues, m: shape.m, n: shape.n, k: shape.k)
            let tolerance = Double(shape.k / 32 + 4) * Double(Float.ulpOfOne)
            var worst = 0.0
            for i in got.indices {
                worst = max(worst, abs(Double(got[i]) - Double(expected[i])) / (tolerance * magnitude[i] + 1e-30))
            }
            #expect(worst <= 1, "\(isa) \(format) \(shape): error \(worst)× the bound")
        }
    }

    /// Scales of 1 and integer activations with a block maximum of 127 make every
    /// step exact, so SIMD and oracle must agree to the bit: the integer dot
    /// products are the same.
    @Test(arguments: Quant.simdISAs, Quant.blockTypes)
    func integerDotProductsAreExact(isa: KernelISA, format: TensorType) throws {
        var generator = SplitMix64(seed: 99)
        let (m, n, k) = (6, 35, 512)
        var blocks = [UInt8]()
        for _ in 0..<(n * k / 32) {
            var block = [UInt8](repeating: 0, count: format.blockBytes)
            withUnsafeBytes(of: ek_fp32_to_fp16(1)) { block[0] = $0[0]; block[1] = $0[1] }
            if format == .q4_1 { withUnsafeBytes(of: ek_fp32_to_fp16(-3)) { block[2] = $0[0]; block[3] = $0[1] } }
            let quants = format == .q4_1 ? 4 : 2
            for j in quants..<block.count { block[j] = UInt8(truncatingIfNeeded: generator.next()) }
            if format == .q8_0 { for j in 2..<block.count where block[j] == 0x80 { block[j] = 0x81 } } // −128 is not a Q8_0 value
            blocks += block
        }
        var x = (0..<(m * k)).map { _ in Float(Int(generator.next() % 255) - 127) }
        for block in 0..<(m * k / 32) { x[block * 32 + 7] = 127 } // block maximum 127: scale exactly 1
        let expected = Quant.referenceGEMM(format, blocks, x, m: m, n: n, k: k)
        let w = try blocks.withUnsafeBytes { try QuantizedMatrix(type: format, rows: n, columns: k, blocks: $0) }
        let got = try matmul(try Tensor(shape: [m, k], values: x), w, isa: isa, threads: 1).scalars()
        #expect(got.map(\.bitPattern) == expected.map(\.bitPattern))
        #expect(expected.allSatisfy { $0 == $0.rounded() }, "the oracle's results are integers")
    }

    /// Q8_0 whose values lie in [−64, 63] is flagged at packing and runs the no-VNNI kernel's faster path (weights + 64
    /// as VPMADDUBSW's unsigned operand): at its extremes (−64 and 63 against activations of ±127, every int16 pair
    /// sum at its largest) and on random values, every ISA equals the oracle to the bit. Full-range Q8_0 is not
    /// flagged, and `q8ValueLimit: 63` makes flagged weights within half a step of a 7-bit rounding.
    @Test(arguments: Quant.allISAs)
    func sevenBitQ8WeightsAreFlaggedAndExact(isa: KernelISA) throws {
        var generator = SplitMix64(seed: 7)
        let (m, n, k) = (5, 37, 320)
        var blocks = [UInt8]()
        for b in 0..<(n * k / 32) {
            var block = [UInt8](repeating: 0, count: 34)
            withUnsafeBytes(of: ek_fp32_to_fp16(1)) { block[0] = $0[0]; block[1] = $0[1] }
            for j in 2..<34 {
                let value = b % 3 == 0 ? (j % 2 == 0 ? -64 : 63) : Int(generator.next() % 128) - 64
                block[j] = UInt8(bitPattern: Int8(value))
            }
            blocks += block
        }
        let w = try blocks.withUnsafeBytes { try QuantizedMatrix(type: .q8_0, rows: n, columns: k, blocks: $0) }
        #expect(w.flags == EK_PACKED_Q8_SEVEN_BITS | EK_PACKED_Q8_ROW_SCALES) // every block's scale is 1: one scale a row too
        for rows in [m, 19] { // 19: more than 16 rows, the sixteen-column tiles of AVX2 without VNNI (tiles of 4 and 3)
            var x = (0..<(rows * k)).map { i in i % 3 == 0 ? Float(i % 2 == 0 ? 127 : -127) : Float(Int(generator.next() % 255) - 127) }
            for block in 0..<(rows * k / 32) { x[block * 32 + 1] = 127 } // block maximum 127: scale exactly 1
            let expected = Quant.referenceGEMM(.q8_0, blocks, x, m: rows, n: n, k: k)
            let got = try matmul(try Tensor(shape: [rows, k], values: x), w, isa: isa, threads: 2).scalars()
            #expect(got.map(\.bitPattern) == expected.map(\.bitPattern), "\(isa), \(rows) rows")
        }

        var values = Quant.randomValues(n * k, &generator)
        values[3] = 2 // a block whose largest value is alone: 127 in full range
        let full = try WeightMatrix(try Tensor(shape: [n, k], values: values), as: .q8_0).packed()
        #expect(full.flags == 0, "full-range Q8_0 reaches ±127")
        let limited = try WeightMatrix(try Tensor(shape: [n, k], values: values), as: .q8_0, q8ValueLimit: 63)
        #expect(try limited.packed().flags == EK_PACKED_Q8_SEVEN_BITS)
        let restored = try limited.fp32().scalars()
        for b in 0..<(n * k / 32) {
            let block = values[(b * 32)..<(b * 32 + 32)]
            let step = Double(block.map(abs).max()!) / 63
            for i in block.indices { #expect(abs(Double(restored[i]) - Double(values[i])) <= step * 0.54 + 1e-6) } // half a step, plus the fp16 scale's rounding over 63 steps
        }
    }

    static let testPlacement = Placement(op: .matmul, type: .q8_0, unit: .cpu, backend: "test", plugin: false, fallbackReason: nil)

    /// Per-channel int8 (`scalePerRow`): every block of a row shares the row's scale, the packed copy says so, its
    /// products take row-scaled activations — with smoothing column scales when given — and equal the fp32 product
    /// within what one 8-bit scale per row and a row's largest activation allow, on every ISA; without
    /// `scalePerRow` nothing changes.
    @Test(arguments: Quant.allISAs)
    func rowScaledQ8MatchesTheFloatProduct(isa: KernelISA) throws {
        var generator = SplitMix64(seed: 11)
        let (m, n, k) = (7, 37, 384)
        let values = Quant.randomValues(n * k, &generator), x = Quant.randomValues(m * k, &generator).map { $0 * 3 }
        let weights = try Tensor(shape: [n, k], values: values)
        let perBlock = try WeightMatrix(weights, as: .q8_0)
        let perBlockFlags = try perBlock.packed().flags
        #expect(!perBlock.scalePerRow && perBlockFlags & EK_PACKED_Q8_ROW_SCALES == 0)
        let perBlockPreparation = try BoundMatmul.packed(perBlock, isa: isa, placement: Self.testPlacement).preparation
        let scales = (0..<k).map { Float(0.5 + Double($0 % 7) * 0.25) }
        let columnScales = try Tensor(shape: [k], values: scales)
        let divided = try Tensor(shape: [n, k], values: values.indices.map { values[$0] / scales[$0 % k] })
        let cases: [(WeightMatrix, String)] = [(try WeightMatrix(weights, as: .q8_0, scalePerRow: true), "row-scaled"),
                                               (try WeightMatrix(weights, as: .q8_0, q8ValueLimit: 63, scalePerRow: true), "seven-bit"),
                                               (try WeightMatrix(divided, as: .q8_0, scalePerRow: true, activationColumnScales: columnScales),
                                                "smoothed")]
        for (matrix, label) in cases {
            let flags = try matrix.packed().flags
            #expect(matrix.scalePerRow && flags & EK_PACKED_Q8_ROW_SCALES != 0, "\(label)")
            let bound = try BoundMatmul.packed(matrix, isa: isa, placement: Self.testPlacement)
            #expect(bound.preparation != perBlockPreparation)
            var y = try Tensor(zeros: [m, n])
            try bound.multiply(try Tensor(shape: [m, k], values: x), into: &y, threads: 2)
            let got = try y.scalars()
            let limit: Float = label == "seven-bit" ? 63 : 127
            for i in 0..<m {
                let row = x[(i * k)..<(i * k + k)]
                let rowMax = label == "smoothed" ? row.indices.map { abs(row[$0]) * scales[$0 % k] }.max()! : row.map(abs).max()!
                for r in 0..<n {
                    let w = values[(r * k)..<(r * k + k)]
                    let exact = zip(row, w).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
                    // Each side off by at most half its step (the row's largest / 127, or / 63), times the other's sum of
                    // magnitudes; the weights' step taken on their largest (smoothed: divided by the smallest scale).
                    let weightStep = Double(w.map(abs).max()!) / Double(limit) / (label == "smoothed" ? 0.5 : 1)
                    let activationStep = Double(rowMax) / 127 / (label == "smoothed" ? 0.5 : 1)
                    let bound = 0.5 * weightStep * row.reduce(0.0) { $0 + Double(abs($1)) } * 2
                        + 0.5 * activationStep * w.reduce(0.0) { $0 + Double(abs($1)) } * 2 + 1e-3
                    #expect(abs(Double(got[i * n + r]) - exact) <= bound, "\(isa) \(label) row \(i) output \(r)")
                }
            }
        }
    }

    /// The largest quants (nibbles of 15, Q8_0's 127) against activations of 127: the int16 partial sums of the
    /// kernels without VNNI at their bound (eight 4-bit pair sums of 2·15·127 add to 30 480 < 2¹⁵), still exact.
    @Test(arguments: Quant.simdISAs, Quant.blockTypes)
    func largestQuantsAreExact(isa: KernelISA, format: TensorType) throws {
        let (m, n, k) = (6, 17, 256)
        var block = [UInt8](repeating: format == .q8_0 ? 0x7F : 0xFF, count: format.blockBytes)
        withUnsafeBytes(of: ek_fp32_to_fp16(1)) { block[0] = $0[0]; block[1] = $0[1] }
        if format == .q4_1 { withUnsafeBytes(of: ek_fp32_to_fp16(-3)) { block[2] = $0[0]; block[3] = $0[1] } }
        let blocks = [[UInt8]](repeating: block, count: n * k / 32).flatMap { $0 }
        let x = (0..<(m * k)).map { i in Float(i / k % 2 == 0 ? 127 : -127) }
        let expected = Quant.referenceGEMM(format, blocks, x, m: m, n: n, k: k)
        let w = try blocks.withUnsafeBytes { try QuantizedMatrix(type: format, rows: n, columns: k, blocks: $0) }
        let got = try matmul(try Tensor(shape: [m, k], values: x), w, isa: isa, threads: 1).scalars()
        #expect(got.map(\.bitPattern) == expected.map(\.bitPattern), "\(isa) \(format)")
    }

    @Test(arguments: Quant.allISAs)
    func rowRangeWritesOnlyItsColumns(isa: KernelISA) throws {
        var generator = SplitMix64(seed: 3)
        let (m, n, k) = (5, 53, 64)
        let blocks = Quant.ggufBlocks(.q4_0, Quant.randomValues(n * k, &generator), rows: n, k: k)
        let x = Quant.randomValues(m * k, &generator)
        let expected = Quant.referenceGEMM(.q4_0, blocks, x, m: m, n: n, k: k)
        let w = try blocks.withUnsafeBytes { try QuantizedMatrix(type: .q4_0, rows: n, columns: k, blocks: $0) }
        var act = [ek_block_q8_act](repeating: ek_block_q8_act(), count: m * k / 32)
        #expect(ek_quantize_activations(isa.cValue, EK_FORMAT_Q4_0, x, Int64(m), Int64(k), &act, act.count * 48) == EK_OK)
        for (begin, end) in [(0, 53), (5, 37), (16, 32), (17, 18), (50, 53), (9, 9)] {
            var y = [Float](repeating: .nan, count: m * n)
            var matrix = w.cMatrix
            #expect(ek_gemm_packed(isa.cValue, &matrix, act, Int64(m), &y, Int64(n), Int64(begin), Int64(end)) == EK_OK)
            for i in 0..<m {
                for r in 0..<n {
                    let value = y[i * n + r]
                    if (begin..<end).contains(r) {
                        #expect(abs(value - expected[i * n + r]) <= 1e-4 * max(1, abs(expected[i * n + r])), "\(isa) [\(begin), \(end)) row \(r)")
                    } else {
                        #expect(value.isNaN, "\(isa) [\(begin), \(end)) wrote row \(r)")
                    }
                }
            }
        }
    }

    @Test func threadSplitDoesNotChangeResults() throws {
        var generator = SplitMix64(seed: 8)
        let (m, n, k) = (9, 301, 1024)
        let w = try QuantizedMatrix(quantizing: try Tensor(shape: [n, k], values: Quant.randomValues(n * k, &generator)), to: .q4_1)
        let x = try Tensor(shape: [m, k], values: Quant.randomValues(m * k, &generator))
        let one = try matmul(x, w, threads: 1).scalars()
        for threads in [2, 3, 8] {
            #expect(try matmul(x, w, threads: threads).scalars() == one, "\(threads) threads")
        }
    }

    @Test func quantizingInitMatchesOracleBlocks() throws {
        var generator = SplitMix64(seed: 12)
        let values = Quant.randomValues(20 * 64, &generator)
        let fromTensor = try QuantizedMatrix(quantizing: try Tensor(shape: [20, 64], values: values), to: .q8_0)
        let fromBlocks = try Quant.ggufBlocks(.q8_0, values, rows: 20, k: 64).withUnsafeBytes {
            try QuantizedMatrix(type: .q8_0, rows: 20, columns: 64, blocks: $0)
        }
        let size = ek_packed_size(EK_FORMAT_Q8_0, 20, 64)
        #expect(memcmp(fromTensor.packed.baseAddress, fromBlocks.packed.baseAddress, size) == 0)
        #expect(fromTensor.byteCount == 20 * 2 * 34)
    }
}
