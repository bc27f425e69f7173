import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// SmolLM2 against llama.cpp's greedy output on the same file (needs `make models`).
@Suite("SmolLM2 against llama.cpp", .serialized, .enabled(if: FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
struct LlamaReferenceTests {
    static let model: (any TextGenerator)? = try? TestCompute.textGenerator(path: GGUFReaderTests.smolLM2)

    /// int4: the file's Q4_1 weights on the neural-engine route, Q8_1 activations as llama.cpp's Q4_1 kernels use.
    /// fp32: the same weights dequantized once, BLAS on the GPU route, against llama.cpp on the F32 file; fp16: those
    /// values rounded to F16 (the GPU route's half kernels, and the neural-engine route's), against the same.
    @Test(arguments: [("smollm2_greedy_q4_1.jsonl", Precision?.none, ComputeUnits.cpuAndNeuralEngine),
                      ("smollm2_greedy_f32.jsonl", Precision.fp32, ComputeUnits.cpuAndGPU),
                      ("smollm2_greedy_f32.jsonl", Precision.fp16, ComputeUnits.cpuAndGPU),
                      ("smollm2_greedy_f32.jsonl", Precision.fp16, ComputeUnits.cpuAndNeuralEngine)])
    func greedyMatchesTheFirstTokensAndTeacherForcedTop1(file: String, precision: Precision?, units: ComputeUnits) throws {
        let model = try #require(Self.model)
        for reference in try References.generations(file) {
            let generated = try model.generateGreedy(prompt: reference.prompt_ids, maxTokens: 8, units: units, precision: precision)
            #expect(Array(generated.prefix(8)) == Array(reference.gen_ids.prefix(8)), "\(reference.prompt.debugDescription)")
            // Teacher forcing: feed prompt + reference tokens once; compare each next-token argmax.
            let session = model.makeSession(contextLength: reference.prompt_ids.count + reference.gen_ids.count + 1)
            let logits = try model.forward(reference.prompt_ids + reference.gen_ids, session: session, units: units,
                                           precision: precision, allLogits: true).scalars()
            let vocabulary = model.vocabularySize
            var agree = 0
            for (index, expected) in reference.gen_ids.enumerated() {
                let row = reference.prompt_ids.count - 1 + index
                let slice = logits[(row * vocabulary)..<((row + 1) * vocabulary)]
                let top = slice.indices.max(by: { slice[$0] < slice[$1] })! - row * vocabulary
                if top == expected { agree += 1 } else {
                    print("position \(index): reference \(expected) (logit \(slice[row * vocabulary + expected])), ours \(top) (logit \(slice[row * vocabulary + top]))")
                }
            }
            let rate = Double(agree) / Double(reference.gen_ids.count)
            #expect(rate >= 0.95, "\(file): top-1 agreement \(agree)/\(reference.gen_ids.count) for \(reference.prompt.debugDescription)")
        }
    }

    /// A maxTokens of Int.max is "until the context is full or the caller stops", not an overflow trap.
    @Test func theLargestMaxTokensDoesNotOverflow() throws {
        let model = try #require(Self.model)
        var steps = 0
        struct Enough: Error {}
        #expect(throws: Enough.self) {
            try model.generate(prompt: "Hello", maxTokens: .max, precision: .int4, betweenTokens: {
                steps += 1
                if steps > 2 { throw Enough() }
            })
        }
        #expect(steps == 3)
    }
}
