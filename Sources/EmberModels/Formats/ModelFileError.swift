/// Why a model file could not be used. Every case names the file, the field
/// (or tensor) and the values found and expected; no malformed or hostile
/// file crashes Ember or makes it allocate absurd amounts of memory.
public enum ModelFileError: Error, Equatable, CustomStringConvertible {
    /// The file could not be opened or mapped.
    case unreadable(file: String, reason: String)
    /// The file ends before a field does.
    case truncated(file: String, field: String, offset: Int, needed: Int, available: Int)
    /// A field holds a value outside what the format allows.
    case invalidField(file: String, field: String, found: String, expected: String)

    /// A one-line human-readable form, e.g. "<file>: version is 1, expected 2 or 3".
    public var description: String {
        switch self {
        case let .unreadable(file, reason):
            "\(file): cannot read: \(reason)"
        case let .truncated(file, field, offset, needed, available):
            "\(file): truncated: \(field) at byte \(offset) needs \(needed) bytes, \(available) remain"
        case let .invalidField(file, field, found, expected):
            "\(file): \(field) is \(found), expected \(expected)"
        }
    }
}
