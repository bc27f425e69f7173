import CKernels

/// The storage format of a weight matrix, numbered as GGUF's tensor types.
public enum WeightFormat: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
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

    public var description: String { rawValue }
}

/// The numeric precision a request runs at.
public enum Precision: String, Sendable, CaseIterable, Codable, Comparable, CustomStringConvertible {
    case int4, int8, fp32

    public static func < (lhs: Precision, rhs: Precision) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    public var description: String { rawValue }
}

/// Operations the registry places. Matmul-class ops may leave the CPU route.
public enum ComputeOperation: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case matmul
    case rmsNorm = "rms_norm"
    case layerNorm = "layer_norm"
    case rope
    case attention
    case softmax
    case activation
    case embedding

    /// The plugin ABI's `ember_op`, for the ops plugins can implement.
    public var abiValue: UInt32? { self == .matmul ? 1 : nil }

    public var description: String { rawValue }
}
