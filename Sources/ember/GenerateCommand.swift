import ArgumentParser
import Ember
import Foundation

/// `ember generate`: text from a GGUF model, streamed, as a critical request through the runtime's scheduler.
struct GenerateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Generate text from a GGUF model; the text streams to stdout as it is generated.")

    @OptionGroup var options: ModelRunOptions

    @Option(name: .short, parsing: .unconditional, help: "Tokens to generate at most.")
    var n = 64

    @Option(parsing: .unconditional, help: "0 is greedy.") var temperature: Float = 0
    @Option(name: .customLong("top-k"), parsing: .unconditional) var topK = 40
    @Option(name: .customLong("top-p"), parsing: .unconditional) var topP: Float = 0.95
    @Option(parsing: .unconditional, help: "Sampling seed.") var seed: UInt64 = 0
    @Option(name: .customLong("min-p"), parsing: .unconditional, help: "Drop tokens below this fraction of the best one's probability (0 off).")
    var minP: Float = 0.05
    @Option(name: .customLong("repeat-penalty"), parsing: .unconditional, help: "Above 1, makes the last 64 tokens less likely (1 off).")
    var repeatPenalty: Float = 1

    @Option(parsing: .unconditionalSingleValue,
            help: ArgumentHelp("End the text before this string (repeat the option for several; up to 16).", valueName: "text"))
    var stop: [String] = []

    /// `arguments` with `--stop V` written `--stop=V` where V begins with a dash, up to a `--` that ends the options.
    /// ArgumentParser's tokenizer refuses a lone `---` (a Markdown rule, a natural stop string) before `--stop`'s
    /// unconditional parsing could take it; every value it did accept after `--stop` means the same joined.
    static func joiningDashedStopValues(_ arguments: [String]) -> [String] {
        var joined = [String](), index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { return joined + arguments[index...] }
            if argument == "--stop", index + 1 < arguments.count, arguments[index + 1].hasPrefix("-") {
                joined.append("--stop=" + arguments[index + 1])
                index += 2
            } else {
                joined.append(argument)
                index += 1
            }
        }
        return joined
    }

    @Flag(help: "Send the prompt as a user's message through the model's chat template (the reply alone is printed).")
    var chat = false

    @Flag(help: "Print one JSON object on one line instead of streaming.")
    var json = false

    @Option(name: .customLong("json-schema"), help: ArgumentHelp("Generate JSON valid against the JSON Schema in this file.",
                                                                  valueName: "file"))
    var jsonSchema: String?

    @Flag(name: .customLong("json-object"), help: "Generate one JSON object (any keys).")
    var jsonObject = false

    @Option(parsing: .unconditional, help: ArgumentHelp("With --json: each token's log-probability and the step's N most likely tokens (0–20).",
                               valueName: "N"))
    var logprobs: Int?

    @Flag(name: .customLong("token-ids"), help: "The prompt is token ids, comma-separated (such as 1,504,3), fed as they are.")
    var tokenIDs = false

    /// The prompt as the library takes it: the text, or the ids --token-ids says it is (--chat is applied in `run`, once
    /// the model and its template are loaded).
    func promptInput() throws -> PromptInput {
        guard tokenIDs else { return .text(prompt) }
        let items = prompt.split(separator: ",", omittingEmptySubsequences: false)
        return .tokens(try items.enumerated().map { index, item in
            guard let id = Int(item.trimmingCharacters(in: .whitespaces)), id >= 0 else {
                throw ValidationError("--token-ids: item \(index) of the prompt is \"\(item)\", expected a token id (a whole number ≥ 0)")
            }
            return id
        })
    }

    /// The sampling options as the library takes them (the schema file read).
    func sampler() throws -> SamplerSettings {
        var settings = SamplerSettings(temperature: temperature, topK: topK, topP: topP, minP: minP, repetitionPenalty: repeatPenalty,
                                       seed: seed, logprobs: logprobs)
        if let jsonSchema {
            guard let data = FileManager.default.contents(atPath: jsonSchema) else {
                throw ValidationError("--json-schema: cannot read \(jsonSchema); expected a file holding a JSON Schema")
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw ValidationError("--json-schema: \(jsonSchema) is not UTF-8 text; expected a JSON Schema")
            }
            settings.format = .jsonSchema(text)
        } else if jsonObject {
            settings.format = .jsonObject
        }
        return settings
    }

    func validate() throws {
        guard n >= 1 else { throw ValidationError("-n: found \(n), expected at least 1 token") }
        _ = try promptInput()
        guard jsonSchema == nil || !jsonObject else { throw ValidationError("--json-schema and --json-object: give one of them") }
        guard !(chat && tokenIDs) else { throw ValidationError("--chat and --token-ids: give one of them (token ids are fed as they are)") }
        guard stop.count <= 16 else { throw ValidationError("--stop: found \(stop.count) strings, expected at most 16") }
        if let empty = stop.firstIndex(of: "") { throw ValidationError("--stop: string \(empty + 1) is empty, expected some text") }
        if !stop.isEmpty, jsonSchema != nil || jsonObject {
            throw ValidationError("--stop with \(jsonObject ? "--json-object" : "--json-schema"): give one of them (a stop string would cut the JSON short)")
        }
        if let logprobs {
            guard (0...20).contains(logprobs) else { throw ValidationError("--logprobs: found \(logprobs), expected 0 to 20 tokens a step") }
            guard json else { throw ValidationError("--logprobs \(logprobs): add --json (the log-probabilities are reported in its object)") }
        }
        try FlagError.validate(try sampler(), format: jsonSchema.map { "--json-schema \($0)" })
    }

    @Argument(help: "The prompt (special tokens such as <|im_start|> are parsed).")
    var prompt: String

    struct Report: Encodable {
        var prompt_token_ids: [Int]
        var token_ids: [Int]
        var text: String
        var stop_reason: String
        var decision: DecisionReport
        var timings: [String: Double]
        var energy_joules: Double
        var energy_source: String
        /// With --logprobs: per token of the text, its id, text and log-probability, and the step's most likely tokens.
        var logprobs: [TokenReport]?
    }

    struct TokenReport: Encodable {
        var id: Int
        var token: String
        var logprob: Float
        var top: [TokenReport]?

        init(_ probability: TokenProbability, top: [TokenProbability]? = nil) {
            (id, token) = (probability.token, String(decoding: probability.bytes, as: UTF8.self))
            logprob = probability.logprob.isFinite ? probability.logprob : -9999 // JSON has no −∞
            self.top = top?.map { TokenReport($0) }
        }
    }

    func run() async throws {
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        let (model, loadMs) = (loaded.model, loaded.milliseconds)
        let streaming = !json
        let firstPiece = FirstPieceClock()
        var input = try promptInput()
        if chat {
            do { input = .text(try ChatTemplate.resolve(for: model).format([ChatMessage(role: "user", content: prompt)])) } catch {
                throw ValidationError("--chat: \(error); leave out --chat and write the prompt in the model's own format")
            }
        }
        let completion = try await runtime.generateText(model, from: input, maxTokens: n, tier: .critical, sampler: try sampler(),
                                                        requirements: loaded.requirements, stop: stop) { piece in
            firstPiece.mark()
            if streaming { FileHandle.standardOutput.write(Data(piece.utf8)) }
        }
        let (result, decision) = (completion.output, completion.decision)
        if json {
            let report = Report(
                prompt_token_ids: result.promptTokenIDs, token_ids: result.tokenIDs, text: result.text, stop_reason: result.stopReason,
                decision: DecisionReport(decision),
                timings: ["load_ms": loadMs, "first_token_ms": firstPiece.milliseconds ?? -1,
                          "prefill_tokens_per_s": Double(result.promptTokenIDs.count) / max(result.prefillSeconds, 1e-9),
                          "decode_tokens_per_s": Double(max(0, result.tokenIDs.count - 1)) / max(result.decodeSeconds, 1e-9)],
                energy_joules: result.energy.joules, energy_source: result.energy.source.rawValue,
                logprobs: logprobs == nil ? nil : result.logprobs.map { TokenReport($0.chosen, top: $0.top) })
            try printJSON(report, singleLine: true)
        } else {
            print()
            printError(String(format: "[%d prompt tokens at %.0f tok/s, first text after %.1f ms, %d generated at %.1f tok/s; %@ on %@]",
                              result.promptTokenIDs.count, Double(result.promptTokenIDs.count) / result.prefillSeconds,
                              firstPiece.milliseconds ?? -1,
                              result.tokenIDs.count, Double(max(0, result.tokenIDs.count - 1)) / max(result.decodeSeconds, 1e-9),
                              decision.precisionName, decision.computeUnits.description))
        }
    }
}

/// When the first piece of text arrived, from the clock's making (the request's submission): the tool's time to
/// first token with the model loaded, to compare with a server's.
final class FirstPieceClock: @unchecked Sendable {
    private let lock = NSLock()
    private let start = DispatchTime.now().uptimeNanoseconds
    private var first: UInt64?

    func mark() { lock.withLock { if first == nil { first = DispatchTime.now().uptimeNanoseconds } } }

    /// Milliseconds to the first piece; nil when none came.
    var milliseconds: Double? { lock.withLock { first.map { Double($0 - start) / 1e6 } } }
}
