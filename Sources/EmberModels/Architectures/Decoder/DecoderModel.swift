import _CEmberKernels
import EmberCore
import Foundation

/// A decoder-only transformer read from GGUF and run as its
/// ``DecoderDescription`` says. The files read top to bottom like llama2.c:
/// config and weights here, the bound plan (`DecoderModel+Plan`), the
/// session (`DecoderSession`), the forward pass (`DecoderModel+Forward`).
/// Every op is placed on a backend by the context's registry, so the units
/// and precision decided for a request apply.
final class DecoderModel: TextGenerator, @unchecked Sendable {
    // MARK: Config

    /// The decoder's shape, from the GGUF metadata.
    struct Config: Sendable, Equatable {
        /// Number of decoder blocks (`ARCH.block_count`).
        var layers: Int
        /// Width of the hidden states (`ARCH.embedding_length`).
        var hidden: Int
        /// Width of the feed-forward layer (`ARCH.feed_forward_length`).
        var feedForward: Int
        /// Query attention heads (`ARCH.attention.head_count`).
        var heads: Int
        /// Key/value heads (`ARCH.attention.head_count_kv`); fewer than `heads` under grouped-query attention.
        var kvHeads: Int
        /// Width of one attention head: `hidden / heads`.
        var headDim: Int
        /// Number of token ids: the rows of `token_embd.weight`.
        var vocabulary: Int
        /// RoPE frequency base (`ARCH.rope.freq_base`, the description's default when absent).
        var ropeBase: Float
        /// Epsilon of the RMS norms (`ARCH.attention.layer_norm_rms_epsilon`, 1e-5 when absent).
        var rmsEpsilon: Float
        /// Tokens the model was trained to attend over (`ARCH.context_length`); sessions are capped at it.
        var contextLength: Int
    }

    // MARK: Weights

    struct Layer {
        let attentionNorm: UnsafePointer<Float> // [hidden]
        let q, k, v, o: WeightMatrix
        let qBias, kBias, vBias: UnsafePointer<Float>?
        let qNorm, kNorm: UnsafePointer<Float>? // [headDim]
        let feedForwardNorm: UnsafePointer<Float>
        let gate, up, down: WeightMatrix
    }

    let description: DecoderDescription
    let config: Config
    let bpe: ByteLevelBPE
    let file: GGUFFile
    let context: ComputeContext
    let chatTemplate: ChatTemplate?
    let embedding: WeightMatrix        // [vocabulary × hidden]
    /// The output projection: `output.weight`, or the token table itself when the file ties them.
    let output: WeightMatrix
    let layers: [Layer]
    let outputNorm: UnsafePointer<Float>
    let embeddingScale: Float
    private let ownedVectors: [UnsafeMutablePointer<Float>]
    /// Bound plans, one per (units, precision, cache type).
    let plans = PlanCache<DecoderPlanKey, DecoderPlan>()

    var architecture: String { description.architecture }
    var path: String { file.path }
    var contextLength: Int { config.contextLength }
    var vocabularySize: Int { config.vocabulary }
    var tokenizer: any TextTokenizer { bpe }
    var filePrecision: Precision { layers.first?.q.type.precision ?? .fp32 }

    /// Reads a model of family `description` from `file`, into `context`; every shape is checked and a
    /// mismatch throws a ``ModelFileError`` naming the key or tensor.
    init(file: GGUFFile, description: DecoderDescription, context: ComputeContext) throws {
        self.file = file
        self.description = description
        self.context = context
        func integer(_ name: String) throws -> Int {
            let key = description.key(name)
            guard let value = try file.require(key).integer, value > 0 else {
                throw ModelFileError.invalidField(file: file.path, field: key, found: "\(file.metadata[key].map { "\($0)" } ?? "?")",
                                                  expected: "a positive integer")
            }
            return value
        }
        let hidden = try integer("embedding_length"), heads = try integer("attention.head_count")
        let config = Config(
            layers: try integer("block_count"), hidden: hidden, feedForward: try integer("feed_forward_length"),
            heads: heads, kvHeads: try integer("attention.head_count_kv"), headDim: hidden / heads,
            vocabulary: try Self.vocabularySize(file),
            ropeBase: Float(file.metadata[description.key("rope.freq_base")]?.number ?? Double(description.defaultRopeBase)),
            rmsEpsilon: Float(file.metadata[description.key("attention.layer_norm_rms_epsilon")]?.number ?? 1e-5),
            contextLength: try integer("context_length"))
        self.config = config
        bpe = try ByteLevelBPE(gguf: file)
        chatTemplate = try? ChatTemplate(gguf: file)
        // Every id the output layer can produce must be a token the tokenizer can print.
        guard bpe.tokens.count >= config.vocabulary else {
            throw ModelFileError.invalidField(file: file.path, field: "tokenizer.ggml.tokens", found: "\(bpe.tokens.count) tokens",
                                              expected: "at least \(config.vocabulary) (the rows of token_embd.weight)")
        }
        // The forward pass trusts these shapes: a file that disagrees is refused here.
        guard hidden % 32 == 0, config.feedForward % 32 == 0 else {
            throw ModelFileError.invalidField(file: file.path, field: description.key("embedding_length"),
                                              found: "\(hidden) (feed-forward \(config.feedForward))",
                                              expected: "multiples of 32 (whole quantization blocks)")
        }
        guard heads % config.kvHeads == 0, hidden % heads == 0, config.headDim % 2 == 0, config.headDim <= 512 else {
            throw ModelFileError.invalidField(
                file: file.path, field: description.key("attention.head_count_kv"),
                found: "\(config.kvHeads) KV heads for \(heads) heads of \(hidden)",
                expected: "a divisor of the head count, and an even head size of at most 512")
        }
        var owned: [UnsafeMutablePointer<Float>] = []
        func vector(_ name: String, length: Int) throws -> UnsafePointer<Float> {
            let info = try file.tensor(name)
            guard info.type.canDequantize, info.type.blockSize == 1, info.elementCount == length else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(info.type.name) \(info.dimensions)",
                                                  expected: "F32 or F16 [\(length)]")
            }
            let copy = UnsafeMutablePointer<Float>.allocate(capacity: length) // aligned fp32, whatever the file's alignment and type
            try info.type.dequantizeRow(file.bytes(of: info).baseAddress!, columns: length, into: copy)
            owned.append(copy)
            return UnsafePointer(copy)
        }
        func optionalVector(_ name: String, length: Int) throws -> UnsafePointer<Float>? {
            file.tensors.contains { $0.name == name } ? try vector(name, length: length) : nil
        }
        let kvWidth = config.kvHeads * config.headDim
        func matrix(_ name: String, rows: Int, columns: Int) throws -> WeightMatrix {
            let weights = try file.weightMatrix(name)
            guard weights.rows == rows, weights.columns == columns else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(weights.rows)×\(weights.columns)",
                                                  expected: "\(rows)×\(columns) (rows × columns)")
            }
            return weights
        }
        embedding = try matrix("token_embd.weight", rows: config.vocabulary, columns: hidden)
        output = file.tensors.contains { $0.name == "output.weight" }
            ? try matrix("output.weight", rows: config.vocabulary, columns: hidden) : embedding
        let feedForward = config.feedForward
        layers = try (0..<config.layers).map { index in
            let prefix = "blk.\(index)."
            func required(_ name: String, _ length: Int, when needed: Bool) throws -> UnsafePointer<Float>? {
                needed ? try vector(prefix + name, length: length) : try optionalVector(prefix + name, length: length)
            }
            return Layer(
                attentionNorm: try vector(prefix + "attn_norm.weight", length: hidden),
                q: try matrix(prefix + "attn_q.weight", rows: hidden, columns: hidden),
                k: try matrix(prefix + "attn_k.weight", rows: kvWidth, columns: hidden),
                v: try matrix(prefix + "attn_v.weight", rows: kvWidth, columns: hidden),
                o: try matrix(prefix + "attn_output.weight", rows: hidden, columns: hidden),
                qBias: try required("attn_q.bias", hidden, when: description.attentionBiases),
                kBias: try required("attn_k.bias", kvWidth, when: description.attentionBiases),
                vBias: try required("attn_v.bias", kvWidth, when: description.attentionBiases),
                qNorm: try required("attn_q_norm.weight", config.headDim, when: description.queryKeyNorm),
                kNorm: try required("attn_k_norm.weight", config.headDim, when: description.queryKeyNorm),
                feedForwardNorm: try vector(prefix + "ffn_norm.weight", length: hidden),
                gate: try matrix(prefix + "ffn_gate.weight", rows: feedForward, columns: hidden),
                up: try matrix(prefix + "ffn_up.weight", rows: feedForward, columns: hidden),
                down: try matrix(prefix + "ffn_down.weight", rows: hidden, columns: feedForward))
        }
        outputNorm = try vector("output_norm.weight", length: hidden)
        ownedVectors = owned
        embeddingScale = description.embeddingScale == .squareRootOfWidth ? Float(hidden).squareRoot() : 1
    }

    deinit { for vector in ownedVectors { vector.deallocate() } }

    /// The token table's rows, checked to be a matrix first.
    private static func vocabularySize(_ file: GGUFFile) throws -> Int {
        let info = try file.tensor("token_embd.weight")
        guard info.dimensions.count == 2, info.dimensions[1] > 0 else {
            throw ModelFileError.invalidField(file: file.path, field: "tensors[token_embd.weight]", found: "\(info.dimensions)",
                                              expected: "2 dimensions [hidden, vocabulary]")
        }
        return info.dimensions[1]
    }

    // MARK: Sessions

    func makeSession(contextLength: Int, halfPrecisionCache: Bool) -> any GenerationSession {
        DecoderSession(config: config, capacity: max(1, min(contextLength, config.contextLength)), halfPrecision: halfPrecisionCache)
    }
}
