import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

@Suite("GGUF reader")
struct GGUFReaderTests {
    static func sample() -> SyntheticGGUF {
        var gguf = SyntheticGGUF()
        gguf.metadata = [
            ("general.architecture", .string("llama")),
            ("llama.block_count", .uint32(2)),
            ("llama.rope.freq_base", .float32(10000)),
            ("test.int8", .int8(-3)), ("test.uint16", .uint16(65535)), ("test.int16", .int16(-300)),
            ("test.int32", .int32(-70000)), ("test.uint64", .uint64(1 << 40)), ("test.int64", .int64(-(1 << 40))),
            ("test.float64", .float64(0.125)), ("test.bool", .bool(true)), ("test.uint8", .uint8(7)),
            ("tokenizer.ggml.tokens", .array([.string("<s>"), .string("hello"), .string("ĠwÃ¶rld")])),
            ("tokenizer.ggml.scores", .array([.float32(0), .float32(-1), .float32(-2)])),
        ]
        var generator = SplitMix64(seed: 5)
        func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
        var q41 = random(4 * 2 * 20)
        for block in 0..<8 { q41[block * 20 + 1] &= 0x3b; q41[block * 20 + 3] &= 0x3b } // finite fp16 d and m
        gguf.tensors = [
            .init(name: "token_embd.weight", dimensions: [64, 3], typeID: 0,
                  data: (0..<192).flatMap { index in withUnsafeBytes(of: Float(index).bitPattern.littleEndian) { Array($0) } }),
            .init(name: "blk.0.attn_q.weight", dimensions: [64, 4], typeID: 3, data: q41),
            .init(name: "output_norm.weight", dimensions: [64], typeID: 0, data: [UInt8](repeating: 0, count: 256)),
        ]
        return gguf
    }

    @Test func readsMetadataOfEveryTypeAndTensors() throws {
        let path = try Self.sample().write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try GGUFFile(path: path)
        #expect(file.version == 3)
        #expect(file.metadata["general.architecture"]?.string == "llama")
        #expect(file.metadata["llama.block_count"]?.integer == 2)
        #expect(file.metadata["llama.rope.freq_base"]?.number == 10000)
        #expect(file.metadata["test.int8"] == .int8(-3) && file.metadata["test.int64"] == .int64(-(1 << 40)))
        #expect(file.metadata["test.bool"]?.bool == true && file.metadata["test.float64"]?.number == 0.125)
        #expect(file.metadata["tokenizer.ggml.tokens"]?.array?.compactMap(\.string) == ["<s>", "hello", "ĠwÃ¶rld"])
        #expect(file.tensors.map(\.name) == ["token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"])
        let embedding = try file.tensor("token_embd.weight")
        #expect(embedding.dimensions == [64, 3] && embedding.byteCount == 768 && embedding.type.name == "F32")
        #expect(file.bytes(of: embedding).load(fromByteOffset: 4 * 70, as: Float.self) == 70)
        let q = try file.weightMatrix("blk.0.attn_q.weight")
        #expect(q.type == .q4_1 && q.rows == 4 && q.columns == 64)
        #expect(file.dataOffset % file.alignment == 0)
        #expect(throws: ModelFileError.self) { try file.weightMatrix("output_norm.weight") }
        #expect(throws: ModelFileError.self) { try file.tensor("missing") }
    }

    /// A file cut at every length before its end is refused, never crashes.
    @Test func truncatedAtEveryLengthIsAnError() throws {
        let (bytes, _) = Self.sample().encode()
        for length in 0..<bytes.count {
            let path = try SyntheticGGUF().write(Array(bytes[0..<length]))
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(throws: ModelFileError.self, "length \(length)") { try GGUFFile(path: path) }
        }
    }

    /// Every header byte flipped, one at a time: an error or a valid reading, never a crash.
    @Test func flippedHeaderBytesNeverCrash() throws {
        let (bytes, headerLength) = Self.sample().encode()
        var refused = 0
        for position in 0..<headerLength {
            var damaged = bytes
            damaged[position] ^= 0xff
            let path = try SyntheticGGUF().write(damaged)
            defer { try? FileManager.default.removeItem(atPath: path) }
            do { _ = try GGUFFile(path: path) } catch is ModelFileError { refused += 1 }
        }
        #expect(refused > headerLength / 2, "most damage is detected (\(refused) of \(headerLength))")
    }

    @Test func hugeCountsAndLengthsAreRefusedWithoutAllocating() throws {
        let bytes = Self.sample().encode().bytes
        func patch(_ offset: Int, _ value: UInt64) -> [UInt8] {
            var copy = bytes
            withUnsafeBytes(of: value.littleEndian) { for (i, byte) in $0.enumerated() { copy[offset + i] = byte } }
            return copy
        }
        for (offset, field) in [(8, "tensor_count"), (16, "metadata_kv_count")] {
            let path = try SyntheticGGUF().write(patch(offset, .max))
            defer { try? FileManager.default.removeItem(atPath: path) }
            let error = try #require(throws: ModelFileError.self) { try GGUFFile(path: path) }
            #expect(error.description.contains(field))
        }
        let stringLength = try SyntheticGGUF().write(patch(24, 1 << 50)) // the first key's length
        defer { try? FileManager.default.removeItem(atPath: stringLength) }
        #expect(throws: ModelFileError.self) { try GGUFFile(path: stringLength) }
    }

    @Test func magicVersionAndTensorChecksNameTheField() throws {
        var gguf = Self.sample()
        gguf.version = 1
        let oldVersion = try gguf.write()
        defer { try? FileManager.default.removeItem(atPath: oldVersion) }
        #expect(throws: ModelFileError.invalidField(file: oldVersion, field: "version", found: "1", expected: "2 or 3")) {
            try GGUFFile(path: oldVersion)
        }
        var bad = Self.sample()
        bad.tensors[1].typeID = 99
        let badType = try bad.write()
        defer { try? FileManager.default.removeItem(atPath: badType) }
        let error = try #require(throws: ModelFileError.self) { try GGUFFile(path: badType) }
        #expect(error.description.contains("tensors[blk.0.attn_q.weight].type") && error.description.contains("99"))
        var ragged = Self.sample()
        ragged.tensors[1].dimensions = [60, 4]
        let raggedPath = try ragged.write()
        defer { try? FileManager.default.removeItem(atPath: raggedPath) }
        #expect(throws: ModelFileError.self) { try GGUFFile(path: raggedPath) }
        let notGGUF = try SyntheticGGUF().write(Array("PK\u{03}\u{04} not a model".utf8))
        defer { try? FileManager.default.removeItem(atPath: notGGUF) }
        let magicError = try #require(throws: ModelFileError.self) { try GGUFFile(path: notGGUF) }
        #expect(magicError.description.contains("magic"))
    }

    /// A type Ember reads but does not compute with is refused naming the tensor, the type and what is supported.
    @Test func unsupportedTypeIsRefusedNamingTensorTypeAndTheSupportedOnes() throws {
        var gguf = Self.sample()
        gguf.tensors[1] = .init(name: "blk.0.attn_q.weight", dimensions: [256, 2], typeID: 16, data: [UInt8](repeating: 0, count: 2 * 66))
        let path = try gguf.write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try GGUFFile(path: path)
        let error = try #require(throws: ModelFileError.self) { try file.weightMatrix("blk.0.attn_q.weight") }
        let text = error.description
        #expect(text.contains("tensors[blk.0.attn_q.weight].type") && text.contains("IQ2_XXS"), "\(text)")
        for supported in ["Q4_K", "Q5_0", "Q6_K", "IQ4_XS", "BF16", "Q2_K"] { #expect(text.contains(supported), "\(supported): \(text)") }
        #expect(text.contains("llama-quantize"))
    }

    /// The real SmolLM2 file, when `make models` has fetched it.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
    func readsSmolLM2() throws {
        let file = try GGUFFile(path: Self.smolLM2)
        #expect(file.metadata["general.architecture"]?.string == "llama")
        #expect(file.metadata["llama.block_count"]?.integer == 30)
        #expect(file.metadata["llama.embedding_length"]?.integer == 576)
        #expect(file.metadata["llama.attention.head_count"]?.integer == 9)
        #expect(file.metadata["llama.attention.head_count_kv"]?.integer == 3)
        #expect(file.metadata["tokenizer.ggml.tokens"]?.array?.count == 49152)
        let q = try file.tensor("blk.0.attn_q.weight")
        #expect(q.type.name == "Q4_1" && q.dimensions == [576, 576])
        let embedding = try file.tensor("token_embd.weight")
        #expect(embedding.type.name == "Q8_0" && embedding.dimensions == [576, 49152])
    }

    static let smolLM2 = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf").path
}
