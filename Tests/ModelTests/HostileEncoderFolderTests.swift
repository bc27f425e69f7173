import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// A sentence-transformers folder with one field changed the way a careless or hostile writer would: each is refused
/// naming the file and the field — no default silently put in place of a wrong type, no layer count the tensors
/// disagree with, no token id of 1.5 or `true` read as 1.
@Suite("Hostile encoder folders", .enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")))
struct HostileEncoderFolderTests {
    /// A copy of MiniLM's folder (the weights linked, not copied) with `file`'s JSON changed by `change`.
    static func folder(editing file: String, _ change: (inout [String: Any]) -> Void) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-minilm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("1_Pooling"), withIntermediateDirectories: true)
        for name in ["model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json", "modules.json", "1_Pooling/config.json"] {
            let source = References.miniLM + "/" + name, destination = folder.appendingPathComponent(name).path
            if name == file {
                var object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: source))) as! [String: Any]
                change(&object)
                try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: destination))
            } else {
                try FileManager.default.createSymbolicLink(atPath: destination, withDestinationPath: source)
            }
        }
        return folder.path
    }

    static let edits: [(file: String, field: String, change: @Sendable (inout [String: Any]) -> Void)] = [
        ("config.json", "num_hidden_layers", { $0["num_hidden_layers"] = 5 }),
        ("config.json", "num_hidden_layers", { $0["num_hidden_layers"] = 1 }),
        ("config.json", "num_hidden_layers", { $0["num_hidden_layers"] = 6.5 }),
        ("config.json", "hidden_size", { $0["hidden_size"] = true }),
        ("config.json", "layer_norm_eps", { $0["layer_norm_eps"] = "tiny" }),
        ("config.json", "layer_norm_eps", { $0["layer_norm_eps"] = -1 }),
        ("config.json", "hidden_act", { $0["hidden_act"] = 3 }),
        ("config.json", "vocab_size", { $0["vocab_size"] = 1e300 }),
        ("sentence_bert_config.json", "max_seq_length", { $0["max_seq_length"] = "256" }),
        ("1_Pooling/config.json", "pooling_mode_mean_tokens", { $0["pooling_mode_mean_tokens"] = "yes" }),
        ("1_Pooling/config.json", "pooling_mode_mean_tokens", { $0["pooling_mode_cls_token"] = true }),
        ("tokenizer.json", "model.vocab[[UNK]]", { root in
            var model = root["model"] as! [String: Any], vocab = model["vocab"] as! [String: Any]
            vocab["[UNK]"] = 100.5
            model["vocab"] = vocab
            root["model"] = model
        }),
        ("tokenizer.json", "model.vocab[[CLS]]", { root in
            var model = root["model"] as! [String: Any], vocab = model["vocab"] as! [String: Any]
            vocab["[CLS]"] = true
            model["vocab"] = vocab
            root["model"] = model
        }),
        ("tokenizer.json", "lowercase", { root in root["normalizer"] = ["lowercase": "no"] }),
    ]

    @Test(arguments: 0..<edits.count)
    func aWrongFieldIsRefusedNamingIt(index: Int) throws {
        let edit = Self.edits[index]
        let folder = try Self.folder(editing: edit.file, edit.change)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let error = try #require(throws: ModelFileError.self) {
            try ArchitectureRegistry.standard.loadEmbedder(directory: folder, context: TestCompute.context)
        }
        #expect(error.description.contains(edit.field), "\(edit.file) \(edit.field): \(error)")
    }

    /// Something that is not a regular file where a file is expected — a link to /dev/zero, whose reading never ends,
    /// or a FIFO, whose opening waits for a writer — is refused at once, by what it is and naming the file.
    @Test(arguments: ["config.json", "tokenizer.json", "modules.json", "1_Pooling/config.json", "model.safetensors"])
    func aDeviceOrAFIFOInPlaceOfAFileIsRefused(file: String) throws {
        for special in ["/dev/zero", "FIFO"] {
            let folder = try Self.folder(editing: "config.json") { _ in }
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let path = (folder as NSString).appendingPathComponent(file)
            try FileManager.default.removeItem(atPath: path)
            if special == "FIFO" {
                #expect(mkfifo(path, 0o600) == 0)
            } else {
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: special)
            }
            let error = try #require(throws: ModelFileError.self) {
                try ArchitectureRegistry.standard.loadEmbedder(directory: folder, context: TestCompute.context)
            }
            #expect(error.description.contains(file) && error.description.contains(special == "FIFO" ? "a FIFO" : "a character device"),
                    "\(file) as \(special): \(error)")
        }
    }

    /// An unreadable pooling config is an error, not mean pooling.
    @Test func anUnreadablePoolingConfigIsRefused() throws {
        let folder = try Self.folder(editing: "config.json") { _ in }
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pooling = (folder as NSString).appendingPathComponent("1_Pooling/config.json")
        try FileManager.default.removeItem(atPath: pooling)
        try Data("{ not json".utf8).write(to: URL(fileURLWithPath: pooling))
        let error = try #require(throws: ModelFileError.self) {
            try ArchitectureRegistry.standard.loadEmbedder(directory: folder, context: TestCompute.context)
        }
        #expect(error.description.contains("1_Pooling/config.json"), "\(error)")
    }
}
