import ArgumentParser
import Ember
import EmberBenchmarks
import Foundation

/// `ember bench structured`: decode speed with a JSON output format against without, same prompt and seeds.
struct BenchStructuredCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "structured",
        abstract: "Decode speed with a JSON schema (or any JSON object) against free text: same prompt, seeds and length, medians.")

    @OptionGroup var options: ModelRunOptions

    @Option(name: .customLong("json-schema"), help: ArgumentHelp("The JSON Schema to measure (default: any JSON object).", valueName: "file"))
    var jsonSchema: String?

    @Option(help: "What the user asks for (put in the model's chat format).")
    var request = "Describe a person called Ada Lovelace as JSON: name, age, email, tags."

    @Option(parsing: .unconditional, help: "Timed rounds (at least 3), after one warm-up.")
    var runs = 10

    @Option(parsing: .unconditional, help: "Sampling temperature of both.") var temperature: Float = 0.8

    @Option(name: .short, parsing: .unconditional, help: "Tokens a generation may take at most.") var n = 256

    @Flag(help: "Print one JSON object.") var json = false

    struct Report: Encodable {
        var model: String
        var vocabulary: Int
        var format: String
        var free_tokens_per_s: Double
        var constrained_tokens_per_s: Double
        var ratio: Double
        var free_runs: [Double]
        var constrained_runs: [Double]
        var parsed: Int
        var runs: Int
        var mean_tokens: Double
        var kernel_isa: String
    }

    func validate() throws {
        guard runs >= 3 else { throw ValidationError("--runs \(runs): expected at least 3") }
        guard n >= 8 else { throw ValidationError("-n \(n): expected at least 8 tokens") }
        try FlagError.validate(SamplerSettings(temperature: temperature))
    }

    func run() throws {
        var format = OutputFormat.jsonObject
        if let jsonSchema {
            guard let data = FileManager.default.contents(atPath: jsonSchema), let text = String(data: data, encoding: .utf8) else {
                throw ValidationError("--json-schema: cannot read \(jsonSchema) as UTF-8 text; expected a file holding a JSON Schema")
            }
            format = .jsonSchema(text)
            do { try format.validate() } catch { throw ValidationError("--json-schema \(jsonSchema): \(error)") }
        }
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        // A base model without a chat format reads the request as it is.
        let prompt = loaded.model.chatTemplate.map { $0.format([ChatMessage(role: "user", content: request)]) } ?? request + "\n"
        var benchmark = StructuredOutputBenchmark(prompt: prompt, format: format,
                                                  options: loaded.decision.executionOptions())
        (benchmark.runs, benchmark.maxTokens, benchmark.sampler.temperature) = (runs, n, temperature)
        let result = try benchmark.run(loaded.model)
        if json {
            try printJSON(Report(model: options.model, vocabulary: loaded.model.vocabularySize, format: format.name,
                                 free_tokens_per_s: result.freeTokensPerSecond, constrained_tokens_per_s: result.constrainedTokensPerSecond,
                                 ratio: result.ratio, free_runs: result.freeRuns, constrained_runs: result.constrainedRuns,
                                 parsed: result.parsed, runs: runs, mean_tokens: result.meanTokens,
                                 kernel_isa: runtime.context.isa.rawValue), singleLine: true)
            return
        }
        print("\(options.model) (\(loaded.model.vocabularySize) tokens), \(format.name), temperature \(temperature), "
              + "\(loaded.decision.precisionName), kernels \(runtime.context.isa)")
        print(String(format: "free text   %7.1f tok/s  (median of %d)", result.freeTokensPerSecond, runs))
        print(String(format: "%@ %7.1f tok/s  (median of %d), %.2f× free (median of the rounds' ratios)",
                     format.name.padding(toLength: 11, withPad: " ", startingAt: 0), result.constrainedTokensPerSecond, runs, result.ratio))
        print(String(format: "%d of %d outputs parse as JSON, %.0f tokens on average; first: %@", result.parsed, runs, result.meanTokens,
                     result.sample.replacingOccurrences(of: "\n", with: " ")))
    }
}
