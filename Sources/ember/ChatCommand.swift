import ArgumentParser
import Ember
import Foundation

/// `ember chat`: a conversation with a chat model, replies streamed as they are generated.
struct ChatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat",
        abstract: "Chat with a GGUF chat model (its chat template applied: ChatML, Gemma or Llama 3); replies stream to stdout.",
        discussion: """
            Each line on stdin is one user message; /reset starts over, /exit (or end of input) leaves. \
            The KV cache is kept between turns, so each turn only processes its new tokens.
            """)

    @OptionGroup var options: ModelRunOptions

    @Option(name: .short, parsing: .unconditional, help: "Tokens per reply at most.")
    var n = 512

    @Option(help: "A system message (default: the template's own).")
    var system: String?

    @Option(name: .customLong("chat-template"),
            help: "The chat format when the file has none or one Ember does not recognise: chatml, gemma or llama3.")
    var chatTemplate: String?

    @Option(name: .customLong("context"), help: "Context length in tokens.")
    var contextLength = 4096

    @Option(help: "0 is greedy.") var temperature: Float = 0.7
    @Option(name: .customLong("top-k")) var topK = 40
    @Option(name: .customLong("top-p")) var topP: Float = 0.95
    @Option(help: "Sampling seed.") var seed: UInt64 = 0

    /// The sampling options as the library takes them.
    var sampler: SamplerSettings { SamplerSettings(temperature: temperature, topK: topK, topP: topP, seed: seed) }

    func validate() throws {
        guard n > 0 else { throw ValidationError("-n \(n): expected at least 1") }
        guard (16...65_536).contains(contextLength) else { throw ValidationError("--context \(contextLength): expected 16 to 65536") }
        do { try sampler.validate() } catch {
            throw ValidationError("\(error)")
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
        printError(String(format: "[%@ loaded in %.0f ms: %@ on %@, %d thread(s); /reset, /exit]", options.model, loadMs,
                          decision.precisionName, decision.computeUnits.description, decision.threads))
        while true {
            if interactive { FileHandle.standardError.write(Data("> ".utf8)) }
            guard let line = readLine() else { break }
            let message = line.trimmingCharacters(in: .whitespaces)
            if message.isEmpty { continue }
            if message == "/exit" { break }
            if message == "/reset" {
                chat.reset()
                continue
            }
            let reply = try chat.send(message, maxTokens: n) { piece in FileHandle.standardOutput.write(Data(piece.utf8)) }
            FileHandle.standardOutput.write(Data("\n".utf8))
            printError(String(format: "[%d new prompt tokens at %.0f tok/s, %d generated at %.1f tok/s, %@; context %d/%d]",
                              reply.promptTokenIDs.count, Double(reply.promptTokenIDs.count) / max(reply.prefillSeconds, 1e-9),
                              reply.tokenIDs.count, Double(max(0, reply.tokenIDs.count - 1)) / max(reply.decodeSeconds, 1e-9),
                              reply.stopReason, chat.contextUsed, chat.contextCapacity))
        }
    }
}
