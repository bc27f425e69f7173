import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// A prompt given as token ids generates what the same prompt given as text does, alone and batched; an id outside
/// the vocabulary is refused naming its place.
@Suite("Prompts as token ids")
struct PromptInputTests {
    @Test func tokenIdsGenerateWhatTheirTextDoes() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let prompt = "Once upon a time there was"
        let fromText = try model.generate(prompt: prompt, maxTokens: 12, options: ExecutionOptions())
        let ids = model.tokenizer.encode(prompt)
        let fromIDs = try model.generate(from: .tokens(ids), maxTokens: 12, options: ExecutionOptions())
        #expect(fromIDs.promptTokenIDs == ids && fromIDs.tokenIDs == fromText.tokenIDs && fromIDs.text == fromText.text)
        let batched = try model.generate(from: .tokens(ids), maxTokens: 12, options: ExecutionOptions(), batcher: ContinuousBatcher(),
                                         batchKey: "ids")
        #expect(batched.tokenIDs == fromText.tokenIDs)
    }

    @Test(arguments: [[1, -1], [0, 1 << 40], []])
    func idsOutsideTheVocabularyAreRefused(ids: [Int]) throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        #expect {
            try model.generate(from: .tokens(ids), maxTokens: 2, options: ExecutionOptions())
        } throws: { error in
            guard case let KernelError.invalidArgument(argument, _, _) = error else { return false }
            return ids.isEmpty ? argument == "prompt" : argument == "prompt[1]"
        }
    }
}
