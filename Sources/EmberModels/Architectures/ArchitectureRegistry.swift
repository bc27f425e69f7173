import EmberCore
import Foundation

/// Which model families Ember can run, keyed by what a file says it is:
/// GGUF's `general.architecture` for text generators, `config.json`'s
/// `model_type` for sentence embedders. Loading reads that field and hands the
/// file to the family's loader, so the runtime, the C API, the CLI and the
/// server never name a concrete model type.
///
/// A decoder family is mostly data: ``register(textGenerator:_:)`` with a
/// ``DecoderDescription``. A host may add its own loaders.
public struct ArchitectureRegistry: Sendable {
    /// Makes a text generator from an opened GGUF file, into a compute context.
    public typealias TextGeneratorLoader = @Sendable (_ file: GGUFFile, _ context: ComputeContext) throws -> any TextGenerator
    /// Makes an embedder from a model folder, into a compute context.
    public typealias EmbedderLoader = @Sendable (_ directory: String, _ context: ComputeContext) throws -> any Embedder

    private var generators: [String: TextGeneratorLoader] = [:]
    private var embedders: [String: EmbedderLoader] = [:]

    /// An empty registry (``standard`` has Ember's families).
    public init() {}

    /// Ember's families: `llama` (SmolLM2, Llama 2/3), `qwen2`, `qwen3`, `gemma3`, and `bert` (MiniLM and other
    /// sentence-transformers BERTs).
    public static var standard: ArchitectureRegistry {
        var registry = ArchitectureRegistry()
        for description in [DecoderDescription.llama, .qwen2, .qwen3, .gemma3] { registry.register(textGenerator: description) }
        registry.register(embedder: "bert") { directory, context in try BertModel(directory: directory, context: context) }
        return registry
    }

    /// Runs GGUF files whose `general.architecture` is `description.architecture` as that decoder.
    public mutating func register(textGenerator description: DecoderDescription) {
        register(textGenerator: description.architecture) { file, context in
            try DecoderModel(file: file, description: description, context: context)
        }
    }

    /// Runs GGUF files whose `general.architecture` is `architecture` with `loader`.
    public mutating func register(textGenerator architecture: String, _ loader: @escaping TextGeneratorLoader) {
        generators[architecture] = loader
    }

    /// Runs model folders whose `config.json` says `model_type: modelType` with `loader`.
    public mutating func register(embedder modelType: String, _ loader: @escaping EmbedderLoader) {
        embedders[modelType] = loader
    }

    /// The GGUF architectures it runs, sorted.
    public var textGeneratorArchitectures: [String] { generators.keys.sorted() }
    /// The `model_type`s it embeds with, sorted.
    public var embedderArchitectures: [String] { embedders.keys.sorted() }

    /// Opens the GGUF file at `path` and loads it as the family its `general.architecture` names; a folder (an
    /// embedding model) or an unknown family is refused, naming the path or field and what Ember runs.
    public func loadTextGenerator(path: String, context: ComputeContext) throws -> any TextGenerator {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ModelFileError.invalidField(file: path, field: "(path)", found: "a folder (an embedding model)",
                                              expected: "a GGUF file of a text model (\(textGeneratorArchitectures.joined(separator: ", ")))")
        }
        let folder = (path as NSString).deletingLastPathComponent
        if !Self.startsWithGGUFMagic(path), FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent("config.json")) {
            throw ModelFileError.invalidField(file: path, field: "(kind)", found: "an embedding model (a folder with config.json)",
                                              expected: "a GGUF text-generation model; use this one to embed (ember embed, Runtime.embeddingModel)")
        }
        let file = try GGUFFile(path: path)
        let architecture = try file.require("general.architecture").string ?? ""
        guard let loader = generators[architecture] else {
            throw ModelFileError.invalidField(file: path, field: "general.architecture", found: architecture,
                                              expected: "a family Ember runs (\(textGeneratorArchitectures.joined(separator: ", ")))")
        }
        return try loader(file, context)
    }

    /// Loads the model folder at `directory` as the family its `config.json`'s `model_type` names.
    public func loadEmbedder(directory: String, context: ComputeContext) throws -> any Embedder {
        let configPath = (directory as NSString).appendingPathComponent("config.json")
        guard FileManager.default.fileExists(atPath: configPath) else {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            if let gguf = files.sorted().first(where: { $0.lowercased().hasSuffix(".gguf") }) {
                throw ModelFileError.invalidField(file: (directory as NSString).appendingPathComponent(gguf), field: "(kind)",
                                                  found: "a GGUF text-generation model",
                                                  expected: "an embedding model (a folder with config.json); generate or chat with this one instead (ember generate, Runtime.languageModel)")
            }
            throw ModelFileError.unreadable(file: configPath, reason: "missing or unreadable (an embedding model is a folder with config.json)")
        }
        let data = try MappedFile.contents(ofSmallFile: configPath)
        guard let settings = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw ModelFileError.invalidField(file: configPath, field: "(root)", found: "not a JSON object", expected: "a JSON object")
        }
        let modelType = settings["model_type"] as? String ?? "missing"
        guard let loader = embedders[modelType] else {
            throw ModelFileError.invalidField(file: configPath, field: "model_type", found: modelType,
                                              expected: "a family Ember embeds with (\(embedderArchitectures.joined(separator: ", ")))")
        }
        return try loader(directory, context)
    }

    /// Whether the file at `path` begins with GGUF's magic (false when it cannot be read or is not a regular file:
    /// mapped as the loader maps it, so a FIFO is not waited on).
    static func startsWithGGUFMagic(_ path: String) -> Bool {
        guard let file = try? MappedFile(path: path) else { return false }
        return file.bytes.starts(with: "GGUF".utf8)
    }
}
