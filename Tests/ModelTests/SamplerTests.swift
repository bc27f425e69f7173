import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

@Suite("Sampler")
struct SamplerTests {
    static let logits: [Float] = [0.1, 2.0, 1.9, -1, 0.5, 1.95]

    @Test func settingsOutOfRangeAreNamed() throws {
        try SamplerSettings().validate()
        try SamplerSettings(temperature: 2, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1.3).validate()
        let bad: [(SamplerSettings, String)] = [
            (SamplerSettings(temperature: .nan), "temperature"), (SamplerSettings(temperature: -0.5), "temperature"),
            (SamplerSettings(temperature: .infinity), "temperature"), (SamplerSettings(topK: -1), "topK"),
            (SamplerSettings(topP: 0), "topP"), (SamplerSettings(topP: 1.5), "topP"), (SamplerSettings(minP: -0.1), "minP"),
            (SamplerSettings(repetitionPenalty: 0), "repetitionPenalty"), (SamplerSettings(repetitionWindow: -1), "repetitionWindow"),
            (SamplerSettings(frequencyPenalty: 2.5), "frequencyPenalty"), (SamplerSettings(presencePenalty: .nan), "presencePenalty"),
            (SamplerSettings(logitBias: [-1: 1]), "logitBias"), (SamplerSettings(logitBias: [2: 101]), "logitBias[2]"),
        ]
        for (settings, field) in bad {
            #expect {
                try settings.validate()
            } throws: { error in
                guard case let KernelError.invalidArgument(argument, _, _) = error else { return false }
                return argument == field
            }
        }
    }

    /// OpenAI's additive penalties and logit bias, on the greedy pick where 0.05 separates token 1 (2.0) from token 5
    /// (1.95): each moves the pick exactly when its amount crosses that gap.
    @Test func additivePenaltiesAndLogitBiasMoveThePickByTheirAmount() {
        func pick(_ settings: SamplerSettings, history: [Int] = [1, 1, 4]) -> Int {
            var sampler = Sampler(settings)
            return sampler.next(logits: Self.logits, history: history)
        }
        #expect(pick(SamplerSettings()) == 1)
        #expect(pick(SamplerSettings(frequencyPenalty: 0.02)) == 1, "twice 0.02 = 0.04 < 0.05")
        #expect(pick(SamplerSettings(frequencyPenalty: 0.03)) == 5, "twice 0.03 = 0.06 > 0.05")
        #expect(pick(SamplerSettings(presencePenalty: 0.04)) == 1)
        #expect(pick(SamplerSettings(presencePenalty: 0.06)) == 5, "once, however often the token came")
        #expect(pick(SamplerSettings(presencePenalty: 0.06), history: []) == 1, "nothing to penalise")
        #expect(pick(SamplerSettings(frequencyPenalty: -2, presencePenalty: 0.06), history: [3, 3]) == 3,
                "−1 + 2 × 2 − 0.06 = 2.94: a negative penalty favours a repeat")
        #expect(pick(SamplerSettings(logitBias: [1: -100])) == 5)
        #expect(pick(SamplerSettings(logitBias: [3: 3.5])) == 3)
        #expect(pick(SamplerSettings(logitBias: [99: 100])) == 1, "an id beyond the logits is ignored")
    }

    @Test func topKAboveTheVocabularyKeepsItAll() {
        for topK in [Self.logits.count, 1 << 40, Int.max] {
            var sampler = Sampler(SamplerSettings(temperature: 1, topK: topK, topP: 1, minP: 0, seed: 9))
            let draws = Set((0..<300).map { _ in sampler.next(logits: Self.logits, history: []) })
            #expect(draws.count >= 5, "top-k \(topK): \(draws)")
        }
    }

    @Test func emptyLogitsGiveTokenZeroInsteadOfTrapping() {
        var sampler = Sampler(SamplerSettings(temperature: 0.8, topK: 0, minP: 0, seed: 1))
        #expect(sampler.next(logits: [], history: [3]) == 0)
        var greedy = Sampler(SamplerSettings(temperature: 0))
        #expect(greedy.next(logits: [], history: []) == 0)
    }

    @Test func greedyTakesTheLargest() {
        var sampler = Sampler(SamplerSettings(temperature: 0))
        #expect(sampler.next(logits: Self.logits, history: []) == 1)
    }

    @Test func topKOfOneIsGreedyAtAnyTemperature() {
        var sampler = Sampler(SamplerSettings(temperature: 5, topK: 1, seed: 3))
        for _ in 0..<20 { #expect(sampler.next(logits: Self.logits, history: []) == 1) }
    }

    @Test func sameSeedSameDrawsAndOnlyKeptCandidates() {
        let settings = SamplerSettings(temperature: 1, topK: 3, topP: 1, minP: 0, seed: 42)
        var a = Sampler(settings), b = Sampler(settings)
        let drawsA = (0..<200).map { _ in a.next(logits: Self.logits, history: []) }
        let drawsB = (0..<200).map { _ in b.next(logits: Self.logits, history: []) }
        #expect(drawsA == drawsB)
        #expect(Set(drawsA).isSubset(of: [1, 2, 5]), "top-3 keeps tokens 1, 5, 2 only")
        #expect(Set(drawsA).count == 3, "all three are drawn at temperature 1")
    }

    @Test func repetitionPenaltyMovesAwayFromRecentTokens() {
        var sampler = Sampler(SamplerSettings(temperature: 0, repetitionPenalty: 1.5))
        #expect(sampler.next(logits: Self.logits, history: [1]) == 5)
    }
}
