import _CEmberKernels
import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

/// Every GGUF type Ember computes with: the scalar dequantizers against the `gguf` package's on real rows
/// made by llama-quantize (Fixtures/gguf_types.json), and every SIMD row kernel against the scalar oracle
/// on odd sizes.
@Suite("GGUF types")
struct GGUFTypeTests {
    struct Fixture: Decodable {
        let type: String
        let gguf_type_id: UInt32
        let source: String
        let tensor: String
        let rows: [Int]
        let columns: Int
        let blocks_base64: String
        let values_base64: String
    }

    static let fixtures: [Fixture] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/gguf_types.json")
        guard let data = try? Data(contentsOf: url), let list = try? JSONDecoder().decode([Fixture].self, from: data) else { return [] }
        return list
    }()

    static let blockTypes: [TensorType] = TensorType.table.filter { $0.blockFormat != nil }

    @Test func everyTypeTheIssueListsHasAFixture() {
        let names = Set(Self.fixtures.map(\.type))
        for name in ["F16", "BF16", "Q8_0", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"] {
            #expect(names.contains(name), "no fixture for \(name)")
            #expect(TensorType(name: name)?.canDequantize == true, "\(name) not computable")
        }
    }

    /// Ember's dequantizers (every ISA) equal the gguf package's on llama-quantize's rows.
    @Test(arguments: GGUFTypeTests.fixtures.map(\.type))
    func dequantizesRealRowsAsTheGGUFPackageDoes(_ name: String) throws {
        let fixture = try #require(Self.fixtures.first { $0.type == name })
        let type = try #require(TensorType(ggufID: fixture.gguf_type_id))
        #expect(type.name == name)
        let blocks = try #require(Data(base64Encoded: fixture.blocks_base64))
        let expected = try #require(Data(base64Encoded: fixture.values_base64)).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let columns = fixture.columns, rows = fixture.rows.count
        #expect(blocks.count == type.byteCount(rows: rows, columns: columns), "\(name): \(blocks.count) bytes")
        for isa in Quant.allISAs {
            var values = [Float](repeating: .nan, count: rows * columns)
            try blocks.withUnsafeBytes { raw in
                for row in 0..<rows {
                    try values.withUnsafeMutableBufferPointer { out in
                        try type.dequantizeRow(raw.baseAddress! + row * raw.count / rows, columns: columns,
                                               into: out.baseAddress! + row * columns, isa: isa)
                    }
                }
            }
            var worst = 0 as Float, at = 0
            for index in values.indices {
                let error = abs(values[index] - expected[index]) / max(abs(expected[index]), 1e-6)
                if !(error <= worst) { (worst, at) = (error, index) }
            }
            // The same fp32 products; numpy may round d·scale·q in another order: a few ulp.
            #expect(worst <= 1e-6, "\(name) on \(isa): element \(at) is \(values[at]), gguf says \(expected[at]) (\(fixture.tensor) of \(fixture.source))")
        }
    }

    /// The row oracle's integer dot products equal the dequantized weights times the quantized activations.
    @Test(arguments: GGUFTypeTests.fixtures.map(\.type).filter { TensorType(name: $0)?.blockFormat != nil })
    func rowOracleAgreesWithDequantizedWeights(_ name: String) throws {
        let fixture = try #require(Self.fixtures.first { $0.type == name })
        let type = try #require(TensorType(name: name)), format = try #require(type.blockFormat)
        let blocks = [UInt8](try #require(Data(base64Encoded: fixture.blocks_base64)))
        let (rows, k) = (fixture.rows.count, fixture.columns)
        var generator = SplitMix64(seed: 21)
        let x = Quant.randomValues(k, &generator)
        let weights = try #require(Data(base64Encoded: fixture.values_base64)).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let (y, xq) = Self.rowProduct(format, blocks, x, m: 1, n: rows, k: k, isa: .scalar)
        for row in 0..<rows {
            var exact = 0.0, bound = 0.0
            for j in 0..<k {
                exact += Double(weights[row * k + j]) * Double(xq[j])
                bound += abs(Double(weights[row * k + j]) * Double(xq[j]))
            }
            #expect(abs(Double(y[row]) - exact) <= 1e-5 * bound + 1e-6, "\(name) row \(row): \(y[row]) vs \(exact)")
        }
    }

    /// Every ISA's row kernels equal the scalar oracle on odd sizes, partial row ranges and 1–5 activation rows.
    @Test(arguments: GGUFTypeTests.blockTypes)
    func simdRowKernelsMatchTheOracle(_ type: TensorType) throws {
        let format = try #require(type.blockFormat)
        var generator = SplitMix64(seed: UInt64(type.id) + 7)
        for isa in Quant.simdISAs {
            for (m, n, blocksPerRow) in [(1, 37, 1), (3, 19, 3), (5, 17, 2), (4, 33, 1), (2, 7, 5)] {
                let k = blocksPerRow * type.blockSize
                let blocks = Self.randomBlocks(type, rows: n, k: k, &generator)
                let x = Quant.randomValues(m * k, &generator, scale: 3)
                let (expected, _) = Self.rowProduct(format, blocks, x, m: m, n: n, k: k, isa: .scalar)
                let (got, _) = Self.rowProduct(format, blocks, x, m: m, n: n, k: k, isa: isa, rows: 2..<(n - 1))
                Self.expectOracle(got, expected, type: type, blocks: blocks, x: x, m: m, n: n, k: k, rows: 2..<(n - 1), label: "\(isa)")
            }
        }
    }

    /// SIMD activation quantization equals the scalar one byte for byte (per 32 and per 256).
    @Test func activationQuantizationIsTheOraclesOnEveryISA() throws {
        var generator = SplitMix64(seed: 3)
        for type in [TensorType.q4_K, .q5_0, .q5_1] {
            let format = try #require(type.blockFormat)
            let (m, k) = (3, 512)
            var x = Quant.randomValues(m * k, &generator, scale: 5)
            for index in 256..<512 { x[index] = 0 } // an all-zero super-block
            let bytes = ek_row_activation_size(format, Int64(m), Int64(k))
            var expected = [UInt8](repeating: 0, count: bytes)
            #expect(ek_quantize_row_activations(EK_ISA_SCALAR, format, x, Int64(m), Int64(k), &expected, bytes) == EK_OK)
            for isa in Quant.simdISAs {
                var got = [UInt8](repeating: 0xAA, count: bytes)
                #expect(ek_quantize_row_activations(isa.cValue, format, x, Int64(m), Int64(k), &got, bytes) == EK_OK)
                #expect(got == expected, "\(type) activations on \(isa)")
            }
        }
    }

    /// fp16 and bf16 weights: every ISA equals the scalar loop within fp32 accumulation error, any k.
    @Test func halfPrecisionKernelsMatchTheScalarLoop() throws {
        var generator = SplitMix64(seed: 9)
        for bf16 in [false, true] {
            // decode's single row (AVX2: a row at a time up to 3 KB, four vectors a step, then one, then scalars: k
            // 576, 135; longer rows four side by side: k 1600),
            // two rows' four-row groups and their remainders, the prefill tiles (m > 2), row sub-ranges;
            // more rows than one tile (AVX2: 3, AVX-512: 6) widen each four weight rows once, remainders included;
            // from 40 rows and 64 weight rows the packed outer products widen each panel (edge rows, two column blocks)
            for (m, n, k, rows) in [(1, 9, 77, 0..<9), (3, 5, 16, 0..<5), (6, 4, 200, 0..<4), (2, 11, 45, 1..<10),
                                    (1, 13, 24, 3..<13), (2, 8, 16, 0..<8), (7, 11, 77, 2..<11), (13, 6, 33, 0..<6),
                                    (1, 10, 576, 1..<9), (1, 5, 135, 0..<5), (1, 6, 1600, 1..<6),
                                    (9, 10, 1000, 0..<10), // columns in two chunks, the second with a remainder
                                    (43, 77, 300, 3..<77), (40, 64, 16, 0..<64)] {
                let w: [UInt16] = (0..<(n * k)).map { _ in
                    let value = generator.nextUnitFloat() * 2 - 1
                    return bf16 ? UInt16(value.bitPattern >> 16) : ek_fp32_to_fp16(value)
                }
                let x = Quant.randomValues(m * k, &generator)
                var expected = [Float](repeating: 0, count: m * n)
                let (first, end) = (Int64(rows.lowerBound), Int64(rows.upperBound))
                #expect(ek_gemm_half(EK_ISA_SCALAR, bf16, w, Int64(n), Int64(k), x, Int64(m), &expected, Int64(n), first, end) == EK_OK)
                for isa in Quant.simdISAs {
                    var got = [Float](repeating: 0, count: m * n)
                    #expect(ek_gemm_half(isa.cValue, bf16, w, Int64(n), Int64(k), x, Int64(m), &got, Int64(n), first, end) == EK_OK)
                    for index in got.indices {
                        #expect(abs(got[index] - expected[index]) <= 1e-4 * Float(k).squareRoot(), "bf16=\(bf16) \(isa) m=\(m) n=\(n) k=\(k)")
                    }
                }
            }
        }
    }

    /// Rows of no columns (k = 0) are empty sums: every ISA's fp32 and fp16/bf16 kernels write zeros over what y
    /// held, at decode's row counts and at more rows than a tile (the blocks size their panels by k).
    @Test func emptyRowsGiveZeros() {
        let (w, x): ([Float], [Float]) = ([0], [0]), half: [UInt16] = [0]
        for isa in Quant.simdISAs {
            for m in [1, 2, 7] {
                var y = [Float](repeating: 9, count: m * 5)
                #expect(ek_gemm_f32(isa.cValue, w, 5, 0, x, Int64(m), &y, 5, 0, 5) == EK_OK)
                #expect(y.allSatisfy { $0 == 0 }, "fp32 \(isa) m=\(m)")
                for bf16 in [false, true] {
                    y = [Float](repeating: 9, count: m * 5)
                    #expect(ek_gemm_half(isa.cValue, bf16, half, 5, 0, x, Int64(m), &y, 5, 0, 5) == EK_OK)
                    #expect(y.allSatisfy { $0 == 0 }, "bf16=\(bf16) \(isa) m=\(m)")
                }
            }
        }
    }

    /// fp32 weights read as they lie (the fp32 route's few-row kernel): every ISA equals the in-order loop within
    /// fp32 accumulation error — four-row blocks and their remainders, activation tiles of every size (1–13 rows:
    /// AVX-512 takes six at a time, AVX2 three), k not a multiple of the vector width, row sub-ranges; rows longer
    /// than 768 columns in chunks (2 and 4 of them, the last shorter and not a multiple of the vector width), with
    /// the next chunk's or weight group's lines prefetched (streams of one and two rows do not chunk); 131 rows of
    /// 1,536 in three panels of activation rows (AVX-512: at most 60 rows each, AVX2 63). From 40 activation rows
    /// and 64 weight rows the packed outer products: panels of 32 (AVX2 16) weight rows with a shorter last one and
    /// a sub-range, 8 × 8 transposes with their edges, activation tiles of 12 (AVX2 6) with every shorter remainder,
    /// k in blocks of 256 with a shorter last, more than 480 activation rows (two row blocks); 39 rows and 63 weight
    /// rows stay on the tiles.
    @Test func fp32KernelMatchesTheScalarLoop() throws {
        var generator = SplitMix64(seed: 19)
        for (m, n, k, rows) in [(1, 9, 77, 0..<9), (2, 11, 45, 1..<10), (3, 5, 16, 0..<5), (6, 8, 200, 0..<8),
                                (7, 13, 384, 3..<13), (13, 6, 33, 0..<6), (12, 17, 64, 2..<17), (3, 12, 769, 0..<12),
                                (8, 9, 1539, 1..<9), (1, 6, 1539, 0..<6), (131, 5, 1536, 0..<5), (45, 77, 300, 2..<77),
                                (40, 70, 8, 0..<70), (43, 66, 257, 0..<66), (517, 64, 20, 0..<64), (48, 65, 1, 1..<65),
                                (39, 70, 40, 0..<70), (45, 63, 40, 0..<63), (1, 7, 40, 2..<7)] {
            let w = Quant.randomValues(n * k, &generator), x = Quant.randomValues(m * k, &generator)
            var expected = [Float](repeating: 0, count: m * n)
            let (first, end) = (Int64(rows.lowerBound), Int64(rows.upperBound))
            #expect(ek_gemm_f32(EK_ISA_SCALAR, w, Int64(n), Int64(k), x, Int64(m), &expected, Int64(n), first, end) == EK_OK)
            for isa in Quant.simdISAs {
                #expect(ek_gemm_f32_is_simd(isa.cValue) == (isa != .neon), "\(isa)")
                var got = [Float](repeating: 0, count: m * n)
                #expect(ek_gemm_f32(isa.cValue, w, Int64(n), Int64(k), x, Int64(m), &got, Int64(n), first, end) == EK_OK)
                for index in got.indices {
                    #expect(abs(got[index] - expected[index]) <= 1e-5 * Float(k).squareRoot() * max(1, abs(expected[index])),
                            "\(isa) m=\(m) n=\(n) k=\(k) [\(index)]: \(got[index]) vs \(expected[index])")
                }
            }
        }
        #expect(!ek_gemm_f32_is_simd(EK_ISA_SCALAR))
        var y = [Float](repeating: 0, count: 4)
        #expect(ek_gemm_f32(EK_ISA_SCALAR, nil, 2, 2, y, 1, &y, 2, 0, 2) == EK_ERR_NULL_POINTER)
        #expect(ek_gemm_f32(EK_ISA_SCALAR, y, 2, 2, y, 1, &y, 1, 0, 2) == EK_ERR_SHAPE)
        #expect(ek_gemm_f32(EK_ISA_SCALAR, y, 2, 2, y, 1, &y, 2, 1, 3) == EK_ERR_RANGE)
    }

    /// fp16 weights are made from fp32 ones (the fp16 precision): F16 rounds to nearest even as F16C does, element by
    /// element as the scalar conversion; BF16 rounds to nearest even on its own cases; a finite value beyond F16's
    /// range is refused with its place and value rather than made infinite.
    @Test func halfTypesAreMadeFromFP32() throws {
        var generator = SplitMix64(seed: 3)
        var values = (0..<1000).map { _ in (generator.nextUnitFloat() * 2 - 1) * 100 }
        values += [0, -0.0, 6e-8, 3e-5, 65504, 65519, -65519, .infinity, -.infinity, 1 + 1 / 2048, 1 + 3 / 2048]
        var halves = [UInt16](repeating: 0, count: values.count)
        try halves.withUnsafeMutableBytes { try TensorType.f16.quantizeRow(values, columns: values.count, into: $0.baseAddress!) }
        #expect(halves == values.map { ek_fp32_to_fp16($0) })
        #expect(halves[values.count - 2] == 0x3C00 && halves[values.count - 1] == 0x3C02, "ties to even")
        let oneStep = Float(bitPattern: 0x3F80_0000 | 1 << 15) // 1 + 2⁻⁸: halfway between bf16 1 and 1 + 2⁻⁷
        let cases: [(Float, UInt16)] = [(1, 0x3F80), (oneStep, 0x3F80), (Float(bitPattern: 0x3F81_8000), 0x3F82),
                                        (Float(bitPattern: 0x3F80_8001), 0x3F81), (-2.5, 0xC020), (-0.0, 0x8000),
                                        (.infinity, 0x7F80), (.greatestFiniteMagnitude, 0x7F80), (Float(bitPattern: 0x0001_16C2), 0x0001)]
        var brain = [UInt16](repeating: 0, count: cases.count + 1)
        try brain.withUnsafeMutableBytes {
            try TensorType.bf16.quantizeRow(cases.map(\.0) + [.nan], columns: cases.count + 1, into: $0.baseAddress!)
        }
        #expect(Array(brain.prefix(cases.count)) == cases.map(\.1))
        #expect(brain[cases.count] & 0x7F80 == 0x7F80 && brain[cases.count] & 0x7F != 0, "NaN stays NaN")
        #expect { try TensorType.f16.quantizeRow([1, 70000], columns: 2, into: &halves) } throws: { error in
            "\(error)".contains("value 1") && "\(error)".contains("70000") && "\(error)".contains("65504")
        }
        #expect { try WeightMatrix(try Tensor(shape: [1, 2], values: [1, 65520]), as: .f16) } throws: { error in "\(error)".contains("65520") }
        // At the fp16 precision such a matrix is kept as BF16 (fp32's range), not refused; one within range is F16.
        let outlier = try WeightMatrix(try Tensor(shape: [2, 2], values: [1, 3, -2.5, 70000]), as: .f32)
        let kept = try outlier.variant(for: .fp16)
        #expect(kept.type == .bf16)
        #expect(try kept.fp32().scalars() == [1, 3, -2.5, 70144], "70000 rounds to bf16's 70144")
        #expect(try WeightMatrix(try Tensor(shape: [1, 2], values: [1, 65504]), as: .f32).variant(for: .fp16).type == .f16)
    }

    @Test func rowKernelsRefuseBadArguments() {
        var y = [Float](repeating: 0, count: 4)
        let w = [UInt8](repeating: 0, count: 144 * 2), act = [UInt8](repeating: 0, count: 4096)
        #expect(ek_gemm_rows(EK_ISA_SCALAR, EK_FORMAT_Q4_K, w, 2, 255, act, 1, &y, 2, 0, 2) == EK_ERR_SHAPE)
        #expect(ek_gemm_rows(EK_ISA_SCALAR, EK_FORMAT_Q4_K, w, 2, 256, act, 1, &y, 2, 0, 3) == EK_ERR_RANGE)
        #expect(ek_gemm_rows(EK_ISA_SCALAR, EK_FORMAT_COUNT, w, 2, 256, act, 1, &y, 2, 0, 2) == EK_ERR_FORMAT)
        #expect(ek_gemm_rows(EK_ISA_SCALAR, EK_FORMAT_Q4_K, nil, 2, 256, act, 1, &y, 2, 0, 2) == EK_ERR_NULL_POINTER)
        #expect(ek_quantize_row_activations(EK_ISA_SCALAR, EK_FORMAT_Q6_K, [Float](repeating: 1, count: 256), 1, 256, &y, 16)
                    == EK_ERR_BUFFER_TOO_SMALL)
        #expect(ek_dequantize_row(EK_ISA_SCALAR, EK_FORMAT_Q6_K, w, &y, 32) == EK_ERR_SHAPE)
        #expect(ek_quantize_row(EK_ISA_SCALAR, EK_FORMAT_Q4_K, [Float](repeating: 1, count: 256), &y, 256) == EK_ERR_FORMAT)
        #expect(ek_packed_size(EK_FORMAT_Q4_K, 16, 256) == 0)
    }

    // MARK: Helpers

    /// `got` equals the oracle's `expected` over `rows` within fp32 summation error (bounded by Σ|w·x|), NaN elsewhere.
    static func expectOracle(_ got: [Float], _ expected: [Float], type: TensorType, blocks: [UInt8], x: [Float], m: Int, n: Int, k: Int,
                             rows: Range<Int>, label: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let dequantized = Quant.dequantize(type, blocks, rows: n, k: k)
        for i in 0..<m {
            for r in 0..<n {
                let value = got[i * n + r]
                guard rows.contains(r) else {
                    #expect(value.isNaN, "\(type) \(label): row \(r) outside \(rows) was written", sourceLocation: sourceLocation)
                    continue
                }
                var bound: Float = 0
                for j in 0..<k { bound += abs(dequantized[r * k + j] * x[i * k + j]) }
                #expect(abs(value - expected[i * n + r]) <= 2e-6 * bound + 1e-6,
                        "\(type) \(label) m=\(m) n=\(n) k=\(k): [\(i), \(r)] \(value) vs \(expected[i * n + r])",
                        sourceLocation: sourceLocation)
            }
        }
    }

    /// Random blocks with small finite scales (and minimums) so products stay in a sane range.
    static func randomBlocks(_ type: TensorType, rows: Int, k: Int, _ generator: inout SplitMix64) -> [UInt8] {
        let count = rows * (k / type.blockSize)
        var bytes = [UInt8](repeating: 0, count: count * type.blockBytes)
        precondition(ek_fill_random_blocks(type.blockFormat!, generator.next(), &bytes, Int64(count)) == EK_OK)
        return bytes
    }

    /// Y = X·Wᵀ by `isa`'s row kernel over `rows` (NaN elsewhere); also the quantized activations of x's first row, dequantized.
    static func rowProduct(_ format: ek_format, _ blocks: [UInt8], _ x: [Float], m: Int, n: Int, k: Int, isa: KernelISA,
                           rows: Range<Int>? = nil) -> ([Float], [Float]) {
        let bytes = ek_row_activation_size(format, Int64(m), Int64(k))
        var act = [UInt8](repeating: 0, count: bytes)
        precondition(ek_quantize_row_activations(isa.cValue, format, x, Int64(m), Int64(k), &act, bytes) == EK_OK)
        var y = [Float](repeating: .nan, count: m * n)
        let range = rows ?? 0..<n
        precondition(ek_gemm_rows(isa.cValue, format, blocks, Int64(n), Int64(k), act, Int64(m), &y, Int64(n),
                                  Int64(range.lowerBound), Int64(range.upperBound)) == EK_OK)
        var first = [Float](repeating: 0, count: k)
        act.withUnsafeBytes { raw in
            if ek_format_super_activations(format) {
                let blocks = raw.bindMemory(to: ek_block_q8_k.self)
                for b in 0..<(k / 256) {
                    withUnsafeBytes(of: blocks[b].qs) { qs in for j in 0..<256 { first[b * 256 + j] = Float(Int8(bitPattern: qs[j])) * blocks[b].d } }
                }
            } else {
                let blocks = raw.bindMemory(to: ek_block_q8_act.self)
                for b in 0..<(k / 32) {
                    withUnsafeBytes(of: blocks[b].qs) { qs in for j in 0..<32 { first[b * 32 + j] = Float(Int8(bitPattern: qs[j])) * blocks[b].d } }
                }
            }
        }
        return (y, first)
    }
}
