import _CEmberKernels
import Testing
@testable import EmberCore
import EmberTestSupport

/// The AMX tile kernels (`avx512` on a CPU with AMX-INT8) against the AVX-512 VNNI ones (`avx512-noamx`): the
/// integer sums are exact and scaled in the same order, so every output must be the same bit for bit — per-block
/// and row-scaled Q8_0, at the batch sizes that take each tile arrangement (16 rows: one half; 17-31: both halves,
/// the second partial; whole chunks of 32 with and without a remainder) and thread-like row ranges that start and
/// end inside a group. The VNNI kernels are themselves held to the scalar oracle by ``QuantizedKernelTests``.
@Suite("AMX kernels", .enabled(if: KernelISA.avx512.multipliesInt8OnTiles(), "no AMX-INT8 here, or the OS does not grant it"))
struct AMXKernelTests {
    static let batches = [16, 17, 31, 32, 45, 64, 77]
    static let ranges: [(Int, Int)] = [(0, 70), (5, 61), (16, 48), (17, 30), (48, 70)]

    @Test(arguments: [false, true])
    func tilesEqualTheVNNIKernels(rowScaled: Bool) throws {
        var generator = SplitMix64(seed: rowScaled ? 71 : 70)
        let (n, k) = (70, 416)
        let values = Quant.randomValues(n * k, &generator)
        let matrix = try WeightMatrix(try Tensor(shape: [n, k], values: values), as: .q8_0, scalePerRow: rowScaled)
        var packed = try matrix.packed().cMatrix
        #expect((packed.flags & EK_PACKED_Q8_ROW_SCALES != 0) == rowScaled)
        for m in Self.batches {
            let x = Quant.randomValues(m * k, &generator).map { $0 * 4 }
            var act = [ek_block_q8_act](repeating: ek_block_q8_act(), count: m * k / 32)
            let bytes = act.count * MemoryLayout<ek_block_q8_act>.stride
            let status = rowScaled
                ? ek_quantize_activations_row_scaled(EK_ISA_AVX512, x, Int64(m), Int64(k), nil, &act, bytes)
                : ek_quantize_activations(EK_ISA_AVX512, EK_FORMAT_Q8_0, x, Int64(m), Int64(k), &act, bytes)
            #expect(status == EK_OK)
            for (begin, end) in Self.ranges {
                var tiles = [Float](repeating: .nan, count: m * n), vnni = tiles
                #expect(ek_gemm_packed(EK_ISA_AVX512, &packed, act, Int64(m), &tiles, Int64(n), Int64(begin), Int64(end)) == EK_OK)
                #expect(ek_gemm_packed(EK_ISA_AVX512_PLAIN, &packed, act, Int64(m), &vnni, Int64(n), Int64(begin), Int64(end)) == EK_OK)
                let differing = (0..<(m * n)).filter { tiles[$0].bitPattern != vnni[$0].bitPattern }
                #expect(differing.isEmpty, "\(m) rows, outputs [\(begin), \(end)): \(differing.count) differ, first at \(differing.first ?? -1)")
                let written = (0..<(m * n)).filter { (begin..<end).contains($0 % n) }
                #expect(written.allSatisfy { !tiles[$0].isNaN }, "\(m) rows, [\(begin), \(end)): an output in range not written")
            }
        }
    }

    /// Quants at their extremes (weights ±127, activations ±127 in every position) over the longest K the row-scaled
    /// kernels take at once: the int32 tile sums at their bound, still equal to the VNNI kernels'.
    @Test func extremeQuantsOverLongRowsStayExact() throws {
        let (m, n, k) = (33, 32, 32 * 1024) // EK_ROW_SCALED_MAX_BLOCKS (quant_impl.h)
        let values = (0..<(n * k)).map { Float($0 % 3 == 0 ? -1 : 1) }
        let matrix = try WeightMatrix(try Tensor(shape: [n, k], values: values), as: .q8_0, scalePerRow: true)
        var packed = try matrix.packed().cMatrix
        let x = (0..<(m * k)).map { Float($0 % 5 == 0 ? 1 : -1) }
        var act = [ek_block_q8_act](repeating: ek_block_q8_act(), count: m * k / 32)
        #expect(ek_quantize_activations_row_scaled(EK_ISA_AVX512, x, Int64(m), Int64(k), nil, &act,
                                                   act.count * MemoryLayout<ek_block_q8_act>.stride) == EK_OK)
        var tiles = [Float](repeating: .nan, count: m * n), vnni = tiles
        #expect(ek_gemm_packed(EK_ISA_AVX512, &packed, act, Int64(m), &tiles, Int64(n), 0, Int64(n)) == EK_OK)
        #expect(ek_gemm_packed(EK_ISA_AVX512_PLAIN, &packed, act, Int64(m), &vnni, Int64(n), 0, Int64(n)) == EK_OK)
        #expect(tiles.map(\.bitPattern) == vnni.map(\.bitPattern))
        let exact = (0..<n).map { r in (0..<k).reduce(0.0) { $0 + Double(values[r * k + $1]) * Double(x[$1]) } }
        #expect(abs(Double(tiles[0]) - exact[0]) <= 1e-3 * abs(exact[0]) + 1e-3, "\(tiles[0]) against \(exact[0])")
    }
}
