import ArgumentParser
import Ember
import EmberBenchmarks
import Foundation

/// The options of the sentence-embedding commands.
struct EncoderRunOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "A model name from models/manifest.json, or a sentence-transformers folder.")
    var model = "all-minilm-l6-v2"

    @OptionGroup var overrides: DecisionOptions

    /// Loads the model through `runtime` and binds its weights for `decision`; returns it with the milliseconds taken.
    func load(in runtime: Runtime, for decision: Decision) throws -> (any Embedder, milliseconds: Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        try FirstUseFetch.ensure(model)
        let embedder = try runtime.embeddingModel(named: model)
        try embedder.prepare(decision.executionOptions())
        return (embedder, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
}

/// `ember embed`: sentence embeddings (all-MiniLM-L6-v2 by default).
struct EmbedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embed",
        abstract: "Sentence embeddings of each TEXT (or of each line on stdin), mean-pooled and L2-normalised.")

    @OptionGroup var options: EncoderRunOptions

    @Flag(help: "Print one JSON object on one line: embeddings, token_ids, decision, timings.")
    var json = false

    @Argument(help: "Sentences (none: one per line on stdin).")
    var texts: [String] = []

    struct Report: Encodable {
        var embeddings: [[Float]]
        var token_ids: [[Int]]
        var decision: DecisionReport
        var timings: [String: Double]
        var energy_joules: Double
        var energy_source: String
    }

    func run() throws {
        var sentences = texts
        if sentences.isEmpty {
            if isatty(0) != 0 { printError("reading sentences from stdin, one per line (Ctrl-D to end)") }
            while let line = readLine() {
                let text = line.trimmingCharacters(in: .whitespaces)
                if !text.isEmpty { sentences.append(text) }
            }
        }
        guard !sentences.isEmpty else { throw ValidationError("no text: give sentences as arguments or one per line on stdin") }
        let runtime = try options.overrides.makeRuntime()
        let decision = try options.overrides.decision(in: runtime, quantizedFile: false)
        let (embedder, loadMs) = try options.load(in: runtime, for: decision)
        let batch = try embedder.embed(sentences, options: decision.executionOptions())
        if json {
            try printJSON(Report(
                embeddings: batch.embeddings, token_ids: batch.tokenIDs,
                decision: DecisionReport(decision),
                timings: ["load_ms": loadMs, "tokenize_ms": batch.tokenizeSeconds * 1000, "encode_ms": batch.encodeSeconds * 1000,
                          "sentences_per_s": Double(sentences.count) / max(batch.tokenizeSeconds + batch.encodeSeconds, 1e-9)],
                energy_joules: batch.energy.joules, energy_source: batch.energy.source.rawValue), singleLine: true)
            return
        }
        for (text, embedding) in zip(sentences, batch.embeddings) {
            print("\(text.prefix(60).debugDescription): [" + embedding.prefix(6).map { String(format: "%.4f", $0) }.joined(separator: ", ")
                  + ", …] (\(embedding.count) values)")
        }
        printError(String(format: "[%d sentence(s), %d tokens: %.1f ms tokenizing, %.1f ms encoding; %@ on %@]",
                          sentences.count, batch.tokenIDs.reduce(0) { $0 + $1.count }, batch.tokenizeSeconds * 1000,
                          batch.encodeSeconds * 1000, decision.precisionName, decision.computeUnits.description))
    }
}

/// `ember similarity A B`: cosine similarity of two sentences' embeddings.
struct SimilarityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "similarity", abstract: "Cosine similarity of the embeddings of two sentences.")

    @OptionGroup var options: EncoderRunOptions

    @Argument(help: "The first sentence.") var first: String
    @Argument(help: "The second sentence.") var second: String

    func run() throws {
        let runtime = try options.overrides.makeRuntime()
        let decision = try options.overrides.decision(in: runtime, quantizedFile: false)
        let (embedder, _) = try options.load(in: runtime, for: decision)
        let vectors = try embedder.embed([first, second], options: decision.executionOptions()).embeddings
        print(String(format: "%.6f", cosineSimilarity(vectors[0], vectors[1])))
    }
}

/// `ember bench embed`: sentences per second on 256 sentences of 12–20 words.
struct BenchEmbedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "embed",
        abstract: "Sentence embeddings per second (256 sentences of 12–20 words, tokenization included, median of --runs).")

    @OptionGroup var options: EncoderRunOptions

    @Option(parsing: .unconditional, help: "Sentences per call.") var batch = 32
    @Option(parsing: .unconditional, help: "Timed passes (at least 3); the median is reported.") var runs = 3
    @Flag(help: "Print one JSON object: precision, batch, threads, sentences_per_s, runs (and more).") var json = false
    @Flag(name: .customLong("print-sentences"),
          help: "Print the benchmark's sentences, one per line, and exit (what `make bench-peers` gives the peers).")
    var printSentences = false

    struct Report: Encodable {
        var precision: String
        var units: String
        var batch: Int
        var threads: Int
        var sentences_per_s: Double
        var runs: Int
        var run_sentences_per_s: [Double]
        var mean_tokens: Double
        var blas_core: String
        var kernel_isa: String
    }

    func validate() throws {
        guard (1...256).contains(batch) else { throw ValidationError("--batch \(batch): expected 1 to 256") }
        guard runs >= 3 else { throw ValidationError("--runs \(runs): expected at least 3") }
    }

    func run() throws {
        if printSentences {
            print(EmbeddingBenchmark.sentences(EmbeddingBenchmark(batch: batch, options: ExecutionOptions()).sentences).joined(separator: "\n"))
            return
        }
        let runtime = try options.overrides.makeRuntime()
        let decision = try options.overrides.decision(in: runtime, quantizedFile: false)
        let (embedder, loadMs) = try options.load(in: runtime, for: decision)
        var benchmark = EmbeddingBenchmark(batch: batch, options: decision.executionOptions())
        benchmark.runs = runs
        let library = runtime.context.blas
        let isa = runtime.context.isa
        if !json {
            print("\(options.model): \(decision.precisionName) on \(decision.computeUnits), \(decision.threads) thread(s), batch \(batch); "
                  + "kernels \(isa), OpenBLAS core \(library.coreName); load \(String(format: "%.0f", loadMs)) ms")
        }
        let result = try benchmark.run(embedder)
        if json {
            try printJSON(Report(precision: decision.precisionName, units: decision.computeUnits.description, batch: batch,
                                 threads: decision.threads, sentences_per_s: result.sentencesPerSecond, runs: runs,
                                 run_sentences_per_s: result.runs, mean_tokens: result.meanTokens, blas_core: library.coreName,
                                 kernel_isa: isa.rawValue), singleLine: true)
        } else {
            print(String(format: "%8.1f sentences/s (median of %d; runs %.1f–%.1f; %.1f tokens per sentence)", result.sentencesPerSecond,
                         runs, result.runs.min() ?? 0, result.runs.max() ?? 0, result.meanTokens))
        }
    }
}
