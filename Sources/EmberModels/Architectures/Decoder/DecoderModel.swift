import _CEmberKernels
import EmberCore
import Foundation

/// A decoder-only transformer read from GGUF and run as its
/// ``DecoderDescription`` says. The files read top to bottom like llama2.c:
/// config (`DecoderConfig`) and weights here, the bound plan
/// (`DecoderModel+Plan`), the session (`DecoderSession`), the forward pass
/// (`DecoderModel+Forward`). Every op is placed on a backend by the context's
/// registry, so the units and precision decided for a request apply.
final class DecoderModel: TextGenerator, @unchecked Sendable {
    typealias Config = DecoderConfig

    // MARK: Weights

    /// One block's weights (a class: a decode step reads it once per layer, and copying seven matrices' references
    /// cost retains on every token).
    final class Layer {
        let attentionNorm: UnsafePointer<Float> // [hidden]
        let q, k, v, o: WeightMatrix
        let qBias, kBias, vBias: UnsafePointer<Float>?
        let qNorm, kNorm: UnsafePointer<Float>? // [headDim]
        /// The norms of the attention and feed-forward outputs (Gemma), nil without post-norms.
        let postAttentionNorm, postFeedForwardNorm: UnsafePointer<Float>?
        let feedForwardNorm: UnsafePointer<Float>
        let gate, up, down: WeightMatrix
        /// The layer's matmul weights in pass order: Q, K, V, O, gate, up, down.
        var matrices: [WeightMatrix] { [q, k, v, o, gate, up, down] }

        init(attentionNorm: UnsafePointer<Float>, q: WeightMatrix, k: WeightMatrix, v: WeightMatrix, o: WeightMatrix,
             qBias: UnsafePointer<Float>?, kBias: UnsafePointer<Float>?, vBias: UnsafePointer<Float>?,
             qNorm: UnsafePointer<Float>?, kNorm: UnsafePointer<Float>?, postAttentionNorm: UnsafePointer<Float>?,
             postFeedForwardNorm: UnsafePointer<Float>?, feedForwardNorm: UnsafePointer<Float>, gate: WeightMatrix,
             up: WeightMatrix, down: WeightMatrix) {
            (self.attentionNorm, self.q, self.k, self.v, self.o) = (attentionNorm, q, k, v, o)
            (self.qBias, self.kBias, self.vBias, self.qNorm, self.kNorm) = (qBias, kBias, vBias, qNorm, kNorm)
            (self.postAttentionNorm, self.postFeedForwardNorm, self.feedForwardNorm) = (postAttentionNorm, postFeedForwardNorm, feedForwardNorm)
            (self.gate, self.up, self.down) = (gate, up, down)
        }
    }

    let description: DecoderDescription
    let config: Config
    let tokenizer: any TextTokenizer
    let file: GGUFFile
    let context: ComputeContext
    let chatTemplate: ChatTemplate?
    let embedding: WeightMatrix        // [vocabulary × hidden]
    /// The output projection: `output.weight`, or the token table itself when the file ties them.
    let output: WeightMatrix
    let layers: [Layer]
    let outputNorm: UnsafePointer<Float>
    let embeddingScale: Float
    /// Llama 3's per-pair RoPE frequency factors (`rope_freqs.weight`, headDim/2 values), nil when the file has none.
    let ropeFactors: UnsafePointer<Float>?
    private let ownedVectors: [UnsafeMutablePointer<Float>]
    /// Bound plans, one per (units, precision, cache type).
    let plans = PlanCache<DecoderPlanKey, DecoderPlan>()

    var architecture: String { description.architecture }
    var path: String { file.path }
    var contextLength: Int { config.contextLength }
    var vocabularySize: Int { config.vocabulary }
    var filePrecision: Precision { layers.first?.q.type.precision ?? .fp32 }
    /// Whether the file is a 4-bit mix whose types int4 keeps as stored: every layer matrix block-quantized and some
    /// at 5 bits or fewer (Q4_K_M, Q5_K_M, Q3_K_M …). llama-quantize's mixes put Q6_K or Q8_0 where a model is
    /// sensitive (Gemma 3 270M's Q4_K_M: half the `ffn_down` and `attn_v`); making Q4_1 of those cost Gemma +6.5 %
    /// perplexity, keeping them costs what the 8-bit activations cost (+0.3 %).
    var int4KeepsStoredTypes: Bool {
        let matrices = layerMatrices
        return matrices.allSatisfy { $0.type.blockSize > 1 } && matrices.contains { $0.type.precision == .int4 }
    }
    /// Every layer's matmul weights, layer after layer in pass order (``Layer/matrices``).
    var layerMatrices: [WeightMatrix] { layers.flatMap(\.matrices) }
    var matmulParameters: Int {
        layerMatrices.reduce(output.rows * output.columns) { $0 + $1.rows * $1.columns }
    }

    func releaseBoundWeights() {
        plans.removeAll()
        let matrices = [embedding, output] + layerMatrices
        matrices.forEach { $0.releaseDerivedCopies() }
    }

    /// Reads a model of family `description` from `file`, into `context`; every shape is checked and a
    /// mismatch throws a ``ModelFileError`` naming the key or tensor.
    init(file: GGUFFile, description: DecoderDescription, context: ComputeContext) throws {
        self.file = file
        self.description = description
        self.context = context
        let config = try DecoderConfig(file: file, description: description)
        self.config = config
        tokenizer = try GGUFTokenizer.load(file)
        chatTemplate = try? ChatTemplate(gguf: file)
        // Every id the output layer can produce must be a token the tokenizer can print.
        guard tokenizer.count >= config.vocabulary else {
            throw ModelFileError.invalidField(file: file.path, field: "tokenizer.ggml.tokens", found: "\(tokenizer.count) tokens",
                                              expected: "at least \(config.vocabulary) (the rows of token_embd.weight)")
        }
        var owned: [UnsafeMutablePointer<Float>] = []
        func vector(_ name: String, length: Int) throws -> UnsafePointer<Float> {
            let info = try file.tensor(name)
            guard info.type.canDequantize, info.type.blockSize == 1, info.elementCount == length else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(info.type.name) \(info.dimensions)",
                                                  expected: "F32 or F16 [\(length)]")
            }
            let copy = UnsafeMutablePointer<Float>.allocate(capacity: length) // aligned fp32, whatever the file's alignment and type
            owned.append(copy)
            try info.type.dequantizeRow(file.bytes(of: info).baseAddress!, columns: length, into: copy)
            guard (0..<length).allSatisfy({ copy[$0].isFinite }) else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "a NaN or infinite value",
                                                  expected: "finite weights")
            }
            return UnsafePointer(copy)
        }
        func optionalVector(_ name: String, length: Int) throws -> UnsafePointer<Float>? {
            file.tensors.contains { $0.name == name } ? try vector(name, length: length) : nil
        }
        func matrix(_ name: String, rows: Int, columns: Int) throws -> WeightMatrix {
            let weights = try file.weightMatrix(name)
            guard weights.rows == rows, weights.columns == columns else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(weights.rows)×\(weights.columns)",
                                                  expected: "\(rows)×\(columns) (rows × columns)")
            }
            return weights
        }
        do {
            let (hidden, feedForward, queries, kvWidth) = (config.hidden, config.feedForward, config.queryWidth, config.kvWidth)
            embedding = try matrix("token_embd.weight", rows: config.vocabulary, columns: hidden)
            output = file.tensors.contains { $0.name == "output.weight" }
                ? try matrix("output.weight", rows: config.vocabulary, columns: hidden) : embedding
            layers = try (0..<config.layers).map { index in
                let prefix = "blk.\(index)."
                func required(_ name: String, _ length: Int, when needed: Bool) throws -> UnsafePointer<Float>? {
                    needed ? try vector(prefix + name, length: length) : try optionalVector(prefix + name, length: length)
                }
                let post = description.postNorms
                return Layer(
                    attentionNorm: try vector(prefix + "attn_norm.weight", length: hidden),
                    q: try matrix(prefix + "attn_q.weight", rows: queries, columns: hidden),
                    k: try matrix(prefix + "attn_k.weight", rows: kvWidth, columns: hidden),
                    v: try matrix(prefix + "attn_v.weight", rows: kvWidth, columns: hidden),
                    o: try matrix(prefix + "attn_output.weight", rows: hidden, columns: queries),
                    qBias: try required("attn_q.bias", queries, when: description.attentionBiases),
                    kBias: try required("attn_k.bias", kvWidth, when: description.attentionBiases),
                    vBias: try required("attn_v.bias", kvWidth, when: description.attentionBiases),
                    qNorm: try required("attn_q_norm.weight", config.headDim, when: description.queryKeyNorm),
                    kNorm: try required("attn_k_norm.weight", config.headDim, when: description.queryKeyNorm),
                    postAttentionNorm: post ? try vector(prefix + "post_attention_norm.weight", length: hidden) : nil,
                    postFeedForwardNorm: post ? try vector(prefix + "post_ffw_norm.weight", length: hidden) : nil,
                    feedForwardNorm: try vector(prefix + "ffn_norm.weight", length: hidden),
                    gate: try matrix(prefix + "ffn_gate.weight", rows: feedForward, columns: hidden),
                    up: try matrix(prefix + "ffn_up.weight", rows: feedForward, columns: hidden),
                    down: try matrix(prefix + "ffn_down.weight", rows: hidden, columns: feedForward))
            }
            outputNorm = try vector("output_norm.weight", length: hidden)
            ropeFactors = description.ropeFrequencyFactors ? try optionalVector("rope_freqs.weight", length: config.headDim / 2) : nil
        } catch {
            for vector in owned { vector.deallocate() }
            throw error
        }
        ownedVectors = owned
        embeddingScale = description.embeddingScale == .squareRootOfWidth ? Float(config.hidden).squareRoot() : 1
    }

    deinit { for vector in ownedVectors { vector.deallocate() } }

    // MARK: Sessions

    func sessionBytes(contextLength: Int) -> Int {
        let c = config, tokens = max(1, min(contextLength, c.contextLength))
        let cache = c.layers * 2 * tokens * c.kvWidth * 2
        // The pass buffers for the longest prompt a session takes at once (prefill rows), and the logits.
        let rows = min(tokens, 512)
        let buffers = rows * (5 * c.hidden + 2 * c.queryWidth + 2 * c.kvWidth + 3 * c.feedForward) * 4 + rows * c.hidden * 2
        return cache + buffers + c.vocabulary * 4 * 2
    }

    func makeSession(contextLength: Int, halfPrecisionCache: Bool) -> any GenerationSession {
        DecoderSession(config: config, capacity: max(1, min(contextLength, config.contextLength)), halfPrecision: halfPrecisionCache)
    }
}
