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
    /// The normaliser is summed in Double from the largest logit down, so a vocabulary of 262,144 loses nothing to it;
    /// the sum and the best tokens come from one pass (Gemma 3's vocabulary: ~1.3 ms a token, against ~3 ms as a
    /// maximum, a sum and the sampler's heap each reading it).
    static func measure(_ logits: [Float], chosen: Int, count: Int, tokenizer: any TextTokenizer) -> TokenLogprobs {
        let maximum = logits.max() ?? 0
        let (sum, best) = logits.withUnsafeBufferPointer { values in
            var best: [Int] = []
            best.reserveCapacity(count + 1)
            var threshold = -Float.infinity // the worst kept logit once `count` are kept
            var sum = 0.0
            for index in 0..<values.count {
                let value = values[index]
                sum += Double(expf(value - maximum))
                guard count > 0, value > threshold || best.count < count else { continue }
                var slot = best.count
                while slot > 0, values[best[slot - 1]] < value { slot -= 1 } // after equals: the lower id first on a tie
                best.insert(index, at: slot)
                if best.count > count { best.removeLast() }
                if best.count == count { threshold = values[best[count - 1]] }
            }
            return (sum, best)
        }
        let normaliser = maximum + Float(log(sum))
        func probability(_ token: Int) -> TokenProbability {
            TokenProbability(token: token, bytes: tokenizer.bytes(of: token),
                             logprob: logits.indices.contains(token) ? min(logits[token] - normaliser, 0) : -.infinity)
        }
        return TokenLogprobs(chosen: probability(chosen), top: best.map(probability))
    }
}
