import EmberCore
import Foundation

/// Perplexity of a text under a ``TextGenerator``, measured as
/// `llama-perplexity` measures it, so the two compare number for number:
///
/// the text (less one trailing line break) is tokenized whole with the
/// file's BOS rule and special tokens not parsed; it is cut into
/// `floor(tokens / context)` chunks of `context` tokens (the rest is
/// dropped); each chunk runs from an empty cache with its first token
/// replaced by BOS when the model adds one; only the second half is scored —
/// the logits at positions `context/2 … context−2` predicting the tokens
/// after them — with the log-softmax's sum of exponentials kept in double.
/// The result is `exp(mean NLL)` with the standard error of the mean.
///
/// With a reference run (``evaluate(_:text:contextLength:options:reference:chunks:progress:)``'s
/// `reference`, for example the same file at fp32) it also measures how far
/// the run's distributions are from the reference's: the mean
/// KL divergence KL(reference ‖ run), how often both pick the same top
/// token, and the RMS of the change in the probability of the right token —
/// what `llama-perplexity --kl-divergence` reports.
public enum Perplexity {
    /// What a measurement found.
    public struct Result: Sendable, Codable {
        /// exp(mean negative log-likelihood of the scored tokens).
        public var perplexity: Double
        /// The standard error of the perplexity (that of the mean NLL, times the perplexity).
        public var uncertainty: Double
        /// Chunks evaluated.
        public var chunks: Int
        /// Tokens scored (`chunks · (context − 1 − context/2)`).
        public var tokens: Int
        /// Seconds the evaluation took (the reference run's included).
        public var seconds: Double
        /// Against a reference run, when one was asked for.
        public var divergence: Divergence?
    }

    /// How a run's next-token distributions differ from a reference run's, over the scored tokens.
    public struct Divergence: Sendable, Codable {
        /// The reference run's perplexity.
        public var referencePerplexity: Double
        /// Mean KL(reference ‖ run) in nats, and its standard error.
        public var meanKL: Double, meanKLUncertainty: Double
        /// The 99th percentile and the largest per-token KL divergence.
        public var kl99: Double, maximumKL: Double
        /// Share of tokens where both runs' most likely token is the same.
        public var sameTop: Double
        /// Root mean square of p(right token) − p_reference(right token).
        public var rmsDeltaP: Double

        enum CodingKeys: String, CodingKey {
            case referencePerplexity = "reference_perplexity", meanKL = "mean_kl", meanKLUncertainty = "mean_kl_uncertainty"
            case kl99 = "kl_99", maximumKL = "max_kl", sameTop = "same_top", rmsDeltaP = "rms_delta_p"
        }
    }

    /// The error when the text is too short for two chunks.
    public struct TooShort: Error, CustomStringConvertible {
        /// Tokens the text has, and the context asked for.
        public let tokens: Int, contextLength: Int
        /// One line naming both numbers and what is needed.
        public var description: String {
            "the text is \(tokens) tokens; perplexity needs at least two chunks of \(contextLength) (\(2 * contextLength) tokens): use a longer text or a smaller -c"
        }
    }

    /// Rows of logits computed at a time (bounds the memory of large vocabularies: 64 × 262,144 floats is 64 MB).
    static let rowsPerPass = 64

    /// Measures `model`'s perplexity on `text` with chunks of `contextLength` tokens run with `options` (at most
    /// `chunks` of them when given); with `reference`, the same chunks run with those options too, and the
    /// divergence of the first run from it. `progress` hears each chunk's running perplexity.
    public static func evaluate(_ model: any TextGenerator, text: String, contextLength: Int, options: ExecutionOptions,
                                reference: ExecutionOptions? = nil, chunks limit: Int? = nil,
                                progress: (_ chunk: Int, _ of: Int, _ perplexity: Double) -> Void = { _, _, _ in }) throws -> Result {
        try evaluate(model, text: text, contextLength: contextLength, runs: [options], reference: reference, chunks: limit,
                     progress: progress)[0]
    }

    /// The same measurement for several runs at once (one ``Result`` per element of `runs`, in order): each chunk's
    /// reference rows are computed once and compared with every run's, so measuring three precisions against fp32
    /// costs four passes, not six. `progress` hears the first run's running perplexity.
    public static func evaluate(_ model: any TextGenerator, text: String, contextLength: Int, runs: [ExecutionOptions],
                                reference: ExecutionOptions? = nil, chunks limit: Int? = nil,
                                progress: (_ chunk: Int, _ of: Int, _ perplexity: Double) -> Void = { _, _, _ in }) throws -> [Result] {
        guard contextLength >= 4, contextLength <= model.contextLength else {
            throw KernelError.invalidArgument(argument: "contextLength", found: "\(contextLength)",
                                              expected: "4 to \(model.contextLength), the model's context")
        }
        guard !runs.isEmpty else { throw KernelError.invalidArgument(argument: "runs", found: "none", expected: "at least one run") }
        let start = DispatchTime.now().uptimeNanoseconds
        let body = text.hasSuffix("\n") ? String(text.dropLast()) : text
        let tokens = model.tokenizer.encode(body, parseSpecial: false, withBOS: nil)
        guard tokens.count >= 2 * contextLength else { throw TooShort(tokens: tokens.count, contextLength: contextLength) }
        let chunkCount = min(tokens.count / contextLength, limit ?? .max)
        let first = contextLength / 2
        var tallies = Array(repeating: Tally(), count: runs.count)
        var referenceNLL = Statistic()
        for chunk in 0..<chunkCount {
            var ids = Array(tokens[(chunk * contextLength)..<((chunk + 1) * contextLength)])
            if model.tokenizer.addBOS, let bos = model.tokenizer.bosID { ids[0] = bos }
            let chunkRuns = try runs.map { try ChunkRun(model, ids, first: first, options: $0) }
            let base = try reference.map { try ChunkRun(model, ids, first: first, options: $0) }
            if let base {
                while let baseRows = try base.next() {
                    let position = base.position - baseRows.count
                    for index in baseRows.indices { referenceNLL.add(-baseRows[index][ids[position + index + 1]]) }
                    for (run, chunkRun) in chunkRuns.enumerated() {
                        guard let rows = try chunkRun.next() else { continue }
                        tallies[run].add(rows, targets: ids[(position + 1)...], reference: baseRows)
                    }
                }
            } else {
                for (run, chunkRun) in chunkRuns.enumerated() {
                    while let rows = try chunkRun.next() {
                        tallies[run].add(rows, targets: ids[(chunkRun.position - rows.count + 1)...], reference: nil)
                    }
                }
            }
            progress(chunk + 1, chunkCount, exp(tallies[0].nll.mean))
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return tallies.map { tally in
            let perplexity = exp(tally.nll.mean)
            let divergence = reference.map { _ in tally.divergence(referencePerplexity: exp(referenceNLL.mean)) }
            return Result(perplexity: perplexity, uncertainty: tally.nll.standardError * perplexity, chunks: chunkCount,
                          tokens: tally.nll.count, seconds: seconds, divergence: divergence)
        }
    }

    /// One run's sums over the scored tokens.
    private struct Tally {
        var nll = Statistic(), kl = Statistic(), deltaP = Statistic()
        var perToken: [Double] = [], sameTop = 0

        /// Adds `rows` (log-probabilities) predicting `targets` in order, each compared with the same row of
        /// `reference` when there is one.
        mutating func add(_ rows: [[Double]], targets: ArraySlice<Int>, reference: [[Double]]?) {
            for (index, logp) in rows.enumerated() {
                let target = targets[targets.startIndex + index]
                nll.add(-logp[target])
                guard let logq = reference?[index] else { continue }
                var divergence = 0.0
                for (q, p) in zip(logq, logp) where q > -16 { divergence += exp(q) * (q - p) }
                kl.add(divergence)
                perToken.append(divergence)
                deltaP.add(exp(logp[target]) - exp(logq[target]))
                if Perplexity.argmax(logp) == Perplexity.argmax(logq) { sameTop += 1 }
            }
        }

        /// The divergence from the reference run over what was added.
        func divergence(referencePerplexity: Double) -> Divergence {
            let sorted = perToken.sorted()
            return Divergence(referencePerplexity: referencePerplexity, meanKL: kl.mean, meanKLUncertainty: kl.standardError,
                              kl99: sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((0.99 * Double(sorted.count - 1)).rounded()))],
                              maximumKL: sorted.last ?? 0, sameTop: Double(sameTop) / Double(max(1, kl.count)),
                              rmsDeltaP: deltaP.rootMeanSquare)
        }
    }

    /// One chunk run from an empty cache: the first `first` tokens fed without logits, then the log-probabilities
    /// (double) of the rows `first … ids.count − 2`, ``rowsPerPass`` rows at a time.
    private final class ChunkRun {
        let model: any TextGenerator
        let ids: [Int]
        let options: ExecutionOptions
        let session: any GenerationSession
        /// The next row to compute.
        private(set) var position: Int

        init(_ model: any TextGenerator, _ ids: [Int], first: Int, options: ExecutionOptions) throws {
            (self.model, self.ids, self.options) = (model, ids, options)
            session = model.makeSession(contextLength: ids.count)
            if first > 0 { _ = try model.forward(Array(ids[0..<first]), session: session, options: options, lastLogits: 1) }
            position = first
        }

        /// The next rows' log-probabilities, nil when the chunk is done.
        func next() throws -> [[Double]]? {
            guard position < ids.count - 1 else { return nil }
            let end = min(position + Perplexity.rowsPerPass, ids.count - 1)
            let logits = try model.forward(Array(ids[position..<end]), session: session, options: options, lastLogits: end - position)
            let vocabulary = model.vocabularySize
            let rows = try logits.withUnsafeBufferPointer { values in
                (0..<(end - position)).map { row -> [Double] in
                    let slice = UnsafeBufferPointer(rebasing: values[(row * vocabulary)..<((row + 1) * vocabulary)])
                    let maximum = slice.max() ?? 0
                    var sum = 0.0
                    for value in slice { sum += Double(expf(value - maximum)) }
                    let shift = Double(maximum) + log(sum)
                    return slice.map { Double($0) - shift }
                }
            }
            position = end
            return rows
        }
    }

    fileprivate static func argmax(_ values: [Double]) -> Int {
        var best = 0
        for index in values.indices where values[index] > values[best] { best = index }
        return best
    }

    /// Running sums for a mean and its standard error.
    private struct Statistic {
        var count = 0
        var sum = 0.0, squares = 0.0

        mutating func add(_ value: Double) {
            count += 1
            sum += value
            squares += value * value
        }

        var mean: Double { count > 0 ? sum / Double(count) : 0 }
        var rootMeanSquare: Double { count > 0 ? (squares / Double(count)).squareRoot() : 0 }
        var standardError: Double {
            guard count > 1 else { return 0 }
            let variance = squares / Double(count) - mean * mean
            return variance > 0 ? (variance / Double(count - 1)).squareRoot() : 0
        }
    }
}
