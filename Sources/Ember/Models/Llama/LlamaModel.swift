import CKernels
import Foundation

/// A Llama-family decoder (SmolLM2) read from GGUF. The file reads top to
/// bottom like llama2.c: config, weights, run state, forward. Every matmul
/// goes through ``ComputeEngine`` so the units and precision decided for a
/// request apply; norms, RoPE and attention run in fp32 on the CPU route.
public final class LlamaModel: @unchecked Sendable {
    // MARK: Config

    /// The decoder's shape, from the GGUF metadata.
    public struct Config: Sendable, Equatable {
        /// Number of decoder blocks (`llama.block_count`).
        public var layers: Int
        /// Width of the hidden states (`llama.embedding_length`).
        public var hidden: Int
        /// Width of the feed-forward layer (`llama.feed_forward_length`).
        public var feedForward: Int
        /// Query attention heads (`llama.attention.head_count`).
        public var heads: Int
        /// Key/value heads (`llama.attention.head_count_kv`); fewer than `heads` under grouped-query attention.
        public var kvHeads: Int
        /// Width of one attention head: `hidden / heads`.
        public var headDim: Int
        /// Number of token ids: the rows of `token_embd.weight`.
        public var vocabulary: Int
        /// RoPE frequency base (`llama.rope.freq_base`, 10000 when absent).
        public var ropeBase: Float
        /// Epsilon of the RMS norms (`llama.attention.layer_norm_rms_epsilon`, 1e-5 when absent).
        public var rmsEpsilon: Float
        /// Tokens the model was trained to attend over (`llama.context_length`); sessions are capped at it.
        public var contextLength: Int
    }

    // MARK: Weights

    struct Layer {
        let attentionNorm: UnsafePointer<Float> // [hidden]
        let q, k, v, o: WeightMatrix
        let feedForwardNorm: UnsafePointer<Float>
        let gate, up, down: WeightMatrix
    }

    /// The decoder's shape as read from the GGUF metadata.
    public let config: Config
    /// The byte-level BPE tokenizer from the GGUF metadata.
    public let tokenizer: ByteLevelBPE
    /// The mapped GGUF file; the weights borrow its bytes.
    public let file: GGUFFile
    let embedding: WeightMatrix       // [vocabulary × hidden], also the tied output projection
    let layers: [Layer]
    let outputNorm: UnsafePointer<Float>
    private let normVectors: [UnsafeMutablePointer<Float>]

    /// Reads a Llama-architecture model from `file`; every shape is checked and a mismatch throws a ``ModelFileError``.
    public init(file: GGUFFile) throws {
        self.file = file
        func integer(_ key: String) throws -> Int {
            guard let value = try file.require(key).integer, value > 0 else {
                throw ModelFileError.invalidField(file: file.path, field: key, found: "\(file.metadata[key].map { "\($0)" } ?? "?")", expected: "a positive integer")
            }
            return value
        }
        let architecture = try file.require("general.architecture").string ?? ""
        guard architecture == "llama" else {
            throw ModelFileError.invalidField(file: file.path, field: "general.architecture", found: architecture, expected: "llama")
        }
        let hidden = try integer("llama.embedding_length"), heads = try integer("llama.attention.head_count")
        let config = Config(
            layers: try integer("llama.block_count"), hidden: hidden, feedForward: try integer("llama.feed_forward_length"),
            heads: heads, kvHeads: try integer("llama.attention.head_count_kv"), headDim: hidden / heads,
            vocabulary: try Self.vocabularySize(file),
            ropeBase: Float(file.metadata["llama.rope.freq_base"]?.number ?? 10000),
            rmsEpsilon: Float(file.metadata["llama.attention.layer_norm_rms_epsilon"]?.number ?? 1e-5),
            contextLength: try integer("llama.context_length"))
        self.config = config
        tokenizer = try ByteLevelBPE(gguf: file)
        // Every id the output layer can produce must be a token the tokenizer can print.
        guard tokenizer.tokens.count >= config.vocabulary else {
            throw ModelFileError.invalidField(file: file.path, field: "tokenizer.ggml.tokens", found: "\(tokenizer.tokens.count) tokens",
                                              expected: "at least \(config.vocabulary) (the rows of token_embd.weight)")
        }
        // The logits come from the token table (tied embeddings, as SmolLM2 has): a file with its own
        // output projection would be decoded wrongly, so it is refused rather than run.
        if file.tensors.contains(where: { $0.name == "output.weight" }) {
            throw ModelFileError.invalidField(file: file.path, field: "tensors[output.weight]", found: "a separate output projection",
                                              expected: "tied embeddings (logits from token_embd.weight), the only kind this decoder runs")
        }
        var owned: [UnsafeMutablePointer<Float>] = []
        func vector(_ name: String) throws -> UnsafePointer<Float> {
            let info = try file.tensor(name)
            guard info.type.name == "F32", info.elementCount == hidden else {
                throw ModelFileError.invalidField(file: file.path, field: "tensors[\(name)]", found: "\(info.type) \(info.dimensions)", expected: "F32 [\(hidden)]")
            }
            let copy = UnsafeMutablePointer<Float>.allocate(capacity: hidden) // aligned, whatever the file's alignment
            UnsafeMutableRawPointer(copy).copyMemory(from: file.bytes(of: info).baseAddress!, byteCount: hidden * 4)
            owned.append(copy)
            return UnsafePointer(copy)
        }
        // The forward pass trusts these shapes: a file that disagrees is refused here.
        guard hidden % 32 == 0, config.feedForward % 32 == 0 else {
            throw ModelFileError.invalidField(file: file.path, field: "llama.embedding_length", found: "\(hidden) (feed-forward \(config.feedForward))",
                                              expected: "multiples of 32 (whole quantization blocks)")
        }
        guard heads % config.kvHeads == 0, hidden % heads == 0, config.headDim % 2 == 0, config.headDim <= 512 else {
            throw ModelFileError.invalidField(
                file: file.path, field: "llama.attention.head_count_kv", found: "\(config.kvHeads) KV heads for \(heads) heads of \(hidden)",
                expected: "a divisor of the head count, and an even head size of at most 512")
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
        let feedForward = config.feedForward
        layers = try (0..<config.layers).map { index in
            let prefix = "blk.\(index)."
            return Layer(
                attentionNorm: try vector(prefix + "attn_norm.weight"),
                q: try matrix(prefix + "attn_q.weight", rows: hidden, columns: hidden),
                k: try matrix(prefix + "attn_k.weight", rows: kvWidth, columns: hidden),
                v: try matrix(prefix + "attn_v.weight", rows: kvWidth, columns: hidden),
                o: try matrix(prefix + "attn_output.weight", rows: hidden, columns: hidden),
                feedForwardNorm: try vector(prefix + "ffn_norm.weight"),
                gate: try matrix(prefix + "ffn_gate.weight", rows: feedForward, columns: hidden),
                up: try matrix(prefix + "ffn_up.weight", rows: feedForward, columns: hidden),
                down: try matrix(prefix + "ffn_down.weight", rows: hidden, columns: feedForward))
        }
        outputNorm = try vector("output_norm.weight")
        normVectors = owned
    }

    deinit { for vector in normVectors { vector.deallocate() } }

    /// The token table's rows, checked to be a matrix first.
    private static func vocabularySize(_ file: GGUFFile) throws -> Int {
        let info = try file.tensor("token_embd.weight")
        guard info.dimensions.count == 2, info.dimensions[1] > 0 else {
            throw ModelFileError.invalidField(file: file.path, field: "tensors[token_embd.weight]", found: "\(info.dimensions)",
                                              expected: "2 dimensions [hidden, vocabulary]")
        }
        return info.dimensions[1]
    }

    // MARK: Plans

    let plans = PlanCache<ForwardPlan>()

    /// Greedy generation: up to `maxTokens` new ids, stopping at end-of-generation.
    public func generateGreedy(prompt: [Int], maxTokens: Int, units: ComputeUnits = .cpuAndNeuralEngine,
                               precision: Precision? = nil) throws -> [Int] {
        let session = makeSession(contextLength: prompt.count + maxTokens + 1)
        var logits = try forward(prompt, session: session, units: units, precision: precision)
        var generated: [Int] = []
        for _ in 0..<maxTokens {
            let values = try logits.scalars()
            let next = values.indices.max { values[$0] < values[$1] }!
            generated.append(next)
            if next == tokenizer.eosID { break }
            logits = try forward([next], session: session, units: units, precision: precision)
        }
        return generated
    }
}
