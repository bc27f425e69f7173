import Ember
import EmberServer
import Foundation

/// A request the HTTP API refuses, with the status, OpenAI's error `type` and `code`, and a message that names the
/// field, the value found, what is expected and what to do.
public struct HTTPAPIError: Error, CustomStringConvertible, Sendable {
    /// The HTTP status: 400 bad request, 404 unknown model, 413 body too large, 503 deferred or dropped, 500 failure.
    public var status: Int
    /// OpenAI's error type, e.g. "invalid_request_error".
    public var type: String
    /// A short machine-readable code, e.g. "model_not_found"; nil when there is none.
    public var code: String?
    /// The field at fault (OpenAI's `param`), nil when none is.
    public var param: String?
    /// What went wrong and what to do.
    public var message: String
    /// Seconds after which a retry may succeed (a `Retry-After` header), for 503.
    public var retryAfter: Int?

    /// An error answered with `status`.
    public init(status: Int, type: String = "invalid_request_error", code: String? = nil, param: String? = nil,
                message: String, retryAfter: Int? = nil) {
        (self.status, self.type, self.code, self.param, self.message, self.retryAfter) = (status, type, code, param, message, retryAfter)
    }

    /// A 400 about `field`: found `found`, expected `expected`.
    static func invalid(_ field: String, found: String, expected: String) -> HTTPAPIError {
        HTTPAPIError(status: 400, code: "invalid_value", param: field, message: "\(field): found \(found), expected \(expected)")
    }

    /// The status and message, e.g. "400 temperature: found -1, expected a number from 0 to 2".
    public var description: String { "\(status) \(message)" }

    /// The body OpenAI's clients parse: `{"error": {"message", "type", "param", "code"}}`.
    var body: JSONValue {
        .object([("error", .object([("message", .string(message)), ("type", .string(type)),
                                    ("param", param.map(JSONValue.string) ?? .null), ("code", code.map(JSONValue.string) ?? .null)]))])
    }
}

/// Reads and checks the fields of a JSON request body; every refusal names the field, the value and what is expected.
struct RequestFields {
    let object: JSONValue

    init(body: Data) throws {
        let value: JSONValue
        do { value = try JSONValue.parse(body) } catch {
            throw HTTPAPIError(status: 400, code: "invalid_json",
                               message: "the request body is not valid JSON (\(body.count) bytes): \(error); send a JSON object")
        }
        guard case .object = value else {
            throw HTTPAPIError(status: 400, code: "invalid_json", message: "the request body is \(Self.kind(of: value)), expected a JSON object")
        }
        object = value
    }

    static func kind(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number, .float: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    static func shown(_ value: JSONValue) -> String { value.shortText }

    /// The value of `field`, nil when absent or null.
    func value(_ field: String) -> JSONValue? {
        guard let value = object[field], value != .null else { return nil }
        return value
    }

    func string(_ field: String, required: Bool = false) throws -> String? {
        guard let value = value(field) else {
            if required { throw HTTPAPIError.invalid(field, found: "nothing", expected: "a string") }
            return nil
        }
        guard case let .string(text) = value else { throw HTTPAPIError.invalid(field, found: Self.shown(value), expected: "a string") }
        return text
    }

    func bool(_ field: String) throws -> Bool? {
        guard let value = value(field) else { return nil }
        guard case let .bool(flag) = value else { throw HTTPAPIError.invalid(field, found: Self.shown(value), expected: "true or false") }
        return flag
    }

    /// A finite number in `range`.
    func number(_ field: String, in range: ClosedRange<Double>) throws -> Double? {
        guard let value = value(field) else { return nil }
        guard case let .number(number) = value, number.isFinite, range.contains(number) else {
            throw HTTPAPIError.invalid(field, found: Self.shown(value), expected: "a number from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))")
        }
        return number
    }

    /// A whole number in `range` (checked: no conversion of a huge or fractional number traps).
    func integer(_ field: String, in range: ClosedRange<Int64>) throws -> Int64? {
        guard let value = value(field) else { return nil }
        guard case let .number(number) = value, let whole = Int64(exactly: number), range.contains(whole) else {
            throw HTTPAPIError.invalid(field, found: Self.shown(value), expected: "a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return whole
    }

    /// A string or an array of strings (`stop`, `input`); `most` caps the count.
    func strings(_ field: String, most: Int) throws -> [String]? {
        guard let value = value(field) else { return nil }
        switch value {
        case let .string(text): return [text]
        case let .array(items):
            guard items.count <= most else {
                throw HTTPAPIError.invalid(field, found: "\(items.count) items", expected: "at most \(most)")
            }
            return try items.enumerated().map { index, item in
                guard case let .string(text) = item else {
                    throw HTTPAPIError.invalid("\(field)[\(index)]", found: Self.shown(item),
                                               expected: "a string (token-id inputs are not supported: send text)")
                }
                return text
            }
        default:
            throw HTTPAPIError.invalid(field, found: Self.shown(value), expected: "a string or an array of strings")
        }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}

extension RequestFields {
    init(object: JSONValue) { self.object = object }
}

/// One message of a chat request, its content as text (an array of text parts is joined).
func chatMessages(_ fields: RequestFields) throws -> [ChatMessage] {
    guard let value = fields.value("messages") else {
        throw HTTPAPIError.invalid("messages", found: "nothing", expected: "an array of {\"role\", \"content\"} objects")
    }
    guard case let .array(items) = value, !items.isEmpty else {
        throw HTTPAPIError.invalid("messages", found: RequestFields.shown(value), expected: "a non-empty array of {\"role\", \"content\"} objects")
    }
    return try items.enumerated().map { index, item in
        let field = "messages[\(index)]"
        guard case .object = item else {
            throw HTTPAPIError.invalid(field, found: RequestFields.shown(item), expected: "an object with \"role\" and \"content\"")
        }
        let message = RequestFields(object: item)
        guard let role = try message.string("role"), ["system", "developer", "user", "assistant", "tool"].contains(role) else {
            throw HTTPAPIError.invalid("\(field).role", found: item["role"].map(RequestFields.shown) ?? "nothing",
                                       expected: "\"system\", \"developer\", \"user\", \"assistant\" or \"tool\"")
        }
        let content: String
        switch message.value("content") {
        case let .string(text)?: content = text
        case let .array(parts)?:
            content = try parts.enumerated().map { partIndex, part in
                guard case let .string(text)? = part["text"], part["type"] == nil || part["type"] == .string("text") else {
                    throw HTTPAPIError.invalid("\(field).content[\(partIndex)]", found: RequestFields.shown(part),
                                               expected: "a text part {\"type\": \"text\", \"text\": …} (images and audio are not supported)")
                }
                return text
            }.joined(separator: "\n")
        case nil: content = ""
        case let other?:
            throw HTTPAPIError.invalid("\(field).content", found: RequestFields.shown(other), expected: "a string or an array of text parts")
        }
        return ChatMessage(role: role == "developer" ? "system" : role, content: content)
    }
}

/// Every check `ember serve --http` makes of a request before it loads a model or runs anything: the headers
/// (`X-Ember-Tier`, `X-Ember-Max-Wait`), the JSON body and each field the endpoint reads. For fuzzing and for hosts
/// that want to refuse early; throws the ``HTTPAPIError`` the server would answer with.
public enum OpenAIRequestCheck {
    /// The endpoints checked: "chat" (`/v1/chat/completions`), "completions" and "embeddings".
    public static let endpoints = ["chat", "completions", "embeddings"]

    /// Checks a request to `endpoint` with `body` and `headers` (name, value) as the server would.
    public static func validate(endpoint: String, body: Data, headers: [(String, String)]) throws {
        _ = try RequestHeaders(pairs: headers, defaultMaxWait: 30)
        let fields = try RequestFields(body: body)
        _ = try fields.string("model")
        switch endpoint {
        case "embeddings":
            _ = try fields.strings("input", most: 2048)
            _ = try fields.string("encoding_format")
            _ = try fields.integer("dimensions", in: 1...65_536)
        case "chat":
            _ = try GenerationParameters(fields, chat: true)
            _ = try chatMessages(fields)
        default:
            _ = try GenerationParameters(fields, chat: false)
            _ = try GenerationParameters.completionPrompts(fields)
        }
    }
}
