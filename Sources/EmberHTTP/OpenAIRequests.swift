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

    static func shown(_ value: JSONValue) -> String {
        let text = value.text
        return text.count > 60 ? String(text.prefix(60)) + "…" : text
    }

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

/// The sampling and length settings common to `/v1/chat/completions` and `/v1/completions`.
struct GenerationParameters {
    var maxTokens: Int?
    var sampler: SamplerSettings
    var stop: [String]
    var stream: Bool
    var includeUsage: Bool
    /// A text completion's `echo`: the prompt comes back before the completion.
    var echo = false

    /// Unset temperature, top-p and seed take llama-server's defaults (temperature 0.8, top-p 0.95, top-k 40, min-p
    /// 0.05) and a fresh seed: a client that sends nothing gets varied, sensible text, as from other servers.
    /// Log-probabilities are asked as OpenAI's two endpoints ask them: `logprobs: true` and `top_logprobs` (0–20) in a
    /// `chat` request, `logprobs` as the number of most likely tokens (0–5) in a text completion.
    init(_ fields: RequestFields, chat: Bool) throws {
        if let n = try fields.integer("n", in: Int64.min...Int64.max), n != 1 {
            throw HTTPAPIError.invalid("n", found: "\(n)", expected: "1 (one choice per request; send several requests for more)")
        }
        let tokens = try fields.integer("max_completion_tokens", in: 1...1_000_000) ?? fields.integer("max_tokens", in: 1...1_000_000)
        maxTokens = tokens.map { Int($0) }
        var sampler = SamplerSettings(temperature: 0.8)
        if let temperature = try fields.number("temperature", in: 0...2) { sampler.temperature = Float(temperature) }
        if let topP = try fields.number("top_p", in: 0...1) { sampler.topP = max(Float(topP), .leastNonzeroMagnitude) }
        if let seed = try fields.integer("seed", in: Int64.min...Int64.max) {
            sampler.seed = UInt64(bitPattern: seed)
        } else {
            sampler.seed = UInt64.random(in: 0...UInt64.max)
        }
        // OpenAI's additive penalties as OpenAI defines them, over the last 64 tokens (as llama-server counts them).
        if let penalty = try fields.number("frequency_penalty", in: -2...2) { sampler.frequencyPenalty = Float(penalty) }
        if let penalty = try fields.number("presence_penalty", in: -2...2) { sampler.presencePenalty = Float(penalty) }
        if let bias = fields.value("logit_bias") { sampler.logitBias = try Self.logitBias(bias) }
        // The filters llama-server and vLLM take beside OpenAI's.
        if let topK = try fields.integer("top_k", in: 0...1_000_000) { sampler.topK = Int(topK) }
        if let minP = try fields.number("min_p", in: 0...1) { sampler.minP = Float(minP) }
        if let penalty = try fields.number("repetition_penalty", in: 0.01...10) { sampler.repetitionPenalty = Float(penalty) }
        try Self.refuseTools(fields)
        if let format = fields.value("response_format") { sampler.format = try Self.outputFormat(format) }
        sampler.logprobs = try Self.logprobs(fields, chat: chat)
        self.sampler = sampler
        if !chat {
            echo = try fields.bool("echo") ?? false
            if echo, sampler.logprobs != nil {
                throw HTTPAPIError.invalid("echo", found: "true with logprobs", expected: "one of them: the prompt's own log-probabilities are not reported")
            }
            if let bestOf = try fields.integer("best_of", in: Int64.min...Int64.max), bestOf != 1 {
                throw HTTPAPIError.invalid("best_of", found: "\(bestOf)", expected: "1 (one completion per request; send several requests for more)")
            }
            if let suffix = try fields.string("suffix"), !suffix.isEmpty {
                throw HTTPAPIError.invalid("suffix", found: RequestFields.shown(.string(suffix)), expected: "none: text is only continued here, not inserted")
            }
        }
        stop = try fields.strings("stop", most: 4) ?? []
        stream = try fields.bool("stream") ?? false
        if let options = fields.value("stream_options") {
            guard case .object = options else {
                throw HTTPAPIError.invalid("stream_options", found: RequestFields.shown(options), expected: "an object such as {\"include_usage\": true}")
            }
            includeUsage = try RequestFields(object: options).bool("include_usage") ?? false
        } else {
            includeUsage = false
        }
    }
}

extension GenerationParameters {
    /// A text completion's `prompt` as OpenAI takes it: a string, an array of one string, an array of token ids, or an
    /// array of one array of token ids (several prompts in one request are refused: send several requests).
    static func completionPrompt(_ fields: RequestFields) throws -> PromptInput {
        let expected = "a string, or token ids (an array of whole numbers), or an array of one of them"
        guard let value = fields.value("prompt") else { throw HTTPAPIError.invalid("prompt", found: "nothing", expected: expected) }
        func ids(_ items: [JSONValue], field: String) throws -> [Int] {
            try items.enumerated().map { index, item in
                guard case let .number(number) = item, let id = Int(exactly: number), id >= 0 else {
                    throw HTTPAPIError.invalid("\(field)[\(index)]", found: RequestFields.shown(item), expected: "a token id (a whole number ≥ 0)")
                }
                return id
            }
        }
        switch value {
        case let .string(text): return .text(text)
        case let .array(items):
            switch items.first {
            case let .string(text)? where items.count == 1: return .text(text)
            case .number?: return .tokens(try ids(items, field: "prompt"))
            case let .array(inner)? where items.count == 1: return .tokens(try ids(inner, field: "prompt[0]"))
            case nil: throw HTTPAPIError.invalid("prompt", found: "[]", expected: expected)
            default:
                throw HTTPAPIError.invalid("prompt", found: items.count > 1 ? "\(items.count) prompts" : RequestFields.shown(value),
                                           expected: expected + " (one prompt a request: send several requests for more)")
            }
        default: throw HTTPAPIError.invalid("prompt", found: RequestFields.shown(value), expected: expected)
        }
    }

    /// OpenAI's `logit_bias`: an object from token ids (as strings) to numbers from −100 to 100, at most 1,024 of them.
    /// Whether each id is in the model's vocabulary is checked once the model is known (``checkTokens(in:)``).
    static func logitBias(_ value: JSONValue) throws -> [Int: Float] {
        let field = "logit_bias"
        guard case let .object(pairs) = value else {
            throw HTTPAPIError.invalid(field, found: RequestFields.shown(value), expected: "an object from token ids to numbers, such as {\"50256\": -100}")
        }
        guard pairs.count <= 1024 else { throw HTTPAPIError.invalid(field, found: "\(pairs.count) entries", expected: "at most 1024") }
        var bias: [Int: Float] = [:]
        for (key, number) in pairs {
            guard let token = Int(key), token >= 0, String(token) == key else {
                throw HTTPAPIError.invalid("\(field).\(key.prefix(40))", found: "the key \"\(key.prefix(40))\"", expected: "a token id (a whole number ≥ 0, written as a string)")
            }
            guard case let .number(amount) = number, amount.isFinite, abs(amount) <= 100 else {
                throw HTTPAPIError.invalid("\(field).\(key)", found: RequestFields.shown(number), expected: "a number from -100 to 100")
            }
            bias[token] = Float(amount)
        }
        return bias
    }

    /// A 400 naming the token of `logit_bias` that `vocabulary` does not hold.
    func checkTokens(vocabulary: Int) throws {
        if let token = sampler.logitBias.keys.filter({ $0 >= vocabulary }).min() {
            throw HTTPAPIError.invalid("logit_bias.\(token)", found: "token id \(token)", expected: "an id below the model's vocabulary of \(vocabulary) tokens")
        }
    }

    /// Tool and function calling are not run here: a request that offers tools gets a 400 saying so rather than an
    /// answer that silently ignores them. An empty list, or `tool_choice: "none"` with none, is fine.
    static func refuseTools(_ fields: RequestFields) throws {
        for field in ["tools", "functions"] {
            guard let value = fields.value(field) else { continue }
            guard case let .array(items) = value else {
                throw HTTPAPIError.invalid(field, found: RequestFields.shown(value), expected: "an array (and tool calling is not supported here)")
            }
            if !items.isEmpty {
                throw HTTPAPIError(status: 400, code: "unsupported_parameter", param: field,
                                   message: "\(field): found \(items.count) tool(s); this server does not run tool calls — describe the "
                                            + "tools in a system message and ask for JSON with response_format (a json_schema) instead")
            }
        }
        for field in ["tool_choice", "function_call"] {
            guard let value = fields.value(field) else { continue }
            if value != .string("none"), value != .string("auto") {
                throw HTTPAPIError(status: 400, code: "unsupported_parameter", param: field,
                                   message: "\(field): found \(RequestFields.shown(value)); this server does not run tool calls (\"none\" or \"auto\" with no tools are accepted)")
            }
        }
    }

    /// How many most likely tokens to report a step, nil for no log-probabilities. A chat's `top_logprobs` without
    /// `logprobs: true` is refused, as OpenAI refuses it, rather than dropped.
    static func logprobs(_ fields: RequestFields, chat: Bool) throws -> Int? {
        guard chat else { return try fields.integer("logprobs", in: 0...5).map { Int($0) } }
        let asked = try fields.bool("logprobs") ?? false
        let top = try fields.integer("top_logprobs", in: 0...20).map { Int($0) }
        if let top, !asked {
            throw HTTPAPIError.invalid("top_logprobs", found: "\(top) without \"logprobs\": true",
                                       expected: "\"logprobs\": true with it (it counts the alternatives logprobs reports)")
        }
        return asked ? top ?? 0 : nil
    }

    /// OpenAI's `response_format`: `{"type": "text"}`, `{"type": "json_object"}` or `{"type": "json_schema",
    /// "json_schema": {"name", "schema", "strict"}}`; the schema is checked here, so a schema Ember cannot enforce is a
    /// 400 naming the keyword, never ignored.
    static func outputFormat(_ value: JSONValue) throws -> OutputFormat {
        let field = "response_format"
        guard case .object = value else {
            throw HTTPAPIError.invalid(field, found: RequestFields.shown(value), expected: "an object such as {\"type\": \"json_object\"}")
        }
        let fields = RequestFields(object: value)
        let format: OutputFormat
        switch try fields.string("type") {
        case "text"?: return .text
        case "json_object"?: format = .jsonObject
        case "json_schema"?:
            guard let wrapper = fields.value("json_schema"), case .object = wrapper else {
                throw HTTPAPIError.invalid("\(field).json_schema", found: fields.value("json_schema").map(RequestFields.shown) ?? "nothing",
                                           expected: "an object {\"name\": …, \"schema\": {…}}")
            }
            guard let schema = wrapper["schema"], schema != .null else {
                throw HTTPAPIError.invalid("\(field).json_schema.schema", found: "nothing", expected: "a JSON Schema object")
            }
            format = .jsonSchema(schema.text) // parsed in the body's key order: properties come as the client wrote them
        case let other:
            throw HTTPAPIError.invalid("\(field).type", found: other.map { "\"\($0)\"" } ?? "nothing",
                                       expected: "\"text\", \"json_object\" or \"json_schema\"")
        }
        do { try format.validate() } catch {
            throw HTTPAPIError(status: 400, code: "invalid_value", param: "\(field).json_schema.schema", message: "\(field): \(error)")
        }
        return format
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
        case "chat":
            _ = try GenerationParameters(fields, chat: true)
            _ = try chatMessages(fields)
        default:
            _ = try GenerationParameters(fields, chat: false)
            _ = try GenerationParameters.completionPrompt(fields)
        }
    }
}
