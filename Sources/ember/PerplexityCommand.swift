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
            chosen precision's predictions are from it: mean KL divergence, same top token, RMS Δp. --compare \
            int8,int4,… measures more precisions against that one fp32 pass.
            """)

    @OptionGroup var options: ModelRunOptions

    @Option(name: .short, help: "The text file.")
    var file: String

    @Option(name: .short, parsing: .unconditional, help: "Tokens per chunk (the context).")
    var contextLength = 512

    @Option(parsing: .unconditional, help: "Evaluate at most this many chunks (default: all).")
    var chunks: Int?

    @Flag(name: .customLong("kl-divergence"), help: "Also run fp32 and report the divergence from it.")
    var klDivergence = false

    @Option(help: ArgumentHelp("Also measure these precisions against the same fp32 pass, one line each (implies "
                               + "--kl-divergence): a comma-separated list of native, fp16, int8, int4.", valueName: "list"))
    var compare: String?

    @Flag(help: ArgumentHelp("Print one JSON object: perplexity, uncertainty, chunks, tokens, seconds (and divergence); with "
                             + "--compare, an array of {precision, result}."))
    var json = false

    /// The --compare list: nil for native, else the precision.
    var comparedPrecisions: [Precision?] {
        get throws {
            guard let compare else { return [] }
            return try compare.split(separator: ",", omittingEmptySubsequences: false).map { item in
                let name = item.trimmingCharacters(in: .whitespaces)
                if name == "native" { return nil }
                guard let precision = Precision(rawValue: name), precision != .fp32 else {
                    throw ValidationError("--compare \(compare): found \"\(name)\", expected a comma-separated list of native, fp16, int8, int4 "
                                          + "(fp32 is the reference every one is measured against)")
                }
                return precision
            }
        }
    }

    func validate() throws {
        guard (4...65_536).contains(contextLength) else { throw ValidationError("-c \(contextLength): expected 4 to 65536 tokens") }
        if let chunks, chunks < 1 { throw ValidationError("--chunks \(chunks): expected at least 1") }
        _ = try comparedPrecisions
    }

    func run() throws {
        let data: Data
        do { data = try TextInputFile.contents(of: file, option: "-f") } catch let error as TextInputError {
            throw ValidationError(error.message)
        }
        let text = String(decoding: data, as: UTF8.self)
        let runtime = try options.overrides.makeRuntime()
        let loaded = try options.load(in: runtime)
        let (model, decision) = (loaded.model, loaded.decision)
        let execution = decision.executionOptions()
        // Each compared precision runs as `--precision` would run it: the policy's units and threads for it.
        var compared: [(name: String, options: ExecutionOptions)] = []
        for precision in try comparedPrecisions {
            var other = runtime.decide(RequestRequirements(tier: .critical, precision: precision, computeUnits: options.overrides.ceiling,
                                                           storedWeights: precision == nil))
            if let threads = options.overrides.threads { other.threads = threads }
            try model.prepare(other.executionOptions())
            compared.append((other.precisionName, other.executionOptions()))
        }
        var reference: ExecutionOptions? = nil
        if klDivergence || !compared.isEmpty {
            // fp32 on the units the flags allow, not the evaluated run's: an int8 or int4 run is on the neural-engine
            // route, where fp32 would fall back to the scalar CPU route (13.6 s against 1.3 s for two chunks).
            reference = ExecutionOptions(units: options.overrides.ceiling, precision: .fp32, threads: execution.threads, qos: execution.qos)
        }
        if !json {
            printError("\(options.model): \(decision.precisionName) on \(decision.computeUnits), \(decision.threads) thread(s); "
                       + "chunks of \(contextLength)\(reference != nil ? ", against fp32" : "")"
                       + (compared.isEmpty ? "" : "; also \(compared.map(\.name).joined(separator: ", "))"))
        }
        let results: [Perplexity.Result]
        do {
            results = try Perplexity.evaluate(model, text: text, contextLength: contextLength, runs: [execution] + compared.map(\.options),
                                              reference: reference, chunks: chunks) { chunk, total, perplexity in
                if !json { printError(String(format: "[%d/%d] %.4f", chunk, total, perplexity)) }
            }
        } catch let error as Perplexity.TooShort {
            throw ValidationError("\(file): \(error)")
        } catch KernelError.invalidArgument("contextLength", let found, let expected) {
            throw FlagError.refused("-c", found: found, expected: expected)
        }
        let names = [decision.precisionName] + compared.map(\.name)
        if json {
            if compared.isEmpty {
                try printJSON(results[0], singleLine: true)
            } else {
                try printJSON(zip(names, results).map { NamedResult(precision: $0, result: $1) }, singleLine: true)
            }
            return
        }
        let result = results[0]
        print(String(format: "Final estimate: PPL = %.4f +/- %.5f (%d chunks of %d, %d tokens scored, %.1f s)", result.perplexity,
                     result.uncertainty, result.chunks, contextLength, result.tokens, result.seconds))
        for (index, (name, run)) in zip(names, results).enumerated() {
            guard let divergence = run.divergence else { continue }
            if index == 0 {
                print(String(format: "fp32 PPL = %.4f", divergence.referencePerplexity))
            }
            print(String(format: "%@: PPL = %.4f (%+.2f%%); mean KL divergence %.6f ± %.6f (99%%: %.5f, max %.5f); same top token %.2f%%; RMS Δp %.3f%%",
                         name, run.perplexity, 100 * (run.perplexity / divergence.referencePerplexity - 1), divergence.meanKL,
                         divergence.meanKLUncertainty, divergence.kl99, divergence.maximumKL, 100 * divergence.sameTop,
                         100 * divergence.rmsDeltaP))
        }
    }

    /// One run of --compare in the JSON report.
    struct NamedResult: Encodable {
        var precision: String
        var result: Perplexity.Result
    }
}
