/// A JSON Schema `pattern` (the ECMA-262 subset small schemas use) compiled to grammar elements that match the
/// contents of a JSON string whose decoded text matches the whole pattern: literals, classes (`[a-z]`, `[^,]`,
/// `\d \w \s` and their negations, `.`), groups, alternation and the quantifiers `* + ? {n} {n,} {n,m}`. A leading
/// `^` and a trailing `$` are accepted (the whole string is generated to match, which also satisfies an unanchored
/// pattern). Look-arounds, back-references, word boundaries, Unicode properties and non-ASCII ranges are refused.
/// Generated text is printable: the control characters a class allows are written as JSON escapes (`\t \n \r`)
/// or left out, and negated classes, `.`, `\S`, `\W` and `\D` generate ASCII characters only.
struct PatternGrammar {
    /// Code points as ranges; `negated` flips the set (over every code point).
    struct CharacterClass {
        var ranges: [ClosedRange<UInt32>] = []
        var negated = false

        func contains(_ point: UInt32) -> Bool { ranges.contains { $0.contains(point) } != negated }
    }

    indirect enum Node {
        case characters(CharacterClass)
        case sequence([Node])
        case alternation([Node])
        case repetition(Node, minimum: Int, maximum: Int?)
    }

    static let largestCount = 1000
    /// Groups nested deeper are refused.
    static let deepestGroup = 64
    private var groupDepth = 0

    let path: String
    private let scalars: [UInt32]
    private var index = 0

    private init(_ pattern: String, path: String) {
        scalars = pattern.unicodeScalars.map(\.value)
        self.path = path
    }

    /// The pattern's syntax tree; throws ``StructuredOutputError`` for what is outside the subset.
    static func parse(_ pattern: String, path: String) throws -> Node {
        var parser = PatternGrammar(pattern, path: path)
        if parser.peek == 0x5E { parser.index += 1 } // ^
        let node = try parser.alternation()
        if parser.peek == 0x24 { parser.index += 1 } // $
        guard parser.index == parser.scalars.count else {
            throw parser.refuse(parser.peek == 0x29 ? "an unmatched \")\"" : "\"^\" or \"$\" inside the pattern", "anchors only at the ends")
        }
        return node
    }

    private var peek: UInt32? { index < scalars.count ? scalars[index] : nil }

    private func refuse(_ found: String, _ expected: String) -> StructuredOutputError {
        .invalidSchema(path: path, found: "\(found) at character \(index)", expected: "a pattern Ember can generate: \(expected)")
    }

    private mutating func alternation() throws -> Node {
        var branches = [try sequence()]
        while peek == 0x7C { // |
            index += 1
            branches.append(try sequence())
        }
        return branches.count == 1 ? branches[0] : .alternation(branches)
    }

    private mutating func sequence() throws -> Node {
        var items: [Node] = []
        while let next = peek, next != 0x7C, next != 0x29 {
            if next == 0x24, index == scalars.count - 1 { break } // the closing $
            var atom = try self.atom()
            atom = try quantified(atom)
            items.append(atom)
        }
        return .sequence(items)
    }

    private mutating func quantified(_ atom: Node) throws -> Node {
        guard let next = peek else { return atom }
        var bounds: (Int, Int?)
        switch next {
        case 0x2A: bounds = (0, nil) // *
        case 0x2B: bounds = (1, nil) // +
        case 0x3F: bounds = (0, 1)   // ?
        case 0x7B: // {
            guard let counted = try counts() else { return atom }
            bounds = counted
            index -= 1
        default: return atom
        }
        index += 1
        if peek == 0x3F { index += 1 } // a lazy quantifier matches the same strings
        if peek == 0x2B { throw refuse("a possessive quantifier", "greedy or lazy quantifiers") }
        if let next = peek, [0x2A, 0x2B, 0x3F].contains(next) { throw refuse("a quantifier after a quantifier", "one quantifier per atom") }
        return .repetition(atom, minimum: bounds.0, maximum: bounds.1)
    }

    /// `{n}`, `{n,}` or `{n,m}` at `index` (left just past the `}`); nil when the brace is a literal.
    private mutating func counts() throws -> (Int, Int?)? {
        let start = index
        index += 1
        func number() -> Int? {
            var digits = ""
            while let next = peek, (0x30...0x39).contains(next) { digits.unicodeScalars.append(Unicode.Scalar(next)!); index += 1 }
            return digits.isEmpty ? nil : Int(digits.prefix(9))
        }
        guard let low = number() else { index = start; return nil }
        var high: Int? = low
        if peek == 0x2C { index += 1; high = number() }
        guard peek == 0x7D else { index = start; return nil }
        index += 1
        guard low <= Self.largestCount, (high ?? low) <= Self.largestCount else {
            throw refuse("a count above \(Self.largestCount)", "counts up to \(Self.largestCount)")
        }
        if let high, high < low { throw refuse("{\(low),\(high)}", "a count range whose maximum is at least its minimum") }
        return (low, high)
    }

    private mutating func atom() throws -> Node {
        let next = scalars[index]
        index += 1
        switch next {
        case 0x28: // (
            if peek == 0x3F { // ?
                guard index + 1 < scalars.count, scalars[index + 1] == 0x3A else { throw refuse("a look-around or named group", "plain or (?:…) groups") }
                index += 2
            }
            guard groupDepth < Self.deepestGroup else { throw refuse("groups nested more than \(Self.deepestGroup) deep", "shallower groups") }
            groupDepth += 1
            defer { groupDepth -= 1 }
            let inner = try alternation()
            guard peek == 0x29 else { throw refuse("a group without its \")\"", "balanced parentheses") }
            index += 1
            return inner
        case 0x5B: return .characters(try bracket())
        case 0x2E: return .characters(CharacterClass(ranges: [0x0A...0x0A, 0x0D...0x0D], negated: true)) // .
        case 0x5C: return .characters(try escape(inBracket: false))
        case 0x5E, 0x24: throw refuse("\"^\" or \"$\" inside the pattern", "anchors only at the ends")
        case 0x2A, 0x2B, 0x3F: throw refuse("a quantifier with nothing before it", "an atom before each quantifier")
        case 0x29: throw refuse("an unmatched \")\"", "balanced parentheses")
        default: return .characters(CharacterClass(ranges: [next...next]))
        }
    }

    private mutating func bracket() throws -> CharacterClass {
        var result = CharacterClass()
        if peek == 0x5E { result.negated = true; index += 1 }
        var first = true
        while true {
            guard let next = peek else { throw refuse("a class without its \"]\"", "a closing \"]\"") }
            if next == 0x5D, !first { index += 1; break }
            first = false
            index += 1
            var low: UInt32
            if next == 0x5C {
                let escaped = try escape(inBracket: true)
                guard escaped.ranges.count == 1, escaped.ranges[0].count == 1, !escaped.negated else {
                    result.ranges += escaped.ranges
                    continue
                }
                low = escaped.ranges[0].lowerBound
            } else {
                low = next
            }
            if peek == 0x2D, index + 1 < scalars.count, scalars[index + 1] != 0x5D { // a-z
                index += 1
                var high = scalars[index]
                index += 1
                if high == 0x5C {
                    let escaped = try escape(inBracket: true)
                    guard escaped.ranges.count == 1, escaped.ranges[0].count == 1 else { throw refuse("a class escape as a range end", "a character") }
                    high = escaped.ranges[0].lowerBound
                }
                guard low <= high else { throw refuse("a range from a higher to a lower character", "ranges like a-z") }
                result.ranges.append(low...high)
            } else {
                result.ranges.append(low...low)
            }
        }
        return result
    }

    /// The class of the escape after a backslash at `index`.
    private mutating func escape(inBracket: Bool) throws -> CharacterClass {
        guard let next = peek else { throw refuse("a backslash at the end", "an escaped character") }
        index += 1
        let digits: [ClosedRange<UInt32>] = [0x30...0x39]
        let word: [ClosedRange<UInt32>] = [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A]
        let space: [ClosedRange<UInt32>] = [0x09...0x0D, 0x20...0x20]
        switch Unicode.Scalar(next)! {
        case "d": return CharacterClass(ranges: digits)
        case "w": return CharacterClass(ranges: word)
        case "s": return CharacterClass(ranges: space)
        case "D", "W", "S":
            if inBracket { throw refuse("\\\(Unicode.Scalar(next)!) inside a class", "\\d, \\w or \\s inside classes") }
            return CharacterClass(ranges: next == 0x44 ? digits : next == 0x57 ? word : space, negated: true)
        case "n": return CharacterClass(ranges: [0x0A...0x0A])
        case "t": return CharacterClass(ranges: [0x09...0x09])
        case "r": return CharacterClass(ranges: [0x0D...0x0D])
        case "b", "B", "p", "P", "k", "c", "x", "u", "f", "v", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9":
            throw refuse("the escape \\\(Unicode.Scalar(next)!)", "\\d \\w \\s \\D \\W \\S \\n \\t \\r or an escaped punctuation character")
        default:
            guard next < 0x80, !(0x41...0x5A).contains(next), !(0x61...0x7A).contains(next) else {
                throw refuse("the escape \\\(Unicode.Scalar(next)!)", "\\d \\w \\s \\D \\W \\S \\n \\t \\r or an escaped punctuation character")
            }
            return CharacterClass(ranges: [next...next])
        }
    }

    // MARK: - To grammar

    /// Elements matching the JSON-string contents of what `node` matches.
    static func elements(_ node: Node, in grammar: inout Grammar, path: String) throws -> [Grammar.Element] {
        switch node {
        case let .characters(set):
            return [try characterRule(set, in: &grammar, path: path)]
        case let .sequence(items):
            var sequence: [Grammar.Element] = []
            for item in items {
                sequence += try elements(item, in: &grammar, path: path)
                guard sequence.count + grammar.size <= JSONSchemaGrammar.sizeLimit else {
                    throw StructuredOutputError.tooLarge(path: path, size: sequence.count + grammar.size, limit: JSONSchemaGrammar.sizeLimit)
                }
            }
            return sequence
        case let .alternation(branches):
            let alternatives = try branches.map { try elements($0, in: &grammar, path: path) }
            return [grammar.rule("pattern-choice", alternatives)]
        case let .repetition(inner, minimum, maximum):
            var item = try elements(inner, in: &grammar, path: path)
            if item.count != 1 { item = [grammar.rule("pattern-item", [item])] }
            let repeated = grammar.repeated("pattern-repeat", item, minimum: minimum, maximum: maximum)
            guard grammar.size <= JSONSchemaGrammar.sizeLimit else {
                throw StructuredOutputError.tooLarge(path: path, size: grammar.size, limit: JSONSchemaGrammar.sizeLimit)
            }
            return repeated
        }
    }

    /// One character of `set`, as it is written inside a JSON string.
    private static func characterRule(_ set: CharacterClass, in grammar: inout Grammar, path: String) throws -> Grammar.Element {
        var plain = ByteSet()
        var alternatives: [[Grammar.Element]] = []
        for byte in UInt8(0x20)...UInt8(0x7E) where set.contains(UInt32(byte)) {
            if byte == 0x22 || byte == 0x5C { alternatives.append(Grammar.literal("\\") + [.bytes(ByteSet(byte))]) } else { plain.insert(byte) }
        }
        for (control, letter) in [(UInt32(0x09), "t"), (0x0A, "n"), (0x0D, "r")] where set.contains(control) {
            alternatives.append(Grammar.literal("\\" + letter))
        }
        if !plain.isEmpty { alternatives.insert([.bytes(plain)], at: 0) }
        // Negated classes, `.`, \S, \W and \D generate ASCII only: which non-ASCII characters they exclude (Unicode
        // spaces for \S, line separators for `.`) would take Unicode tables to get right.
        if set.ranges.contains(where: { $0.upperBound >= 0x80 }) && !set.negated {
            throw StructuredOutputError.unsupported(path: path, keyword: "pattern",
                                                    hint: "character ranges beyond ASCII are not supported; use \".\" or a negated class")
        }
        guard !alternatives.isEmpty else {
            throw StructuredOutputError.unsatisfiable(path: path, reason: "a pattern class matches no printable character")
        }
        return grammar.rule("pattern-class", alternatives)
    }
}
