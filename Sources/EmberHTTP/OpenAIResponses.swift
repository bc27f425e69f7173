import Ember
import EmberServer
import Foundation

/// The JSON bodies of the OpenAI API as Ember answers them, each with an `ember` object: the tier, the policy's
/// decision, how long the request waited and ran, and its energy (measured or modelled).
enum OpenAIResponses {
    /// OpenAI's finish reason for Ember's stop reason: "stop" at an end-of-generation token or a stop string,
    /// "length" at `max_tokens` or a full context.
    static func finishReason(_ stopReason: String) -> String {
        stopReason == "eos" || stopReason == "stop" ? "stop" : "length"
    }

    /// OpenAI's `system_fingerprint` of a generation: the configuration it ran with — Ember's version, the precision
    /// and the compute unit the policy chose ("ember-0.2.0-int4-neural-engine"). Two requests at temperature 0 (or
    /// with one seed) give the same text when their fingerprints match; the policy may choose another precision as
    /// the power state or the costs it measures change, and int8 and int4 round differently (SmolLM2 writes "New
    /// Haven" at int8 where int4 writes "Nova Haven"). `ember serve --precision` pins it.
    static func fingerprint(_ decision: Decision) -> String {
        "ember-\(SystemReport.emberVersion)-\(decision.precisionName)-\(decision.unit.rawValue)"
    }

    /// The `ember` object of a finished request.
    static func ember<Output>(_ completion: Completion<Output>, tier: Tier) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("tier", .string(tier.rawValue)), ("decision", JSONValue.decision(completion.decision, detailed: true)),
            ("predicted_run_ms", completion.predictedSeconds.map { .number(($0 * 1000).rounded()) } ?? .null),
            ("wait_ms", .number((completion.waitSeconds * 1000).rounded())),
            ("run_ms", .number((completion.runSeconds * 1000).rounded())),
        ]
        if let rate = completion.piecesPerSecond { pairs.append(("tokens_per_second", .number((rate * 10).rounded() / 10))) }
        if let energy = completion.energy {
            pairs.append(("energy_joules", .number((energy.joules * 1e4).rounded() / 1e4)))
            pairs.append(("energy_source", .string(energy.source.rawValue)))
        }
        if completion.batchSize > 1 { pairs.append(("batch_size", .number(Double(completion.batchSize)))) }
        return .object(pairs)
    }

    /// OpenAI's `usage`: `cached` of the `prompt` tokens were restored from the prompt cache rather than computed
    /// (`prompt_tokens_details.cached_tokens`).
    static func usage(prompt: Int, completion: Int, cached: Int) -> JSONValue {
        .object([("prompt_tokens", .number(Double(prompt))), ("completion_tokens", .number(Double(completion))),
                 ("total_tokens", .number(Double(prompt + completion))),
                 ("prompt_tokens_details", .object([("cached_tokens", .number(Double(min(cached, prompt))))]))])
    }

    /// A whole chat completion (`object: chat.completion`) or text completion (`object: text_completion`), a choice
    /// per generation (`n` for each prompt); `logprobs` says whether the request asked for log-probabilities; `echoes`
    /// is each choice's prompt when a text completion echoes it. The usage counts `promptTokens` (each prompt once, and
    /// of them the tokens the prompt cache held for each prompt's first choice) and every choice's tokens; the `system_fingerprint` and the `ember` object are the first choice's run (with several
    /// choices each one's is under its own `ember` key too).
    static func completion(chat: Bool, id: String, created: Int, model: String, generations: [Completion<Generation>],
                           promptTokens: Int, cachedTokens: Int = 0, tier: Tier, logprobs asked: Bool = false,
                           echoes: [String] = []) -> JSONValue {
        let choices = generations.enumerated().map { index, generation -> JSONValue in
            let text = (echoes.indices.contains(index) ? echoes[index] : "") + generation.output.text
            let finish = JSONValue.string(finishReason(generation.output.stopReason))
            let logprobs = asked ? Self.logprobs(chat: chat, generation.output.logprobs) : .null
            var pairs: [(String, JSONValue)] = chat
                ? [("index", .number(Double(index))), ("message", .object([("role", .string("assistant")), ("content", .string(text))])),
                   ("logprobs", logprobs), ("finish_reason", finish)]
                : [("index", .number(Double(index))), ("text", .string(text)), ("logprobs", logprobs), ("finish_reason", finish)]
            if generations.count > 1 { pairs.append(("ember", ember(generation, tier: tier))) }
            return .object(pairs)
        }
        let generated = generations.reduce(0) { $0 + $1.output.tokenIDs.count }
        return .object([
            ("id", .string(id)), ("object", .string(chat ? "chat.completion" : "text_completion")),
            ("created", .number(Double(created))), ("model", .string(model)), ("choices", .array(choices)),
            ("usage", usage(prompt: promptTokens, completion: generated, cached: cachedTokens)),
            ("system_fingerprint", generations.first.map { .string(fingerprint($0.decision)) } ?? .null),
            ("ember", generations.first.map { ember($0, tier: tier) } ?? .null),
        ])
    }

    /// OpenAI's `logprobs` object for `tokens`: a chat's `{"content": [{token, logprob, bytes, top_logprobs}],
    /// "refusal": null}`, or a text completion's `{tokens, token_logprobs, top_logprobs, text_offset}` (its
    /// `top_logprobs` holds the chosen token too, as OpenAI's do: up to `logprobs` + 1 entries). A log-probability too
    /// small for a float is sent as −9999, as OpenAI sends it. `offset` is the characters of text before the first of
    /// `tokens` (a streamed chunk's).
    static func logprobs(chat: Bool, _ tokens: [TokenLogprobs], offset: Int = 0) -> JSONValue {
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        func number(_ logprob: Float) -> JSONValue { .float(logprob.isFinite ? logprob : -9999) }
        func bytes(_ bytes: [UInt8]) -> JSONValue { .array(bytes.map { .number(Double($0)) }) }
        if chat {
            let content = tokens.map { step -> JSONValue in
                let top = step.top.map { JSONValue.object([("token", .string(text($0.bytes))), ("logprob", number($0.logprob)),
                                                           ("bytes", bytes($0.bytes))]) }
                return .object([("token", .string(text(step.chosen.bytes))), ("logprob", number(step.chosen.logprob)),
                                ("bytes", bytes(step.chosen.bytes)), ("top_logprobs", .array(top))])
            }
            return .object([("content", .array(content)), ("refusal", .null)])
        }
        // Each token's offset in characters (Unicode scalars) of the text before it; counted in one pass: the bytes up
        // to the last one that starts a character are counted once, the rest again with each token.
        var offsets: [JSONValue] = []
        var decoded: [UInt8] = []
        var counted = 0, scalars = offset
        for step in tokens {
            offsets.append(.number(Double(scalars + text(Array(decoded[counted...])).unicodeScalars.count)))
            decoded += step.chosen.bytes
            if let start = decoded[counted...].lastIndex(where: { $0 & 0xC0 != 0x80 }), start > counted {
                scalars += text(Array(decoded[counted..<start])).unicodeScalars.count
                counted = start
            }
        }
        let top = tokens.map { step -> JSONValue in
            var pairs = step.top.map { (text($0.bytes), number($0.logprob)) }
            if !step.top.contains(where: { $0.token == step.chosen.token }) {
                pairs.append((text(step.chosen.bytes), number(step.chosen.logprob)))
            }
            return .object(pairs)
        }
        return .object([("tokens", .array(tokens.map { .string(text($0.chosen.bytes)) })),
                        ("token_logprobs", .array(tokens.map { number($0.chosen.logprob) })),
                        ("top_logprobs", .array(top)), ("text_offset", .array(offsets))])
    }

    /// One streamed chunk: a piece of text (or the role, first) with, when asked, its tokens' `logprobs`; or the last
    /// one with its finish reason. `fingerprint`, the choice's run's (``fingerprint(_:)``), is its `system_fingerprint`.
    static func chunk(chat: Bool, id: String, created: Int, model: String, fingerprint: String? = nil, index: Int = 0, piece: String?,
                      role: Bool = false, finish: String? = nil, logprobs: JSONValue = .null, extra: [(String, JSONValue)] = []) -> JSONValue {
        let choice: JSONValue
        if chat {
            var delta: [(String, JSONValue)] = []
            if role { delta.append(("role", .string("assistant"))) }
            if let piece { delta.append(("content", .string(piece))) }
            choice = .object([("index", .number(Double(index))), ("delta", .object(delta)), ("logprobs", logprobs),
                              ("finish_reason", finish.map(JSONValue.string) ?? .null)])
        } else {
            choice = .object([("index", .number(Double(index))), ("text", .string(piece ?? "")), ("logprobs", logprobs),
                              ("finish_reason", finish.map(JSONValue.string) ?? .null)])
        }
        return .object(head(chat: chat, id: id, created: created, model: model, fingerprint: fingerprint) + [("choices", .array([choice]))] + extra)
    }

    /// The usage chunk of `stream_options.include_usage`: no choices, the usage (and `fingerprint` as its
    /// `system_fingerprint`).
    static func usageChunk(chat: Bool, id: String, created: Int, model: String, fingerprint: String? = nil, usage: JSONValue) -> JSONValue {
        .object(head(chat: chat, id: id, created: created, model: model, fingerprint: fingerprint) + [("choices", .array([])), ("usage", usage)])
    }

    /// A chunk's fields before its choices, `system_fingerprint` among them when known.
    private static func head(chat: Bool, id: String, created: Int, model: String, fingerprint: String?) -> [(String, JSONValue)] {
        [("id", .string(id)), ("object", .string(chat ? "chat.completion.chunk" : "text_completion")),
         ("created", .number(Double(created))), ("model", .string(model))] + (fingerprint.map { [("system_fingerprint", .string($0))] } ?? [])
    }

    /// `/v1/embeddings`: each vector as floats or as base64 of little-endian fp32 (`encoding_format`).
    static func embeddings(_ completion: Completion<[[Float]]>, model: String, promptTokens: Int, base64: Bool, tier: Tier) -> JSONValue {
        let data = completion.output.enumerated().map { index, vector -> JSONValue in
            let embedding: JSONValue
            if base64 {
                let bytes = vector.withUnsafeBufferPointer { Data(buffer: $0) } // fp32, little-endian on every Ember target
                embedding = .string(bytes.base64EncodedString())
            } else {
                embedding = .array(vector.map(JSONValue.float))
            }
            return .object([("object", .string("embedding")), ("index", .number(Double(index))), ("embedding", embedding)])
        }
        return .object([("object", .string("list")), ("data", .array(data)), ("model", .string(model)),
                        ("usage", .object([("prompt_tokens", .number(Double(promptTokens))), ("total_tokens", .number(Double(promptTokens)))])),
                        ("ember", ember(completion, tier: tier))])
    }
}
