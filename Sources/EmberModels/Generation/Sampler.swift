import EmberCore
import Foundation

/// How the next token is chosen from the logits.
public struct SamplerSettings: Sendable, Equatable {
    /// 0 picks the most likely token (greedy); above 0 samples.
    public var temperature: Float = 0
    /// Keep at most this many candidates (0: all).
    public var topK = 40
    /// Keep the smallest set whose probabilities reach this (1: all).
    public var topP: Float = 0.95
    /// Drop candidates below this fraction of the best one's probability.
    public var minP: Float = 0.05
    /// Divide positive (multiply negative) logits of recent tokens by this (1: off).
    public var repetitionPenalty: Float = 1
    /// How many recent tokens the penalty looks at.
    public var repetitionWindow = 64
    /// Seed of the random draws; the same seed and inputs give the same tokens.
    public var seed: UInt64 = 0

    /// Throws `KernelError.invalidArgument` naming the first setting out of range:
    /// temperature finite and ≥ 0, top-k ≥ 0, top-p in (0, 1], min-p in [0, 1], repetition penalty finite and > 0,
    /// repetition window ≥ 0.
    public func validate() throws {
        func check(_ ok: Bool, _ field: String, _ value: String, _ expected: String) throws {
            guard ok else { throw KernelError.invalidArgument(argument: field, found: value, expected: expected) }
        }
        try check(temperature.isFinite && temperature >= 0, "temperature", "\(temperature)", "a finite number ≥ 0 (0 is greedy)")
        try check(topK >= 0, "topK", "\(topK)", "≥ 0 (0 keeps every token)")
        try check(topP > 0 && topP <= 1, "topP", "\(topP)", "a number in (0, 1]")
        try check(minP >= 0 && minP <= 1, "minP", "\(minP)", "a number in [0, 1]")
        try check(repetitionPenalty.isFinite && repetitionPenalty > 0, "repetitionPenalty", "\(repetitionPenalty)",
                  "a finite number > 0 (1 is off)")
        try check(repetitionWindow >= 0, "repetitionWindow", "\(repetitionWindow)", "≥ 0")
    }

    /// Settings with the defaults above: greedy, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty, seed 0.
    public init(temperature: Float = 0, topK: Int = 40, topP: Float = 0.95, minP: Float = 0.05,
                repetitionPenalty: Float = 1, repetitionWindow: Int = 64, seed: UInt64 = 0) {
        (self.temperature, self.topK, self.topP, self.minP) = (temperature, topK, topP, minP)
        (self.repetitionPenalty, self.repetitionWindow, self.seed) = (repetitionPenalty, repetitionWindow, seed)
    }
}

/// Picks tokens: repetition penalty, then greedy, or top-k → temperature → top-p → min-p → a seeded draw.
public struct Sampler {
    /// The settings this sampler applies.
    public let settings: SamplerSettings
    private var random: SplitMix64

    /// A sampler whose random draws start from `settings.seed`.
    public init(_ settings: SamplerSettings) {
        self.settings = settings
        random = SplitMix64(seed: settings.seed)
    }

    /// Picks the next token id from `logits` (one per vocabulary entry); the repetition penalty applies to the last `repetitionWindow` ids of `history`.
    /// Empty `logits` (a vocabulary of none, which no loader accepts) give token 0 whatever the settings.
    public mutating func next(logits input: [Float], history: [Int]) -> Int {
        guard !input.isEmpty else { return 0 }
        var logits = input
        if settings.repetitionPenalty != 1 {
            for token in Set(history.suffix(settings.repetitionWindow)) where logits.indices.contains(token) {
                logits[token] = logits[token] > 0 ? logits[token] / settings.repetitionPenalty : logits[token] * settings.repetitionPenalty
            }
        }
        guard settings.temperature > 0 else { return logits.indices.max { logits[$0] < logits[$1] } ?? 0 }
        // Probabilities are normalised over the top-k set (the whole vocabulary when top-k is off);
        // without top-k only tokens min-p can accept are sorted, but all count in the total.
        let topK = settings.topK > 0
        let candidates = Self.bestFirst(logits, keep: settings.topK, minP: topK ? 0 : settings.minP, temperature: settings.temperature)
        let best = logits[candidates[0]]
        var weights = candidates.map { exp(Double((logits[$0] - best) / settings.temperature)) }
        let total = topK ? weights.reduce(0, +) : logits.reduce(0.0) { $0 + exp(Double(($1 - best) / settings.temperature)) }
        weights = weights.map { $0 / total }
        var kept = 0, mass = 0.0
        while kept < candidates.count {
            if weights[kept] < Double(settings.minP) * weights[0] { break }
            mass += weights[kept]
            kept += 1
            if mass >= Double(settings.topP) { break }
        }
        kept = max(1, kept)
        let draw = Double(random.next() >> 11) / Double(1 << 53) * weights.prefix(kept).reduce(0, +)
        var running = 0.0
        for index in 0..<kept {
            running += weights[index]
            if draw < running { return candidates[index] }
        }
        return candidates[kept - 1]
    }

    /// Token ids best first: the `keep` best (all when 0), and of those only
    /// the ones min-p can still accept. One pass with a small sorted buffer
    /// instead of sorting the whole vocabulary every token.
    static func bestFirst(_ logits: [Float], keep requested: Int, minP: Float, temperature: Float) -> [Int] {
        guard let maximum = logits.max() else { return [0] }
        let keep = min(requested, logits.count) // top-k above the vocabulary keeps it all
        // min-p drops tokens whose probability is below minP × the best one's.
        let floor = minP > 0 ? maximum + temperature * log(minP) : -Float.infinity
        guard keep > 0 else {
            return logits.indices.filter { logits[$0] >= floor }.sorted { logits[$0] > logits[$1] }
        }
        var best: [Int] = []
        best.reserveCapacity(keep + 1)
        for index in logits.indices where logits[index] >= floor {
            if best.count == keep, logits[index] <= logits[best[keep - 1]] { continue }
            var position = best.count
            while position > 0, logits[best[position - 1]] < logits[index] { position -= 1 }
            best.insert(index, at: position)
            if best.count > keep { best.removeLast() }
        }
        return best.isEmpty ? [logits.indices.max { logits[$0] < logits[$1] }!] : best
    }
}

