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

    @Test func smolLMPretokenizerIsolatesDigitsThenSplitsLikeGPT2() {
        let split = { (text: String) in BPEPretokenizer.smollm.split(Substring(text)) }
        #expect(split("Hello world's 2024!!  ok\n\nYes") ==
                ["Hello", " world", "'s", " ", "2", "0", "2", "4", "!!", " ", " ok", "\n", "\n", "Yes"]) // as the reference's 198, 198
        #expect(split("a  1") == ["a", "  ", "1"])
        #expect(split("x   ") == ["x", "   "])
        #expect(split("Ünïcödé café") == ["Ünïcödé", " café"])
    }

    /// Llama 3's words: contractions in any case, a symbol or space before letters, numbers by three, symbols with
    /// the line breaks after them, whitespace up to its last line break; Qwen2's the same with single digits.
    @Test func llama3AndQwen2PretokenizersCutAsTheirPatterns() {
        let llama3 = { (text: String) in BPEPretokenizer.llama3.split(Substring(text)) }, qwen2 = { (text: String) in BPEPretokenizer.qwen2.split(Substring(text)) }
        #expect(llama3("I'M here, DON'T 1234567!\n\n  ok") == ["I", "'M", " here", ",", " DON", "'T", " ", "123", "456", "7", "!\n\n", " ", " ok"])
        #expect(qwen2("I'M 2026") == ["I", "'M", " ", "2", "0", "2", "6"])
        #expect(llama3("a \n\n b") == ["a", " \n\n", " b"])
        #expect(llama3("(x) ...end") == ["(x", ")", " ...", "end"])
        #expect(llama3("tail   ") == ["tail", "   "])
        #expect(BPEPretokenizer.gpt2.split("it's ABC'S") == ["it", "'s", " ABC", "'", "S"])
        #expect(BPEPretokenizer.standard.split("x=1234, y") == ["x", "=", "123", "4", ",", " y"])
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

/// llama.cpp's ids for hard strings (`scripts/make_tokenizer_fixtures.py`): leading, repeated and trailing spaces,
/// newlines and tabs, digits, emoji, CJK, composed and combining accents, control bytes that need byte fallback,
/// special-token text parsed and not, code, empty text — for each real vocabulary Ember reads.
struct TokenizerFixture: Decodable {
    struct Case: Decodable {
        var text: String
        var parse_special: Bool
        var ids: [Int]
    }
    var model: String
    var cases: [Case]

    static func load(_ name: String) throws -> TokenizerFixture {
        try JSONDecoder().decode(TokenizerFixture.self, from: Data(contentsOf: References.fixtures.appendingPathComponent(name)))
    }
}

@Suite("Tokenizers against llama.cpp")
struct TokenizerFixtureTests {
    static func check(_ tokenizer: any TextTokenizer, _ fixture: TokenizerFixture) {
        var matched = 0
        for item in fixture.cases {
            let ids = tokenizer.encode(item.text, parseSpecial: item.parse_special, withBOS: nil)
            #expect(ids == item.ids, "\(fixture.model) \(item.text.debugDescription) parse_special \(item.parse_special)")
            if ids == item.ids { matched += 1 }
        }
        #expect(fixture.cases.count >= 58 && matched == fixture.cases.count)
    }

    @Test(.enabled(if: GemmaFile.present))
    func sentencePieceIdsEqualLlamaCpps() throws {
        let tokenizer = try GGUFTokenizer.load(GGUFFile(path: GemmaFile.path))
        #expect(tokenizer is SentencePieceTokenizer)
        Self.check(tokenizer, try TokenizerFixture.load("tokenizer_gemma3.json"))
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
    func byteLevelBPEIdsEqualLlamaCpps() throws {
        let tokenizer = try GGUFTokenizer.load(GGUFFile(path: GGUFReaderTests.smolLM2))
        #expect(tokenizer is ByteLevelBPE)
        Self.check(tokenizer, try TokenizerFixture.load("tokenizer_smollm2.json"))
    }

    /// Pieces that split a UTF-8 character (byte-fallback tokens) stream as whole characters; ▁ prints as a space.
    @Test(.enabled(if: GemmaFile.present))
    func sentencePieceStreamsWholeCharacters() throws {
        let tokenizer = try GGUFTokenizer.load(GGUFFile(path: GemmaFile.path))
        for text in ["emoji 😀🎉 and 日本語", "\u{0001}\u{007f} bytes", "  spaced   out\n\ttabs"] {
            let ids = tokenizer.encode(text, parseSpecial: false, withBOS: false)
            var decoder = StreamingDecoder()
            var streamed = ""
            for id in ids {
                let piece = decoder.append(tokenizer.bytes(of: id))
                #expect(!piece.unicodeScalars.contains("\u{FFFD}"), "no half character in \(text.debugDescription)")
                streamed += piece
            }
            streamed += decoder.finish()
            #expect(streamed == text)
        }
    }
}
