import Ember
import Foundation

/// A JSON value as the worker protocol reads and writes it: strictly typed on
/// the way in (a number is never taken for a Boolean), objects in a fixed key
/// order on the way out, and one line of UTF-8 without escaped slashes.
public enum JSONValue: Sendable, Equatable, Decodable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number; written without a fraction when whole and under 1e15 in magnitude, and as `null` when not finite.
    case number(Double)
    /// A single-precision number, written in its shortest form (embeddings).
    case float(Float)
    /// A string; written with quotes, backslashes and control characters escaped (slashes and non-ASCII as they are).
    case string(String)
    /// An array.
    case array([JSONValue])
    /// Keys in the order they are written (``parse(_:)`` keeps the text's order: a JSON Schema's properties are
    /// generated in it).
    case object([(String, JSONValue)])

    /// Decodes any JSON value: numbers become `.number`, never `.float`; object keys come in the decoder's order, not necessarily the text's.
    public init(from decoder: Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            self = .object(try object.allKeys.map { ($0.stringValue, try object.decode(JSONValue.self, forKey: $0)) })
            return
        }
        let value = try decoder.singleValueContainer()
        if value.decodeNil() {
            self = .null
        } else if let bool = try? value.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? value.decode(Double.self) {
            self = .number(number)
        } else {
            self = .string(try value.decode(String.self))
        }
    }

    /// Parses one JSON text with EmberModels' `OrderedJSON` parser: objects keep their key order; numbers become
    /// `.number`.
    /// Throws `JSONParseError` (EmberModels) naming the byte offset, what was found and what was expected.
    public static func parse(_ data: Data) throws -> JSONValue {
        JSONValue(try OrderedJSON.parse(utf8: Array(data)))
    }

    /// The same value with numbers as doubles.
    init(_ value: OrderedJSON) {
        switch value {
        case .null: self = .null
        case let .bool(flag): self = .bool(flag)
        case let .number(text): self = .number(Double(text) ?? .nan)
        case let .string(text): self = .string(text)
        case let .array(items): self = .array(items.map(JSONValue.init))
        case let .object(members): self = .object(members.map { ($0.key, JSONValue($0.value)) })
        }
    }

    /// The value of `key` in an object (nil for other values or a missing key).
    public subscript(key: String) -> JSONValue? {
        guard case let .object(pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    /// One line of JSON text (no newline).
    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// How many UTF-8 bytes `text` would have.
    public var byteCount: Int { text.utf8.count }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(value): out += value ? "true" : "false"
        case let .number(value):
            if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
                out += String(Int64(value))
            } else if value.isFinite {
                out += "\(value)"
            } else {
                out += "null" // JSON has no NaN or infinity
            }
        case let .float(value): out += value.isFinite ? "\(value)" : "null"
        case let .string(value): out += Self.quoted(value)
        case let .array(values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case let .object(pairs):
            out += "{"
            for (index, (key, value)) in pairs.enumerated() {
                if index > 0 { out += "," }
                out += Self.quoted(key) + ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    /// `text` as a JSON string literal.
    static func quoted(_ text: String) -> String { OrderedJSON.quoted(text) }

    /// One scalar as it appears inside a JSON string literal.
    static func escaped(_ scalar: Unicode.Scalar) -> String { OrderedJSON.escaped(scalar) }

    /// Equal when ``text`` is equal: object key order counts, and a non-finite number equals `.null`.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.text == rhs.text }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
