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
