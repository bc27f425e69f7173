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
    public var seed: UInt64 = 0

    public init(temperature: Float = 0, topK: Int = 40, topP: Float = 0.95, minP: Float = 0.05,
                repetitionPenalty: Float = 1, repetitionWindow: Int = 64, seed: UInt64 = 0) {
        (self.temperature, self.topK, self.topP, self.minP) = (temperature, topK, topP, minP)
        (self.repetitionPenalty, self.repetitionWindow, self.seed) = (repetitionPenalty, repetitionWindow, seed)
    }
}

/// Picks tokens: repetition penalty, then greedy, or top-k → temperature → top-p → min-p → a seeded draw.
public struct Sampler {
    public let settings: SamplerSettings
    private var random: SplitMix64

    public init(_ settings: SamplerSettings) {
        self.settings = settings
        random = SplitMix64(seed: settings.seed)
    }

    public mutating func next(logits input: [Float], history: [Int]) -> Int {
        var logits = input
        if settings.repetitionPenalty != 1 {
            for token in Set(history.suffix(settings.repetitionWindow)) where logits.indices.contains(token) {
                logits[token] = logits[token] > 0 ? logits[token] / settings.repetitionPenalty : logits[token] * settings.repetitionPenalty
            }
        }
        guard settings.temperature > 0 else { return logits.indices.max { logits[$0] < logits[$1] } ?? 0 }
        var candidates = logits.indices.sorted { logits[$0] > logits[$1] }
        if settings.topK > 0 { candidates = Array(candidates.prefix(settings.topK)) }
        let best = logits[candidates[0]]
        var weights = candidates.map { exp(Double((logits[$0] - best) / settings.temperature)) }
        let total = weights.reduce(0, +)
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
}

