import EmberCore
import Foundation

/// Finds a model's file from what a user types: a path to a file, or a
/// model name from the manifest (`smollm2-135m-instruct`), fetched into
/// `<models>/<name>/` by `ember fetch` / `make models`.
public enum ModelLocator {
    /// The models directory when the host names none: `models` under the current directory when it holds a
    /// manifest (a checkout of Ember), else the per-user cache, `~/.cache/ember/models`. The CLI passes
    /// `EMBER_MODELS_DIR` instead when it is set, and honours `XDG_CACHE_HOME`.
    public static var defaultModelsDirectory: URL {
        defaultModelsDirectory(currentDirectory: FileManager.default.currentDirectoryPath, cacheHome: nil)
    }

    /// ``defaultModelsDirectory`` from `currentDirectory` and the cache folder (`XDG_CACHE_HOME`; nil: `~/.cache`).
    public static func defaultModelsDirectory(currentDirectory: String, cacheHome: String?) -> URL {
        let local = URL(fileURLWithPath: currentDirectory, isDirectory: true).appendingPathComponent("models", isDirectory: true)
        if FileManager.default.fileExists(atPath: local.appendingPathComponent("manifest.json").path) { return local }
        let cache = cacheHome.flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache", isDirectory: true)
        return cache.appendingPathComponent("ember", isDirectory: true).appendingPathComponent("models", isDirectory: true)
    }

    /// The manifest that lists the models of `modelsDirectory`: its own `manifest.json`, else the one Ember ships
    /// with (``ModelManifest/builtIn()``).
    public static func manifest(in modelsDirectory: URL) throws -> ModelManifest {
        let own = modelsDirectory.appendingPathComponent("manifest.json")
        return FileManager.default.fileExists(atPath: own.path) ? try ModelManifest(contentsOf: own) : try ModelManifest.builtIn()
    }

    /// The path of the model file for `nameOrPath`; a name that is in the
    /// manifest but not fetched yet is an error that says how to fetch it.
    /// Something that names a path (a "/" in it, or a model file's extension) and does not exist is
    /// "no such file", not an unknown model name; a folder where a file is expected is refused too.
    public static func path(for nameOrPath: String, modelsDirectory: URL = ModelLocator.defaultModelsDirectory) throws -> String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: nameOrPath, isDirectory: &isDirectory) {
            guard !isDirectory.boolValue else {
                throw ModelCatalogError.unreadable(file: nameOrPath, reason: "a folder; expected a model file (.gguf) or a model name")
            }
            return nameOrPath
        }
        if nameOrPath.contains("/") || [".gguf", ".safetensors", ".bin"].contains(where: { nameOrPath.lowercased().hasSuffix($0) }) {
            throw ModelCatalogError.unreadable(file: nameOrPath, reason: "no such file")
        }
        let manifest = try manifest(in: modelsDirectory)
        let entry = try manifest.model(named: nameOrPath)
        guard let first = entry.files.first else {
            throw ModelCatalogError.invalidField(file: "manifest.json", field: "models[\(nameOrPath)].files", found: "[]", expected: "a file")
        }
        let location = manifest.location(of: first, in: entry, modelsDirectory: modelsDirectory)
        guard FileManager.default.fileExists(atPath: location.path) else {
            throw ModelCatalogError.unreadable(
                file: location.path,
                reason: "not fetched yet into \(modelsDirectory.path): run `ember fetch \(nameOrPath)` from any folder that is "
                    + "not an Ember checkout (it downloads there), or point Ember at the folder that has it — a host app: "
                    + "Runtime.Configuration's modelsDirectory (C: ember_runtime_options_t.models_directory), the CLI: EMBER_MODELS_DIR")
        }
        return location.path
    }

    /// The folder of a model made of several files (a sentence-transformers
    /// folder): `nameOrPath` itself when it is a folder, else the folder of its file.
    public static func directory(for nameOrPath: String, modelsDirectory: URL = ModelLocator.defaultModelsDirectory) throws -> String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: nameOrPath, isDirectory: &isDirectory), isDirectory.boolValue { return nameOrPath }
        return (try path(for: nameOrPath, modelsDirectory: modelsDirectory) as NSString).deletingLastPathComponent
    }
}
