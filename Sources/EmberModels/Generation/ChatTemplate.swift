import EmberCore
import Foundation

/// One turn of a conversation.
public struct ChatMessage: Sendable, Equatable, Codable {
    /// Who speaks: "system", "user" or "assistant".
    public var role: String
    /// The message text, tokenized as plain text (special tokens in it are not parsed).
    public var content: String

    /// A message from `role` with text `content`.
    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }
}

/// The chat format a GGUF file's `tokenizer.chat_template` describes, for the
/// ChatML family (SmolLM2, Qwen, …): `<|im_start|>role\ncontent<|im_end|>\n`
/// per message, `<|im_start|>assistant\n` to ask for a reply, and the default
/// system message the template inserts when a conversation has none.
///
/// Ember does not run the Jinja template: it recognises the ChatML shape and
/// reads the default system message out of it; a template of another shape
/// is refused, naming the field.
public struct ChatTemplate: Sendable, Equatable {
    /// Inserted first when the conversation does not start with a system message.
    public var defaultSystemMessage: String?

    /// A ChatML template with the given default system message (nil: none is inserted).
    public init(defaultSystemMessage: String? = nil) {
        self.defaultSystemMessage = defaultSystemMessage
    }

    /// Reads the template from the file's metadata.
    public init(gguf: GGUFFile) throws {
        guard let template = gguf.metadata["tokenizer.chat_template"]?.string else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.chat_template", found: "missing",
                                              expected: "a ChatML chat template")
        }
        try self.init(template: template, file: gguf.path)
    }

    /// Recognises a ChatML Jinja template.
    public init(template: String, file: String = "chat template") throws {
        guard template.contains("<|im_start|>"), template.contains("<|im_end|>"),
              template.contains("message['role']") || template.contains("message.role") else {
            throw ModelFileError.invalidField(file: file, field: "tokenizer.chat_template", found: "\(template.prefix(60))…",
                                              expected: "a ChatML template (<|im_start|>role … <|im_end|>)")
        }
        // A literal system turn inside the template is its default system message: the first
        // `<|im_start|>system` turn whose text is a plain string (no Jinja expression), with
        // escaped newlines unescaped.
        var searchFrom = template.startIndex
        while let start = template.range(of: "<|im_start|>system", range: searchFrom..<template.endIndex),
              let end = template.range(of: "<|im_end|>", range: start.upperBound..<template.endIndex) {
            searchFrom = end.upperBound
            var text = String(template[start.upperBound..<end.lowerBound])
            if text.hasPrefix("\\n") { text.removeFirst(2) } else if text.hasPrefix("\n") { text.removeFirst() } else { continue }
            guard !["'", "\"", "+", "{{", "}}", "{%", "%}"].contains(where: { text.contains($0) }) else { continue }
            defaultSystemMessage = text.replacingOccurrences(of: "\\n", with: "\n")
            break
        }
    }

    /// Token ids for `messages`: the turn markers as special tokens, the roles and
    /// contents as plain text — a message cannot smuggle in control tokens.
    public func tokens(_ messages: [ChatMessage], tokenizer: any TextTokenizer, addGenerationPrompt: Bool = true) throws -> [Int] {
        guard let start = tokenizer.id(of: "<|im_start|>"), let end = tokenizer.id(of: "<|im_end|>") else {
            throw KernelError.invalidArgument(argument: "tokenizer", found: "no <|im_start|>/<|im_end|> tokens", expected: "a ChatML vocabulary")
        }
        func plain(_ text: String) -> [Int] { tokenizer.encode(text, parseSpecial: false, withBOS: false) }
        var ids = tokenizer.addBOS ? tokenizer.bosID.map { [$0] } ?? [] : []
        for turn in turns(messages) { ids += [start] + plain("\(turn.role)\n\(turn.content)") + [end] + plain("\n") }
        if addGenerationPrompt { ids += [start] + plain("assistant\n") }
        return ids
    }

    /// The prompt text for `messages` (special tokens written out, to be parsed
    /// by the tokenizer), ending with the assistant's opening when `addGenerationPrompt`.
    public func format(_ messages: [ChatMessage], addGenerationPrompt: Bool = true) -> String {
        var text = ""
        for message in turns(messages) { text += "<|im_start|>\(message.role)\n\(message.content)<|im_end|>\n" }
        if addGenerationPrompt { text += "<|im_start|>assistant\n" }
        return text
    }

    /// `messages`, led by the template's default system message when they do not start with one.
    private func turns(_ messages: [ChatMessage]) -> [ChatMessage] {
        guard let defaultSystemMessage, messages.first?.role != "system" else { return messages }
        return [ChatMessage(role: "system", content: defaultSystemMessage)] + messages
    }
}

/// A conversation with a ``TextGenerator`` that keeps its KV cache between
/// turns: each turn feeds only the tokens the cache does not hold yet.
public final class ChatSession: @unchecked Sendable {
    /// The model that generates the replies.
    public let model: any TextGenerator
    /// The chat format that turns the conversation into tokens.
    public let template: ChatTemplate
    /// The conversation so far, including each reply; starts with the `system` message if one was given.
    public private(set) var messages: [ChatMessage] = []
    /// The sampling settings of the next turns; setting them restarts the random draws from their seed.
    public var sampler: SamplerSettings {
        didSet { random = Sampler(sampler) }
    }
    /// The units, precision, threads and QoS class generation runs with.
    public var options: ExecutionOptions
    private let session: any GenerationSession
    private var cached: [Int] = []   // the tokens the session's cache holds, in order
    private var random: Sampler

    /// Starts a conversation with an optional `system` message and a KV cache of `contextLength` tokens (capped at the model's context length).
    public init(model: any TextGenerator, template: ChatTemplate, system: String? = nil, contextLength: Int = 4096,
                sampler: SamplerSettings = SamplerSettings(), options: ExecutionOptions = ExecutionOptions()) {
        self.model = model
        self.template = template
        if let system { messages.append(ChatMessage(role: "system", content: system)) }
        self.sampler = sampler
        self.options = options
        session = model.makeSession(contextLength: contextLength)
        random = Sampler(sampler)
    }

    /// Tokens of the context in use, and its size.
    public var contextUsed: Int { session.position }
    /// Tokens the session's KV cache can hold.
    public var contextCapacity: Int { session.capacity }

    /// Adds the user's message, generates the assistant's reply (streamed to `onPiece`) and keeps it.
    public func send(_ text: String, maxTokens: Int = 512, onPiece: (String) -> Void = { _ in }) throws -> Generation {
        let turn = messages + [ChatMessage(role: "user", content: text)]
        let tokens = try template.tokens(turn, tokenizer: model.tokenizer)
        var common = 0
        while common < min(tokens.count, cached.count), tokens[common] == cached[common] { common += 1 }
        if common == tokens.count { common -= 1 } // at least one token is fed, for fresh logits
        guard tokens.count < session.capacity else {
            throw KernelError.invalidArgument(argument: "conversation", found: "\(tokens.count) tokens",
                                              expected: "fewer than the \(session.capacity)-token context: start a new chat")
        }
        session.rewind(to: common)
        cached.removeSubrange(common...)
        let room = session.capacity - tokens.count
        let result = try model.continueGeneration(
            session: session, feeding: Array(tokens[common...]), history: tokens, maxTokens: min(maxTokens, room),
            sampler: &random, options: options, onPiece: onPiece)
        cached = tokens + result.tokenIDs.prefix(session.position - tokens.count)
        messages = turn + [ChatMessage(role: "assistant", content: result.text)]
        return result
    }

    /// Forgets the conversation (keeps a system message given at the start).
    public func reset() {
        messages = messages.first?.role == "system" ? [messages[0]] : []
        cached = []
        session.rewind(to: 0)
    }
}
