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
    /// How many recent tokens the penalties look at.
    public var repetitionWindow = 64
    /// OpenAI's additive penalties over the same recent tokens: a token's logit loses `frequencyPenalty` for each time
    /// it is there and `presencePenalty` once if it is there at all (0: off; −2 to 2, negative favours repeats).
    public var frequencyPenalty: Float = 0
    /// See ``frequencyPenalty``.
    public var presencePenalty: Float = 0
    /// Added to the named tokens' logits before anything else picks (OpenAI's `logit_bias`: −100 to 100; −100 in
    /// effect bans a token). Ids beyond the vocabulary are ignored here; the HTTP API refuses them.
    public var logitBias: [Int: Float] = [:]
    /// Seed of the random draws; the same seed and inputs give the same tokens.
    public var seed: UInt64 = 0
    /// What the text must be: free text (the default), any JSON object, or JSON valid against a schema.
    public var format: OutputFormat = .text
    /// Not a sampling rule but what the generation reports with each token: nil reports nothing; 0…20 reports each
    /// sampled token's log-probability and that many of the step's most likely tokens with theirs
    /// (``Generation/logprobs``).
    public var logprobs: Int? = nil

    /// Throws `KernelError.invalidArgument` naming the first setting out of range:
    /// temperature finite and ≥ 0, top-k ≥ 0, top-p in (0, 1], min-p in [0, 1], repetition penalty finite and > 0,
    /// repetition window ≥ 0; a JSON schema format that Ember cannot enforce throws ``StructuredOutputError``.
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
        try check(frequencyPenalty.isFinite && abs(frequencyPenalty) <= 2, "frequencyPenalty", "\(frequencyPenalty)", "a number from −2 to 2 (0 is off)")
        try check(presencePenalty.isFinite && abs(presencePenalty) <= 2, "presencePenalty", "\(presencePenalty)", "a number from −2 to 2 (0 is off)")
        for (token, bias) in logitBias.sorted(by: { $0.key < $1.key }) {
            try check(token >= 0, "logitBias", "token \(token)", "token ids ≥ 0")
            try check(bias.isFinite && abs(bias) <= 100, "logitBias[\(token)]", "\(bias)", "a number from −100 to 100")
        }
        if let logprobs { try check((0...20).contains(logprobs), "logprobs", "\(logprobs)", "0 to 20 most likely tokens a step (nil: none)") }
        try format.validate()
    }

    /// Settings with the defaults above: greedy, top-k 40, top-p 0.95, min-p 0.05, no penalties or bias, seed 0, free
    /// text, no log-probabilities reported.
    public init(temperature: Float = 0, topK: Int = 40, topP: Float = 0.95, minP: Float = 0.05,
                repetitionPenalty: Float = 1, repetitionWindow: Int = 64, frequencyPenalty: Float = 0, presencePenalty: Float = 0,
                logitBias: [Int: Float] = [:], seed: UInt64 = 0, format: OutputFormat = .text, logprobs: Int? = nil) {
        (self.temperature, self.topK, self.topP, self.minP) = (temperature, topK, topP, minP)
        (self.repetitionPenalty, self.repetitionWindow, self.seed, self.format) = (repetitionPenalty, repetitionWindow, seed, format)
        (self.frequencyPenalty, self.presencePenalty, self.logitBias, self.logprobs) = (frequencyPenalty, presencePenalty, logitBias, logprobs)
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

    /// Picks the next token id from `logits` (one per vocabulary entry); the penalties apply to the last `repetitionWindow` ids of `history`, then the logit bias.
    /// With a `constraint`, only tokens it allows are candidates — the mask comes before temperature, top-k, top-p and
    /// min-p. Empty `logits` (a vocabulary of none, which no loader accepts) give token 0 whatever the settings.
    public mutating func next(logits input: [Float], history: [Int], constraint: TokenConstraint? = nil) -> Int {
        guard !input.isEmpty else { return 0 }
        var logits = input
        if settings.repetitionPenalty != 1 {
            for token in Set(history.suffix(settings.repetitionWindow)) where logits.indices.contains(token) {
                logits[token] = logits[token] > 0 ? logits[token] / settings.repetitionPenalty : logits[token] * settings.repetitionPenalty
            }
        }
        if settings.frequencyPenalty != 0 || settings.presencePenalty != 0 {
            var counts: [Int: Int] = [:]
            for token in history.suffix(settings.repetitionWindow) { counts[token, default: 0] += 1 }
            for (token, count) in counts where logits.indices.contains(token) {
                logits[token] -= settings.frequencyPenalty * Float(count) + settings.presencePenalty
            }
        }
        for (token, bias) in settings.logitBias where logits.indices.contains(token) { logits[token] += bias }
        if let constraint {
            // A state known to allow few tokens: pick among them. Otherwise the best candidates first, and the
            // state's whole list of allowed tokens only when too few of them pass.
            if let few = constraint.knownAllowedTokens() { return pick(among: few, logits, constraint) }
            if let pick = constrainedFromBest(logits, constraint) { return pick }
            return pick(among: constraint.allowedTokens(), logits, constraint)
        }
        guard settings.temperature > 0 else { return logits.indices.max { logits[$0] < logits[$1] } ?? 0 }
        // Probabilities are normalised over the top-k set (the whole vocabulary when top-k is off);
        // without top-k only tokens min-p can accept are sorted, but all count in the total.
        let topK = settings.topK > 0
        let candidates = Self.bestFirst(logits, keep: settings.topK, minP: topK ? 0 : settings.minP, temperature: settings.temperature)
        let total = topK ? nil : logits.reduce(0.0) { $0 + exp(Double(($1 - logits[candidates[0]]) / settings.temperature)) }
        return draw(from: candidates, logits: logits, total: total)
    }

    /// The pick when enough of the best tokens are allowed: greedy takes the best allowed one; with top-k, the k best
    /// allowed tokens are the top-k set of the masked logits, so no mask is needed. Nil when the best few hundred
    /// tokens hold too few allowed ones, or top-k is off (the total then needs the mask).
    private mutating func constrainedFromBest(_ logits: [Float], _ constraint: TokenConstraint) -> Int? {
        let greedy = settings.temperature <= 0
        guard greedy || settings.topK > 0 else { return nil }
        let wanted = greedy ? 1 : settings.topK
        let budget = max(4 * wanted, 64)
        let best = Self.bestFirst(logits, keep: budget, minP: 0, temperature: 1)
        var allowed: [Int] = []
        for token in best where constraint.allows(token) {
            allowed.append(token)
            if allowed.count == wanted { break }
        }
        // Every token outside `best` scores lower, so `allowed` is exact when it is full or `best` was the whole vocabulary.
        guard allowed.count == wanted || (best.count < budget && !allowed.isEmpty) else { return nil }
        return greedy ? allowed[0] : draw(from: allowed, logits: logits, total: nil)
    }

    /// The pick among `allowed` (the constraint's allowed tokens): greedy, or top-k / min-p over them, normalised
    /// over them — what the unconstrained path does with every other token's logit at −∞.
    private mutating func pick(among listed: [Int32], _ logits: [Float], _ constraint: TokenConstraint) -> Int {
        // A tokenizer may hold more tokens than the model has logits: those are never picked.
        let allowed = Int(listed.last ?? 0) < logits.count ? listed : listed.filter { Int($0) < logits.count }
        guard !allowed.isEmpty else { return constraint.fallbackToken }
        func better(_ a: Int, _ b: Int) -> Bool { logits[a] > logits[b] || (logits[a] == logits[b] && a < b) }
        var best = Int(allowed[0])
        for token in allowed where better(Int(token), best) { best = Int(token) }
        guard settings.temperature > 0 else { return best }
        if settings.topK > 0 {
            var candidates = allowed.map(Int.init)
            if candidates.count > settings.topK {
                candidates = Self.bestFirst(candidates.map { logits[$0] }, keep: settings.topK, minP: 0, temperature: 1).map { candidates[$0] }
            } else {
                candidates.sort(by: better)
            }
            return draw(from: candidates, logits: logits, total: nil)
        }
        let top = logits[best]
        let floor = settings.minP > 0 ? top + settings.temperature * log(settings.minP) : -Float.infinity
        let candidates = allowed.map(Int.init).filter { logits[$0] >= floor }.sorted(by: better)
        let total = allowed.reduce(0.0) { $0 + exp(Double((logits[Int($1)] - top) / settings.temperature)) }
        return draw(from: candidates, logits: logits, total: total)
    }

    /// A seeded draw among `candidates` (best first, at least one): temperature, then top-p and min-p. `total` is the
    /// normalising sum of the whole vocabulary's weights when top-k is off; nil normalises over the candidates.
    private mutating func draw(from candidates: [Int], logits: [Float], total fullTotal: Double?) -> Int {
        let best = logits[candidates[0]]
        var weights = candidates.map { exp(Double((logits[$0] - best) / settings.temperature)) }
        let total = fullTotal ?? weights.reduce(0, +)
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
    /// the ones min-p can still accept. One pass with a heap of the best
    /// instead of sorting the whole vocabulary every token.
    static func bestFirst(_ logits: [Float], keep requested: Int, minP: Float, temperature: Float) -> [Int] {
        guard let maximum = logits.max() else { return [0] }
        let keep = min(requested, logits.count) // top-k above the vocabulary keeps it all
        // min-p drops tokens whose probability is below minP × the best one's.
        let floor = minP > 0 ? maximum + temperature * log(minP) : -Float.infinity
        guard keep > 0 else {
            return logits.indices.filter { logits[$0] >= floor }.sorted { logits[$0] > logits[$1] }
        }
        // A min-heap of the best `keep` so far, its worst at the root (lower logit, or the later index on a tie:
        // earlier tokens win ties, as a stable sort would keep them).
        var heap: [Int] = []
        heap.reserveCapacity(keep)
        func worse(_ a: Int, _ b: Int) -> Bool { logits[a] < logits[b] || (logits[a] == logits[b] && a > b) }
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1, right = left + 1
                var worst = parent
                if left < heap.count, worse(heap[left], heap[worst]) { worst = left }
                if right < heap.count, worse(heap[right], heap[worst]) { worst = right }
                if worst == parent { return }
                heap.swapAt(parent, worst)
                parent = worst
            }
        }
        for index in logits.indices where logits[index] >= floor {
            if heap.count < keep {
                heap.append(index)
                var child = heap.count - 1
                while child > 0 {
                    let parent = (child - 1) / 2
                    guard worse(heap[child], heap[parent]) else { break }
                    heap.swapAt(child, parent)
                    child = parent
                }
            } else if logits[index] > logits[heap[0]] {
                heap[0] = index
                siftDown(0)
            }
        }
        let best = heap.sorted { logits[$0] > logits[$1] || (logits[$0] == logits[$1] && $0 < $1) }
        return best.isEmpty ? [logits.indices.max { logits[$0] < logits[$1] }!] : best
    }
}

