import ArgumentParser
import Ember
import EmberBenchmarks
import Foundation

/// `ember bench generate`: llama-bench's pp128 / tg64 on a GGUF model, and time to first token.
struct BenchGenerateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Prompt processing of 128 tokens and generation of 64 (medians of --runs), like llama-bench's pp128/tg64.")

    @OptionGroup var options: ModelRunOptions

    @Option(parsing: .unconditional, help: "Timed runs of each (at least 5); medians are reported.")
    var runs = 5

    @Option(name: .customLong("prompt-tokens"), parsing: .unconditional, help: "Tokens of the prompt-processing test.")
    var promptTokens = 128

    @Option(name: .customLong("generated-tokens"), parsing: .unconditional, help: "Tokens of the generation test.")
    var generatedTokens = 64

    @Option(parsing: .unconditional, help: "Tokens already in the context of each test, prefilled untimed (llama-bench's -d): tg64 at depth 1024 decodes after 1,024 tokens.")
    var depth = 0

    @Option(parsing: .unconditional, help: "Also decode this many sequences together (continuous batching: one pass per step) and report their summed tokens/s.")
    var sequences = 1

    @Flag(help: "Also time the first token of a 20-token prompt from opening the file (TTFT).")
    var ttft = false

    @Flag(help: "Print one JSON object: precision, threads, prefill_tokens_per_s, decode_tokens_per_s, runs (and more).")
    var json = false

    struct Report: Encodable {
        var precision: String
        var units: String
        var threads: Int
        var prefill_tokens_per_s: Double
        var decode_tokens_per_s: Double
        var runs: Int
        var prompt_tokens: Int
        var generated_tokens: Int
        var depth: Int
        var prefill_runs: [Double]
        var decode_runs: [Double]
        var ttft_ms: Double?
        var sequences: Int
        var batched_decode_tokens_per_s: Double?
        var load_ms: Double
        var blas_core: String
        var kernel_isa: String
    }

    func validate() throws {
        guard runs >= 5 else { throw ValidationError("--runs \(runs): expected at least 5") }
        guard (1...4096).contains(promptTokens), (1...4096).contains(generatedTokens) else {
            throw ValidationError("--prompt-tokens and --generated-tokens: expected 1 to 4096")
        }
        guard (0...32768).contains(depth) else { throw ValidationError("--depth \(depth): expected 0 to 32768 (and within the model's context)") }
        guard (1...256).contains(sequences) else { throw ValidationError("--sequences \(sequences): expected 1 to 256") }
    }

    func run() throws {
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        let (model, decision, loadMs) = (loaded.model, loaded.decision, loaded.milliseconds)
        var benchmark = GenerationBenchmark(options: decision.executionOptions())
        (benchmark.runs, benchmark.promptTokens, benchmark.generatedTokens) = (runs, promptTokens, generatedTokens)
        benchmark.sequences = sequences
        benchmark.depth = depth
        let library = runtime.context.blas
        let isa = runtime.context.isa
        if !json {
            print("\(options.model): \(decision.precisionName) on \(decision.computeUnits), \(decision.threads) thread(s) at \(decision.qos); "
                  + "kernels \(isa), OpenBLAS core \(library.coreName); load \(String(format: "%.0f", loadMs)) ms")
        }
        let result = try benchmark.run(model)
        let name = options.model
        let firstToken = ttft ? try benchmark.timeToFirstToken(load: { try runtime.languageModel(named: name) }, runs: runs) : nil
        if json {
            try printJSON(Report(
                precision: decision.precisionName, units: decision.computeUnits.description, threads: decision.threads,
                prefill_tokens_per_s: result.prefillTokensPerSecond, decode_tokens_per_s: result.decodeTokensPerSecond, runs: runs,
                prompt_tokens: promptTokens, generated_tokens: generatedTokens, depth: depth,
                prefill_runs: result.prefillRuns, decode_runs: result.decodeRuns, ttft_ms: firstToken?.median,
                sequences: sequences, batched_decode_tokens_per_s: result.batchedDecodeTokensPerSecond,
                load_ms: loadMs, blas_core: library.coreName, kernel_isa: isa.rawValue), singleLine: true)
            return
        }
        func spread(_ values: [Double]) -> String {
            String(format: "%.1f–%.1f", values.min() ?? 0, values.max() ?? 0)
        }
        let at = depth > 0 ? " @ d\(depth)" : ""
        print(String(format: "pp%d%@  %8.1f tok/s  (median of %d; runs %@)", promptTokens, at, result.prefillTokensPerSecond, runs,
                     spread(result.prefillRuns)))
        print(String(format: "tg%d%@  %8.1f tok/s  (median of %d; runs %@)", generatedTokens, at, result.decodeTokensPerSecond, runs,
                     spread(result.decodeRuns)))
        if let batched = result.batchedDecodeTokensPerSecond {
            print(String(format: "tg%d × %d sequences batched  %8.1f tok/s in all  (%.2f× one sequence; runs %@)", generatedTokens,
                         sequences, batched, batched / result.decodeTokensPerSecond, spread(result.batchedDecodeRuns)))
        }
        if let firstToken {
            print(String(format: "time to first token, 20-token prompt, load included: %.1f ms (median of %d, file in page cache)",
                         firstToken.median, runs))
        }
    }
}
