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

/// The chat format a GGUF file's `tokenizer.chat_template` describes.
///
/// Ember does not run the Jinja template: it recognises the format as
/// llama.cpp does, by what the template contains, and writes the turns the
/// way that format writes them —
///
/// - ChatML (SmolLM2, Qwen2/2.5/3): `<|im_start|>role\ncontent<|im_end|>\n`,
///   with the default system message a template inserts when a conversation
///   has none;
/// - Gemma: `<start_of_turn>user\n…<end_of_turn>\n`, the assistant's role
///   written `model`, a system message folded into the next turn;
/// - Llama 3: `<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>`.
///
/// A template of another shape is refused naming the field; a host (or
/// `--chat-template`) can name the format instead (``init(named:)``), which is
/// also the way for a file without a template (a base model).
public struct ChatTemplate: Sendable, Equatable {
    /// The chat formats Ember writes.
    public enum Format: String, Sendable, CaseIterable {
        /// ChatML: `<|im_start|>role\n…<|im_end|>` (SmolLM2, Qwen2/Qwen3).
        case chatml
        /// Gemma's `<start_of_turn>user|model\n…<end_of_turn>`, the system message folded into the first user turn.
        case gemma
        /// Llama 3's `<|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>`.
        case llama3
    }

    /// The format the turns are written in.
    public var format: Format
    /// Inserted first when the conversation does not start with a system message (ChatML templates that have one).
    public var defaultSystemMessage: String?

    /// A template of `format` (ChatML by default) with the given default system message (nil: none is inserted).
    public init(format: Format = .chatml, defaultSystemMessage: String? = nil) {
        self.format = format
        self.defaultSystemMessage = defaultSystemMessage
    }

    /// The format called `name` (`chatml`, `gemma`, `llama3`); another name is refused listing the known ones.
    public init(named name: String) throws {
        guard let format = Format(rawValue: name.lowercased()) else {
            throw KernelError.invalidArgument(argument: "chat template", found: name,
                                              expected: "one of \(Format.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.init(format: format)
    }

    /// The format a chat with `model` uses: the one named by `override` when given, else the file's own; a file
    /// without one Ember recognises is refused, saying how to name a format.
    public static func resolve(for model: any TextGenerator, override: String? = nil) throws -> ChatTemplate {
        if let override { return try ChatTemplate(named: override) }
        guard let template = model.chatTemplate else {
            throw ModelFileError.invalidField(
                file: model.path, field: "tokenizer.chat_template", found: "missing, or of a format Ember does not recognise",
                expected: "ChatML, Gemma or Llama 3; name the format instead (--chat-template \(Format.allCases.map(\.rawValue).joined(separator: "|")))")
        }
        return template
    }

    /// Reads the template from the file's metadata; a file without one is refused, saying how to name a format.
    public init(gguf: GGUFFile) throws {
        guard let template = gguf.metadata["tokenizer.chat_template"]?.string else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.chat_template", found: "missing (a base model?)",
                                              expected: "a chat template; name a format instead: \(Format.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        try self.init(template: template, file: gguf.path)
    }

    /// Recognises a Jinja chat template by what it contains, as llama.cpp does: `<|im_start|>` is ChatML,
    /// `<start_of_turn>` Gemma, `<|start_header_id|>` with `<|end_header_id|>` Llama 3.
    public init(template: String, file: String = "chat template") throws {
        if template.contains("<|im_start|>"), template.contains("<|im_end|>"), !template.contains("<|im_sep|>") {
            self.init(format: .chatml, defaultSystemMessage: Self.defaultSystemMessage(inChatML: template))
        } else if template.contains("<start_of_turn>") {
            self.init(format: .gemma)
        } else if template.contains("<|start_header_id|>"), template.contains("<|end_header_id|>") {
            self.init(format: .llama3)
        } else {
            throw ModelFileError.invalidField(file: file, field: "tokenizer.chat_template", found: "\(template.prefix(60))…",
                                              expected: "a ChatML, Gemma or Llama 3 template, or a format named with --chat-template")
        }
    }

    /// A literal system turn inside a ChatML template is its default system message: the first
    /// `<|im_start|>system` turn whose text is a plain string (no Jinja expression), escaped newlines unescaped.
    private static func defaultSystemMessage(inChatML template: String) -> String? {
        var searchFrom = template.startIndex
        while let start = template.range(of: "<|im_start|>system", range: searchFrom..<template.endIndex),
              let end = template.range(of: "<|im_end|>", range: start.upperBound..<template.endIndex) {
            searchFrom = end.upperBound
            var text = String(template[start.upperBound..<end.lowerBound])
            if text.hasPrefix("\\n") { text.removeFirst(2) } else if text.hasPrefix("\n") { text.removeFirst() } else { continue }
            guard !["'", "\"", "+", "{{", "}}", "{%", "%}"].contains(where: { text.contains($0) }) else { continue }
            return text.replacingOccurrences(of: "\\n", with: "\n")
        }
        return nil
    }

    /// One turn's pieces: the markers (special tokens) and the text between them.
    private enum Piece {
        case marker(String)
        case text(String)
    }

    /// The conversation as markers and text, ending with the assistant's opening when `addGenerationPrompt`.
    private func pieces(_ messages: [ChatMessage], addGenerationPrompt: Bool) -> [Piece] {
        var pieces: [Piece] = []
        switch format {
        case .chatml:
            for turn in turns(messages) {
                pieces += [.marker("<|im_start|>"), .text("\(turn.role)\n\(turn.content)"), .marker("<|im_end|>"), .text("\n")]
            }
            if addGenerationPrompt { pieces += [.marker("<|im_start|>"), .text("assistant\n")] }
        case .gemma:
            var system = ""
            for message in messages {
                if message.role == "system" {
                    system += Self.trimmed(message.content)
                    continue
                }
                let role = message.role == "assistant" ? "model" : message.role
                var text = role + "\n"
                if !system.isEmpty, role != "model" {
                    text += system + "\n\n"
                    system = ""
                }
                pieces += [.marker("<start_of_turn>"), .text(text + Self.trimmed(message.content)), .marker("<end_of_turn>"), .text("\n")]
            }
            if addGenerationPrompt { pieces += [.marker("<start_of_turn>"), .text("model\n")] }
        case .llama3:
            for turn in turns(messages) {
                pieces += [.marker("<|start_header_id|>"), .text(turn.role), .marker("<|end_header_id|>"),
                           .text("\n\n" + Self.trimmed(turn.content)), .marker("<|eot_id|>")]
            }
            if addGenerationPrompt { pieces += [.marker("<|start_header_id|>"), .text("assistant"), .marker("<|end_header_id|>"), .text("\n\n")] }
        }
        return pieces
    }

    /// Token ids for `messages`: the turn markers as special tokens, the roles and contents as plain text — a
    /// message cannot smuggle in control tokens; BOS first when the tokenizer adds one.
    public func tokens(_ messages: [ChatMessage], tokenizer: any TextTokenizer, addGenerationPrompt: Bool = true) throws -> [Int] {
        var ids = tokenizer.addBOS ? tokenizer.bosID.map { [$0] } ?? [] : []
        for piece in pieces(messages, addGenerationPrompt: addGenerationPrompt) {
            switch piece {
            case let .marker(name):
                guard let id = tokenizer.id(of: name) else {
                    throw KernelError.invalidArgument(argument: "tokenizer", found: "no \(name) token",
                                                      expected: "a vocabulary with the \(format.rawValue) chat format's markers")
                }
                ids.append(id)
            case let .text(text):
                ids += tokenizer.encode(text, parseSpecial: false, withBOS: false)
            }
        }
        return ids
    }

    /// The prompt text for `messages` (markers written out, to be parsed by the tokenizer), ending with the
    /// assistant's opening when `addGenerationPrompt`.
    public func format(_ messages: [ChatMessage], addGenerationPrompt: Bool = true) -> String {
        pieces(messages, addGenerationPrompt: addGenerationPrompt).map { piece in
            switch piece {
            case let .marker(text), let .text(text): text
            }
        }.joined()
    }

    /// `messages`, led by the template's default system message when they do not start with one.
    private func turns(_ messages: [ChatMessage]) -> [ChatMessage] {
        guard let defaultSystemMessage, messages.first?.role != "system" else { return messages }
        return [ChatMessage(role: "system", content: defaultSystemMessage)] + messages
    }

    /// `text` without leading and trailing spaces, tabs and line breaks (how Gemma's and Llama 3's templates trim).
    private static func trimmed(_ text: String) -> String {
        text.trimmingCharacters(in: CharacterSet(charactersIn: " \t\n\r\u{0B}\u{0C}"))
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

    /// Turns (a user message and its reply) the last ``send(_:maxTokens:onPiece:interrupted:)`` dropped from the start
    /// of the conversation to fit the context; 0 when all fit.
    public private(set) var droppedTurns = 0

    /// Adds the user's message, generates the assistant's reply (streamed to `onPiece`) and keeps it. When the
    /// conversation and room for the reply (`maxTokens`, at most a quarter of the context) no longer fit the context,
    /// the oldest turns are dropped first (a system message stays; ``droppedTurns`` says how many). `interrupted` is
    /// asked after each token: true ends the reply there, and what it said so far is kept as the reply.
    public func send(_ text: String, maxTokens: Int = 512, onPiece: (String) -> Void = { _ in },
                     interrupted: () -> Bool = { false }) throws -> Generation {
        var turn = messages + [ChatMessage(role: "user", content: text)]
        var tokens = try template.tokens(turn, tokenizer: model.tokenizer)
        droppedTurns = 0
        let reserve = min(max(maxTokens, 1), session.capacity / 4)
        while tokens.count + reserve > session.capacity, let first = turn.firstIndex(where: { $0.role != "system" }), first < turn.count - 1 {
            var end = first + 1 // the oldest user message and what answered it, up to the next user message
            while end < turn.count - 1, turn[end].role != "user" { end += 1 }
            turn.removeSubrange(first..<end)
            droppedTurns += 1
            tokens = try template.tokens(turn, tokenizer: model.tokenizer)
        }
        guard tokens.count < session.capacity else {
            throw KernelError.invalidArgument(argument: "message", found: "\(tokens.count) tokens with the system message",
                                              expected: "fewer than the \(session.capacity)-token context: shorten it, or start with a larger --context")
        }
        var common = 0
        while common < min(tokens.count, cached.count), tokens[common] == cached[common] { common += 1 }
        if common == tokens.count { common -= 1 } // at least one token is fed, for fresh logits
        session.rewind(to: common)
        cached.removeSubrange(common...)
        let room = session.capacity - tokens.count
        let result = try model.continueGeneration(
            session: session, feeding: Array(tokens[common...]), history: tokens, maxTokens: min(maxTokens, room),
            sampler: &random, options: options, onPiece: onPiece, interrupted: interrupted)
        cached = tokens + result.tokenIDs.prefix(session.position - tokens.count)
        messages = turn + [ChatMessage(role: "assistant", content: result.text)]
        return result
    }

    /// Replaces the conversation (a saved one, or the same with another system message); the KV cache keeps what
    /// the new conversation shares with the old from its start.
    public func replaceMessages(_ conversation: [ChatMessage]) {
        messages = conversation
    }

    /// Forgets the conversation (keeps a system message given at the start).
    public func reset() {
        messages = messages.first?.role == "system" ? [messages[0]] : []
        cached = []
        session.rewind(to: 0)
    }
}
