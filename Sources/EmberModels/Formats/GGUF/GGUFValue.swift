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

    /// The value as an error message shows it: a number as written (`4294967295`, `nan`), a string quoted, an array
    /// by its length.
    public var summary: String {
        switch self {
        case let .uint64(v): String(v)
        case let .float32(v): String(v)
        case let .float64(v): String(v)
        case let .bool(v): String(v)
        case let .string(v): "\"\(v.prefix(60))\""
        case let .array(v): "an array of \(v.count)"
        default: integer.map(String.init) ?? "\(self)"
        }
    }
}
