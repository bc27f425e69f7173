import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// JSON Schema → grammar → token masks: what the grammar accepts, what it refuses, and the token masks against a
/// token-by-token check on a real vocabulary.
@Suite("Structured output")
struct StructuredOutputTests {
    static func matcher(_ schema: String) throws -> GrammarMatcher { GrammarMatcher(try JSONSchemaGrammar.compile(schemaText: schema)) }

    static func accepts(_ matcher: GrammarMatcher, _ text: String) -> Bool {
        matcher.isAccepting(matcher.step(matcher.initial, Array(text.utf8)))
    }

    static let person = #"""
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0,
     "maximum": 150}, "email": {"type": "string", "format": "email"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]},
     "maxItems": 2}}, "required": ["name", "age"], "additionalProperties": false}
    """#

    static let texts: [(String, String, Bool)] = [
        (person, #"{"name": "Ada", "age": 36}"#, true),
        (person, "{\n  \"name\": \"Ada\",\n  \"age\": 36,\n  \"tags\": [\"a\", \"b\"]\n}", true),
        (person, #"{"name":"Ada","age":150,"email":"ada@example.org"}"#, true),
        (person, #"{"age": 36, "name": "Ada"}"#, false),            // properties in the schema's order
        (person, #"{"name": "Ada"}"#, false),                       // age is required
        (person, #"{"name": "Ada", "age": 151}"#, false),           // above the maximum
        (person, #"{"name": "Ada", "age": -1}"#, false),
        (person, #"{"name": "Ada", "age": 3.5}"#, false),           // an integer
        (person, #"{"name": "Ada Lovelace!", "age": 36}"#, false),  // longer than 10
        (person, #"{"name": "Ada", "age": 36, "tags": ["a", "b", "a"]}"#, false),
        (person, #"{"name": "Ada", "age": 36, "tags": ["c"]}"#, false),
        (person, #"{"name": "Ada", "age": 36, "extra": 1}"#, false),
        (person, #" {"name": "Ada", "age": 36}"#, false),           // nothing before the value
        (#"{"type": "number", "exclusiveMinimum": 0, "maximum": 1}"#, "0.25", true),
        (#"{"type": "number", "exclusiveMinimum": 0, "maximum": 1}"#, "0", false),
        (#"{"type": "number", "exclusiveMinimum": 0, "maximum": 1}"#, "1.5", false),
        (#"{"type": "integer", "minimum": -20, "maximum": -10}"#, "-15", true),
        (#"{"type": "integer", "minimum": -20, "maximum": -10}"#, "-9", false),
        (#"{"type": "integer", "minimum": 10, "maximum": 12}"#, "01", false),
        (#"{"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}"#, #""AB-123""#, true),
        (#"{"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}"#, #""AB-12""#, false),
        (#"{"type": "string", "pattern": "^(yes|no)$"}"#, #""no""#, true),
        (#"{"type": "string", "pattern": "^[^,]+$"}"#, #""a\"b c""#, true),
        (#"{"type": "string", "pattern": "^[^,]+$"}"#, #""é""#, false),     // negated classes generate ASCII only
        (#"{"type": "string", "enum": ["a", 1]}"#, "1", false),          // enum values of another type are dropped
        (#"{"type": "string", "enum": ["a", 1]}"#, #""a""#, true),
        (#"{"type": "object", "required": ["b"], "additionalProperties": {"type": "integer"}}"#, #"{"b": "x"}"#, false),
        (#"{"type": "object", "required": ["b"], "additionalProperties": {"type": "integer"}}"#, #"{"b": 2}"#, true),
        (#"{"type": "number", "minimum": 0.3}"#, "0.2", false),
        (#"{"type": "number", "minimum": 0.3}"#, "0.30000000000000004", false), // more than 15 fraction digits
        (#"{"type": "number", "minimum": 0.3}"#, "0.3", true),
        (#"{"type": "string", "pattern": "^(a?|b?)*$"}"#, #""abba""#, true),
        (##"{"anyOf": [{"$ref": "#"}, {"type": "null"}]}"##, "null", true), // a reference back to itself first: only null ends
        (#"{"type": "string", "format": "date"}"#, #""2024-02-28""#, true),
        (#"{"type": "string", "format": "date"}"#, #""2024-02-30""#, false),
        (#"{"type": "string", "minLength": 2, "maxLength": 3}"#, #""é\n""#, true),
        (#"{"type": "string", "minLength": 2, "maxLength": 3}"#, #""a""#, false),
        (#"{"type": ["string", "null"]}"#, "null", true),
        (#"{"anyOf": [{"type": "boolean"}, {"const": {"k": [1]}}]}"#, #"{"k":[1]}"#, true),
        (#"{"anyOf": [{"type": "boolean"}, {"const": {"k": [1]}}]}"#, "1", false),
        (#"{"type": "array", "minItems": 2, "items": {"type": "integer"}}"#, "[1]", false),
        (#"{"type": "array", "minItems": 2, "items": {"type": "integer"}}"#, "[1, 2, 3]", true),
        (##"{"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["next"]}}, "$ref": "#/$defs/node"}"##,
         #"{"next": {"next": null}}"#, true),
        (#"{"type": "object"}"#, #"{"a": [1, {"b": "\u00e9"}], "c": -0.5}"#, true),
        (#"{"type": "object"}"#, #"{"a": "\ud800"}"#, false),       // a lone surrogate is not a character
        (#"{}"#, #"[true, null, "x"]"#, true),
    ]

    @Test(arguments: texts)
    func grammarAcceptsExactlyTheValidTexts(schema: String, text: String, valid: Bool) throws {
        #expect(Self.accepts(try Self.matcher(schema), text) == valid, "\(text) against \(schema)")
    }

    static let refusals: [(String, String)] = [
        (#"{"type": "object", "minProperties": 1}"#, "minProperties"),
        (#"{"oneOf": [{"type": "string"}]}"#, "oneOf"),
        (#"{"type": "string", "format": "hostname"}"#, "format"),
        (#"{"type": "number", "multipleOf": 5}"#, "multipleOf"),
        (#"{"type": "array", "uniqueItems": true}"#, "uniqueItems"),
        (#"{"type": "string", "fancy": 1}"#, "fancy"),
        (#"{"type": "string", "pattern": "(?=a)b"}"#, "look-around"),
        (#"{"type": "string", "pattern": "\\bword"}"#, "\\b"),
        (#"{"type": "integer", "minimum": 5, "maximum": 4}"#, "no value satisfies"),
        (#"{"type": "string", "minLength": 5, "maxLength": 4}"#, "minLength 5 is above maxLength 4"),
        (#"{"type": "strin"}"#, "#/type"),
        (##"{"$ref": "#/$defs/missing"}"##, "no \"$defs\""),
        (#"{"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}"#, "#/properties/a/minimum"),
        (#"{"type": "string", "maxLength": 20000}"#, "at most 10000"),
        (#"{"type": "object""#, "not JSON"),
        (#"[1]"#, "expected a schema"),
        (#"{"type": "integer", "enum": [1, 10], "minimum": 5}"#, "beside enum, only type"),
        (#"{"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false}"#, "\"b\" is required"),
        (#"{"type": "integer", "minimum": 1600000000000000}"#, "at most 15 digits"),
        (##"{"$ref": "#"}"##, "nest forever"),
        (##"{"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"}"##, "nest forever"),
        ("{\"type\": \"string\", \"pattern\": \"" + String(repeating: "(", count: 100) + "a" + String(repeating: ")", count: 100) + "\"}",
         "nested more than 64"),
        ("{\"type\": \"string\", \"pattern\": \"" + String(repeating: "a{1000}", count: 400) + "\"}", "more than the limit"),
        (String(repeating: "{\"type\": \"array\", \"items\": ", count: 200) + "{}" + String(repeating: "}", count: 200), "nested more than 128"),
    ]

    @Test(arguments: refusals)
    func unsupportedOrWrongSchemasAreNamed(schema: String, phrase: String) {
        #expect {
            _ = try JSONSchemaGrammar.compile(schemaText: schema)
        } throws: { error in
            "\(error)".contains(phrase)
        }
    }

    /// Near the token limit only tokens after which the value can still be closed are allowed: every generation of
    /// a schema with long free strings ends whole, however small the limit above the shortest value.
    @Test func outputsFinishInsideTheTokenLimit() throws {
        let runtime = try Runtime(configuration: .init(calibration: .sharedForTests))
        let model = try runtime.languageModel(named: "smollm2-135m-instruct")
        let schema = #"{"type": "object", "properties": {"story": {"type": "string"}, "moral": {"type": "string"}}, "required": ["story", "moral"]}"#
        let prompt = "<|im_start|>user\nTell a long story as JSON.<|im_end|>\n<|im_start|>assistant\n"
        for limit in [24, 40, 64] {
            let generation = try model.generate(prompt: prompt, maxTokens: limit,
                                                sampler: SamplerSettings(temperature: 0.9, seed: UInt64(limit), format: .jsonSchema(schema)),
                                                options: ExecutionOptions(), stop: [], onPiece: { _ in }, betweenTokens: {})
            let value = try OrderedJSON.parse(generation.text)
            #expect(value["story"] != nil && value["moral"] != nil, "limit \(limit): \(generation.text)")
            #expect(generation.tokenIDs.count <= limit)
        }
        #expect {
            _ = try model.generate(prompt: prompt, maxTokens: 8, sampler: SamplerSettings(format: .jsonObject), options: ExecutionOptions(),
                                   stop: ["}"], onPiece: { _ in }, betweenTokens: {})
        } throws: { "\($0)".contains("no stop strings with a JSON output format") }
    }

    @Test func numberBoundsAreCheckedDigitByDigit() {
        let bounds = NumberBounds(integer: true, minimum: 0, maximum: 150)
        #expect(bounds.canExtend(Array("15".utf8)))     // 15, or 150
        #expect(bounds.canExtend(Array("16".utf8)) && bounds.canComplete("16"))
        #expect(!bounds.canExtend(Array("160".utf8)))
        #expect(!bounds.canExtend(Array("-1".utf8)))
        #expect(bounds.canComplete("150") && !bounds.canComplete("151"))
        let unit = NumberBounds(integer: false, minimum: 0, minimumExclusive: true, maximum: 1)
        #expect(unit.canExtend(Array("0.".utf8)) && !unit.canComplete("0") && unit.canComplete("0.5"))
        #expect(!unit.canExtend(Array("2".utf8)) && unit.canExtend(Array("1.".utf8)) && !unit.canExtend(Array("1.1".utf8)))
        #expect(!NumberBounds(integer: true, minimum: 0.2, maximum: 0.8).isSatisfiable)
        // Exact decimals: after "0." the digit 2 cannot reach 0.3 or more (in binary 0.2 + 0.1 is above 0.3).
        let fromPointThree = NumberBounds(integer: false, minimum: Decimal(string: "0.3"))
        #expect(!fromPointThree.canExtend(Array("0.2".utf8)) && fromPointThree.canExtend(Array("0.3".utf8)))
        #expect(!NumberBounds(integer: false, maximum: Decimal(string: "-1e15")).isSatisfiable)
        #expect(NumberBounds(integer: true, minimum: 100_000_000_000).shortestLength == 12)
    }

    /// Random texts drawn byte by byte from what the grammar allows parse as JSON, and the matcher never
    /// crashes on random schemas and random bytes.
    @Test func randomWalksParseAndRandomSchemasNeverCrash() throws {
        var random = SplitMix64(seed: 5)
        let matcher = try Self.matcher(Self.person)
        var finished = 0
        for _ in 0..<200 {
            var state = matcher.initial, bytes: [UInt8] = []
            while bytes.count < 400, !(matcher.isAccepting(state) && (!matcher.canContinue(state) || random.next() % 4 == 0)) {
                let live = (0..<256).map(UInt8.init).filter { matcher.step(state, $0) != GrammarMatcher.dead }
                guard !live.isEmpty else { break }
                // Prefer structure over long strings so walks end.
                let structural = live.filter { "\"}],0123456789".utf8.contains($0) }
                let pool = !structural.isEmpty && random.next() % 3 == 0 ? structural : live
                let byte = pool[Int(random.next() % UInt64(pool.count))]
                bytes.append(byte)
                state = matcher.step(state, byte)
            }
            guard matcher.isAccepting(state) else { continue }
            finished += 1
            let text = String(decoding: bytes, as: UTF8.self)
            let value = try OrderedJSON.parse(text)
            guard case let .number(age)? = value["age"], let years = Int(age) else { Issue.record("no integer age in \(text)"); continue }
            #expect((0...150).contains(years), "\(text)")
        }
        #expect(finished >= 100)
        let pieces = [#""type""#, #""string""#, #""object""#, #""properties""#, #""items""#, #""anyOf""#, #""enum""#, "[", "]", "{", "}",
                      ":", ",", "1", "-2.5", "true", #""pattern""#, #""^a+$""#, #""$ref""#, ##""#""##, #""minimum""#, "null"]
        for _ in 0..<2000 {
            let text = (0..<Int(random.next() % 24)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            guard let grammar = try? JSONSchemaGrammar.compile(schemaText: text) else { continue }
            let fuzzed = GrammarMatcher(grammar)
            var state = fuzzed.initial
            for _ in 0..<64 { state = fuzzed.step(state == GrammarMatcher.dead ? fuzzed.initial : state, UInt8(random.next() % 128)) }
        }
    }

    /// The whole-vocabulary mask equals asking each token alone, on SmolLM2's 49,152 tokens, in states of every kind.
    @Test func maskMatchesTokenByTokenChecks() throws {
        let runtime = try Runtime(configuration: .init(calibration: .sharedForTests))
        let model = try runtime.languageModel(named: "smollm2-135m-instruct")
        let constraint = try #require(try OutputFormat.jsonSchema(Self.person).constraint(for: model.tokenizer))
        for prefix in ["", "{", "{\"name\": \"A", "{\"name\": \"Ada\", \"age\": 1", "{\"name\": \"Ada\", \"age\": 15"] {
            let probe = TokenConstraint(grammar: constraint.shared.grammar, trie: constraint.shared.trie)
            for token in model.tokenizer.encode(prefix, parseSpecial: false, withBOS: false) { probe.accept(token) }
            let mask = probe.allowedMask()
            var mismatches = 0, allowed = 0
            for id in 0..<model.vocabularySize {
                let inMask = mask[id >> 6] >> UInt64(id & 63) & 1 == 1
                if inMask != probe.allows(id) { mismatches += 1 }
                if inMask { allowed += 1 }
            }
            #expect(mismatches == 0, "after \(prefix): \(mismatches) tokens differ")
            #expect(allowed > 0 && allowed < model.vocabularySize, "after \(prefix): \(allowed) allowed")
        }
    }

    /// What a constraint adds to sampling one token, on SmolLM2's real logits (printed, not asserted: speed is for
    /// `ember bench structured`).
    @Test func samplingCostIsPrinted() throws {
        let runtime = try Runtime(configuration: .init(calibration: .sharedForTests))
        let model = try runtime.languageModel(named: "smollm2-135m-instruct")
        let prompt = "<|im_start|>user\nDescribe Ada Lovelace as JSON.<|im_end|>\n<|im_start|>assistant\n"
        var settings = SamplerSettings(temperature: 0.8, seed: 3, format: .jsonSchema(Self.person))
        let generation = try model.generate(prompt: prompt, maxTokens: 120, sampler: settings, options: ExecutionOptions(), stop: [],
                                            onPiece: { _ in }, betweenTokens: {})
        let value = try OrderedJSON.parse(generation.text)
        #expect(value["name"] != nil && value["age"] != nil, "\(generation.text)")
        // Replay: the logits after each prefix, sampled with and without the constraint.
        let session = model.makeSession(contextLength: 512)
        var logits = try model.forward(model.tokenizer.encode(prompt), session: session, options: ExecutionOptions()).scalars()
        var free = Sampler(SamplerSettings(temperature: 0.8, seed: 3))
        settings.seed = 3
        var constrained = Sampler(settings)
        let constraint = try #require(try settings.format.constraint(for: model.tokenizer))
        var freeSeconds = 0.0, constrainedSeconds = 0.0
        for token in generation.tokenIDs where !model.tokenizer.endsGeneration(token) {
            freeSeconds += Measurement.seconds { _ = free.next(logits: logits, history: []) }
            var pick = 0
            constrainedSeconds += Measurement.seconds { pick = constrained.next(logits: logits, history: [], constraint: constraint) }
            #expect(constraint.allows(pick), "picked \(pick), which the grammar does not allow here")
            constraint.accept(token)
            logits = try model.forward([token], session: session, options: ExecutionOptions()).scalars()
        }
        let count = Double(generation.tokenIDs.count)
        print(String(format: "sampling per token: free %.3f ms, constrained %.3f ms; %d masks for %.0f tokens",
                     freeSeconds / count * 1e3, constrainedSeconds / count * 1e3, constraint.masksComputed, count))
    }
}
