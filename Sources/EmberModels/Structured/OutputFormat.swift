/// What a generation must produce: free text, any JSON object, or JSON valid against a schema. With a JSON format
/// the sampler only ever picks tokens that keep the text a prefix of a valid value (the mask is applied before
/// temperature, top-k, top-p and min-p), and the generation ends as soon as the value is complete.
public enum OutputFormat: Sendable, Hashable {
    /// Any text (no constraint).
    case text
    /// Any JSON object (OpenAI's `response_format: {"type": "json_object"}`).
    case jsonObject
    /// JSON valid against this JSON Schema, given as JSON text (see `JSONSchemaGrammar` for the keywords).
    case jsonSchema(String)

    /// The grammar of the format; nil for ``text``. Throws ``StructuredOutputError`` for a schema Ember cannot enforce.
    func grammar() throws -> Grammar? {
        switch self {
        case .text: return nil
        case .jsonObject: return JSONSchemaGrammar.anyObject()
        case let .jsonSchema(text): return try JSONSchemaGrammar.compile(schemaText: text)
        }
    }

    /// Throws ``StructuredOutputError`` when the schema cannot be enforced (not JSON, a wrong or unsupported keyword).
    public func validate() throws { _ = try grammar() }

    /// A constraint for one generation over `tokenizer`'s vocabulary; nil for ``text``.
    /// The grammar is compiled once per vocabulary and format and shared, with its caches, by later generations.
    public func constraint(for tokenizer: any TextTokenizer) throws -> TokenConstraint? {
        guard self != .text else { return nil }
        let shared = try tokenizer.tokenTrie.sharedGrammar(self) { try grammar()! }
        return TokenConstraint(shared: shared)
    }

    /// "text", "json_object" or "json_schema".
    public var name: String {
        switch self {
        case .text: return "text"
        case .jsonObject: return "json_object"
        case .jsonSchema: return "json_schema"
        }
    }
}
