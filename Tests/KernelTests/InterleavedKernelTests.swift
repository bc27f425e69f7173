import _CEmberKernels
import Testing
@testable import EmberCore
import EmberTestSupport

/// The interleaved layout of the row formats (ek_interleaved.h): lossless, and every ISA's kernels over it equal
/// the row oracle on the GGUF blocks it was made from — odd row counts (a padded last group), partial row ranges,
/// 1–11 activation rows (whole tiles of eight on AVX-512, four on AVX2, and their remainders), and more rows than a
/// tile over 2304 columns: the weights decoded once per GEMM, 2048 columns at a time on AVX2 and 1024 on AVX-512,
/// the last chunk partial (and 262 rows: more than the 256 whose sums the AVX2 driver keeps at a time across the
/// chunks). On
/// AVX-512 the 512-bit kernels take groups in pairs: ranges whose pair ends inside its second group
/// (3..<13) or leave a lone group to the 256-bit tile (16..<40).
@Suite("Interleaved kernels")
struct InterleavedKernelTests {
    static let types: [TensorType] = TensorType.table.filter { $0.blockFormat.map(ek_format_interleavable) ?? false }

    @Test func theTypesThatMatterForSpeedHaveTheLayout() {
        #expect(Set(Self.types.map(\.name)) == ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"])
        for type in Self.types {
            for isa in Quant.simdISAs where isa != .neon {
                // Q4_0 and Q4_1 keep the packed layout on AVX-512 (its VNNI GEMV reads at the bandwidth already).
                let expected = !(isa.isAVX512 && [TensorType.q4_0, .q4_1].contains(type))
                #expect(ek_interleaved_available(isa.cValue, type.blockFormat!) == expected, "\(type) on \(isa)")
            }
            #expect(!ek_interleaved_available(EK_ISA_SCALAR, type.blockFormat!))
        }
    }

    /// Interleaving then de-interleaving gives the GGUF bytes back, whatever the row count.
    @Test(arguments: InterleavedKernelTests.types)
    func interleavingIsLossless(_ type: TensorType) throws {
        let format = try #require(type.blockFormat)
        var generator = SplitMix64(seed: UInt64(type.id) + 40)
        for (n, blocksPerRow) in [(1, 1), (7, 2), (8, 1), (13, 3), (33, 2)] {
            let k = blocksPerRow * type.blockSize
            let blocks = GGUFTypeTests.randomBlocks(type, rows: n, k: k, &generator)
            let size = ek_interleaved_size(format, Int64(n), Int64(k))
            #expect(size >= blocks.count && size <= (n + 7) / 8 * 8 * blocks.count / n * 103 / 100, "\(type): \(size) bytes for \(blocks.count)")
            var interleaved = [UInt8](repeating: 0xEE, count: size)
            #expect(ek_interleave_weights(format, blocks, Int64(n), Int64(k), &interleaved, size) == EK_OK)
            var back = [UInt8](repeating: 0, count: blocks.count)
            #expect(ek_deinterleave_weights(format, interleaved, Int64(n), Int64(k), &back, back.count) == EK_OK)
            #expect(back == blocks, "\(type) n=\(n) k=\(k): the round trip changed the blocks")
        }
    }

    @Test(arguments: InterleavedKernelTests.types)
    func kernelsMatchTheRowOracle(_ type: TensorType) throws {
        let format = try #require(type.blockFormat)
        var generator = SplitMix64(seed: UInt64(type.id) + 90)
        for isa in [KernelISA.scalar] + Quant.simdISAs {
            for (m, n, blocksPerRow, rows) in [(1, 37, 1, 2..<36), (3, 19, 3, 0..<19), (5, 17, 2, 9..<16), (4, 33, 1, 1..<33),
                                               (2, 7, 5, 0..<7), (6, 64, 2, 16..<40), (11, 21, 2, 3..<21),
                                               (10, 19, 2304 / type.blockSize, 2..<19), (9, 29, 2, 3..<13),
                                               (262, 11, 2304 / type.blockSize, 2..<11),
                                               // two pairs of groups a tile (AVX-512 per-32 formats from 9 rows):
                                               // a range starting inside the first pair, then inside the second
                                               (13, 70, 2304 / type.blockSize, 5..<66), (12, 64, 3, 21..<60)] {
                let k = blocksPerRow * type.blockSize
                let blocks = GGUFTypeTests.randomBlocks(type, rows: n, k: k, &generator)
                let x = Quant.randomValues(m * k, &generator, scale: 3)
                let (expected, _) = GGUFTypeTests.rowProduct(format, blocks, x, m: m, n: n, k: k, isa: .scalar)
                let got = Self.interleavedProduct(format, blocks, x, m: m, n: n, k: k, isa: isa, outputs: rows)
                GGUFTypeTests.expectOracle(got, expected, type: type, blocks: blocks, x: x, m: m, n: n, k: k, rows: rows,
                                           label: "interleaved on \(isa)")
            }
        }
    }

    /// Extreme blocks: every quant at its largest (the int16 partial sums at their bound) against activations of ±127,
    /// and every quant byte 0 (the most negative values of the offset formats: Q4_0's −8, Q6_K's −32, which the
    /// decoded GEMMs multiply by the activations + 128).
    @Test(arguments: InterleavedKernelTests.types)
    func extremeQuantsDoNotOverflow(_ type: TensorType) throws {
        let format = try #require(type.blockFormat)
        let (n, k) = (8, type.blockSize * 2)
        // Quantizes to ±127; nine rows, so the GEMMs that decode the weights once (more rows than a tile) run too.
        let m = 9
        let x = (0..<(m * k)).map { j in Float((j % k) % 3 == 0 ? -1 : 1) }
        for fill: UInt8 in [0xFF, 0x00] {
            let blocks = Self.extremeBlocks(type, rows: n, k: k, fill: fill)
            let (expected, _) = GGUFTypeTests.rowProduct(format, blocks, x, m: m, n: n, k: k, isa: .scalar)
            for isa in Quant.simdISAs {
                for rows in [1, m] { // the decode GEMV, and a GEMM over decoded weights
                    let got = Self.interleavedProduct(format, blocks, x, m: rows, n: n, k: k, isa: isa, outputs: 0..<n)
                    for i in 0..<(rows * n) {
                        #expect(abs(got[i] - expected[i]) <= 1e-5 * max(1, abs(expected[i])),
                                "\(type) fill \(fill) \(isa) m=\(rows) output \(i): \(got[i]) vs \(expected[i])")
                    }
                }
            }
        }
    }

    /// Random blocks of `type` whose fp16 scale fields are kept (the random filler makes them sane) and every other
    /// byte set to `fill`: 0xFF the largest nibbles, high bits and 6-bit scales/minimums each format can hold, 0x00 the
    /// most negative values. Q6_K's int8 sub-block scales stay 0xFF (−1) so that zero quants still count.
    static func extremeBlocks(_ type: TensorType, rows n: Int, k: Int, fill: UInt8) -> [UInt8] {
        var generator = SplitMix64(seed: 5)
        var blocks = GGUFTypeTests.randomBlocks(type, rows: n, k: k, &generator)
        let scaleFields = scaleByteOffsets(type)
        for b in 0..<(blocks.count / type.blockBytes) {
            for j in 0..<type.blockBytes where !scaleFields.contains(j) {
                let isQ6KScale = type == .q6_K && (192..<208).contains(j)
                blocks[b * type.blockBytes + j] = isQ6KScale ? 0xFF : fill
            }
        }
        return blocks
    }

    /// `blocks` (n rows of k) interleaved and multiplied on `isa` with the first m rows of `x` quantized: the m×n
    /// outputs (only the columns in `outputs` written; the rest NaN).
    static func interleavedProduct(_ format: ek_format, _ blocks: [UInt8], _ x: [Float], m: Int, n: Int, k: Int,
                                   isa: KernelISA, outputs: Range<Int>) -> [Float] {
        let size = ek_interleaved_size(format, Int64(n), Int64(k))
        var interleaved = [UInt8](repeating: 0, count: size)
        #expect(ek_interleave_weights(format, blocks, Int64(n), Int64(k), &interleaved, size) == EK_OK)
        let bytes = ek_row_activation_size(format, Int64(m), Int64(k))
        var act = [UInt8](repeating: 0, count: bytes)
        #expect(ek_quantize_row_activations(isa.cValue, format, x, Int64(m), Int64(k), &act, bytes) == EK_OK)
        var got = [Float](repeating: .nan, count: m * n)
        #expect(ek_gemm_interleaved(isa.cValue, format, interleaved, Int64(n), Int64(k), act, Int64(m), &got, Int64(n),
                                    Int64(outputs.lowerBound), Int64(outputs.upperBound)) == EK_OK)
        return got
    }

    @Test func badArgumentsAreRefused() {
        var y = [Float](repeating: 0, count: 8)
        let w = [UInt8](repeating: 0, count: 4096), act = [UInt8](repeating: 0, count: 4096)
        #expect(ek_interleaved_size(EK_FORMAT_Q4_K, 8, 255) == 0)
        #expect(ek_interleaved_size(EK_FORMAT_Q8_0, 8, 256) == 0)
        #expect(ek_gemm_interleaved(EK_ISA_SCALAR, EK_FORMAT_Q4_K, w, 2, 255, act, 1, &y, 2, 0, 2) == EK_ERR_SHAPE)
        #expect(ek_gemm_interleaved(EK_ISA_SCALAR, EK_FORMAT_Q4_K, w, 2, 256, act, 1, &y, 2, 0, 3) == EK_ERR_RANGE)
        #expect(ek_gemm_interleaved(EK_ISA_SCALAR, EK_FORMAT_Q3_K, w, 2, 256, act, 1, &y, 2, 0, 2) == EK_ERR_FORMAT)
        #expect(ek_gemm_interleaved(EK_ISA_SCALAR, EK_FORMAT_Q4_K, nil, 2, 256, act, 1, &y, 2, 0, 2) == EK_ERR_NULL_POINTER)
        var small = [UInt8](repeating: 0, count: 10)
        #expect(ek_interleave_weights(EK_FORMAT_Q5_0, w, 8, 32, &small, small.count) == EK_ERR_BUFFER_TOO_SMALL)
        #expect(ek_deinterleave_weights(EK_FORMAT_Q5_0, w, 8, 32, &small, small.count) == EK_ERR_BUFFER_TOO_SMALL)
    }

    /// Byte offsets of the fp16 scale fields inside one GGUF block of `type` (left as the random filler made them).
    static func scaleByteOffsets(_ type: TensorType) -> Set<Int> {
        switch type.name {
        case "Q4_0", "Q5_0", "IQ4_NL", "IQ4_XS": [0, 1]
        case "Q4_1", "Q5_1", "Q4_K", "Q5_K": [0, 1, 2, 3]
        case "Q6_K": [208, 209]
        default: []
        }
    }
}
