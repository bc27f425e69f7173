import Ember
import Testing

/// A generation is predicted at the reply its model tends to give, not at its `maxTokens` ceiling.
@Suite("Reply lengths")
struct ReplyLengthTests {
    @Test func startsAtThePriorCappedByMaxTokens() {
        let lengths = ReplyLengths()
        #expect(lengths.expected(model: "m", maxTokens: 8000) == Int(ReplyLengths.prior))
        #expect(lengths.expected(model: "m", maxTokens: 16) == 16)
        #expect(lengths.expected(model: "m", maxTokens: 0) == 1)
    }

    @Test func learnsFromRepliesThatEndedOnTheirOwn() {
        let lengths = ReplyLengths()
        for _ in 0..<3 { lengths.record(model: "m", tokens: 20, stopReason: "eos") }
        // The first replies are averaged with the prior, then weigh in fully: (128 + 20 + 20 + 20) / 4 = 47.
        #expect(lengths.expected(model: "m", maxTokens: 8000) == 47)
        for _ in 0..<40 { lengths.record(model: "m", tokens: 20, stopReason: "stop") }
        #expect(lengths.expected(model: "m", maxTokens: 8000) <= 21)
        // A reply cut by its ceiling, or cancelled, teaches nothing; another model keeps the prior.
        lengths.record(model: "m", tokens: 4000, stopReason: "max_tokens")
        lengths.record(model: "m", tokens: 3000, stopReason: "interrupted")
        #expect(lengths.expected(model: "m", maxTokens: 8000) <= 21)
        #expect(lengths.expected(model: "other", maxTokens: 8000) == Int(ReplyLengths.prior))
    }
}
