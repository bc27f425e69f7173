import Foundation

/// Compiles a JSON Schema to a ``Grammar`` whose matches are JSON texts that validate against it.
///
/// Supported: `type` (one or a list), `properties` (generated in the schema's order), `required`,
/// `additionalProperties` (false, true or a schema), `items`, `minItems`, `maxItems`, `enum`, `const`, `anyOf`,
/// `allOf` of one schema, `$ref` to `#`, `#/$defs/…` or `#/definitions/…` (recursion allowed), `minLength`,
/// `maxLength`, `pattern` (``PatternGrammar``), `format` (date, time, date-time, uuid, email, ipv4), `minimum`,
/// `maximum`, `exclusiveMinimum`, `exclusiveMaximum`; annotations (`title`, `description`, `default`, `examples`,
/// `$schema`, `$id`, `$comment`, …) are read past. Any other keyword is a ``StructuredOutputError`` — a keyword
/// that restricts values is never dropped silently.
///
/// The text generated is JSON with optional light whitespace (one space, or a newline and up to 16 spaces, between
/// tokens), no whitespace before the first byte or after the last; numbers have no exponent; an object without
/// `additionalProperties: false` still gets only the properties the schema names.
struct JSONSchemaGrammar {
    private(set) var grammar = Grammar()
    private let document: OrderedJSON
    private var references: [String: Int] = [:]
    private var shared: [String: Grammar.Element] = [:]
    /// Schemas being compiled, outermost first (nesting through properties, items and references).
    private var depth = 0
    /// The deepest nesting compiled (a chain of references or nested schemas).
    static let depthLimit = 128

    /// Largest grammar built, in elements.
    static let sizeLimit = 200_000

    /// The grammar of JSON texts valid against `schema` (JSON text).
    static func compile(schemaText: String) throws -> Grammar {
        let schema: OrderedJSON
        do { schema = try OrderedJSON.parse(schemaText) } catch { throw StructuredOutputError.notJSON("\(error)") }
        return try compile(schema: schema)
    }

    /// The grammar of JSON texts valid against `schema`.
    static func compile(schema: OrderedJSON) throws -> Grammar {
        var compiler = JSONSchemaGrammar(document: schema)
        let root = compiler.grammar.declare("root")
        compiler.grammar.root = root
        let value = try compiler.value(schema, at: "#")
        compiler.grammar.define(root, [value])
        guard compiler.grammar.size <= sizeLimit else { throw StructuredOutputError.tooLarge(path: "#", size: compiler.grammar.size, limit: sizeLimit) }
        try compiler.grammar.checkFinite()
        return compiler.grammar
    }

    /// The grammar of any JSON object (OpenAI's `json_object` format).
    static func anyObject() -> Grammar {
        var compiler = JSONSchemaGrammar(document: .object([]))
        let root = compiler.grammar.declare("root")
        compiler.grammar.root = root
        let object = compiler.anyObject()
        compiler.grammar.define(root, [[object]])
        return compiler.grammar
    }

    private init(document: OrderedJSON) { self.document = document }

    // MARK: - Shared pieces

    /// UTF-8 sequences of one non-ASCII scalar (no overlong forms, no surrogates).
    static let multiByteCharacters: [[Grammar.Element]] = {
        let tail = Grammar.Element.bytes(ByteSet(0x80...0xBF))
        func b(_ range: ClosedRange<UInt8>) -> Grammar.Element { .bytes(ByteSet(range)) }
        return [
            [b(0xC2...0xDF), tail],
            [b(0xE0...0xE0), b(0xA0...0xBF), tail], [b(0xE1...0xEC), tail, tail], [b(0xED...0xED), b(0x80...0x9F), tail],
            [b(0xEE...0xEF), tail, tail],
            [b(0xF0...0xF0), b(0x90...0xBF), tail, tail], [b(0xF1...0xF3), tail, tail, tail], [b(0xF4...0xF4), b(0x80...0x8F), tail, tail],
        ]
    }()

    /// The shared rule `name`, made by `make` the first time — declared before it is made, so rules may refer back to
    /// themselves.
    private mutating func once(_ name: String, _ make: (inout JSONSchemaGrammar) -> [[Grammar.Element]]) -> Grammar.Element {
        if let known = shared[name] { return known }
        let id = grammar.declare(name)
        shared[name] = .rule(id)
        grammar.define(id, make(&self))
        return .rule(id)
    }

    /// Optional whitespace between tokens: nothing, a space, or a newline and up to 16 spaces.
    private mutating func space() -> Grammar.Element {
        once("space") { compiler in
            let indent = compiler.grammar.repeated("indent", [.bytes(ByteSet(0x20))], minimum: 0, maximum: 16)
            return [[], [.bytes(ByteSet(0x20))], [.bytes(ByteSet(0x0A))] + indent]
        }
    }

    /// One character inside a JSON string: printable ASCII but `"` and `\`, an escape, or a UTF-8 scalar.
    private mutating func character() -> Grammar.Element {
        once("char") { _ in
            var plain = ByteSet(0x20...0x7E)
            plain.remove(0x22)
            plain.remove(0x5C)
            let hex = Grammar.Element.bytes(ByteSet(ascii: "0123456789abcdefABCDEF"))
            let hexNotD = Grammar.Element.bytes(ByteSet(ascii: "0123456789abcefABCEF"))
            return [[.bytes(plain)],
                    Grammar.literal("\\") + [.bytes(ByteSet(ascii: "\"\\/bfnrt"))],
                    Grammar.literal("\\u") + [hexNotD, hex, hex, hex],
                    Grammar.literal("\\u") + [.bytes(ByteSet(ascii: "dD")), .bytes(ByteSet(ascii: "01234567")), hex, hex]]
                + Self.multiByteCharacters
        }
    }

    private mutating func anyString() -> Grammar.Element {
        once("string") { compiler in
            let char = compiler.character()
            return [Grammar.literal("\"") + compiler.grammar.repeated("string-chars", [char], minimum: 0, maximum: nil) + Grammar.literal("\"")]
        }
    }

    // Any JSON value, object and array refer to each other: `once` names each rule before building it.
    private mutating func anyValue() -> Grammar.Element {
        once("value") { compiler in
            let number = compiler.grammar.number(NumberBounds(integer: false))
            return [[compiler.anyObject()], [compiler.anyArray()], [compiler.anyString()], [number],
                    Grammar.literal("true"), Grammar.literal("false"), Grammar.literal("null")]
        }
    }

    private mutating func anyObject() -> Grammar.Element {
        once("object") { compiler in [compiler.mapObject(value: compiler.anyValue())] }
    }

    private mutating func anyArray() -> Grammar.Element {
        once("array") { compiler in [compiler.array(item: [compiler.anyValue()], minimum: 0, maximum: nil)] }
    }

    /// `{ "key": value, … }` with any keys.
    private mutating func mapObject(value: Grammar.Element) -> [Grammar.Element] {
        let ws = space(), key = anyString()
        let member = [key] + Grammar.literal(":") + [ws, value, ws]
        return Grammar.literal("{") + [ws] + grammar.repeated("members", member, separator: Grammar.literal(",") + [ws], minimum: 0, maximum: nil)
            + Grammar.literal("}")
    }

    private mutating func array(item: [Grammar.Element], minimum: Int, maximum: Int?) -> [Grammar.Element] {
        let ws = space()
        return Grammar.literal("[") + [ws]
            + grammar.repeated("items", item + [ws], separator: Grammar.literal(",") + [ws], minimum: minimum, maximum: maximum)
            + Grammar.literal("]")
    }

    // MARK: - Schemas

    private static let annotations: Set<String> = [
        "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly",
        "$defs", "definitions", "contentEncoding", "contentMediaType", "strict", "name",
    ]

    private static let typeKeywords: [String: Set<String>] = [
        "string": ["minLength", "maxLength", "pattern", "format"],
        "number": ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"],
        "integer": ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"],
        "object": ["properties", "required", "additionalProperties"],
        "array": ["items", "minItems", "maxItems", "uniqueItems"],
        "boolean": [], "null": [],
    ]

    private static let hints: [String: String] = [
        "oneOf": "use anyOf (Ember generates a value of one of the branches)",
        "allOf": "merge the schemas into one (allOf of a single schema is accepted)",
        "not": "describe the allowed values positively",
        "patternProperties": "list the properties under \"properties\"",
        "multipleOf": "state the allowed values with enum or bounds",
        "minProperties": "mark the properties that must appear as required",
        "maxProperties": "set additionalProperties to false and list the properties",
        "uniqueItems": "uniqueItems: true cannot be enforced while generating",
        "prefixItems": "use items with one schema for every item",
        "contains": "use items",
        "if": "use anyOf", "then": "use anyOf", "else": "use anyOf",
        "dependentRequired": "mark the properties required", "dependentSchemas": "use anyOf",
        "propertyNames": "list the properties under \"properties\"",
        "unevaluatedProperties": "use additionalProperties", "unevaluatedItems": "use items",
    ]

    private func members(_ schema: OrderedJSON, at path: String) throws -> [(key: String, value: OrderedJSON)] {
        switch schema {
        case let .object(members): return members
        case .bool(true): return []
        case .bool(false): throw StructuredOutputError.unsatisfiable(path: path, reason: "the schema false allows nothing")
        default: throw StructuredOutputError.invalidSchema(path: path, found: schema.summary, expected: "a schema (a JSON object or true)")
        }
    }

    /// The grammar sequence for one value valid against `schema` at `path`.
    private mutating func value(_ schema: OrderedJSON, at path: String) throws -> [Grammar.Element] {
        guard grammar.size <= Self.sizeLimit else { throw StructuredOutputError.tooLarge(path: path, size: grammar.size, limit: Self.sizeLimit) }
        guard depth < Self.depthLimit else {
            throw StructuredOutputError.invalidSchema(path: path, found: "schemas nested more than \(Self.depthLimit) deep",
                                                      expected: "at most \(Self.depthLimit) levels of properties, items and references")
        }
        depth += 1
        defer { depth -= 1 }
        let fields = try members(schema, at: path)
        let keys = Set(fields.map(\.key))
        if let reference = schema["$ref"] {
            guard keys.subtracting(Self.annotations).subtracting(["$ref"]).isEmpty else {
                throw StructuredOutputError.unsupported(path: path, keyword: "$ref", hint: "put $ref alone (with annotations) in its schema")
            }
            return [try referenced(reference, at: path + "/$ref")]
        }
        if let only = schema["allOf"] {
            guard case let .array(parts) = only, parts.count == 1 else {
                throw StructuredOutputError.unsupported(path: path, keyword: "allOf", hint: Self.hints["allOf"]!)
            }
            guard keys.subtracting(Self.annotations).subtracting(["allOf"]).isEmpty else {
                throw StructuredOutputError.unsupported(path: path, keyword: "allOf", hint: "put allOf alone (with annotations) in its schema")
            }
            return try value(parts[0], at: path + "/allOf/0")
        }
        for key in keys.sorted() where Self.hints[key] != nil && !(key == "uniqueItems" && schema[key] == .bool(false)) {
            throw StructuredOutputError.unsupported(path: path, keyword: key, hint: Self.hints[key]!)
        }
        if let anyOf = schema["anyOf"] {
            guard case let .array(branches) = anyOf, !branches.isEmpty else {
                throw StructuredOutputError.invalidSchema(path: path + "/anyOf", found: anyOf.summary, expected: "a non-empty array of schemas")
            }
            guard keys.subtracting(Self.annotations).subtracting(["anyOf"]).isEmpty else {
                throw StructuredOutputError.unsupported(path: path, keyword: "anyOf",
                                                        hint: "put the other keywords inside each branch of anyOf")
            }
            let alternatives = try branches.enumerated().map { try value($1, at: path + "/anyOf/\($0)") }
            return [grammar.rule("anyOf \(path)", alternatives)]
        }
        if schema["const"] != nil || schema["enum"] != nil {
            return try enumerated(schema, keys: keys, at: path)
        }
        let types = try self.types(schema, keys: keys, at: path)
        let known = Set(types.flatMap { Self.typeKeywords[$0] ?? [] }).union(Self.annotations).union(["type"])
        if let stray = keys.subtracting(known).sorted().first {
            let owner = Self.typeKeywords.first { $0.value.contains(stray) }?.key
            throw owner.map { StructuredOutputError.invalidSchema(path: path + "/" + stray, found: "a keyword of type \"\($0)\" in a schema of type \(types)",
                                                                  expected: "keywords of the schema's type") }
                ?? StructuredOutputError.unsupported(path: path, keyword: stray, hint: "remove it, or describe the values with the keywords Ember supports (see docs/STRUCTURED.md)")
        }
        let alternatives = try types.map { try typed($0, schema, at: path) }
        return alternatives.count == 1 ? alternatives[0] : [grammar.rule("types \(path)", alternatives)]
    }

    /// `const` or `enum`: the listed values, of the schema's `type` when it has one. Other restricting keywords beside
    /// them are refused (Ember would have to validate each value against them).
    private mutating func enumerated(_ schema: OrderedJSON, keys: Set<String>, at path: String) throws -> [Grammar.Element] {
        let keyword = schema["const"] != nil ? "const" : "enum"
        if let stray = keys.subtracting(Self.annotations).subtracting(["const", "enum", "type"]).sorted().first {
            throw StructuredOutputError.unsupported(path: path, keyword: stray,
                                                    hint: "beside \(keyword), only type is supported: list only the values that satisfy it")
        }
        var values: [OrderedJSON]
        if let constant = schema["const"] {
            guard schema["enum"] == nil else {
                throw StructuredOutputError.unsupported(path: path, keyword: "enum", hint: "use const or enum, not both")
            }
            values = [constant]
        } else {
            guard case let .array(listed)? = schema["enum"], !listed.isEmpty else {
                throw StructuredOutputError.invalidSchema(path: path + "/enum", found: schema["enum"]!.summary, expected: "a non-empty array of values")
            }
            values = listed
        }
        if schema["type"] != nil {
            let types = try self.types(schema, keys: keys, at: path)
            values = values.filter { value in types.contains { Self.value(value, hasType: $0) } }
            guard !values.isEmpty else {
                throw StructuredOutputError.unsatisfiable(path: path, reason: "no value of \(keyword) has the type \(types)")
            }
        }
        return values.count == 1 ? Grammar.literal(values[0].compactText)
                                 : [grammar.rule("enum \(path)", values.map { Grammar.literal($0.compactText) })]
    }

    private static func value(_ value: OrderedJSON, hasType type: String) -> Bool {
        switch (value, type) {
        case (.null, "null"), (.bool, "boolean"), (.string, "string"), (.array, "array"), (.object, "object"), (.number, "number"): return true
        case let (.number(text), "integer"):
            guard var exact = Decimal(string: text) else { return false }
            var whole = Decimal()
            NSDecimalRound(&whole, &exact, 0, .plain)
            return whole == exact
        default: return false
        }
    }

    /// The types `schema` allows: its `type`, or what its keywords imply, or every type.
    private func types(_ schema: OrderedJSON, keys: Set<String>, at path: String) throws -> [String] {
        switch schema["type"] {
        case nil:
            let implied = ["object", "array", "string", "number"].filter { !Self.typeKeywords[$0]!.isDisjoint(with: keys) }
            if implied.count == 1 { return implied }
            return implied.isEmpty ? ["any"] : implied
        case let .string(name)?:
            guard Self.typeKeywords[name] != nil else {
                throw StructuredOutputError.invalidSchema(path: path + "/type", found: "\"\(name)\"",
                                                          expected: "one of object, array, string, number, integer, boolean, null")
            }
            return [name]
        case let .array(names)?:
            let list = names.compactMap { if case let .string(name) = $0, Self.typeKeywords[name] != nil { return name } else { return nil } }
            guard list.count == names.count, !list.isEmpty, Set(list).count == list.count else {
                throw StructuredOutputError.invalidSchema(path: path + "/type", found: schema["type"]!.summary,
                                                          expected: "a type name or a non-empty list of distinct type names")
            }
            return list
        case let other?:
            throw StructuredOutputError.invalidSchema(path: path + "/type", found: other.summary, expected: "a type name or a list of them")
        }
    }

    private mutating func typed(_ type: String, _ schema: OrderedJSON, at path: String) throws -> [Grammar.Element] {
        switch type {
        case "any": return [anyValue()]
        case "null": return Grammar.literal("null")
        case "boolean": return [grammar.rule("boolean", [Grammar.literal("true"), Grammar.literal("false")])]
        case "number", "integer": return [try number(schema, integer: type == "integer", at: path)]
        case "string": return try string(schema, at: path)
        case "array": return try arrayValue(schema, at: path)
        default: return try object(schema, at: path)
        }
    }

    // MARK: Numbers and strings

    private func bound(_ schema: OrderedJSON, _ key: String, at path: String) throws -> Decimal? {
        guard let field = schema[key] else { return nil }
        guard case let .number(text) = field, let value = Decimal(string: text), !value.isNaN else {
            throw StructuredOutputError.invalidSchema(path: path + "/" + key, found: field.summary,
                                                      expected: "a number (at most 38 significant digits, exponent within ±127)")
        }
        return value
    }

    private func count(_ schema: OrderedJSON, _ key: String, at path: String, limit: Int) throws -> Int? {
        guard let field = schema[key] else { return nil }
        guard case let .number(text) = field, let value = Double(text), value >= 0, value.rounded() == value else {
            throw StructuredOutputError.invalidSchema(path: path + "/" + key, found: field.summary, expected: "a whole number ≥ 0")
        }
        guard value <= Double(limit) else {
            throw StructuredOutputError.invalidSchema(path: path + "/" + key, found: field.summary,
                                                      expected: "at most \(limit) (Ember builds counts into its grammar)")
        }
        return Int(value)
    }

    private mutating func number(_ schema: OrderedJSON, integer: Bool, at path: String) throws -> Grammar.Element {
        var bounds = NumberBounds(integer: integer)
        bounds.minimum = try bound(schema, "minimum", at: path)
        bounds.maximum = try bound(schema, "maximum", at: path)
        if let exclusive = try bound(schema, "exclusiveMinimum", at: path), bounds.minimum.map({ exclusive >= $0 }) ?? true {
            (bounds.minimum, bounds.minimumExclusive) = (exclusive, true)
        }
        if let exclusive = try bound(schema, "exclusiveMaximum", at: path), bounds.maximum.map({ exclusive <= $0 }) ?? true {
            (bounds.maximum, bounds.maximumExclusive) = (exclusive, true)
        }
        guard bounds.isSatisfiable else {
            throw StructuredOutputError.unsatisfiable(path: path, reason: "no \(integer ? "integer" : "number") within its bounds "
                                                          + "with at most 15 digits before the point and 15 after")
        }
        return grammar.number(bounds)
    }

    private static let formats: [String: String] = [
        "date": #"\d{4}-(((0[13578]|1[02])-(0[1-9]|[12]\d|3[01]))|((0[469]|11)-(0[1-9]|[12]\d|30))|(02-(0[1-9]|1\d|2[0-8])))"#,
        "time": #"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"#,
        "uuid": #"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#,
        "email": #"[a-zA-Z0-9._+-]{1,64}@[a-zA-Z0-9-]{1,63}(\.[a-zA-Z0-9-]{1,63}){1,4}"#,
        "ipv4": #"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}"#,
    ]

    private mutating func string(_ schema: OrderedJSON, at path: String) throws -> [Grammar.Element] {
        let minimum = try count(schema, "minLength", at: path, limit: 10_000) ?? 0
        let maximum = try count(schema, "maxLength", at: path, limit: 10_000)
        if let maximum, maximum < minimum {
            throw StructuredOutputError.unsatisfiable(path: path, reason: "minLength \(minimum) is above maxLength \(maximum)")
        }
        var pattern: String?
        if let field = schema["pattern"] {
            guard case let .string(text) = field else {
                throw StructuredOutputError.invalidSchema(path: path + "/pattern", found: field.summary, expected: "a regular expression as a string")
            }
            pattern = text
        }
        if let field = schema["format"] {
            guard case let .string(name) = field, let format = Self.formats[name == "date-time" ? "date" : name] else {
                throw StructuredOutputError.unsupported(path: path, keyword: "format",
                                                        hint: "formats Ember generates: date, time, date-time, uuid, email, ipv4 (\(field.summary) is not one)")
            }
            guard pattern == nil else {
                throw StructuredOutputError.unsupported(path: path, keyword: "format", hint: "use pattern or format, not both")
            }
            pattern = name == "date-time" ? format + "T" + Self.formats["time"]! : format
        }
        if let pattern {
            guard schema["minLength"] == nil, schema["maxLength"] == nil else {
                throw StructuredOutputError.unsupported(path: path, keyword: schema["minLength"] != nil ? "minLength" : "maxLength",
                                                        hint: "with a pattern or format, state the length in the pattern ({n,m})")
            }
            let tree = try PatternGrammar.parse(pattern, path: path + (schema["pattern"] != nil ? "/pattern" : "/format"))
            return Grammar.literal("\"") + (try PatternGrammar.elements(tree, in: &grammar, path: path + "/pattern"))
                + Grammar.literal("\"")
        }
        if minimum == 0, maximum == nil { return [anyString()] }
        return Grammar.literal("\"") + grammar.repeated("chars \(path)", [character()], minimum: minimum, maximum: maximum) + Grammar.literal("\"")
    }

    // MARK: Arrays and objects

    private mutating func arrayValue(_ schema: OrderedJSON, at path: String) throws -> [Grammar.Element] {
        let minimum = try count(schema, "minItems", at: path, limit: 1000) ?? 0
        let maximum = try count(schema, "maxItems", at: path, limit: 1000)
        if let maximum, maximum < minimum {
            throw StructuredOutputError.unsatisfiable(path: path, reason: "minItems \(minimum) is above maxItems \(maximum)")
        }
        var item = try schema["items"].map { try value($0, at: path + "/items") } ?? [anyValue()]
        if item.count != 1 { item = [grammar.rule("item \(path)", [item])] }
        return array(item: item, minimum: minimum, maximum: maximum)
    }

    private mutating func object(_ schema: OrderedJSON, at path: String) throws -> [Grammar.Element] {
        var properties: [(key: String, value: OrderedJSON)] = []
        if let field = schema["properties"] {
            guard case let .object(members) = field else {
                throw StructuredOutputError.invalidSchema(path: path + "/properties", found: field.summary, expected: "an object of schemas")
            }
            properties = members
        }
        var required = Set<String>()
        if let field = schema["required"] {
            guard case let .array(names) = field else {
                throw StructuredOutputError.invalidSchema(path: path + "/required", found: field.summary, expected: "an array of property names")
            }
            for name in names {
                guard case let .string(text) = name else {
                    throw StructuredOutputError.invalidSchema(path: path + "/required", found: name.summary, expected: "property names (strings)")
                }
                required.insert(text)
                if !properties.contains(where: { $0.key == text }) {
                    // Named only in required: its value follows additionalProperties.
                    switch schema["additionalProperties"] {
                    case .bool(false)?:
                        throw StructuredOutputError.unsatisfiable(path: path, reason: "\"\(text)\" is required but additionalProperties is false "
                                                                      + "and properties does not name it")
                    case let other?: properties.append((text, other))
                    case nil: properties.append((text, .bool(true)))
                    }
                }
            }
        }
        let additional = schema["additionalProperties"]
        if properties.isEmpty {
            switch additional {
            case .bool(false)?: return Grammar.literal("{") + [space()] + Grammar.literal("}")
            case nil, .bool(true)?: return [anyObject()]
            case let other?: return mapObject(value: try value(other, at: path + "/additionalProperties").single(in: &grammar))
            }
        }
        if let additional, !(additional == .bool(true) || additional == .bool(false)) {
            _ = try members(additional, at: path + "/additionalProperties") // checked; only the named properties are generated
        }
        let ws = space()
        var pairs: [[Grammar.Element]] = []
        for (name, property) in properties {
            let content = try value(property, at: path + "/properties/" + name)
            pairs.append(Grammar.literal(OrderedJSON.quoted(name) + ":") + [ws] + content + [ws])
        }
        // rest[i][comma]: the members from property i on, `comma` when one was written before them.
        var rest: [[Grammar.Element]] = [[], []]
        for index in stride(from: pairs.count - 1, through: 0, by: -1) {
            let isRequired = required.contains(properties[index].key)
            var next: [[Grammar.Element]] = [[], []]
            for comma in [0, 1] {
                let written = (comma == 1 ? Grammar.literal(",") + [ws] : []) + pairs[index] + rest[1]
                let alternatives = isRequired ? [written] : [written, rest[comma]]
                next[comma] = [grammar.rule("members \(path) from \(index)\(comma == 1 ? " after comma" : "")", alternatives)]
            }
            rest = next
        }
        return Grammar.literal("{") + [ws] + rest[0] + Grammar.literal("}")
    }

    /// The rule `reference` points to (compiled once; a recursive schema refers back to its own rule).
    private mutating func referenced(_ reference: OrderedJSON, at path: String) throws -> Grammar.Element {
        guard case let .string(pointer) = reference, pointer.hasPrefix("#") else {
            throw StructuredOutputError.invalidSchema(path: path, found: reference.summary, expected: "a reference within the schema, like \"#/$defs/Name\"")
        }
        if let id = references[pointer] { return .rule(id) }
        var target = document
        for token in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: true) {
            let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            switch target {
            case .object:
                guard let next = target[key] else {
                    throw StructuredOutputError.invalidSchema(path: path, found: "\"\(pointer)\"", expected: "a reference to a schema that exists (no \"\(key)\")")
                }
                target = next
            case let .array(items):
                guard let position = Int(key), items.indices.contains(position) else {
                    throw StructuredOutputError.invalidSchema(path: path, found: "\"\(pointer)\"", expected: "a reference to a schema that exists")
                }
                target = items[position]
            default:
                throw StructuredOutputError.invalidSchema(path: path, found: "\"\(pointer)\"", expected: "a reference to a schema that exists")
            }
        }
        let id = grammar.declare("ref \(pointer)")
        references[pointer] = id
        grammar.define(id, [try value(target, at: pointer)])
        return .rule(id)
    }
}

private extension Array where Element == Grammar.Element {
    /// One element standing for the sequence (a rule when it has several).
    func single(in grammar: inout Grammar) -> Grammar.Element { count == 1 ? self[0] : grammar.rule("sequence", [self]) }
}
