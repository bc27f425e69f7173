import ArgumentParser
import Ember
import Foundation

/// `ember list`: the models the manifest offers, whether each is fetched into the models folder, and its size.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the models Ember can fetch, whether each is here (and where), and their sizes on disk.")

    @Flag(help: "Print one JSON object: {\"models_directory\", \"models\": [{\"name\", \"family\", \"format\", \"fetched\", \"bytes\", \"path\", \"description\"}]}.")
    var json = false

    /// One model as `--json` prints it.
    struct Entry: Encodable {
        var name: String
        var family: String
        var format: String
        var fetched: Bool
        /// Bytes of its files on disk when fetched, else as the manifest gives them (nil when it does not).
        var bytes: Int?
        var path: String
        var description: String?
        var isDefault: Bool

        enum CodingKeys: String, CodingKey {
            case name, family, format, fetched, bytes, path, description
            case isDefault = "default"
        }
    }

    func run() throws {
        let directory = URL(fileURLWithPath: CommandEnvironment.modelsDirectory, isDirectory: true)
        let manifest = try ModelLocator.manifest(in: directory)
        let entries = manifest.models.map { model -> Entry in
            let locations = model.files.map { manifest.location(of: $0, in: model, modelsDirectory: directory) }
            let sizes = locations.map { (try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? Int) ?? nil }
            let fetched = !sizes.isEmpty && sizes.allSatisfy { $0 != nil }
            let declared = model.files.allSatisfy { $0.size != nil } ? model.files.reduce(0) { $0 + ($1.size ?? 0) } : nil
            return Entry(name: model.name, family: model.family, format: model.format, fetched: fetched,
                         bytes: fetched ? sizes.reduce(0) { $0 + ($1 ?? 0) } : declared,
                         path: (locations.first?.deletingLastPathComponent() ?? directory).path, description: model.description,
                         isDefault: model.name == manifest.defaultModel)
        }
        if json {
            struct Report: Encodable {
                var models_directory: String
                var models: [Entry]
            }
            try printJSON(Report(models_directory: directory.path, models: entries))
            return
        }
        print("models folder: \(directory.path)")
        for entry in entries {
            let size = entry.bytes.map { String(format: "%.1f MB", Double($0) / 1e6) } ?? "size unknown"
            let state = entry.fetched ? "fetched, \(size)" : "not fetched (\(size)): ember fetch \(entry.name)"
            print("  \(pad(entry.name + (entry.isDefault ? " *" : ""), 24)) \(pad(entry.family, 8)) \(pad(entry.format, 12)) \(state)")
        }
        print("(* the default; EMBER_MODELS_DIR moves the folder)")
    }
}
