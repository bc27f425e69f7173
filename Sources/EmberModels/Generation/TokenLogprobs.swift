import Foundation

/// A token and its log-probability at one step of a generation.
public struct TokenProbability: Sendable, Equatable {
    /// The token id.
    public var token: Int
    /// The token's bytes as the tokenizer decodes it (a byte-level token may hold part of a UTF-8 character).
    public var bytes: [UInt8]
    /// ln p: the log-softmax of the step's logits as the model gives them — before the repetition penalty, the
    /// temperature and an output format's mask, so the same text has the same log-probabilities however it was sampled.
    public var logprob: Float
}

/// One sampled token's log-probability and the step's most likely tokens (``SamplerSettings/logprobs``).
public struct TokenLogprobs: Sendable, Equatable {
    /// The token the sampler picked.
    public var chosen: TokenProbability
    /// The step's most likely tokens, best first (ties: the lower id first); as many as the settings asked for.
    public var top: [TokenProbability]

    /// `chosen`'s log-probability in `logits` (one per vocabulary entry) and the `count` most likely tokens'.
    /// The normaliser is summed in Double from the largest logit down, so a vocabulary of 262,144 loses nothing to it.
    static func measure(_ logits: [Float], chosen: Int, count: Int, tokenizer: any TextTokenizer) -> TokenLogprobs {
        let maximum = logits.max() ?? 0
        var sum = 0.0
        for value in logits { sum += Double(expf(value - maximum)) }
        let normaliser = maximum + Float(log(sum))
        func probability(_ token: Int) -> TokenProbability {
            TokenProbability(token: token, bytes: tokenizer.bytes(of: token),
                             logprob: logits.indices.contains(token) ? min(logits[token] - normaliser, 0) : -.infinity)
        }
        let best = count > 0 ? Sampler.bestFirst(logits, keep: count, minP: 0, temperature: 1) : []
        return TokenLogprobs(chosen: probability(chosen), top: best.map(probability))
    }
}
