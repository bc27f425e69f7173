import EmberCore
import EmberModels
import Foundation

/// Sentence-embedding throughput: `sentences` synthetic English sentences of
/// 12–20 words (a fixed pseudo-random draw, the same every run), embedded in
/// batches of `batch`, tokenization included; one untimed warm-up pass, then
/// the median of `runs` passes, in sentences per second.
public struct EmbeddingBenchmark: Sendable {
    /// The median rate and every run's.
    public struct Result: Sendable, Codable {
        /// Median throughput of the timed runs, sentences per second.
        public var sentencesPerSecond: Double
        /// Each timed run's throughput, sentences per second, in order.
        public var runs: [Double]
        /// Tokens per sentence on average ([CLS] and [SEP] included).
        public var meanTokens: Double
    }

    /// Sentences per pass; default 256.
    public var sentences = 256
    /// Sentences per `embed` call.
    public var batch: Int
    /// Timed passes after the warm-up (default 3; fewer than 1 counts as 1).
    public var runs = 3
    /// The units, precision, threads and QoS class the calls run with.
    public var options: ExecutionOptions

    /// A benchmark of `batch`-sentence calls with these options; `sentences` and `runs` start at 256 and 3.
    public init(batch: Int, options: ExecutionOptions) {
        self.batch = batch
        self.options = options
    }

    static let words = """
        the a of and to in is was for on with as by at from that this it be are were have has had not but or an \
        their which one all new more time year people way day man woman child world life hand part place case week \
        company system program question work government number night point home water room mother area money story \
        fact month lot right study book eye job word business issue side kind head house service friend father power \
        hour game line end member law car city community name president team minute idea kid body information back \
        parent face others level office door health person art war history party result change morning reason research \
        girl guy moment air teacher force education quickly carefully river mountain computer language model small \
        large early late young important public bad same able good first last long great little own other old right \
        big high different local sure make know think take see come want look use find give tell ask seem feel try \
        leave call keep provide hold turn follow begin bring learn
        """.split(separator: " ").map(String.init)

    /// The benchmark's sentences: 12–20 words each, capitalised, with a full stop.
    public static func sentences(_ count: Int, seed: UInt64 = 2024) -> [String] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let length = 12 + Int(generator.next() % 9)
            var text = (0..<length).map { _ in words[Int(generator.next() % UInt64(words.count))] }.joined(separator: " ")
            text = text.prefix(1).uppercased() + text.dropFirst() + "."
            return text
        }
    }

    /// Embeds the sentences with `model`: one untimed warm-up pass, then `runs` timed passes.
    /// Throws `KernelError.invalidArgument` for a batch or a sentence count below 1.
    public func run(_ model: any Embedder) throws -> Result {
        guard batch >= 1 else {
            throw KernelError.invalidArgument(argument: "batch", found: "\(batch)", expected: "at least 1 sentence per call")
        }
        guard sentences >= 1 else {
            throw KernelError.invalidArgument(argument: "sentences", found: "\(sentences)", expected: "at least 1")
        }
        let texts = Self.sentences(sentences)
        func pass() throws -> Double {
            try Measurement.seconds {
                for start in stride(from: 0, to: texts.count, by: batch) {
                    _ = try model.embed(Array(texts[start..<min(texts.count, start + batch)]), options: options)
                }
            }
        }
        _ = try pass()
        let rates = try (0..<max(1, runs)).map { _ in Double(texts.count) / (try pass()) }
        let tokens = texts.reduce(0) { $0 + model.tokenize($1).count }
        return Result(sentencesPerSecond: Measurement.median(rates), runs: rates, meanTokens: Double(tokens) / Double(texts.count))
    }
}
