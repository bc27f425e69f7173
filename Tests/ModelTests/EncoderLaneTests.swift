import Foundation
import Testing
@testable import EmberModels
import EmberCore
import EmberTestSupport

/// How an encoder batch is divided among threads that each run their own sentences (`EncoderPass.sentenceGroups`).
struct SentenceGroupTests {
    @Test func evenSentencesSplitInHalves() {
        #expect(EncoderPass.sentenceGroups([10, 10, 10, 10], parts: 2) == [0..<2, 2..<4])
        #expect(EncoderPass.sentenceGroups([4, 4, 4, 4, 4, 4], parts: 3) == [0..<2, 2..<4, 4..<6])
    }

    @Test func tooFewOrTooUnevenSentencesShareEveryStage() {
        #expect(EncoderPass.sentenceGroups([12, 14, 9], parts: 1) == nil, "one thread")
        #expect(EncoderPass.sentenceGroups([12], parts: 2) == nil, "fewer sentences than threads")
        #expect(EncoderPass.sentenceGroups([3, 15], parts: 2) == nil, "15 of 18 tokens on one thread")
        #expect(EncoderPass.sentenceGroups([1, 1, 1, 100], parts: 2) == nil, "one long sentence")
    }

    /// A benchmark-like batch: consecutive, non-empty groups covering every sentence once, none above the allowed
    /// imbalance; the boundaries as near even shares as whole sentences allow.
    @Test(arguments: [2, 3, 4])
    func groupsCoverTheBatchEvenly(parts: Int) throws {
        var generator = SplitMix64(seed: 7)
        let lengths = (0..<32).map { _ in 12 + Int(generator.next() % 11) }
        let groups = try #require(EncoderPass.sentenceGroups(lengths, parts: parts))
        #expect(groups.count == parts)
        #expect(groups.first?.lowerBound == 0 && groups.last?.upperBound == lengths.count)
        for (left, right) in zip(groups, groups.dropFirst()) { #expect(left.upperBound == right.lowerBound) }
        let total = lengths.reduce(0, +)
        for group in groups {
            #expect(!group.isEmpty)
            let tokens = group.reduce(0) { $0 + lengths[$1] }
            #expect(Double(tokens) <= EncoderPass.ownedRowsImbalance * Double(total) / Double(parts))
            #expect(abs(Double(tokens) - Double(total) / Double(parts)) <= Double(lengths.max()! * (parts - 1)), "\(groups)")
        }
    }
}
