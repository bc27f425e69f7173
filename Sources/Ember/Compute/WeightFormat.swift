import CKernels

/// The storage format of a weight matrix, numbered as GGUF's tensor types.
public enum WeightFormat: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// fp32 rows (GGUF type 0), or the GGUF block formats Q8_0 (type 8), Q4_0 (type 2) and Q4_1 (type 3).
    case f32, q8_0, q4_0, q4_1

    /// The precision class the policy speaks of.
    public var precision: Precision {
        switch self {
        case .f32: .fp32
        case .q8_0: .int8
        case .q4_0, .q4_1: .int4
        }
    }

    /// GGUF's tensor type id (`ember_weight_format` in the plugin ABI).
    public var ggufType: UInt32 {
        switch self {
        case .f32: 0
        case .q4_0: 2
        case .q4_1: 3
        case .q8_0: 8
        }
    }

    /// The format with GGUF tensor type id `ggufType`; nil for a type Ember does not take.
    public init?(ggufType: UInt32) {
        guard let format = Self.allCases.first(where: { $0.ggufType == ggufType }) else { return nil }
        self = format
    }

    /// The block format, for the quantized ones.
    public var quantized: QuantizedFormat? {
        switch self {
        case .f32: nil
        case .q8_0: .q8_0
        case .q4_0: .q4_0
        case .q4_1: .q4_1
        }
    }

    /// The weight format of a quantized block format.
    public init(_ format: QuantizedFormat) {
        switch format {
        case .q8_0: self = .q8_0
        case .q4_0: self = .q4_0
        case .q4_1: self = .q4_1
        }
    }

    /// Bytes of a rows × columns matrix.
    public func byteCount(rows: Int, columns: Int) -> Int {
        quantized?.byteCount(rows: rows, columns: columns) ?? rows * columns * 4
    }

    /// The raw value, e.g. "q4_0".
    public var description: String { rawValue }
}

/// The numeric precision a request runs at.
public enum Precision: String, Sendable, CaseIterable, Codable, Comparable, CustomStringConvertible {
    /// 4-bit (Q4_0, Q4_1), 8-bit (Q8_0) or fp32 weights, narrowest first.
    case int4, int8, fp32

    /// Orders by width: int4 < int8 < fp32.
    public static func < (lhs: Precision, rhs: Precision) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    /// The raw value: "int4", "int8" or "fp32".
    public var description: String { rawValue }
}

/// Operations the registry places. Matmul-class ops may leave the CPU route.
public enum ComputeOperation: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// Y = X·Wᵀ with a weight matrix; the one op plugins can implement (ABI value 1).
    case matmul
    /// RMS normalization.
    case rmsNorm = "rms_norm"
    /// Layer normalization.
    case layerNorm = "layer_norm"
    /// Rotary position embedding.
    case rope
    /// Attention over the cached keys and values.
    case attention
    /// Softmax.
    case softmax
    /// An elementwise activation such as SwiGLU or GELU.
    case activation
    /// Token-embedding lookup.
    case embedding

    /// The plugin ABI's `ember_op`, for the ops plugins can implement.
    public var abiValue: UInt32? { self == .matmul ? 1 : nil }

    /// The raw value, e.g. "rms_norm".
    public var description: String { rawValue }
}
