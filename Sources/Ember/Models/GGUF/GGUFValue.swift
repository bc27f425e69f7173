/// A GGUF metadata value.
public enum GGUFValue: Sendable, Equatable {
    /// An integer of the width and signedness GGUF stored.
    case uint8(UInt8), int8(Int8), uint16(UInt16), int16(Int16), uint32(UInt32), int32(Int32)
    /// A 64-bit integer, a floating-point number or a Boolean.
    case uint64(UInt64), int64(Int64), float32(Float), float64(Double), bool(Bool)
    /// A UTF-8 string.
    case string(String)
    /// An array of values of one element type (arrays of arrays are rejected).
    case array([GGUFValue])

    /// The value as an integer, when it is one (any width).
    public var integer: Int? {
        switch self {
        case let .uint8(v): Int(v)
        case let .int8(v): Int(v)
        case let .uint16(v): Int(v)
        case let .int16(v): Int(v)
        case let .uint32(v): Int(v)
        case let .int32(v): Int(v)
        case let .uint64(v): Int(exactly: v)
        case let .int64(v): Int(v)
        default: nil
        }
    }

    /// The value as a floating-point number, when it is a number.
    public var number: Double? {
        switch self {
        case let .float32(v): Double(v)
        case let .float64(v): v
        default: integer.map(Double.init)
        }
    }

    /// The value as a string, nil when it is not one.
    public var string: String? { if case let .string(v) = self { v } else { nil } }
    /// The value as a Boolean, nil when it is not one.
    public var bool: Bool? { if case let .bool(v) = self { v } else { nil } }
    /// The value's elements, nil when it is not an array.
    public var array: [GGUFValue]? { if case let .array(v) = self { v } else { nil } }
}

/// GGML tensor types GGUF files use: id, elements per block, bytes per block.
public struct GGMLType: Sendable, Equatable, CustomStringConvertible {
    /// The type id as ggml numbers it (0 F32, 1 F16, 2 Q4_0, …).
    public let id: UInt32
    /// The ggml name, e.g. "Q4_0".
    public let name: String
    /// Elements per block: 1 for plain types, 32 or 256 for quantized ones.
    public let blockSize: Int
    /// Bytes per block.
    public let blockBytes: Int

    /// The types Ember knows the sizes of (ids as in ggml).
    public static let known: [UInt32: GGMLType] = Dictionary(uniqueKeysWithValues: [
        GGMLType(id: 0, name: "F32", blockSize: 1, blockBytes: 4), GGMLType(id: 1, name: "F16", blockSize: 1, blockBytes: 2),
        GGMLType(id: 2, name: "Q4_0", blockSize: 32, blockBytes: 18), GGMLType(id: 3, name: "Q4_1", blockSize: 32, blockBytes: 20),
        GGMLType(id: 6, name: "Q5_0", blockSize: 32, blockBytes: 22), GGMLType(id: 7, name: "Q5_1", blockSize: 32, blockBytes: 24),
        GGMLType(id: 8, name: "Q8_0", blockSize: 32, blockBytes: 34), GGMLType(id: 9, name: "Q8_1", blockSize: 32, blockBytes: 36),
        GGMLType(id: 10, name: "Q2_K", blockSize: 256, blockBytes: 84), GGMLType(id: 11, name: "Q3_K", blockSize: 256, blockBytes: 110),
        GGMLType(id: 12, name: "Q4_K", blockSize: 256, blockBytes: 144), GGMLType(id: 13, name: "Q5_K", blockSize: 256, blockBytes: 176),
        GGMLType(id: 14, name: "Q6_K", blockSize: 256, blockBytes: 210), GGMLType(id: 15, name: "Q8_K", blockSize: 256, blockBytes: 292),
        GGMLType(id: 24, name: "I8", blockSize: 1, blockBytes: 1), GGMLType(id: 25, name: "I16", blockSize: 1, blockBytes: 2),
        GGMLType(id: 26, name: "I32", blockSize: 1, blockBytes: 4), GGMLType(id: 27, name: "I64", blockSize: 1, blockBytes: 8),
        GGMLType(id: 28, name: "F64", blockSize: 1, blockBytes: 8), GGMLType(id: 30, name: "BF16", blockSize: 1, blockBytes: 2),
    ].map { ($0.id, $0) })

    /// The weight format Ember's kernels take, if this is one of them.
    public var weightFormat: WeightFormat? { WeightFormat(ggufType: id) }

    /// The ggml name, e.g. "Q8_0".
    public var description: String { name }
}
