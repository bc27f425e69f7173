import ArgumentParser
import CEditLine
import _CEmberThreads
import Ember
import Foundation

/// `ember chat`: a conversation with a chat model, replies streamed as they are generated.
struct ChatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract: "Chat with a GGUF chat model (its chat template applied: ChatML, Gemma or Llama 3); replies stream to stdout.",
        discussion: """
            Each line on stdin is one user message (end a line with \\ to continue the message on the next); at a \
            terminal, lines are edited with libedit (arrows, history). \
            Ctrl-C stops the reply being written and keeps the conversation; /reset starts over; /system TEXT sets \
            the system message; /save FILE and /load FILE keep and restore a conversation (JSON); /exit or Ctrl-D \
            leaves. When the context fills, the oldest turns are dropped. The KV cache is kept between turns, so \
            each turn only processes its new tokens.
            """)

    @OptionGroup var options: ModelRunOptions

    @Option(name: .short, parsing: .unconditional, help: "Tokens per reply at most.")
    var n = 512

    @Option(help: "A system message (default: the template's own).")
    var system: String?

    @Option(name: .customLong("chat-template"),
            help: "The chat format when the file has none or one Ember does not recognise: chatml, gemma or llama3.")
    var chatTemplate: String?

    @Option(name: .customLong("context"), parsing: .unconditional, help: "Context length in tokens.")
    var contextLength = 4096

    @Option(parsing: .unconditional, help: "0 is greedy.") var temperature: Float = 0.7
    @Option(name: .customLong("top-k"), parsing: .unconditional) var topK = 40
    @Option(name: .customLong("top-p"), parsing: .unconditional) var topP: Float = 0.95
    @Option(parsing: .unconditional, help: "Sampling seed.") var seed: UInt64 = 0

    /// The sampling options as the library takes them.
    var sampler: SamplerSettings { SamplerSettings(temperature: temperature, topK: topK, topP: topP, seed: seed) }

    func validate() throws {
        guard n > 0 else { throw ValidationError("-n \(n): expected at least 1") }
        guard (16...65_536).contains(contextLength) else { throw ValidationError("--context \(contextLength): expected 16 to 65536") }
        try FlagError.validate(sampler)
        if let chatTemplate {
            do { _ = try ChatTemplate(named: chatTemplate) } catch KernelError.invalidArgument(_, let found, let expected) {
                throw FlagError.refused("--chat-template", found: found, expected: expected)
            }
        }
    }

    func run() throws {
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        let (model, decision, loadMs) = (loaded.model, loaded.decision, loaded.milliseconds)
        let template: ChatTemplate
        do { template = try ChatTemplate.resolve(for: model, override: chatTemplate) } catch { throw ValidationError("\(error)") }
        let chat = ChatSession(model: model, template: template, system: system, contextLength: contextLength,
                               sampler: sampler, options: decision.executionOptions())
        let interactive = isatty(STDIN_FILENO) != 0
        printError(String(format: "[%@ loaded in %.0f ms: %@ on %@, %d thread(s); Ctrl-C stops a reply, /reset, /system, /save, /load, /exit]",
                          options.model, loadMs, decision.precisionName, decision.computeUnits.description, decision.threads))
        let interrupt = InterruptFlag()
        let terminal = interactive ? TypeAheadTerminal() : nil
        defer { terminal?.restore() }
        while true {
            guard let message = Self.readMessage(interactive: interactive) else { break }
            if message.isEmpty { continue }
            if message.hasPrefix("/"), try command(message, chat: chat) { continue }
            if message == "/exit" { break }
            interrupt.clear()
            let reply = try chat.send(message, maxTokens: n, onPiece: { piece in FileHandle.standardOutput.write(Data(piece.utf8)) },
                                      interrupted: { interrupt.isSet })
            FileHandle.standardOutput.write(Data("\n".utf8))
            if chat.droppedTurns > 0 {
                printError("\u{1B}[2m[context full: the oldest \(chat.droppedTurns) turn(s) dropped]\u{1B}[0m")
            }
            printError(String(format: "[%d new prompt tokens at %.0f tok/s, %d generated at %.1f tok/s, %@; context %d/%d]",
                              reply.promptTokenIDs.count, Double(reply.promptTokenIDs.count) / max(reply.prefillSeconds, 1e-9),
                              reply.tokenIDs.count, Double(max(0, reply.tokenIDs.count - 1)) / max(reply.decodeSeconds, 1e-9),
                              reply.stopReason, chat.contextUsed, chat.contextCapacity))
        }
    }

    /// One user message: a line, or several joined when each but the last ends with a backslash; nil at end of input.
    /// At a terminal, lines are read with libedit (editing, and history with the arrow keys), and a multi-line
    /// paste is one message (``BracketedPaste``).
    static func readMessage(interactive: Bool) -> String? {
        func line(_ prompt: String) -> String? {
            guard interactive else { return readLine() }
            return BracketedPaste.readline(prompt)
        }
        guard var current = line("> ") else { return nil }
        var lines: [String] = []
        while current.hasSuffix("\\") {
            lines.append(String(current.dropLast()))
            guard let next = line(". ") else { break }
            current = next
        }
        if !current.hasSuffix("\\") { lines.append(current) }
        return lines.joined(separator: "\n").trimmingCharacters(in: .whitespaces)
    }

    /// Runs a slash command; false for text that is not one (it is then sent as a message), except /exit.
    func command(_ text: String, chat: ChatSession) throws -> Bool {
        let (name, argument) = { () -> (String, String) in
            guard let space = text.firstIndex(of: " ") else { return (text, "") }
            return (String(text[..<space]), text[space...].trimmingCharacters(in: .whitespaces))
        }()
        switch name {
        case "/reset":
            chat.reset()
            printError("[conversation cleared]")
        case "/system":
            var messages = chat.messages.filter { $0.role != "system" }
            if !argument.isEmpty { messages.insert(ChatMessage(role: "system", content: argument), at: 0) }
            chat.replaceMessages(messages)
            printError(argument.isEmpty ? "[system message removed]" : "[system message set]")
        case "/save":
            guard !argument.isEmpty else { printError("usage: /save FILE"); return true }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .withoutEscapingSlashes]
            do {
                try encoder.encode(chat.messages).write(to: URL(fileURLWithPath: argument))
                printError("[\(chat.messages.count) messages saved to \(argument)]")
            } catch {
                printError("/save \(argument): \(error.localizedDescription)")
            }
        case "/load":
            guard !argument.isEmpty else { printError("usage: /load FILE"); return true }
            do {
                let messages = try JSONDecoder().decode([ChatMessage].self, from: Data(contentsOf: URL(fileURLWithPath: argument)))
                chat.replaceMessages(messages)
                printError("[\(messages.count) messages loaded from \(argument)]")
            } catch {
                printError("/load \(argument): expected a JSON array of {\"role\", \"content\"} objects (as /save writes): \(error.localizedDescription)")
            }
        case "/exit":
            return false
        default:
            printError("\(name): unknown command; /reset, /system TEXT, /save FILE, /load FILE, /exit")
        }
        return true
    }
}

/// Set by Ctrl-C while a reply is written: the reply stops at its next token and the conversation goes on.
/// (SIGINT is caught for the life of the chat, by a handler any thread may run; at the prompt it only reminds how to
/// leave. The notice is written before the signal is counted, so a reply that stops prints its statistics after it.)
final class InterruptFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: UInt = 0

    init() {
        _ = et_interrupts_catch("\n[interrupted — /exit or Ctrl-D leaves]\n")
    }

    func clear() { lock.withLock { seen = et_interrupts_count() } }
    var isSet: Bool { lock.withLock { et_interrupts_count() != seen } }
}
