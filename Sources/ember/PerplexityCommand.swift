import ArgumentParser
import Ember
import Foundation

/// `ember perplexity`: a model's perplexity on a text, with llama-perplexity's protocol, and its divergence from the
/// same file at fp32.
struct PerplexityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "perplexity",
        abstract: "Perplexity of a GGUF model on a text, measured as llama-perplexity measures it.",
        discussion: """
            The text is tokenized whole (BOS first when the model adds one), cut into chunks of -c tokens, each run \
            from an empty cache with its first token replaced by BOS, and the second half of each chunk scored. \
            --kl-divergence also runs every chunk at fp32 (the file's weights dequantized) and reports how far the \
            chosen precision's predictions are from it: mean KL divergence, same top token, RMS Δp.
            """)

    @OptionGroup var options: ModelRunOptions

    @Option(name: .short, help: "The text file.")
    var file: String

    @Option(name: .short, help: "Tokens per chunk (the context).")
    var contextLength = 512

    @Option(help: "Evaluate at most this many chunks (default: all).")
    var chunks: Int?

    @Flag(name: .customLong("kl-divergence"), help: "Also run fp32 and report the divergence from it.")
    var klDivergence = false

    @Flag(help: "Print one JSON object: perplexity, uncertainty, chunks, tokens, seconds (and divergence).")
    var json = false

    func validate() throws {
        guard (4...65_536).contains(contextLength) else { throw ValidationError("-c \(contextLength): expected 4 to 65536 tokens") }
        if let chunks, chunks < 1 { throw ValidationError("--chunks \(chunks): expected at least 1") }
    }

    func run() throws {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("-f \(file): cannot read the file (no such file, or not readable)")
        }
        let text = String(decoding: data, as: UTF8.self)
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        let (model, decision) = (loaded.model, loaded.decision)
        let execution = decision.executionOptions()
        var reference: ExecutionOptions? = nil
        if klDivergence {
            // fp32 on the units the flags allow, not the evaluated run's: an int8 or int4 run is on the neural-engine
            // route, where fp32 would fall back to the scalar CPU route (13.6 s against 1.3 s for two chunks).
            reference = ExecutionOptions(units: options.overrides.ceiling, precision: .fp32, threads: execution.threads, qos: execution.qos)
        }
        if !json {
            printError("\(options.model): \(decision.precisionName) on \(decision.computeUnits), \(decision.threads) thread(s); "
                       + "chunks of \(contextLength)\(klDivergence ? ", against fp32" : "")")
        }
        let result: Perplexity.Result
        do {
            result = try Perplexity.evaluate(model, text: text, contextLength: contextLength, options: execution, reference: reference,
                                             chunks: chunks) { chunk, total, perplexity in
                if !json { printError(String(format: "[%d/%d] %.4f", chunk, total, perplexity)) }
            }
        } catch let error as Perplexity.TooShort {
            throw ValidationError("\(file): \(error)")
        }
        if json {
            try printJSON(result, singleLine: true)
            return
        }
        print(String(format: "Final estimate: PPL = %.4f +/- %.5f (%d chunks of %d, %d tokens scored, %.1f s)", result.perplexity,
                     result.uncertainty, result.chunks, contextLength, result.tokens, result.seconds))
        if let divergence = result.divergence {
            print(String(format: "fp32 PPL = %.4f; mean KL divergence %.6f ± %.6f (99%%: %.5f, max %.5f); same top token %.2f%%; RMS Δp %.3f%%",
                         divergence.referencePerplexity, divergence.meanKL, divergence.meanKLUncertainty, divergence.kl99,
                         divergence.maximumKL, 100 * divergence.sameTop, 100 * divergence.rmsDeltaP))
        }
    }
}
