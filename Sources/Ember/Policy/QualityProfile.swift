import EmberCore
import EmberModels
import Foundation

/// How much a model loses at each precision against fp32, measured on a built-in text (``QualityProbe``): for a
/// generator the relative rise in perplexity (0.005 = +0.5 %) its KL divergence from fp32 predicts, for an embedder
/// 1 − the mean cosine to fp32's vectors.
public struct QualityProfile: Sendable, Equatable, Codable {
    /// What the loss measures: "perplexity" (relative rise) or "cosine" (1 − mean cosine to fp32).
    public var metric: String
    /// Precision → loss against fp32 (fp32 itself is 0). Never below 0: a precision that scored better by chance
    /// counts as lossless.
    public var loss: [Precision: Double]
    /// fp32's own score on the text (its perplexity; 1 for cosine).
    public var reference: Double
    /// "measured (KL divergence from fp32 over N tokens)", "measured (N sentences)" or "default".
    public var source: String

    /// A profile of `loss` per precision.
    public init(metric: String, loss: [Precision: Double], reference: Double, source: String) {
        self.metric = metric
        self.loss = loss.mapValues { max(0, $0) }
        self.loss[.fp32] = 0
        self.reference = reference
        self.source = source
    }

    /// The loss at `precision`; a precision never measured counts as the default's.
    public func loss(at precision: Precision) -> Double { loss[precision] ?? Self.unmeasured.loss[precision] ?? 0 }

    /// What a model not yet measured is assumed to lose: cautious figures above what this project measured on its
    /// models (``QualityProbe``; SmolLM2's Q4_1 file: int4 +0.27 % perplexity, int8 +0.36 %, fp16 +0.0002 %; Gemma 3
    /// 270M's int8 +0.34 %), so an unmeasured model is not pushed to int4 where the budget is tight.
    public static let unmeasured = QualityProfile(metric: "perplexity", loss: [.fp16: 0.0005, .int8: 0.004, .int4: 0.02],
                                                  reference: 0, source: "default")

    /// "+0.26 % perplexity" or "cosine −0.0012" for `precision`.
    public func describe(_ precision: Precision) -> String {
        let value = loss(at: precision)
        if metric == "cosine" { return String(format: "cosine −%.4f", value) }
        return String(format: "+%.2f%% perplexity", value * 100)
    }

    enum CodingKeys: String, CodingKey { case metric, loss, reference, source }

    /// Encodes the losses keyed by precision name.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(metric, forKey: .metric)
        try container.encode(Dictionary(uniqueKeysWithValues: loss.map { ($0.key.rawValue, $0.value) }), forKey: .loss)
        try container.encode(reference, forKey: .reference)
        try container.encode(source, forKey: .source)
    }

    /// Decodes what ``encode(to:)`` wrote; unknown precisions are skipped.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let named = try container.decode([String: Double].self, forKey: .loss)
        self.init(metric: try container.decode(String.self, forKey: .metric),
                  loss: Dictionary(uniqueKeysWithValues: named.compactMap { key, value in Precision(rawValue: key).map { ($0, value) } }),
                  reference: try container.decode(Double.self, forKey: .reference),
                  source: try container.decode(String.self, forKey: .source))
    }
}

/// Quality profiles cached beside the calibration (`quality.json`), keyed by the model file's checksum and the
/// kernel ISA: measured once per model and machine kind, read on every later load.
public struct QualityCache: Sendable {
    /// The cache file.
    public let url: URL

    /// A cache in `url`.
    public init(url: URL) { self.url = url }

    /// The profile stored under `key`, nil when absent or unreadable.
    public func profile(for key: String) -> QualityProfile? { entries()[key] }

    /// Stores `profile` under `key` (rewriting the file atomically; another process's entries are kept).
    public func store(_ profile: QualityProfile, for key: String) throws {
        var all = entries()
        all[key] = profile
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(all).write(to: url, options: .atomic)
    }

    private func entries() -> [String: QualityProfile] {
        guard let data = try? Data(contentsOf: url) else { return [:] }
        return (try? JSONDecoder().decode([String: QualityProfile].self, from: data)) ?? [:]
    }
}

/// The quality profiles of a runtime's loaded models, by model path: written when a model loads (from any thread),
/// read by the scheduler for every decision.
public final class QualityRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var profiles: [String: QualityProfile] = [:]

    /// An empty registry.
    public init() {}

    /// Records `profile` for the model read from `model`.
    public func set(_ profile: QualityProfile, for model: String) { lock.withLock { profiles[model] = profile } }

    /// Every profile recorded.
    public var all: [String: QualityProfile] { lock.withLock { profiles } }
}
