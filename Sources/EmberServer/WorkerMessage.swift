import Ember
import Foundation

/// One line a client sent, understood: a request to run, or a change of the
/// connection's settings. Parsing names the field that is wrong.
public enum WorkerMessage: Sendable, Equatable {
    /// A request to run: any object that is not a cancel or settings line.
    case request(WorkerRequest)
    /// `{"runOnlyWhileCharging": true}` (no `prompt`/`input`): the connection's setting.
    case settings(runOnlyWhileCharging: Bool)
    /// `{"cancel": "<id>"}`: stop that request of this connection.
    case cancel(id: String)

    /// Why a line was refused; `id` is the request's id when it could be read.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        /// The request's id, nil when the line had no readable one.
        public var id: String?
        /// What is wrong, naming the field, e.g. "maxTokens: expected an integer 1…4096, found the number 0".
        public var message: String
        /// The message alone.
        public var description: String { message }
    }

    /// Parses one line (without its newline).
    public static func parse(_ line: Data) throws(Invalid) -> WorkerMessage {
        let value: JSONValue
        do { value = try JSONValue.parse(line) } catch {
            throw Invalid(id: nil, message: "malformed JSON: \(error)")
        }
        guard case let .object(pairs) = value else {
            throw Invalid(id: nil, message: "expected a JSON object, found \(Self.kind(value))")
        }
        let keys = Set(pairs.map(\.0))
        if keys.contains("cancel"), !keys.contains("prompt"), !keys.contains("input") {
            guard case let .string(id)? = value["cancel"] else {
                throw Invalid(id: nil, message: "cancel: expected the id (a string) of a request, found \(Self.kind(value["cancel"]!))")
            }
            if let tooLong = WorkerRequest.idTooLong(id, field: "cancel") { throw tooLong }
            return .cancel(id: id)
        }
        if keys.contains("runOnlyWhileCharging"), !keys.contains("prompt"), !keys.contains("input") {
            guard case let .bool(on)? = value["runOnlyWhileCharging"] else {
                throw Invalid(id: nil, message: "runOnlyWhileCharging: expected true or false, found \(Self.kind(value["runOnlyWhileCharging"]!))")
            }
            return .settings(runOnlyWhileCharging: on)
        }
        return .request(try WorkerRequest(value))
    }

    static func kind(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case let .bool(value): "the Boolean \(value)"
        case let .float(value): "the number \(value)"
        case let .number(value): "the number \(Int64(exactly: value).map(String.init) ?? String(value))"
        case let .string(text): text.count <= 40 ? JSONValue.quoted(text) : "a string of \(text.count) characters"
        case .array: "an array"
        case .object: "an object"
        }
    }

}

/// A request to generate text or embed texts, as the worker protocol carries it.
public struct WorkerRequest: Sendable, Equatable {
    /// What a request does.
    public enum Kind: String, Sendable {
        /// Continue the prompt with generated text.
        case generate
        /// Turn each text into an embedding vector.
        case embed
    }

    /// The client's id for the request (non-empty); every response line carries it.
    public var id: String
    /// What to do: `.generate` (the default) or `.embed`.
    public var kind: Kind
    /// The prompt (generate).
    public var prompt: String
    /// The texts (embed): `input` as a string or an array of strings, else the prompt.
    public var texts: [String]
    /// The most tokens to generate, 1…``maxTokensLimit``; default 256.
    public var maxTokens: Int
    /// The request's tier; default `.standard`.
    public var tier: Tier
    /// A model name or path; nil for the worker's default of the kind.
    public var model: String?
    /// Whether to send each decoded piece as it comes (`{"id", "piece"}`).
    public var stream: Bool
    /// Whether to wrap the prompt as a user turn in the model's chat template.
    public var chat: Bool
    /// How tokens are chosen: greedy unless `temperature` is given; `topK`, `topP`, `minP`, `repetitionPenalty`,
    /// `frequencyPenalty`, `presencePenalty`, `logitBias` and `seed` as `SamplerSettings` (EmberModels) names them.
    public var sampler = SamplerSettings()
    /// Strings that end the generation (at most 4), neither streamed nor in the output.
    public var stop: [String] = []
    // `jsonSchema` (a JSON Schema object) or `jsonObject: true` set `sampler.format`: the output is JSON valid
    // against the schema, or any JSON object.

    /// The most tokens one request may ask for.
    public static let maxTokensLimit = 4096
    /// The longest id, in bytes as written in JSON (escapes included): every line about a request
    /// repeats its id, and each line must fit the chunk limit (at least 512 bytes) with room for its payload.
    public static let maxIDBytes = 128
    /// The longest `model` field, in bytes as written in JSON: names appear in status lines.
    public static let maxModelBytes = 256

    /// The refusal of an id longer than ``maxIDBytes`` once escaped, or nil.
    static func idTooLong(_ id: String, field: String) -> WorkerMessage.Invalid? {
        let written = JSONValue.string(id).byteCount - 2 // without the quotes
        guard written > maxIDBytes else { return nil }
        return WorkerMessage.Invalid(id: nil, message: "\(field): expected at most \(maxIDBytes) bytes as JSON text, found \(written)")
    }

    init(_ value: JSONValue) throws(WorkerMessage.Invalid) {
        guard let idValue = value["id"] else { throw WorkerMessage.Invalid(id: nil, message: "id: missing (expected a string)") }
        guard case let .string(id) = idValue, !id.isEmpty else {
            throw WorkerMessage.Invalid(id: nil, message: "id: expected a non-empty string, found \(WorkerMessage.kind(idValue))")
        }
        if let tooLong = Self.idTooLong(id, field: "id") { throw tooLong }
        self.id = id
        func fail(_ field: String, _ expected: String) -> WorkerMessage.Invalid {
            WorkerMessage.Invalid(id: id, message: "\(field): expected \(expected), found \(value[field].map(WorkerMessage.kind) ?? "nothing")")
        }
        func string(_ field: String) throws(WorkerMessage.Invalid) -> String? {
            switch value[field] {
            case nil, .null?: return nil
            case let .string(text)?: return text
            default: throw fail(field, "a string")
            }
        }

        switch try string("kind") ?? "generate" {
        case "generate": kind = .generate
        case "embed": kind = .embed
        default: throw fail("kind", "\"generate\" or \"embed\"")
        }
        prompt = try string("prompt") ?? ""
        switch value["input"] {
        case nil, .null?: texts = prompt.isEmpty ? [] : [prompt]
        case let .string(text)?: texts = [text]
        case let .array(items)?:
            texts = []
            for item in items {
                guard case let .string(text) = item else { throw fail("input", "a string or an array of strings") }
                texts.append(text)
            }
        default: throw fail("input", "a string or an array of strings")
        }
        switch value["maxTokens"] {
        case nil, .null?: maxTokens = 256
        case let .number(number)? where number == number.rounded() && number >= 1 && number <= Double(Self.maxTokensLimit):
            maxTokens = Int(number)
        default: throw fail("maxTokens", "an integer 1…\(Self.maxTokensLimit)")
        }
        let tierName = try string("tier") ?? "standard"
        guard let tier = Tier(rawValue: tierName) else { throw fail("tier", "\"critical\", \"standard\" or \"background\"") }
        self.tier = tier
        model = try string("model")
        if let model, case let written = JSONValue.string(model).byteCount - 2, written > Self.maxModelBytes {
            throw WorkerMessage.Invalid(id: id, message: "model: expected a name or path of at most \(Self.maxModelBytes) bytes as JSON text, "
                                                         + "found \(written)")
        }
        func flag(_ field: String) throws(WorkerMessage.Invalid) -> Bool {
            switch value[field] {
            case nil, .null?: return false
            case let .bool(on)?: return on
            default: throw fail(field, "true or false")
            }
        }
        stream = try flag("stream")
        chat = try flag("chat")
        func number(_ field: String, _ range: ClosedRange<Double>, whole: Bool = false) throws(WorkerMessage.Invalid) -> Double? {
            switch value[field] {
            case nil, .null?: return nil
            case let .number(number)? where number.isFinite && range.contains(number) && (!whole || number == number.rounded()):
                return number
            default:
                throw fail(field, whole ? "an integer \(Int64(range.lowerBound))…\(Int64(range.upperBound))"
                                        : "a number from \(range.lowerBound) to \(range.upperBound)")
            }
        }
        if let temperature = try number("temperature", 0...2) { sampler.temperature = Float(temperature) }
        if let topK = try number("topK", 0...100_000, whole: true) { sampler.topK = Int(topK) }
        if let topP = try number("topP", 0.000_001...1) { sampler.topP = Float(topP) }
        if let minP = try number("minP", 0...1) { sampler.minP = Float(minP) }
        if let penalty = try number("repetitionPenalty", 0.01...10) { sampler.repetitionPenalty = Float(penalty) }
        if let penalty = try number("frequencyPenalty", -2...2) { sampler.frequencyPenalty = Float(penalty) }
        if let penalty = try number("presencePenalty", -2...2) { sampler.presencePenalty = Float(penalty) }
        if let bias = value["logitBias"], bias != .null {
            guard case let .success(parsed) = LogitBiasJSON.parse(bias) else {
                throw fail("logitBias", "an object of up to 1024 token ids (as strings) to numbers from -100 to 100, such as {\"42\": -100}")
            }
            sampler.logitBias = parsed
        }
        if let seed = try number("seed", 0...9_007_199_254_740_991, whole: true) { sampler.seed = UInt64(seed) }
        switch value["stop"] {
        case nil, .null?: break
        case let .string(text)?: stop = [text]
        case let .array(items)? where items.count <= 4:
            for item in items {
                guard case let .string(text) = item else { throw fail("stop", "a string or an array of up to 4 strings") }
                stop.append(text)
            }
        default: throw fail("stop", "a string or an array of up to 4 strings")
        }
        switch value["jsonSchema"] {
        case nil, .null?: break
        case .object?, .bool?:
            sampler.format = .jsonSchema(value["jsonSchema"]!.text) // parsed in the text's key order: properties come as written
        default: throw fail("jsonSchema", "a JSON Schema (an object)")
        }
        if try flag("jsonObject") {
            guard sampler.format == .text else { throw fail("jsonObject", "not both jsonObject and jsonSchema") }
            sampler.format = .jsonObject
        }
        do { try sampler.format.validate() } catch {
            throw WorkerMessage.Invalid(id: id, message: "jsonSchema: \(error)")
        }
        switch kind {
        case .generate where prompt.isEmpty: throw fail("prompt", "a non-empty string")
        case .embed where texts.isEmpty: throw fail("input", "a string or a non-empty array of strings")
        default: break
        }
    }
}
