import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// What llama.cpp computed on one tiny random-weight model (Fixtures/tiny, made by scripts/make_tiny_models.py).
struct TinyFamilyFixture: Decodable {
    struct Generation: Decodable {
        var prompt: String
        var prompt_ids: [Int]
        var gen_ids: [Int]
        var prompt_logits: [Float]
        /// After each generated token, llama.cpp's five best (id, logit).
        var step_top5: [[[Double]]]
    }
    struct Chat: Decodable {
        var messages: [[String: String]]
        var text: String
    }
    var model: String
    var tokenization: [TokenizerFixture.Case]
    var chats: [Chat]
    var generations: [Generation]

    static func load(_ family: String) throws -> (fixture: TinyFamilyFixture, path: String) {
        let folder = References.fixtures.appendingPathComponent("tiny")
        let fixture = try JSONDecoder().decode(TinyFamilyFixture.self, from: Data(contentsOf: folder.appendingPathComponent("tiny-\(family).json")))
        return (fixture, folder.appendingPathComponent(fixture.model).path)
    }
}

/// Llama 3, Qwen2 and Qwen3 without their multi-gigabyte files: tiny models with each family's parts (Llama 3's
/// RoPE frequency factors, Qwen2's Q/K/V biases, Qwen3's per-head Q/K norms and wide heads), random weights and
/// the first 768 tokens of the real vocabularies, checked against what the newest llama.cpp computes on the same files.
@Suite("Llama 3, Qwen2, Qwen3 against llama.cpp (tiny models)")
struct TinyFamilyTests {
    static let families = ["llama3", "qwen2", "qwen3"]

    /// The hard strings tokenize to llama.cpp's ids: the real pre-tokenizers (llama-bpe, qwen2) and BPE, the BOS rule,
    /// special tokens parsed and not.
    @Test(arguments: families)
    func tokenizationEqualsLlamaCpps(family: String) throws {
        let (fixture, path) = try TinyFamilyFixture.load(family)
        let tokenizer = try GGUFTokenizer.load(GGUFFile(path: path))
        TokenizerFixtureTests.check(tokenizer, TokenizerFixture(model: fixture.model, cases: fixture.tokenization))
    }

    /// The logits after each prompt are llama.cpp's within 2e-3 (relative to the largest), and greedy decoding
    /// follows llama.cpp's tokens wherever its best two are more than 0.01 apart.
    @Test(arguments: families)
    func logitsAndGreedyTokensEqualLlamaCpps(family: String) throws {
        let (fixture, path) = try TinyFamilyFixture.load(family)
        let model = try TestCompute.textGenerator(path: path)
        #expect(model.architecture == (family == "llama3" ? "llama" : family))
        for reference in fixture.generations {
            #expect(model.tokenizer.encode(reference.prompt) == reference.prompt_ids, "\(family) \(reference.prompt.debugDescription)")
            let logits = try model.forward(reference.prompt_ids, session: model.makeSession(contextLength: 64)).scalars()
            try #require(logits.count == reference.prompt_logits.count)
            let scale = reference.prompt_logits.map(abs).max() ?? 1
            let worst = zip(logits, reference.prompt_logits).map { abs($0 - $1) }.max() ?? 0
            #expect(worst <= 2e-3 * scale, "\(family) \(reference.prompt.debugDescription): logits differ by \(worst) (largest \(scale))")

            let generated = try model.generateGreedy(prompt: reference.prompt_ids, maxTokens: reference.gen_ids.count)
            for (step, id) in reference.gen_ids.enumerated() {
                let margin = step == 0 ? Self.margin(reference.prompt_logits) : reference.step_top5[step - 1][0][1] - reference.step_top5[step - 1][1][1]
                guard margin > 0.01 else { break }  // a near-tie: either token is right, and what follows may differ
                #expect(generated.count > step && generated[step] == id, "\(family) \(reference.prompt.debugDescription) step \(step): \(generated) vs \(reference.gen_ids)")
                if generated.count <= step || generated[step] != id { break }
            }
        }
    }

    /// The file's chat template is recognised, and a conversation is written as llama.cpp writes it.
    @Test(arguments: families)
    func chatTemplateWritesWhatLlamaCppWrites(family: String) throws {
        let (fixture, path) = try TinyFamilyFixture.load(family)
        let model = try TestCompute.textGenerator(path: path)
        let template = try ChatTemplate.resolve(for: model)
        #expect(template.format == (family == "llama3" ? .llama3 : .chatml))
        for chat in fixture.chats {
            let messages = chat.messages.map { ChatMessage(role: $0["role"] ?? "", content: $0["content"] ?? "") }
            #expect(template.format(messages) == chat.text)
            // Markers are special tokens; a message's text is not, even when it spells a marker.
            let smuggles = model.tokenizer.id(of: "<|im_start|>") != nil && messages.contains { $0.content.contains("<|im_start|>") }
            let parsed = model.tokenizer.encode(chat.text, parseSpecial: true, withBOS: nil)
            #expect((try template.tokens(messages, tokenizer: model.tokenizer) == parsed) == !smuggles, "\(family) \(chat.text.debugDescription)")
        }
    }

    /// What each family's parts are read as: Llama 3's frequency factors, Qwen2's biases, Qwen3's norms and head width.
    @Test func eachFamilysPartsAreRead() throws {
        let llama = try #require(try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path) as? DecoderModel)
        #expect(llama.config.ropeBase == 500_000 && llama.tokenizer.addBOS)
        let qwen2 = try #require(try TestCompute.textGenerator(path: TinyFamilyFixture.load("qwen2").path) as? DecoderModel)
        #expect(!qwen2.tokenizer.addBOS && qwen2.output === qwen2.embedding)
        let qwen3 = try #require(try TestCompute.textGenerator(path: TinyFamilyFixture.load("qwen3").path) as? DecoderModel)
        #expect(qwen3.config.headDim == 32 && qwen3.config.queryWidth == 128 && qwen3.config.hidden == 64 && qwen3.output !== qwen3.embedding)
        #expect(qwen3.tokenizer.endsGeneration(qwen3.tokenizer.id(of: "<|im_end|>") ?? -1))
        for model in [llama, qwen2, qwen3] {
            let plan = try model.plan(ExecutionOptions(units: .cpuAndNeuralEngine))
            #expect(!plan.steps.isEmpty)
        }
    }

    static func margin(_ logits: [Float]) -> Double {
        let sorted = logits.sorted(by: >)
        return Double(sorted[0] - sorted[1])
    }
}
