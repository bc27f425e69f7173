import Foundation
import Testing
import Ember
@testable import EmberModels
import EmberTestSupport

/// The decoder on a tiny synthetic model (random weights: a fake for shapes
/// and consistency, no real file needed).
@Suite("Llama forward pass (synthetic model)")
struct LlamaForwardTests {
    static func tinyModel(_ gguf: SyntheticGGUF = .tinyLlama()) throws -> DecoderModel {
        try #require(try gguf.withFile(TestCompute.textGenerator(path:)) as? DecoderModel)
    }

    /// Loading `gguf` must fail with a ModelFileError whose message contains every one of `mentions`.
    static func expectRefused(_ gguf: SyntheticGGUF, mentioning mentions: [String], _ accepted: String,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try tinyModel(gguf)
            Issue.record(Comment(rawValue: accepted), sourceLocation: sourceLocation)
        } catch let error as ModelFileError {
            #expect(mentions.allSatisfy { "\(error)".contains($0) }, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record(error, sourceLocation: sourceLocation)
        }
    }

    static func maxDifference(_ a: [Float], _ b: [Float]) -> Float {
        zip(a, b).map { abs($0 - $1) }.max() ?? .infinity
    }

    @Test func shapesAndFiniteLogits() throws {
        let model = try Self.tinyModel()
        #expect(model.config.headDim == 16 && model.config.layers == 2)
        let logits = try model.forward([1, 2, 3], session: model.makeSession(contextLength: 8), allLogits: true)
        #expect(logits.shape == [3, 48])
        #expect(try logits.scalars().allSatisfy(\.isFinite))
    }

    /// One batch of prefill and token-by-token decoding give the same logits.
    @Test(arguments: [(Precision.fp32, ComputeUnits.cpuAndGPU), (.int8, .cpuAndNeuralEngine), (.int4, .cpuAndNeuralEngine), (.fp32, .cpuOnly)])
    func batchedPrefillEqualsStepByStepDecode(precision: Precision, units: ComputeUnits) throws {
        let model = try Self.tinyModel()
        let tokens = [5, 17, 3, 40, 22, 9, 30]
        let batch = try model.forward(tokens, session: model.makeSession(contextLength: 16), units: units,
                                      precision: precision, allLogits: true).scalars()
        let session = model.makeSession(contextLength: 16)
        var stepwise: [Float] = []
        for token in tokens { stepwise += try model.forward([token], session: session, units: units, precision: precision).scalars() }
        #expect(session.position == tokens.count)
        let scale = batch.map(abs).max()!
        #expect(Self.maxDifference(batch, stepwise) <= 1e-3 * scale, "\(precision) on \(units)")
    }

    /// Every route the policy may pick runs the same weights at a precision: the GPU route the quantized weights
    /// converted to fp32, the neural-engine route (SIMD) and the CPU route (scalar reference) their integer products
    /// with 8-bit activations — the last two equal but for the order of additions, and all a few percent of the logit
    /// range from fp32, never another model. (An encoder's smoothed int8 weights once came out wrong on the GPU route
    /// alone.)
    @Test(arguments: [Precision.int8, .int4])
    func everyRouteRunsTheSameWeights(precision: Precision) throws {
        let model = try Self.tinyModel()
        let tokens = [5, 17, 3, 40, 22, 9, 30]
        func logits(_ units: ComputeUnits, _ precision: Precision) throws -> [Float] {
            try model.forward(tokens, session: model.makeSession(contextLength: 16), units: units, precision: precision,
                              allLogits: true).scalars()
        }
        let fp32 = try logits(.cpuAndGPU, .fp32)
        let (gpu, engine, cpu) = (try logits(.cpuAndGPU, precision), try logits(.cpuAndNeuralEngine, precision), try logits(.cpuOnly, precision))
        let scale = fp32.map(abs).max()!
        let (engineVsCPU, gpuVsEngine, gpuVsFP32) = (Self.maxDifference(engine, cpu), Self.maxDifference(gpu, engine), Self.maxDifference(gpu, fp32))
        print("\(precision): neural engine vs CPU \(engineVsCPU), GPU vs neural engine \(gpuVsEngine), GPU vs fp32 \(gpuVsFP32) of \(scale)")
        #expect(engineVsCPU <= 1e-3 * scale, "\(precision): neural-engine vs CPU route \(engineVsCPU) of \(scale)")
        #expect(gpuVsEngine <= 0.05 * scale, "\(precision): GPU vs neural-engine route \(gpuVsEngine) of \(scale)")
        // Rounding itself: 0.8 % of the range at int8, 11.5 % at int4 on these random weights; a wrong model is ~100 %.
        let rounding: Float = precision == .int8 ? 0.05 : 0.25
        #expect(gpuVsFP32 <= rounding * scale, "\(precision): GPU route vs fp32 \(gpuVsFP32) of \(scale)")
    }

    /// Threads split rows and heads, never a sum: the thread count cannot change a bit.
    @Test(arguments: [1, 5]) // 1 row: private stage inputs; 5 rows: shared ones
    func threadCountDoesNotChangeResults(rows: Int) throws {
        let model = try Self.tinyModel()
        let tokens = Array([4, 8, 15, 16, 23].prefix(rows))
        var results: [[Float]] = []
        for threads in [1, 2] {
            let session = model.makeSession(contextLength: 8)
            results.append(try model.forward(tokens, session: session, units: .cpuAndNeuralEngine, precision: .int4,
                                             allLogits: true, threads: threads).scalars())
        }
        #expect(results[0] == results[1])
    }

    @Test func halfPrecisionCacheStaysCloseToFP32() throws {
        let model = try Self.tinyModel()
        let tokens = Array(0..<24).map { $0 * 7 % 48 }
        let half = model.makeSession(contextLength: 32, halfPrecisionCache: true), full = model.makeSession(contextLength: 32, halfPrecisionCache: false)
        // Keys and values in fp16 against fp32 (the bytes mapped are whole pages: half as many only for a long enough cache).
        #expect((half as? DecoderSession)?.cacheType == .f16 && (full as? DecoderSession)?.cacheType == .f32)
        #expect(half.cacheBytes <= full.cacheBytes)
        let a = try model.forward(tokens, session: half, precision: .fp32, allLogits: true).scalars()
        let b = try model.forward(tokens, session: full, precision: .fp32, allLogits: true).scalars()
        #expect(Self.maxDifference(a, b) <= 0.01 * b.map(abs).max()!)
        #expect(a != b, "the fp16 cache really rounds")
    }

    @Test func contextAndTokenErrorsAreTyped() throws {
        let model = try Self.tinyModel()
        let session = model.makeSession(contextLength: 4)
        #expect(throws: KernelError.self) { try model.forward([1, 2, 3, 4, 5], session: session) }
        #expect(throws: KernelError.self) { try model.forward([48], session: session) }
        #expect(throws: KernelError.self) { try model.forward([], session: session) }
        #expect(session.position == 0, "a refused call leaves the session as it was")
    }

    @Test func weightOfTheWrongShapeIsRefusedNamingTheTensor() throws {
        var gguf = SyntheticGGUF.tinyLlama()
        let index = try #require(gguf.tensors.firstIndex { $0.name == "blk.1.attn_k.weight" })
        gguf.tensors[index].dimensions = [64, 16] // 16 rows, not 32
        gguf.tensors[index].data = Array(gguf.tensors[index].data.prefix(64 * 16 * 4))
        Self.expectRefused(gguf, mentioning: ["blk.1.attn_k.weight", "32×64"], "a 16-row attn_k was accepted")
    }

    @Test func aTokenListShorterThanTheTokenTableIsRefused() throws {
        var gguf = SyntheticGGUF.tinyLlama()
        let index = try #require(gguf.metadata.firstIndex { $0.0 == "tokenizer.ggml.tokens" })
        gguf.metadata[index].1 = .array((0..<40).map { .string("t\($0)") }) // 40 tokens for 48 rows
        Self.expectRefused(gguf, mentioning: ["tokenizer.ggml.tokens", "48"], "40 tokens for a 48-row token table were accepted")
    }

    /// A file with its own `output.weight` gets its logits from it, not from the token table.
    @Test func aSeparateOutputProjectionIsUsed() throws {
        let tied = try Self.tinyModel()
        var gguf = SyntheticGGUF.tinyLlama()
        var output = try #require(gguf.tensors.first { $0.name == "token_embd.weight" })
        output.name = "output.weight"
        gguf.tensors.append(output)
        let same = try Self.tinyModel(gguf)
        #expect(same.output !== same.embedding)
        let tokens = [3, 14, 15]
        let expected = try tied.forward(tokens, session: tied.makeSession(contextLength: 8), precision: .fp32).scalars()
        #expect(try same.forward(tokens, session: same.makeSession(contextLength: 8), precision: .fp32).scalars() == expected,
                "an output.weight equal to the token table gives the tied model's logits")
        // Negated output weights (F32 here): the logits flip sign.
        let index = gguf.tensors.count - 1
        gguf.tensors[index].data = stride(from: 0, to: output.data.count, by: 4).flatMap { offset -> [UInt8] in
            let value = -Float(bitPattern: UInt32(output.data[offset]) | UInt32(output.data[offset + 1]) << 8
                               | UInt32(output.data[offset + 2]) << 16 | UInt32(output.data[offset + 3]) << 24)
            return withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) }
        }
        let negated = try Self.tinyModel(gguf)
        let flipped = try negated.forward(tokens, session: negated.makeSession(contextLength: 8), precision: .fp32).scalars()
        #expect(zip(flipped, expected).allSatisfy { abs($0 + $1) <= 1e-5 * max(1, abs($1)) })
    }

    @Test func widthsOutsideWholeBlocksAreRefused() throws {
        var gguf = SyntheticGGUF.tinyLlama()
        let index = try #require(gguf.metadata.firstIndex { $0.0 == "llama.feed_forward_length" })
        gguf.metadata[index].1 = .uint32(100)
        #expect(throws: ModelFileError.self) { try Self.tinyModel(gguf) }
    }

    @Test func planPlacesEveryOpByUnits() throws {
        let model = try Self.tinyModel()
        let simd = TestCompute.isa != .scalar
        let engine = try model.plan(ExecutionOptions(units: .cpuAndNeuralEngine, precision: .int4))
        #expect(engine.steps.filter { $0.op == .matmul }.allSatisfy { $0.unit == (simd ? .neuralEngine : .cpu) })
        #expect(engine.steps.contains { $0.op == .attention && $0.unit == .cpu && $0.type == .f16 })
        #expect(engine.steps.contains { $0.op == .attention && $0.fallbackReason?.contains("neural-engine has no attention") == true })
        // Every op of every block, and the ones around them.
        let perLayer = engine.steps.filter { $0.layer == 0 }.map(\.op)
        #expect(Set(perLayer).isSuperset(of: [.rmsNorm, .matmul, .rope, .attention, .swiglu, .add]))
        #expect(engine.steps.filter { $0.layer == 1 }.count == perLayer.count)
        #expect(engine.steps.first?.op == .embedding && engine.steps.last?.op == .matmul)
        let gpu = try model.plan(ExecutionOptions(units: .cpuAndGPU, precision: .fp32))
        #expect(gpu.steps.filter { $0.op == .matmul }.allSatisfy { $0.unit == .gpu && $0.backend == "openblas" })
        let cpu = try model.plan(ExecutionOptions(units: .cpuOnly))
        #expect(cpu.steps.allSatisfy { $0.unit == .cpu })
        #expect(cpu.route == .cpu && gpu.route == .gpu)
    }
}
