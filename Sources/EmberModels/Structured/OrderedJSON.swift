import Foundation

/// A JSON value that keeps its objects' key order — a schema's properties are generated in the order the schema
/// writes them, which `JSONSerialization` forgets.
public indirect enum OrderedJSON: Sendable, Equatable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as written (so `1` and `1.0` stay apart and big integers keep their digits).
    case number(String)
    /// A string, unescaped.
    case string(String)
    /// An array.
    case array([OrderedJSON])
    /// An object's members in the order written (a repeated key keeps its last value, at its first place).
    case object([(key: String, value: OrderedJSON)])

    /// Equal values: objects with the same members in the same order; numbers equal as written or as doubles.
    public static func == (lhs: OrderedJSON, rhs: OrderedJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b || (Double(a) != nil && Double(a) == Double(b))
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The member `key` of an object (nil for other values or a missing key).
    public subscript(key: String) -> OrderedJSON? {
        guard case let .object(members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The value as compact JSON text (strings escaped as JSON requires, non-ASCII kept as UTF-8).
    public var compactText: String {
        switch self {
        case .null: return "null"
        case let .bool(flag): return flag ? "true" : "false"
        case let .number(text): return text
        case let .string(text): return Self.quoted(text)
        case let .array(items): return "[" + items.map(\.compactText).joined(separator: ",") + "]"
        case let .object(members): return "{" + members.map { Self.quoted($0.key) + ":" + $0.value.compactText }.joined(separator: ",") + "}"
        }
    }

    /// `text` as a JSON string literal.
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars { out += escaped(scalar) }
        return out + "\""
    }

    /// One scalar as it appears inside a JSON string literal: quotes, backslashes and control characters escaped,
    /// everything else (slashes, non-ASCII) as it is.
    public static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\"": "\\\""
        case "\\": "\\\\"
        case "\n": "\\n"
        case "\r": "\\r"
        case "\t": "\\t"
        case _ where scalar.value < 0x20: String(format: "\\u%04x", scalar.value)
        default: String(scalar)
        }
    }

    /// A short description for error messages: the value's kind and, when short, its text.
    var summary: String {
        let text = compactText
        return text.count <= 60 ? text : String(text.prefix(57)) + "…"
    }

    /// Parses `text` as one JSON value (RFC 8259), nested at most 256 deep.
    /// Throws ``JSONParseError`` naming the byte offset, what was found and what was expected.
    public static func parse(_ text: String) throws -> OrderedJSON { try parse(utf8: Array(text.utf8)) }

    /// Parses UTF-8 `bytes` as one JSON value (strings must be valid UTF-8).
    public static func parse(utf8 bytes: [UInt8]) throws -> OrderedJSON {
        var parser = JSONTextParser(bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.atEnd else { throw parser.error("the end of the text") }
        return value
    }
}

/// Where and why JSON text does not parse.
public struct JSONParseError: Error, CustomStringConvertible, Sendable {
    /// The byte offset of the problem.
    public let offset: Int
    /// What the text has there.
    public let found: String
    /// What JSON allows there.
    public let expected: String
    /// "JSON text at byte N: found …, expected …".
    public var description: String { "JSON text at byte \(offset): found \(found), expected \(expected)" }
}

/// A recursive-descent reader of JSON text over its UTF-8 bytes.
private struct JSONTextParser {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }

    func error(_ expected: String) -> JSONParseError {
        let found: String
        if atEnd {
            found = "the end of the text"
        } else {
            let end = min(bytes.count, index + 12)
            found = "\"" + String(decoding: bytes[index..<end], as: UTF8.self) + (end < bytes.count ? "…" : "") + "\""
        }
        return JSONParseError(offset: index, found: found, expected: expected)
    }

    mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func literal(_ word: String) -> Bool {
        let utf8 = Array(word.utf8)
        guard index + utf8.count <= bytes.count, Array(bytes[index..<(index + utf8.count)]) == utf8 else { return false }
        index += utf8.count
        return true
    }

    mutating func value(depth: Int) throws -> OrderedJSON {
        guard depth < 256 else { throw error("at most 256 nested arrays and objects") }
        guard !atEnd else { throw error("a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default:
            if literal("true") { return .bool(true) }
            if literal("false") { return .bool(false) }
            if literal("null") { return .null }
            throw error("a value (object, array, string, number, true, false or null)")
        }
    }

    mutating func object(depth: Int) throws -> OrderedJSON {
        index += 1
        var members: [(key: String, value: OrderedJSON)] = []
        skipSpace()
        if !atEnd, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard !atEnd, bytes[index] == UInt8(ascii: "\"") else { throw error("a member name in double quotes") }
            let key = try string()
            skipSpace()
            guard !atEnd, bytes[index] == UInt8(ascii: ":") else { throw error("\":\" after the member name") }
            index += 1
            skipSpace()
            let item = try value(depth: depth + 1)
            if let existing = members.firstIndex(where: { $0.key == key }) { members[existing].value = item } else { members.append((key, item)) }
            skipSpace()
            guard !atEnd else { throw error("\",\" or \"}\"") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            guard bytes[index] == UInt8(ascii: "}") else { throw error("\",\" or \"}\"") }
            index += 1
            return .object(members)
        }
    }

    mutating func array(depth: Int) throws -> OrderedJSON {
        index += 1
        var items: [OrderedJSON] = []
        skipSpace()
        if !atEnd, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipSpace()
            items.append(try value(depth: depth + 1))
            skipSpace()
            guard !atEnd else { throw error("\",\" or \"]\"") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            guard bytes[index] == UInt8(ascii: "]") else { throw error("\",\" or \"]\"") }
            index += 1
            return .array(items)
        }
    }

    mutating func number() throws -> String {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard !atEnd else { throw error("a digit") }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else if digits() == 0 { throw error("a digit") }
        if !atEnd, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw error("a digit after the decimal point") }
        }
        if !atEnd, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if !atEnd, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw error("a digit in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func string() throws -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard !atEnd else { throw error("the closing double quote") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw JSONParseError(offset: index, found: "invalid UTF-8 in a string", expected: "UTF-8 text")
                }
                return text
            case UInt8(ascii: "\\"):
                guard !atEnd else { throw error("an escape") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar), literal("\\u") {
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("a low surrogate \\uDC00…\\uDFFF") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("a Unicode scalar (not a lone surrogate)") }
                    out += Array(String(Character(unicode)).utf8)
                default:
                    index -= 1
                    throw error("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX")
                }
            case 0..<0x20:
                index -= 1
                throw error("a character (control characters must be escaped in a string)")
            default:
                out.append(byte)
            }
        }
    }

    mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16) else {
            throw error("four hexadecimal digits")
        }
        index += 4
        return value
    }
}
