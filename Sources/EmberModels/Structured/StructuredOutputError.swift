/// Why an output format cannot be used: the schema is not JSON, a keyword's value is wrong, or a keyword is one
/// Ember cannot enforce while generating (it never ignores one silently). Each names the place in the schema
/// (`#/properties/age/minimum`), what is there and what is expected.
public enum StructuredOutputError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The schema text does not parse as JSON.
    case notJSON(String)
    /// A keyword's value is not what JSON Schema allows there.
    case invalidSchema(path: String, found: String, expected: String)
    /// A keyword Ember does not enforce; `hint` says what to write instead.
    case unsupported(path: String, keyword: String, hint: String)
    /// No value can satisfy the schema (an empty range, `minLength` above `maxLength`, …).
    case unsatisfiable(path: String, reason: String)
    /// The grammar the schema needs is larger than Ember builds.
    case tooLarge(path: String, size: Int, limit: Int)

    /// The place in the schema, what is wrong there and what to do.
    public var description: String {
        switch self {
        case let .notJSON(reason):
            return "JSON schema: not JSON (\(reason)); pass the schema as a JSON object"
        case let .invalidSchema(path, found, expected):
            return "JSON schema at \(path): found \(found), expected \(expected)"
        case let .unsupported(path, keyword, hint):
            return "JSON schema at \(path): the keyword \"\(keyword)\" is not supported for generation; \(hint)"
        case let .unsatisfiable(path, reason):
            return "JSON schema at \(path): no value satisfies it (\(reason))"
        case let .tooLarge(path, size, limit):
            return "JSON schema at \(path): it needs a grammar of \(size) elements, more than the limit of \(limit); "
                + "lower maxLength/maxItems or simplify the schema"
        }
    }
}
