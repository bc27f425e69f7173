import Ember
import EmberServer
import Foundation

/// The sampling and length settings common to `/v1/chat/completions` and `/v1/completions`.
struct GenerationParameters {
    var maxTokens: Int?
    var sampler: SamplerSettings
    var stop: [String]
    var stream: Bool
    var includeUsage: Bool
    /// A text completion's `echo`: the prompt comes back before the completion.
    var echo = false
    /// `n`: how many choices to generate from each prompt (16 in all at most), each sampled from its own seed (the
    /// request's seed + its index), run side by side (the continuous batcher decodes them together); greedy choices
    /// are one run's text.
    var choices = 1

    /// Unset temperature, top-p and seed take llama-server's defaults (temperature 0.8, top-p 0.95, top-k 40, min-p
    /// 0.05) and a fresh seed: a client that sends nothing gets varied, sensible text, as from other servers.
    /// Log-probabilities are asked as OpenAI's two endpoints ask them: `logprobs: true` and `top_logprobs` (0–20) in a
    /// `chat` request, `logprobs` as the number of most likely tokens (0–5) in a text completion.
    init(_ fields: RequestFields, chat: Bool) throws {
        if let n = try fields.integer("n", in: 1...16) { choices = Int(n) }
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
    /// A text completion's `prompt` as OpenAI takes it: a string, an array of strings, an array of token ids, or an
    /// array of arrays of token ids — one prompt or several (each answered with `n` choices).
    static func completionPrompts(_ fields: RequestFields) throws -> [PromptInput] {
        let expected = "a string, an array of strings, token ids (an array of whole numbers), or an array of such arrays"
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
        case let .string(text): return [.text(text)]
        case let .array(items):
            switch items.first {
            case .number?: return [.tokens(try ids(items, field: "prompt"))]
            case .string?, .array?:
                return try items.enumerated().map { index, item in
                    switch (item, items[0]) {
                    case let (.string(text), .string): return .text(text)
                    case let (.array(inner), .array): return .tokens(try ids(inner, field: "prompt[\(index)]"))
                    default:
                        throw HTTPAPIError.invalid("prompt[\(index)]", found: RequestFields.shown(item),
                                                   expected: "a prompt of the same kind as prompt[0] (all strings or all arrays of token ids)")
                    }
                }
            case nil: throw HTTPAPIError.invalid("prompt", found: "[]", expected: expected)
            default: throw HTTPAPIError.invalid("prompt", found: RequestFields.shown(value), expected: expected)
            }
        default: throw HTTPAPIError.invalid("prompt", found: RequestFields.shown(value), expected: expected)
        }
    }

    /// OpenAI's `logit_bias` (``LogitBiasJSON``: token ids as strings → −100…100, at most 1,024). Whether each id is in
    /// the model's vocabulary is checked once the model is known (``checkTokens(vocabulary:)``).
    static func logitBias(_ value: JSONValue) throws -> [Int: Float] {
        switch LogitBiasJSON.parse(value) {
        case let .success(bias): return bias
        case let .failure(problem):
            throw HTTPAPIError.invalid(problem.key.map { "logit_bias.\($0)" } ?? "logit_bias", found: problem.found, expected: problem.expected)
        }
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
