import EmberModels
import Foundation
import Testing

/// Models found the way users expect: `models/` here in a checkout, else the per-user cache; the manifest Ember
/// ships with when that folder has none; an error that says where it looked and how to fetch.
@Suite("Models folder")
struct ModelsFolderTests {
    static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-models-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// The built-in copy is the project's manifest (scripts/embed_manifest.py writes it; run it after an edit).
    @Test func theBuiltInManifestIsTheProjects() throws {
        let project = try JSONSerialization.jsonObject(with: Data(contentsOf: ModelManifestTests.projectManifest)) as? NSDictionary
        let builtIn = try JSONSerialization.jsonObject(with: Data(ModelManifest.builtInJSON.utf8)) as? NSDictionary
        #expect(project != nil && project == builtIn, "run scripts/embed_manifest.py")
        #expect(try ModelManifest.builtIn().defaultModel == "smollm2-135m-instruct")
    }

    @Test func aCheckoutsModelsFolderElseThePerUserCache() throws {
        let checkout = try Self.temporaryFolder(), elsewhere = try Self.temporaryFolder(), cache = try Self.temporaryFolder()
        defer { [checkout, elsewhere, cache].forEach { try? FileManager.default.removeItem(at: $0) } }
        try FileManager.default.createDirectory(at: checkout.appendingPathComponent("models"), withIntermediateDirectories: true)
        try Data(ModelManifest.builtInJSON.utf8).write(to: checkout.appendingPathComponent("models/manifest.json"))
        #expect(ModelLocator.defaultModelsDirectory(currentDirectory: checkout.path, cacheHome: cache.path).standardizedFileURL.path
                == checkout.appendingPathComponent("models").standardizedFileURL.path)
        #expect(ModelLocator.defaultModelsDirectory(currentDirectory: elsewhere.path, cacheHome: cache.path).standardizedFileURL.path
                == cache.appendingPathComponent("ember/models").standardizedFileURL.path)
        let home = ModelLocator.defaultModelsDirectory(currentDirectory: elsewhere.path, cacheHome: nil).path
        #expect(home.hasSuffix("/.cache/ember/models"), "\(home)")
    }

    /// A folder without a manifest uses the built-in one; a model not fetched there says where and how.
    @Test func aModelNotFetchedSaysWhereItLookedAndHowToFetch() throws {
        let empty = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: empty) }
        #expect(try ModelLocator.manifest(in: empty).defaultModel == "smollm2-135m-instruct")
        do {
            _ = try ModelLocator.path(for: "smollm2-135m-instruct", modelsDirectory: empty)
            Issue.record("a model that is not there was found")
        } catch {
            let message = "\(error)"
            #expect(message.contains(empty.path) && message.contains("ember fetch smollm2-135m-instruct")
                    && message.contains("EMBER_MODELS_DIR"), "\(message)")
        }
        #expect(throws: ModelCatalogError.self) { try ModelLocator.path(for: "no-such-model", modelsDirectory: empty) }
    }
}
