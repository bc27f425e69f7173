import _CEmberKernels
import Foundation
import Testing
@testable import EmberCore
import EmberTestSupport

/// The query heads that share one key/value head attending in one pass (`ek_attention_group_for`, the built-in
/// backends' form of the attention op): each head against the exact softmax in double, on every ISA's code.
@Suite("Grouped-query attention")
struct GroupedAttentionTests {
    /// One to seven heads (passes of three and what is left), fp32 and fp16 caches, head widths on and off the SIMD
    /// path, one position to several blocks: every head within fp32 rounding of the exact softmax, outputs written
    /// only in their heads; bad arguments refused.
    @Test(arguments: [(64, 1), (64, 33), (64, 130), (256, 45), (48, 9), (16, 70), (40, 12)]) // 40: per head, portable
    func everyHeadMatchesTheExactSoftmax(headDim: Int, visible: Int) {
        let stride = headDim * 2 + 8 // the other key/value head's columns between positions
        let keys = VectorOpsTests.random(visible * stride, seed: 31), values = VectorOpsTests.random(visible * stride, seed: 32)
        let keys16 = keys.map { ek_fp32_to_fp16($0) }, values16 = values.map { ek_fp32_to_fp16($0) }
        let scale = 1 / Float(headDim).squareRoot()
        for isa in [EK_ISA_SCALAR, EK_ISA_AVX2, EK_ISA_AVX512, EK_ISA_NEON] {
            for heads in 1...7 {
                let q = VectorOpsTests.random(heads * headDim, seed: UInt64(33 + heads), scale: 6)
                for half in [false, true] {
                    let sentinel: Float = -7
                    var out = [Float](repeating: sentinel, count: heads * headDim + 5)
                    let ok = half
                        ? ek_attention_group_for(isa, true, q, Int64(heads), keys16, values16, Int64(stride), Int64(visible), Int64(headDim), scale, &out)
                        : ek_attention_group_for(isa, false, q, Int64(heads), keys, values, Int64(stride), Int64(visible), Int64(headDim), scale, &out)
                    #expect(ok)
                    for head in 0..<heads {
                        let expected = VectorOpsTests.attention(
                            q: Array(q[(head * headDim)..<((head + 1) * headDim)]), keys: half ? keys.map(VectorOpsTests.half) : keys,
                            values: half ? values.map(VectorOpsTests.half) : values, visible: visible, headDim: headDim, stride: stride,
                            scale: scale, fp16: false)
                        for i in 0..<headDim where abs(Double(out[head * headDim + i]) - expected[i]) >= 2e-6 {
                            Issue.record("isa \(isa.rawValue) heads \(heads) half \(half) \(headDim)×\(visible) head \(head) [\(i)]: \(out[head * headDim + i]) vs \(expected[i])")
                            break
                        }
                    }
                    #expect(out[(heads * headDim)...].allSatisfy { $0 == sentinel }, "nothing past the last head")
                }
            }
        }
        var out = [Float](repeating: 0, count: headDim)
        #expect(!ek_attention_group_for(EK_ISA_AVX2, false, keys, 0, keys, values, Int64(stride), Int64(visible), Int64(headDim), scale, &out),
                "no heads is refused")
        #expect(!ek_attention_group_for(EK_ISA_AVX2, false, keys, 1, keys, values, Int64(headDim - 1), Int64(visible), Int64(headDim), scale, &out),
                "a stride below the head width is refused")
    }

    /// A scores far apart and a maximum that grows in a later block: the rescaled weights stay exact.
    @Test func aMaximumThatGrowsLaterIsRescaled() {
        let (headDim, visible, heads) = (64, 100, 3)
        let q = [Float](repeating: 1, count: heads * headDim)
        var keys = (0..<(visible * headDim)).map { Float($0 / headDim) * 0.01 }
        for i in 0..<headDim { keys[75 * headDim + i] = 60 }
        let values = (0..<(visible * headDim)).map { Float($0 / headDim) }
        for isa in [EK_ISA_SCALAR, EK_ISA_AVX2, EK_ISA_AVX512] {
            var out = [Float](repeating: 0, count: heads * headDim)
            #expect(ek_attention_group_for(isa, false, q, Int64(heads), keys, values, Int64(headDim), Int64(visible), Int64(headDim), 1, &out))
            #expect(out.allSatisfy { abs($0 - 75) < 1e-3 }, "isa \(isa.rawValue): \(out.prefix(4))")
        }
    }

    /// A backend without the grouped form (as every plugin is) runs its one-pass attention once per head: the bound
    /// op's grouped call equals calling it head by head, and the built-in backend's grouped form agrees to rounding.
    @Test func aBackendWithoutTheGroupedFormRunsEachHead() throws {
        let (headDim, visible, heads, stride) = (64, 50, 3, 192)
        let q = VectorOpsTests.random(heads * headDim, seed: 41, scale: 6)
        let keys = VectorOpsTests.random(visible * stride, seed: 42).map { ek_fp32_to_fp16($0) }
        let values = VectorOpsTests.random(visible * stride, seed: 43).map { ek_fp32_to_fp16($0) }
        let perHead = FakePerHeadAttentionBackend()
        let context = ComputeContext()
        try context.backends.register(perHead)
        let bound = try context.backends.bind(.attention, type: .f16, units: .all)
        #expect(bound.placement.backend == perHead.descriptor.name)
        var grouped = [Float](repeating: .nan, count: heads * headDim), single = grouped, builtIn = grouped
        #expect(bound.attention(cacheType: .f16, queries: q, heads: heads, keys: keys, values: values, stride: stride, visible: visible,
                                headDim: headDim, scale: 0.125, into: &grouped) == 0)
        for head in 0..<heads {
            q.withUnsafeBufferPointer { q in
                single.withUnsafeMutableBufferPointer { out in
                    #expect(bound.attention(cacheType: .f16, query: q.baseAddress! + head * headDim, keys: keys, values: values, stride: stride,
                                            visible: visible, headDim: headDim, scale: 0.125, into: out.baseAddress! + head * headDim) == 0)
                }
            }
        }
        #expect(grouped == single, "head by head, bit for bit")
        let native = try TestCompute.context.backends.bind(.attention, type: .f16, units: .all)
        #expect(native.attention(cacheType: .f16, queries: q, heads: heads, keys: keys, values: values, stride: stride, visible: visible,
                                 headDim: headDim, scale: 0.125, into: &builtIn) == 0)
        for i in builtIn.indices { #expect(abs(builtIn[i] - single[i]) < 1e-5, "[\(i)] \(builtIn[i]) vs \(single[i])") }
    }

    /// A fake backend (named so) with only the one-pass attention op, as a plugin's table has it.
    final class FakePerHeadAttentionBackend: Backend, @unchecked Sendable {
        let descriptor = BackendDescriptor(name: "fake-per-head-attention", unit: .cpu, score: 1000,
                                           supports: [OpSupport(.attention, .f16), OpSupport(.attention, .f32)])
        let opTable: OpTable
        private let context = UnsafeMutablePointer<ek_backend_context>.allocate(capacity: 1)
        init() {
            context.initialize(to: ek_backend_context(isa: EK_ISA_AVX2))
            var table = OpTable(context: UnsafeMutableRawPointer(context))
            table.attention = ek_op_attention
            opTable = table
        }
        deinit { context.deallocate() }
        func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
            throw KernelError.invalidArgument(argument: "matmul", found: "a fake backend", expected: "no matmul here")
        }
    }
}
