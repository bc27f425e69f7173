import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// Every number a decoder's metadata holds, at its extremes (0, 1, 2³¹, 2³²−1, 2⁶⁴−1, −1, NaN, ±∞): Ember either
/// refuses the file with a ModelFileError naming the key, or loads it with the number within its bounds — no crash,
/// no allocation sized by a hostile count, no silent load of nonsense (a block count the tensors disagree with, a
/// zero context, a NaN RoPE base or epsilon).
@Suite("Hostile metadata")
struct HostileMetadataTests {
    static let integers: [GGUFValue] = [.uint32(0), .uint32(1), .uint32(1 << 31), .uint32(.max), .uint64(.max), .int32(-1), .int64(.min)]
    static let reals: [GGUFValue] = [.float32(.nan), .float32(.infinity), .float32(-.infinity), .float32(0), .float32(-1), .float32(1e30)]

    /// Keys whose extreme values must be refused (they decide shapes or arithmetic).
    static let mustRefuseAnyExtreme: Set<String> = ["llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
                                                    "llama.attention.head_count"]

    @Test func everyNumericKeyAtItsExtremes() throws {
        let base = SyntheticGGUF.tinyLlama()
        var mutants = 0, refused = 0
        for (index, (key, value)) in base.metadata.enumerated() {
            let candidates: [GGUFValue] = switch value {
            case .float32, .float64: Self.reals
            case .uint8, .int8, .uint16, .int16, .uint32, .int32, .uint64, .int64: Self.integers
            default: []
            }
            for candidate in candidates {
                var gguf = base
                gguf.metadata[index].1 = candidate
                let path = try gguf.write()
                defer { try? FileManager.default.removeItem(atPath: path) }
                mutants += 1
                do {
                    let model = try #require(try TestCompute.textGenerator(path: path) as? DecoderModel)
                    let config = model.config
                    #expect(!Self.mustRefuseAnyExtreme.contains(key) || candidate == value, "\(key) = \(candidate) loaded")
                    #expect(config.contextLength >= 1 && config.ropeBase.isFinite && config.ropeBase > 0, "\(key) = \(candidate)")
                    #expect(config.rmsEpsilon.isFinite && config.rmsEpsilon > 0, "\(key) = \(candidate)")
                    #expect(config.layers == 2 && config.hidden == 64, "\(key) = \(candidate)")
                } catch let error as ModelFileError {
                    refused += 1
                    #expect(error.description.contains(key) || error.description.contains("tensors["), "\(key) = \(candidate): \(error)")
                }
            }
        }
        #expect(mutants >= 50 && refused >= 45, "\(refused) of \(mutants) refused")
    }

    /// The crash the issue reported: a block count of 2³²−1 was an allocation of 309 GB before any check.
    @Test(arguments: [UInt32.max, 1 << 31, 3, 0])
    func aBlockCountTheTensorsDisagreeWithIsRefused(count: UInt32) throws {
        var gguf = SyntheticGGUF.tinyLlama()
        let index = try #require(gguf.metadata.firstIndex { $0.0 == "llama.block_count" })
        gguf.metadata[index].1 = .uint32(count)
        let path = try gguf.write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = try #require(throws: ModelFileError.self) { try TestCompute.textGenerator(path: path) }
        #expect(error.description.contains("llama.block_count"), "\(error)")
    }

    /// A model path that is a device or a FIFO is refused by what it is, at once: /dev/zero was "truncated: magic at
    /// byte 0 needs 4 bytes, 0 remain", and a FIFO with no writer kept the loader waiting for ever.
    @Test func aDeviceOrAFIFOIsNotAModelFile() throws {
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("ember-fifo-\(UUID().uuidString).gguf").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { try? FileManager.default.removeItem(atPath: fifo) }
        for (path, kind) in [("/dev/zero", "a character device"), (fifo, "a FIFO"), (NSTemporaryDirectory(), "a directory")] {
            let error = try #require(throws: ModelFileError.self) { try GGUFFile(path: path) }
            #expect(error == .unreadable(file: path, reason: "\(kind)\(kind == "a FIFO" ? " (named pipe)" : ""), not a regular file; "
                                                             + "expected a model file on disk"), "\(error)")
        }
    }

    /// A norm weight of NaN is refused naming the tensor (a small tensor: checked whole at load).
    @Test func nanInASmallTensorIsRefused() throws {
        var gguf = SyntheticGGUF.tinyLlama()
        let index = try #require(gguf.tensors.firstIndex { $0.name == "output_norm.weight" })
        withUnsafeBytes(of: Float.nan.bitPattern.littleEndian) { gguf.tensors[index].data.replaceSubrange(8..<12, with: $0) }
        let path = try gguf.write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = try #require(throws: ModelFileError.self) { try TestCompute.textGenerator(path: path) }
        #expect(error.description.contains("output_norm.weight") && error.description.contains("NaN"), "\(error)")
    }

    /// A tensor relabelled to a smaller type (F32 read as F16, as Q8_0 read as Q4_0 would be) leaves most of its
    /// bytes unread: refused naming the tensor, the type and both byte counts, instead of computing with garbage.
    @Test func aRelabelledTensorTypeIsRefused() throws {
        let source = References.fixtures.appendingPathComponent("tiny/tiny-qwen3.gguf")
        let data = try Data(contentsOf: source)
        var bytes = [UInt8](data)
        let name = Array("blk.0.attn_q.weight".utf8)
        let at = try #require(data.range(of: Data(name))?.lowerBound)
        let dims = Int(bytes[at + name.count])                       // n_dims (u32, little-endian)
        let typeAt = at + name.count + 4 + 8 * dims
        #expect(bytes[typeAt] == 0, "F32 in the fixture")
        bytes[typeAt] = 1                                            // now says F16
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("relabelled-\(getpid()).gguf").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = #expect(throws: ModelFileError.self) { try GGUFFile(path: path) }
        let message = "\(error.map { "\($0)" } ?? "")"
        #expect(message.contains("tensors[blk.0.attn_q.weight].type") && message.contains("f16 [64, 128]") && message.contains("16384") && message.contains("relabelled"), "\(message)")
        #expect(try GGUFFile(path: source.path).tensors.count > 0, "the original loads")
    }
}
