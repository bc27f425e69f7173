import Foundation
import Testing
@testable import EmberModels
import EmberCore
import EmberTestSupport

/// A decode step's threads deal each matmul's columns out in pieces (``WorkRanges``), each piece followed by its
/// epilogue — Q/K/V biases (Qwen2), SwiGLU or GeGLU, the residual add (after Gemma's post-norms, once rows are
/// whole): every column must be computed and added exactly once, so two threads compute what one thread computes.
/// The tiny models' 64-wide matrices make one piece per thread (their feed-forward and logits several); Gemma 3's
/// 640-wide ones make several everywhere.
@Suite("Decode steps split among threads", .enabled(if: TestCompute.context.maximumThreads >= 2))
struct DecodeSplitTests {
    @Test(arguments: ["llama3", "qwen2", "qwen3"])
    func twoThreadsComputeWhatOneThreadComputes(family: String) throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load(family).path)
        try Self.check(model, family: family, precisions: [.fp32, nil])
    }

    @Test(.enabled(if: GemmaFile.present))
    func twoThreadsComputeWhatOneThreadComputesOnGemma() throws {
        try Self.check(try #require(GemmaTests.model), family: "gemma3", precisions: [nil])
    }

    static func check(_ model: any TextGenerator, family: String, precisions: [Precision?]) throws {
        let prompt = model.tokenizer.encode("Once upon a time there was")
        for precision in precisions {
            let one = ExecutionOptions(units: .cpu, precision: precision, threads: 1)
            let two = ExecutionOptions(units: .cpu, precision: precision, threads: 2)
            let (alone, shared) = (model.makeSession(contextLength: 64), model.makeSession(contextLength: 64))
            _ = try model.forward(prompt, session: alone, options: one)
            _ = try model.forward(prompt, session: shared, options: two)
            var token = 7
            for step in 0..<6 {
                let want = try model.forward([token], session: alone, options: one).scalars()
                let got = try model.forward([token], session: shared, options: two).scalars()
                let scale = want.map(abs).max() ?? 1
                let worst = zip(got, want).map { abs($0 - $1) }.max() ?? .infinity
                #expect(worst <= 1e-5 * scale, "\(family) \(precision.map { "\($0)" } ?? "native") step \(step): \(worst) of \(scale)")
                token = want.indices.max { want[$0] < want[$1] } ?? 0
            }
        }
    }
}
