import EmberCore

/// A decoder-only transformer family described as data: what its blocks do,
/// where its hyperparameters and tensors are in a GGUF file. One
/// implementation (`DecoderModel`) runs every description; a new family is a
/// description (``ArchitectureRegistry/register(textGenerator:_:)``) plus,
/// when it needs one, the op it lacks.
///
/// Hyperparameters are read from `ARCH.block_count`, `ARCH.embedding_length`,
/// `ARCH.feed_forward_length`, `ARCH.attention.head_count(_kv)`,
/// `ARCH.attention.key_length` / `value_length` (the head width, when it is
/// not the hidden width over the heads), `ARCH.context_length`,
/// `ARCH.rope.freq_base`, `ARCH.rope.scaling.*`,
/// `ARCH.attention.layer_norm_rms_epsilon` and, for sliding-window families,
/// `ARCH.attention.sliding_window(_pattern)` and `ARCH.rope.freq_base_swa` —
/// ARCH being ``architecture``; tensors by GGUF's standard names
/// (`token_embd`, `blk.N.attn_q`, …, `output_norm`, `output`).
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
        /// down(gelu(gate(x)) · up(x)), GELU's tanh form (Gemma).
        case geglu
    }

    /// A factor applied to embeddings.
    public enum EmbeddingScale: Sendable, Equatable {
        /// √(embedding length).
        case squareRootOfWidth
    }

    /// Layers that attend over a window of recent positions only, interleaved with global ones (Gemma 2/3).
    public struct SlidingWindow: Sendable, Equatable {
        /// Every `period`-th layer (the last of each period) is global when the file gives no
        /// `ARCH.attention.sliding_window_pattern`; the others slide.
        public var period: Int
        /// RoPE frequency base of the sliding layers when the file gives no `ARCH.rope.freq_base_swa`.
        public var defaultRopeBase: Float

        /// Sliding layers with global ones every `period`-th, their RoPE base `defaultRopeBase` unless the file says.
        public init(period: Int, defaultRopeBase: Float) {
            self.period = period
            self.defaultRopeBase = defaultRopeBase
        }
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
    /// Whether the attention and feed-forward outputs are RMS-normalized before joining the residual stream
    /// (`blk.N.post_attention_norm`, `blk.N.post_ffw_norm`: Gemma 2/3).
    public var postNorms: Bool
    /// Sliding-window layers, nil when every layer attends over the whole context.
    public var slidingWindow: SlidingWindow?
    /// Whether the queries are multiplied by the attention scale before attention (Gemma) rather than the scores.
    public var scalesQueries: Bool
    /// Whether per-pair RoPE frequency factors may come from `rope_freqs.weight` (Llama 3.1+).
    public var ropeFrequencyFactors: Bool

    /// A description; the defaults are Llama's.
    public init(architecture: String, normalization: Normalization = .rms, rotaryLayout: RotaryLayout = .adjacentPairs,
                defaultRopeBase: Float = 10000, feedForward: FeedForward = .swiglu, attentionBiases: Bool = false,
                queryKeyNorm: Bool = false, embeddingScale: EmbeddingScale? = nil, postNorms: Bool = false,
                slidingWindow: SlidingWindow? = nil, scalesQueries: Bool = false, ropeFrequencyFactors: Bool = false) {
        self.architecture = architecture
        self.normalization = normalization
        self.rotaryLayout = rotaryLayout
        self.defaultRopeBase = defaultRopeBase
        self.feedForward = feedForward
        self.attentionBiases = attentionBiases
        self.queryKeyNorm = queryKeyNorm
        self.embeddingScale = embeddingScale
        self.postNorms = postNorms
        self.slidingWindow = slidingWindow
        self.scalesQueries = scalesQueries
        self.ropeFrequencyFactors = ropeFrequencyFactors
    }

    /// Llama (SmolLM2, Llama 2/3): RMSNorm, adjacent-pair RoPE (with Llama 3's frequency factors when the file has
    /// `rope_freqs.weight`), SwiGLU, no biases; the output projection is `output.weight` or, when the file has none,
    /// the token table (tied).
    public static let llama = DecoderDescription(architecture: "llama", ropeFrequencyFactors: true)

    /// Qwen2 / Qwen2.5: Llama's blocks with Q, K and V biases and NeoX RoPE.
    public static let qwen2 = DecoderDescription(architecture: "qwen2", rotaryLayout: .halves, attentionBiases: true)

    /// Qwen3: Llama's blocks with a per-head RMSNorm of queries and keys before NeoX RoPE, no biases.
    public static let qwen3 = DecoderDescription(architecture: "qwen3", rotaryLayout: .halves, queryKeyNorm: true)

    /// Gemma 3: embeddings scaled by √hidden, a per-head query/key norm, NeoX RoPE, four norms per block (the
    /// attention and feed-forward outputs normalized before the residual), a GELU-gated feed-forward, queries scaled
    /// before attention, and five sliding-window layers (RoPE base 10,000) for every global one.
    public static let gemma3 = DecoderDescription(
        architecture: "gemma3", rotaryLayout: .halves, feedForward: .geglu, queryKeyNorm: true, embeddingScale: .squareRootOfWidth,
        postNorms: true, slidingWindow: SlidingWindow(period: 6, defaultRopeBase: 10000), scalesQueries: true)

    /// The GGUF metadata key of hyperparameter `name` ("ARCH.name").
    func key(_ name: String) -> String { "\(architecture).\(name)" }
}
