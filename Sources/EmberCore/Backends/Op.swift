import _CEmberKernels

/// The operations a backend can run, numbered as `ember_op` in the plugin ABI
/// (`CKernels/include/ember_plugin.h`). A model's forward pass is a sequence
/// of these; each one is placed on a backend (``BackendRegistry/place(_:type:units:)``).
public enum Op: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// Y = X·Wᵀ with a weight matrix (GEMV when X is one row).
    case matmul
    /// One row of a token table, in the table's type, to fp32.
    case embedding
    /// RMS normalization with a weight vector.
    case rmsNorm = "rms_norm"
    /// Layer normalization with a gain and a bias.
    case layerNorm = "layer_norm"
    /// Rotary position embedding of query and key heads.
    case rope
    /// Attention, first part: scale·q·Kᵀ over one head's cached keys.
    case attentionScores = "attention_scores"
    /// Softmax of each row, in place.
    case softmax
    /// Attention, last part: the softmax weights times one head's cached values.
    case attentionValues = "attention_values"
    /// x·σ(x), in place.
    case silu
    /// GELU (the erf form), in place.
    case gelu
    /// silu(gate)·up.
    case swiglu
    /// x + y, in place.
    case add
    /// x·y, in place.
    case mul
    /// fp32 activations into the blocks a backend's matmul reads.
    case quantizeActivations = "quantize_activations"
    /// One head over its cached keys and values in one pass, the softmax online (flash attention).
    case attention
    /// gelu(gate)·up, GELU's tanh form (Gemma's feed-forward).
    case geglu
    /// Every query row of one sequence and head against all of its keys and values (an encoder's bidirectional
    /// self-attention), in one call.
    case sequenceAttention = "sequence_attention"

    /// The plugin ABI's `ember_op` value.
    public var abiValue: UInt32 {
        switch self {
        case .matmul: EMBER_OP_MATMUL.rawValue
        case .embedding: EMBER_OP_EMBEDDING.rawValue
        case .rmsNorm: EMBER_OP_RMS_NORM.rawValue
        case .layerNorm: EMBER_OP_LAYER_NORM.rawValue
        case .rope: EMBER_OP_ROPE.rawValue
        case .attentionScores: EMBER_OP_ATTENTION_SCORES.rawValue
        case .softmax: EMBER_OP_SOFTMAX.rawValue
        case .attentionValues: EMBER_OP_ATTENTION_VALUES.rawValue
        case .silu: EMBER_OP_SILU.rawValue
        case .gelu: EMBER_OP_GELU.rawValue
        case .swiglu: EMBER_OP_SWIGLU.rawValue
        case .add: EMBER_OP_ADD.rawValue
        case .mul: EMBER_OP_MUL.rawValue
        case .quantizeActivations: EMBER_OP_QUANTIZE_ACTIVATIONS.rawValue
        case .attention: EMBER_OP_ATTENTION.rawValue
        case .geglu: EMBER_OP_GEGLU.rawValue
        case .sequenceAttention: EMBER_OP_SEQUENCE_ATTENTION.rawValue
        }
    }

    /// The op with the plugin ABI's value `abiValue`, nil for a value the ABI does not define.
    public init?(abiValue: UInt32) {
        guard let op = Self.allCases.first(where: { $0.abiValue == abiValue }) else { return nil }
        self = op
    }

    /// Whether the op reads a weight matrix or table whose type is the weights' (matmul, embedding,
    /// activation quantization for a weight type); attention and its parts name the KV cache's type;
    /// the rest work on fp32 activations.
    public var typeIsWeights: Bool { self == .matmul || self == .embedding || self == .quantizeActivations }

    /// The raw value, e.g. "rms_norm".
    public var description: String { rawValue }
}

/// One op on one tensor type: what a backend declares it runs.
public struct OpSupport: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The operation.
    public var op: Op
    /// The weights' type (matmul, embedding, activation quantization), the KV cache's (attention parts), else F32.
    public var type: TensorType

    /// `op` on `type`.
    public init(_ op: Op, _ type: TensorType) {
        self.op = op
        self.type = type
    }

    /// "op/type", e.g. "matmul/q4_0".
    public var description: String { "\(op)/\(type)" }
}
