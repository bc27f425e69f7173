import _CEmberKernels
import Foundation
import Testing
import Ember
@testable import EmberModels
import EmberTestSupport

/// A decoder whose tensors are every block type Ember computes with, in every role (token embedding, separate
/// output, attention, feed-forward): random blocks, a fake model for consistency, no real file. Run as stored
/// (`precision` nil: the SIMD backend's packed, interleaved and row kernels), it must give the scalar
/// reference's logits (the same quantized arithmetic) and, within activation rounding, the logits of the same
/// weights dequantized to fp32.
@Suite("Quantized decoder (synthetic model)")
struct QuantizedModelTests {
    /// Per layer, the types of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
    static let layerTypes: [[TensorType]] = [
        [.q4_K, .q5_0, .iq4_XS, .q5_1, .iq4_NL, .q5_K, .q6_K],
        [.q2_K, .q3_K, .f16, .bf16, .q4_0, .q4_1, .q8_0],
        [.q5_K, .iq4_NL, .q6_K, .q4_K, .q5_0, .iq4_XS, .q4_K],
    ]

    /// hidden 256 (the K-quants' block), 4 heads of 64 with 2 KV heads, feed-forward 512, 53 tokens (not a multiple
    /// of eight: a padded interleaved group), a Q6_K token embedding and a separate Q5_K output.
    static func model(layerTypes: [[TensorType]] = layerTypes) throws -> DecoderModel {
        let (hidden, heads, kvHeads, feedForward, vocabulary) = (256, 4, 2, 512, 53)
        var gguf = SyntheticGGUF.tinyLlama(layers: layerTypes.count)
        var generator = SplitMix64(seed: 77)
        func blocks(_ name: String, _ type: TensorType, rows: Int, columns: Int) -> SyntheticGGUF.Tensor {
            var data = [UInt8](repeating: 0, count: type.byteCount(rows: rows, columns: columns)!)
            if let format = type.blockFormat {
                precondition(ek_fill_random_blocks(format, generator.next(), &data, Int64(data.count / type.blockBytes)) == EK_OK)
            } else {
                data.withUnsafeMutableBytes { raw in
                    let halves = raw.bindMemory(to: UInt16.self)
                    for index in halves.indices {
                        let value = (generator.nextUnitFloat() - 0.5) * 0.2
                        halves[index] = type == .bf16 ? UInt16(value.bitPattern >> 16) : ek_fp32_to_fp16(value)
                    }
                }
            }
            return SyntheticGGUF.Tensor(name: name, dimensions: [columns, rows], typeID: UInt32(type.id), data: data)
        }
        // Random K-quant blocks hold weights up to ~20 (6-bit sub-block scales): the blocks' norms are scaled down so
        // the attention scores stay in softmax's smooth range and the comparison with fp32 measures rounding, not chaos.
        func norm(_ name: String, gain: Float = 0.01) -> SyntheticGGUF.Tensor {
            let values = (0..<hidden).map { _ in gain * (0.8 + 0.4 * generator.nextUnitFloat()) }
            return SyntheticGGUF.Tensor(name: name, dimensions: [hidden], typeID: 0,
                                        data: values.flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } })
        }
        let tokens = (0..<vocabulary).map { String(UnicodeScalar(UInt8(65 + $0 % 58))) + ($0 >= 58 ? "x" : "") }
        gguf.metadata = gguf.metadata.map { key, value in
            switch key {
            case "llama.embedding_length": (key, .uint32(UInt32(hidden)))
            case "llama.feed_forward_length": (key, .uint32(UInt32(feedForward)))
            case "tokenizer.ggml.tokens": (key, .array(tokens.map { .string($0) }))
            default: (key, value)
            }
        }
        let kvWidth = kvHeads * hidden / heads
        gguf.tensors = [blocks("token_embd.weight", .q6_K, rows: vocabulary, columns: hidden)]
        for (layer, types) in layerTypes.enumerated() {
            let prefix = "blk.\(layer)."
            let shapes = [("attn_q", hidden, hidden), ("attn_k", kvWidth, hidden), ("attn_v", kvWidth, hidden),
                          ("attn_output", hidden, hidden), ("ffn_gate", feedForward, hidden), ("ffn_up", feedForward, hidden),
                          ("ffn_down", hidden, feedForward)]
            gguf.tensors += [norm(prefix + "attn_norm.weight"), norm(prefix + "ffn_norm.weight")]
            gguf.tensors += zip(shapes, types).map { shape, type in blocks(prefix + shape.0 + ".weight", type, rows: shape.1, columns: shape.2) }
        }
        gguf.tensors += [norm("output_norm.weight", gain: 1), blocks("output.weight", .q5_K, rows: vocabulary, columns: hidden)]
        return try #require(try gguf.withFile(TestCompute.textGenerator(path:)) as? DecoderModel)
    }

    /// int4 makes Q4_1 of the types finer than 5 bits, except in a 4-bit mix (every layer matrix block-quantized, some
    /// at 5 bits or fewer), whose Q6_K and Q8_0 matrices it keeps as stored, as llama-quantize placed them.
    @Test func int4KeepsAFourBitMixAsStored() throws {
        func int4Types(_ model: DecoderModel) throws -> [String: Set<TensorType>] {
            let plan = try model.plan(ExecutionOptions(units: .cpuAndNeuralEngine, precision: .int4))
            return Dictionary(grouping: plan.steps.filter { $0.op == .matmul && $0.layer != nil }, by: \.role).mapValues { Set($0.map(\.type)) }
        }
        let mix: [[TensorType]] = [[.q4_K, .q4_K, .q8_0, .q4_K, .q5_0, .q5_0, .q6_K], [.q4_K, .q4_K, .q5_0, .q4_K, .q5_0, .q5_0, .q4_K]]
        let mixed = try Self.model(layerTypes: mix)
        #expect(mixed.int4KeepsStoredTypes)
        let kept = try int4Types(mixed)
        #expect(kept["attn_v"] == [.q8_0, .q5_0] && kept["ffn_down"] == [.q6_K, .q4_K], "\(kept)")
        // With F16 and BF16 matrices among its layers the file is no 4-bit mix: its Q6_K and Q8_0 become Q4_1.
        let unmixed = try Self.model()
        #expect(!unmixed.int4KeepsStoredTypes)
        let made = try int4Types(unmixed)
        #expect(made["ffn_down"] == [.q4_1, .q4_K] && made["attn_v"] == [.iq4_XS, .q4_1], "\(made)")
        // An 8-bit file is no 4-bit mix either.
        #expect(try !Self.model(layerTypes: [[TensorType]](repeating: Array(repeating: .q8_0, count: 7), count: 2)).int4KeepsStoredTypes)
    }

    @Test func storedTypesRunAsTheReferenceAndAsDequantizedWeights() throws {
        let model = try Self.model()
        let tokens = [5, 17, 3, 40, 22, 9, 52]
        func logits(_ units: ComputeUnits, _ precision: Precision?) throws -> [Float] {
            try model.forward(tokens, session: model.makeSession(contextLength: 16), units: units, precision: precision, allLogits: true).scalars()
        }
        let simd = try logits(.cpuAndNeuralEngine, nil)
        let reference = try logits(.cpuOnly, nil)
        let fp32 = try logits(.cpuAndGPU, .fp32)
        #expect(simd.allSatisfy(\.isFinite) && simd.count == tokens.count * 53)
        let scale = fp32.map(abs).max()!
        let simdVsReference = LlamaForwardTests.maxDifference(simd, reference), simdVsFP32 = LlamaForwardTests.maxDifference(simd, fp32)
        // Same quantized activations and integer products: only the order of fp32 additions differs.
        #expect(simdVsReference <= 1e-3 * scale, "SIMD vs scalar reference: \(simdVsReference) (logits up to \(scale))")
        // Activations rounded to 8 bits at every matmul of three layers: a few percent of the logit range at most.
        #expect(simdVsFP32 <= 0.05 * scale, "SIMD vs fp32: \(simdVsFP32) (logits up to \(scale))")
        let plan = try model.plan(ExecutionOptions(units: .cpuAndNeuralEngine))
        let matmulBackends = Set(plan.steps.filter { $0.op == .matmul }.map(\.backend))
        // The SIMD backend of the tests' ISA; forced to the scalar ISA (EMBER_ISA=scalar) there is none, and every
        // matmul falls back to the scalar reference.
        if TestCompute.isa == .scalar {
            #expect(matmulBackends == ["scalar-reference"], "\(matmulBackends)")
        } else {
            #expect(matmulBackends.allSatisfy { $0.hasPrefix("simd-") }, "\(matmulBackends)")
        }
    }

    /// What binding a route is predicted to copy (the memory budget's figure) is what binding it makes: on every
    /// route and precision, each matrix's variant and the layout its backend keeps, nothing once bound, nothing left
    /// after the copies are released.
    @Test func weightCopiesArePredictedBeforeBinding() throws {
        let model = try Self.model()
        #expect(model.heldWeightCopyBytes == 0, "a model read from its file holds no copy")
        var grew: [String] = []
        for units in [ComputeUnits.cpuAndGPU, .cpuAndNeuralEngine, .cpuOnly] {
            for precision in [nil] + Precision.allCases.map(Optional.some) {
                let options = ExecutionOptions(units: units, precision: precision)
                let (before, predicted) = (model.heldWeightCopyBytes, model.weightCopyBytes(for: options))
                try model.prepare(options)
                let made = model.heldWeightCopyBytes - before
                #expect(made == predicted, "\(units) \(precision.map { "\($0)" } ?? "native"): made \(made), predicted \(predicted)")
                #expect(model.weightCopyBytes(for: options) == 0, "bound: nothing more")
                if made > 0 { grew.append("\(units)/\(precision.map { "\($0)" } ?? "native")") }
            }
        }
        // The SIMD route interleaves or packs, the BLAS route converts to fp32, requantized precisions copy: the
        // test is not passing on zeros.
        #expect(grew.contains("cpuAndNeuralEngine/native") && grew.contains("cpuAndNeuralEngine/int8") && grew.contains("cpuAndGPU/native"),
                "\(grew)")
        model.releaseBoundWeights()
        #expect(model.heldWeightCopyBytes == 0)
    }

    /// Prefill in one batch (the GEMM tiles) equals token-by-token decoding (the GEMV).
    @Test func batchedPrefillEqualsStepByStepDecode() throws {
        let model = try Self.model()
        let tokens = [5, 17, 3, 40, 22, 9, 30]
        let batch = try model.forward(tokens, session: model.makeSession(contextLength: 16), allLogits: true).scalars()
        let session = model.makeSession(contextLength: 16)
        var stepwise: [Float] = []
        for token in tokens { stepwise += try model.forward([token], session: session).scalars() }
        let scale = batch.map(abs).max()!
        #expect(LlamaForwardTests.maxDifference(batch, stepwise) <= 1e-3 * scale)
    }
}
