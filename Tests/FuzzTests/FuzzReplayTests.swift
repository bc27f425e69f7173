import EmberCore
import EmberFuzzTargets
import EmberTestSupport
import Foundation
import Testing

/// The short pass of fuzzing that `make test` runs: each fuzz target over its seed corpus (Tests/Fuzz/corpus),
/// the inputs that once crashed it (Tests/Fuzz/crashers), and thousands of seeded random mutations — every one
/// must return. `make fuzz` runs the same targets under libFuzzer and AddressSanitizer for longer.
@Suite("Fuzz targets: corpus, crashers and mutations")
struct FuzzReplayTests {
    static let root = ExternalProcess.repositoryRoot
    static let environment = FuzzTarget.Environment(repositoryRoot: root)

    static func inputs(_ target: FuzzTarget) -> [Data] {
        var folders = ["Tests/Fuzz/corpus/\(target.rawValue)", "Tests/Fuzz/crashers/\(target.rawValue)"]
        if target == .gguf { folders.append("Tests/ModelTests/Fixtures/tiny") }
        return folders.flatMap { FuzzCorpus.files(at: root.appendingPathComponent($0).path) }
            .compactMap { FileManager.default.contents(atPath: $0) }
    }

    @Test(arguments: FuzzTarget.allCases)
    func everyInputReturns(target: FuzzTarget) {
        let inputs = Self.inputs(target)
        #expect(inputs.count >= 1, "a seed corpus for \(target.rawValue)")
        let report = FuzzCorpus.replay(target, inputs: inputs, mutations: target == .gguf ? 3000 : 5000, seed: 2026,
                                       environment: Self.environment)
        #expect(report.inputs == inputs.count && report.mutations > 0)
    }

    /// The mutator makes what it promises: different bytes from the same seed each time, the same from the same seed.
    @Test func mutationsAreSeededAndVaried() {
        let base = Data("{\"id\":1,\"prompt\":\"hi\",\"maxTokens\":4}".utf8)
        var a = SplitMix64(seed: 1), b = SplitMix64(seed: 1)
        let first = (0..<50).map { _ in FuzzCorpus.mutate(base, other: base, using: &a) }
        let second = (0..<50).map { _ in FuzzCorpus.mutate(base, other: base, using: &b) }
        #expect(first == second)
        #expect(Set(first).count > 40, "varied")
        #expect(first.filter { $0 == base }.count < 3, "edits change the bytes")
    }
}
