import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// `ember perplexity`'s measurement against llama-perplexity's published figures (-c 512 on Debian's Apache-2.0
/// licence text, 4 chunks; shared/reference/README.md), and its protocol on a synthetic model.
@Suite("Perplexity", .serialized)
struct PerplexityTests {
    static let text = "/usr/share/common-licenses/Apache-2.0"
    static var textPresent: Bool { FileManager.default.fileExists(atPath: text) }

    static func measure(_ model: any TextGenerator, precision: Precision? = nil, reference: Bool = false) throws -> Perplexity.Result {
        let text = try String(contentsOfFile: Self.text, encoding: .utf8)
        let options = ExecutionOptions(units: .all, precision: precision, threads: 2)
        return try Perplexity.evaluate(model, text: text, contextLength: 512, options: options,
                                       reference: reference ? ExecutionOptions(units: .all, precision: .fp32, threads: 2) : nil)
    }

    /// SmolLM2's Q4_1 as stored and dequantized to fp32: within 1% of llama.cpp's 15.9289 and 15.9143, 4 chunks,
    /// 255 tokens scored in each; the quantized run's divergence from fp32 is small and measured.
    @Test(.enabled(if: textPresent && FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
    func smolLM2MatchesLlamaPerplexity() throws {
        let model = try TestCompute.textGenerator(path: GGUFReaderTests.smolLM2)
        let native = try Self.measure(model, reference: true)
        #expect(native.chunks == 4 && native.tokens == 4 * 255)
        #expect(abs(native.perplexity / 15.9289 - 1) < 0.01, "Q4_1: \(native.perplexity)")
        let divergence = try #require(native.divergence)
        #expect(abs(divergence.referencePerplexity / 15.9143 - 1) < 0.01, "fp32: \(divergence.referencePerplexity)")
        // With EMBER_ISA=scalar no SIMD backend takes Q4_1: the weights run dequantized on the GPU route, as fp32 does.
        #expect(TestCompute.isa == .scalar ? divergence.meanKL < 1e-9 : divergence.meanKL > 0, "\(divergence)")
        #expect(divergence.meanKL < 0.02 && divergence.sameTop > 0.9, "\(divergence)")
    }

    @Test(.enabled(if: textPresent && GemmaFile.present))
    func gemma3MatchesLlamaPerplexity() throws {
        let result = try Self.measure(try TestCompute.textGenerator(path: GemmaFile.path))
        #expect(result.chunks == 4)
        #expect(abs(result.perplexity / 10.1452 - 1) < 0.01, "Gemma 3 Q4_K_M: \(result.perplexity)")
    }

    /// The protocol: chunks of the context (the rest dropped), the second half scored, two chunks at least; the same
    /// options as reference give a divergence of zero and the same top token everywhere.
    @Test func protocolOnASyntheticModel() throws {
        let model = try SyntheticGGUF.tinyLlama().withFile(TestCompute.textGenerator(path:))
        let text = String(repeating: "ABCDEFGHIJ", count: 9)   // one token per letter: 90 tokens
        let options = ExecutionOptions(units: .cpuAndNeuralEngine, precision: .fp32, threads: 2)
        let result = try Perplexity.evaluate(model, text: text, contextLength: 40, options: options, reference: options)
        #expect(result.chunks == 2 && result.tokens == 2 * (40 - 1 - 20))
        #expect(result.perplexity.isFinite && result.perplexity > 1)
        let divergence = try #require(result.divergence)
        #expect(abs(divergence.meanKL) < 1e-9 && divergence.sameTop == 1 && divergence.referencePerplexity == result.perplexity)
        #expect(throws: Perplexity.TooShort.self) { try Perplexity.evaluate(model, text: text, contextLength: 64, options: options) }
        #expect(throws: KernelError.self) { try Perplexity.evaluate(model, text: text, contextLength: 1 << 20, options: options) }
    }

    /// Several runs measured at once against one reference give each run what measuring it alone gives.
    @Test func severalRunsShareOneReference() throws {
        let model = try SyntheticGGUF.tinyLlama().withFile(TestCompute.textGenerator(path:))
        let text = String(repeating: "ABCDEFGHIJ", count: 9)
        func options(_ precision: Precision) -> ExecutionOptions {
            ExecutionOptions(units: .cpuAndNeuralEngine, precision: precision, threads: 2)
        }
        let runs = [Precision.int8, .int4, .fp32].map(options)
        let together = try Perplexity.evaluate(model, text: text, contextLength: 40, runs: runs, reference: options(.fp32))
        #expect(together.count == 3)
        for (run, combined) in zip(runs, together) {
            let alone = try Perplexity.evaluate(model, text: text, contextLength: 40, options: run, reference: options(.fp32))
            let (a, b) = (try #require(alone.divergence), try #require(combined.divergence))
            #expect(alone.perplexity == combined.perplexity && alone.tokens == combined.tokens, "\(run.precision!)")
            #expect(a.meanKL == b.meanKL && a.sameTop == b.sameTop && a.referencePerplexity == b.referencePerplexity, "\(run.precision!)")
        }
        #expect(try #require(together[0].divergence).meanKL > 0, "int8 differs from fp32")
        #expect(abs(try #require(together[2].divergence).meanKL) < 1e-9)
        #expect(throws: KernelError.self) { try Perplexity.evaluate(model, text: text, contextLength: 40, runs: []) }
    }

    /// The quality probe's generator loss is exp(mean KL from fp32) − 1 of each precision, measured together.
    @Test func theQualityProbeMeasuresDivergenceFromFP32() throws {
        let model = try SyntheticGGUF.tinyLlama().withFile(TestCompute.textGenerator(path:))
        let profile = try QualityProbe.measure(model, threads: 2)
        let contextLength = min(QualityProbe.contextLength, model.contextLength)
        func options(_ precision: Precision) -> ExecutionOptions {
            ExecutionOptions(units: .all, precision: precision, threads: 2, qos: .utility)
        }
        let int4 = try Perplexity.evaluate(model, text: QualityProbe.text, contextLength: contextLength, options: options(.int4),
                                           reference: options(.fp32))
        let divergence = try #require(int4.divergence)
        #expect(profile.metric == "perplexity" && profile.source.contains("KL divergence from fp32 over \(int4.tokens) tokens"))
        #expect(abs(profile.loss(at: .int4) - expm1(divergence.meanKL)) < 1e-12, "\(profile.loss) vs KL \(divergence.meanKL)")
        #expect(profile.loss(at: .int4) > profile.loss(at: .int8) && profile.loss(at: .int8) > profile.loss(at: .fp16), "\(profile.loss)")
        #expect(profile.loss(at: .fp16) > 0 && profile.reference == divergence.referencePerplexity)
    }
}
