import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// The reference prompts and generations (llama.cpp on the same GGUF; see shared/reference/README.md).
struct ReferenceGeneration: Decodable {
    var prompt: String
    var prompt_ids: [Int]
    var gen_ids: [Int]
    var gen_text: String
}

enum References {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let fixtures = root.appendingPathComponent("Tests/ModelTests/Fixtures")

    static func generations(_ name: String) throws -> [ReferenceGeneration] {
        let text = try String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONDecoder().decode(ReferenceGeneration.self, from: Data($0.utf8)) }
    }
}

@Suite("Byte-level BPE tokenizer", .enabled(if: FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
struct TokenizerTests {
    static let tokenizer: ByteLevelBPE? = try? ByteLevelBPE(gguf: GGUFFile(path: GGUFReaderTests.smolLM2))

    @Test(arguments: ["smollm2_greedy_q4_1.jsonl", "smollm2_greedy_f32.jsonl"])
    func promptIdsEqualTheReference(file: String) throws {
        let tokenizer = try #require(Self.tokenizer)
        for reference in try References.generations(file) {
            #expect(tokenizer.encode(reference.prompt) == reference.prompt_ids, "\(reference.prompt.debugDescription)")
            let generated = reference.gen_ids.filter { $0 != tokenizer.eosID && $0 != 2 }
            #expect(tokenizer.decode(generated) == reference.gen_text)
        }
    }

    @Test func pretokenizerSplitsLikeGPT2WithSeparateDigits() {
        #expect(ByteLevelBPE.pretokenize("Hello world's 2024!!  ok\n\nYes") ==
                ["Hello", " world", "'s", " ", "2", "0", "2", "4", "!!", " ", " ok", "\n", "\n", "Yes"]) // as the regex splits (the reference's 198, 198)
        #expect(ByteLevelBPE.pretokenize("a  1") == ["a", "  ", "1"])
        #expect(ByteLevelBPE.pretokenize("x   ") == ["x", "   "])
        #expect(ByteLevelBPE.pretokenize("Ünïcödé café") == ["Ünïcödé", " café"])
    }

    @Test func roundTripsText() throws {
        let tokenizer = try #require(Self.tokenizer)
        for text in ["Plain text.", "Emoji 🎉 and accents: naïve café", "Code: let x = [1, 2, 3]\n\ttabs", "日本語のテキスト", "<|im_start|>user\nhi<|im_end|>"] {
            #expect(tokenizer.decode(tokenizer.encode(text)) == text)
        }
    }

    @Test func streamingDecoderNeverSplitsACharacter() {
        var decoder = StreamingDecoder()
        let bytes = Array("a🎉b".utf8)
        var text = ""
        for byte in bytes { text += decoder.append([byte]) }
        text += decoder.finish()
        #expect(text == "a🎉b")
        var partial = StreamingDecoder()
        #expect(partial.append(Array(bytes[0..<3])) == "a")
    }
}
