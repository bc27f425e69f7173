import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

@Suite("safetensors reader")
struct SafetensorsTests {
    /// A safetensors file's bytes: the header's length (or `declaredLength`), the header, the data.
    static func bytes(header: String, data: [UInt8], declaredLength: UInt64? = nil) -> [UInt8] {
        withUnsafeBytes(of: (declaredLength ?? UInt64(header.utf8.count)).littleEndian) { Array($0) } + Array(header.utf8) + data
    }

    /// Those bytes in a new temporary file; the caller removes it.
    static func file(header: String, data: [UInt8], declaredLength: UInt64? = nil) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-test-\(UUID().uuidString).safetensors")
        try Data(bytes(header: header, data: data, declaredLength: declaredLength)).write(to: url)
        return url.path
    }

    static let valid = #"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[20,22]}}"#
    static let data: [UInt8] = [Float(1), 2, -3, 0.5].flatMap { value in withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } }
        + [0x00, 0x3c, 0x00, 0xc0] + [0x40, 0x40] // fp16 1, -2; bf16 3

    @Test func readsTensorsOfEveryFloatType() throws {
        let path = try Self.file(header: Self.valid, data: Self.data)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try SafetensorsFile(path: path)
        #expect(file.metadata["format"] == "pt")
        #expect(try file.floats("w", shape: [2, 2]) == [1, 2, -3, 0.5])
        #expect(try file.floats("h", shape: [2]) == [1, -2])
        #expect(try file.floats("b", shape: [1]) == [3])
        #expect(throws: ModelFileError.self) { try file.floats("w", shape: [4]) }
        #expect(throws: ModelFileError.self) { try file.floats("missing", shape: [1]) }
    }

    @Test func truncatedAtEveryLengthIsAnError() throws {
        let whole = Data(Self.bytes(header: Self.valid, data: Self.data))
        for length in 0..<(whole.count - 1) {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-cut-\(UUID().uuidString).safetensors")
            try whole.prefix(length).write(to: url)
            defer { try? FileManager.default.removeItem(at: url) }
            #expect(throws: ModelFileError.self, "cut at \(length)") { try SafetensorsFile(path: url.path) }
        }
    }

    @Test(arguments: [
        (#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#, "overlap"),
        (#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,64]}}"#, "w.data_offsets"),
        (#"{"w":{"dtype":"F32","shape":[3,2],"data_offsets":[0,16]}}"#, "w.data_offsets"),
        (#"{"w":{"dtype":"Q9","shape":[2,2],"data_offsets":[0,16]}}"#, "w.dtype"),
        (#"{"w":{"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]}}"#, "w.shape"),
        (#"{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}}"#, "w.shape"),
        (#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}}"#, "w.data_offsets"),
        (#"{"w":"not an object"}"#, "w"),
        (#"[1, 2, 3]"#, "header"),
        (#"{"w":{"dtype":"F32","shape":[2,2],"#, "header"),
    ])
    func hostileHeadersAreRefusedNamingTheField(header: String, field: String) throws {
        let path = try Self.file(header: header, data: Self.data)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try SafetensorsFile(path: path)
            Issue.record("accepted: \(header)")
        } catch let error as ModelFileError {
            #expect("\(error)".contains(field), "\(error)")
        }
    }

    @Test func absurdHeaderLengthIsRefusedWithoutAllocating() throws {
        for length: UInt64 in [0, 1, UInt64(Int64.max), UInt64.max, 1 << 40] {
            let path = try Self.file(header: Self.valid, data: Self.data, declaredLength: length)
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(throws: ModelFileError.self) { try SafetensorsFile(path: path) }
        }
    }
}

@Suite("WordPiece tokenizer")
struct WordPieceTests {
    static func tokenizer(maxLength: Int = 16) throws -> WordPiece {
        let tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", "cafe", ",", "!", "東", "京", "a"]
        return try WordPiece(vocabulary: Dictionary(uniqueKeysWithValues: tokens.enumerated().map { ($1, $0) }), maxLength: maxLength)
    }

    @Test func greedyLongestMatchWithContinuations() throws {
        let tokenizer = try Self.tokenizer()
        #expect(tokenizer.encode("unaffable") == [2, 4, 5, 6, 3])
        #expect(tokenizer.encode("HELLO, Café!") == [2, 7, 9, 8, 10, 3], "lower-cased, accent stripped, punctuation split")
        #expect(tokenizer.encode("unknownword") == [2, 1, 3], "a word it cannot cover whole is [UNK]")
        #expect(tokenizer.encode("東京") == [2, 11, 12, 3], "CJK characters split apart")
        #expect(tokenizer.encode("  \t\u{0}a\u{200B}  ") == [2, 13, 3], "whitespace and control characters cleaned")
    }

    @Test func truncatesToTheMaximumLength() throws {
        let tokenizer = try Self.tokenizer(maxLength: 5)
        #expect(tokenizer.encode("a a a a a a a") == [2, 13, 13, 13, 3])
    }

    @Test func missingSpecialTokensAreAnError() {
        #expect(throws: ModelFileError.self) { try WordPiece(vocabulary: ["[UNK]": 0, "[CLS]": 1]) }
    }
}
