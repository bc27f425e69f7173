import Foundation

/// How long a model's replies turn out to be, so a generation is predicted for the reply it will likely give rather
/// than for its `maxTokens` ceiling (an OpenAI request without `max_tokens` may allow the whole context: predicted
/// at that length, a 20-token answer looked like 50 seconds of work and every standard request was decided
/// "fastest, nothing within the target" instead of "least energy within the target").
///
/// The expectation for a model is a running mean (an exponential one after the first few) of the tokens of its
/// replies that ended on their own — an end-of-generation token or a stop string — starting from
/// ``prior``; a request is predicted at the smaller of that and its `maxTokens`.
public final class ReplyLengths: @unchecked Sendable {
    /// The expected reply before a model has finished any reply on its own.
    public static let prior = 128.0
    /// Weight of the newest reply once ``settled`` replies have been seen.
    public static let smoothing = 0.2
    /// Replies averaged plainly before the exponential mean takes over.
    public static let settled = 5

    private let lock = NSLock()
    private var means: [String: (mean: Double, count: Int)] = [:]

    /// An empty record: every model starts at ``prior``.
    public init() {}

    /// The tokens a reply of `model` (its file) is predicted to have when it may have at most `maxTokens`.
    public func expected(model: String, maxTokens: Int) -> Int {
        let mean = lock.withLock { means[model]?.mean } ?? Self.prior
        return max(1, min(maxTokens, Int(mean.rounded(.up))))
    }

    /// Records a finished reply of `model`: `tokens` generated, ended by `stopReason` ("eos", "stop", "max_tokens", …).
    /// Only replies that ended on their own teach it: one cut by its ceiling says only that the reply would have been
    /// longer.
    public func record(model: String, tokens: Int, stopReason: String) {
        guard stopReason == "eos" || stopReason == "stop", tokens > 0 else { return }
        lock.withLock {
            let (mean, count) = means[model] ?? (Self.prior, 0)
            // The prior counts as the first reply; then a plain mean, then an exponential one.
            let weight = count < Self.settled ? 1 / Double(count + 2) : Self.smoothing
            means[model] = (mean + weight * (Double(tokens) - mean), count + 1)
        }
    }
}
