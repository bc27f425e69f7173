import EmberCore

/// A decoder-only transformer family described as data: what its blocks do,
/// where its hyperparameters and tensors are in a GGUF file. One
/// implementation (`DecoderModel`) runs every description; a new family is a
/// description (``ArchitectureRegistry/register(textGenerator:_:)``) plus,
/// when it needs one, the op it lacks.
///
/// Hyperparameters are read from `ARCH.block_count`, `ARCH.embedding_length`,
/// `ARCH.feed_forward_length`, `ARCH.attention.head_count(_kv)`,
/// `ARCH.context_length`, `ARCH.rope.freq_base` and
/// `ARCH.attention.layer_norm_rms_epsilon`, ARCH being ``architecture``;
/// tensors by GGUF's standard names (`token_embd`, `blk.N.attn_q`, …,
/// `output_norm`, `output`).
public struct DecoderDescription: Sendable, Equatable {
    /// How a block normalizes its input.
    public enum Normalization: String, Sendable {
        /// RMSNorm with a weight vector (`attn_norm`, `ffn_norm`, `output_norm`).
        case rms
    }

    /// Which pairs of a head RoPE rotates together.
    public enum RotaryLayout: String, Sendable {
        /// Adjacent pairs (2i, 2i+1): llama.cpp's "normal" mode.
        case adjacentPairs = "adjacent_pairs"
        /// Pairs (i, i + head_dim/2): llama.cpp's NeoX mode (Qwen2, Gemma).
        case halves

        /// The plugin ABI's rope `mode` (0 normal, 2 NeoX).
        var abiMode: UInt32 { self == .adjacentPairs ? 0 : 2 }
    }

    /// The feed-forward block.
    public enum FeedForward: String, Sendable {
        /// down(silu(gate(x)) · up(x)).
        case swiglu
    }

    /// The GGUF architecture name, also the prefix of its hyperparameter keys ("llama").
    public var architecture: String
    /// How blocks normalize.
    public var normalization: Normalization
    /// The RoPE pairing.
    public var rotaryLayout: RotaryLayout
    /// RoPE frequency base when the file does not give `ARCH.rope.freq_base`.
    public var defaultRopeBase: Float
    /// The feed-forward block.
    public var feedForward: FeedForward
    /// Whether Q, K and V have biases (`blk.N.attn_q.bias` …); they are used when present either way.
    public var attentionBiases: Bool
    /// Whether each query and key head is RMS-normalized before RoPE (`blk.N.attn_q_norm`, `attn_k_norm`).
    public var queryKeyNorm: Bool
    /// A factor the token embeddings are multiplied by (√hidden for Gemma), nil for none.
    public var embeddingScale: EmbeddingScale?

    /// A factor applied to embeddings.
    public enum EmbeddingScale: Sendable, Equatable {
        /// √(embedding length).
        case squareRootOfWidth
    }

    /// A description; the defaults are Llama's.
    public init(architecture: String, normalization: Normalization = .rms, rotaryLayout: RotaryLayout = .adjacentPairs,
                defaultRopeBase: Float = 10000, feedForward: FeedForward = .swiglu, attentionBiases: Bool = false,
                queryKeyNorm: Bool = false, embeddingScale: EmbeddingScale? = nil) {
        self.architecture = architecture
        self.normalization = normalization
        self.rotaryLayout = rotaryLayout
        self.defaultRopeBase = defaultRopeBase
        self.feedForward = feedForward
        self.attentionBiases = attentionBiases
        self.queryKeyNorm = queryKeyNorm
        self.embeddingScale = embeddingScale
    }

    /// Llama (SmolLM2, Llama 2/3): RMSNorm, adjacent-pair RoPE, SwiGLU, no biases; the output projection is
    /// `output.weight` or, when the file has none, the token table (tied).
    public static let llama = DecoderDescription(architecture: "llama")

    /// The GGUF metadata key of hyperparameter `name` ("ARCH.name").
    func key(_ name: String) -> String { "\(architecture).\(name)" }
}
