/// A context-free grammar over bytes, the form every output constraint is compiled to: rules of alternatives, each
/// alternative a sequence of elements — a byte from a set, another rule, or a JSON number with bounds (checked
/// digit by digit, which a grammar of digits cannot do for bounds like 0…150). ``GrammarMatcher`` runs it.
///
/// Elements live in one flat array; each alternative is a run of elements ended by `.end`, and a position in that
/// array is what the matcher's stacks hold.
public struct Grammar: Sendable {
    /// One element of an alternative.
    enum Element: Sendable, Equatable {
        /// One byte from the set.
        case bytes(ByteSet)
        /// The rule with this index.
        case rule(Int)
        /// A JSON number whose digits are checked by `numbers[index]`.
        case number(Int)
        /// The end of an alternative.
        case end
    }

    private(set) var elements: [Element] = []
    /// Each rule's alternatives, as the positions in `elements` where they start.
    private(set) var rules: [[Int]] = []
    /// What each rule is, for error messages and debugging.
    private(set) var ruleNames: [String] = []
    private(set) var numbers: [NumberBounds] = []
    /// The rule a match starts from.
    var root = 0

    /// A new rule with no alternatives yet (fill it with ``define(_:_:)``), so that rules can refer to each other.
    mutating func declare(_ name: String) -> Int {
        rules.append([])
        ruleNames.append(name)
        return rules.count - 1
    }

    /// Sets the alternatives of `rule`.
    mutating func define(_ rule: Int, _ alternatives: [[Element]]) {
        rules[rule] = alternatives.map { sequence in
            let start = elements.count
            elements += sequence
            elements.append(.end)
            return start
        }
    }

    /// A new rule with `alternatives`; returns the element that refers to it.
    mutating func rule(_ name: String, _ alternatives: [[Element]]) -> Element {
        let id = declare(name)
        define(id, alternatives)
        return .rule(id)
    }

    /// An element for a number checked against `bounds`.
    mutating func number(_ bounds: NumberBounds) -> Element {
        numbers.append(bounds)
        return .number(numbers.count - 1)
    }

    /// The elements that match `text`'s UTF-8 bytes exactly.
    static func literal(_ text: String) -> [Element] { text.utf8.map { .bytes(ByteSet($0)) } }

    /// `item` repeated `minimum` to `maximum` times (nil: no upper limit), with `separator` between repetitions.
    /// Optional repetitions are a chain of rules, each ending in the next, so the matcher's stacks do not grow with
    /// the count (it drops a rule's frame when the rule ends in another).
    mutating func repeated(_ name: String, _ item: [Element], separator: [Element] = [], minimum: Int, maximum: Int?) -> [Element] {
        precondition(minimum >= 0 && (maximum ?? minimum) >= minimum)
        // After the first item, each further one is `separator item`.
        let further = separator + item
        var tail: Element
        if let maximum {
            // tail_k: up to k more; tail_0 matches nothing.
            let extra = maximum - max(minimum, 1)
            var next = rule("\(name)-none", [[]])
            for count in stride(from: 1, through: max(0, extra), by: 1) {
                next = rule("\(name)-upto\(count)", [[], further + [next]])
            }
            tail = next
        } else {
            let open = declare("\(name)-more")
            define(open, [[], further + [.rule(open)]])
            tail = .rule(open)
        }
        if maximum == 0 { return [] }
        var sequence = item
        if minimum >= 2 { for _ in 2...minimum { sequence += further } }
        sequence.append(tail)
        if minimum == 0 { return [rule("\(name)-optional", [[], sequence])] }
        return sequence
    }

    /// Rules, elements and number checks in use (for the limits a schema must respect).
    var size: Int { elements.count }
}

/// 256 bits: which bytes an element accepts.
public struct ByteSet: Hashable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// The empty set.
    init() {}

    /// The set of one byte.
    init(_ byte: UInt8) { insert(byte) }

    /// The bytes in `range`.
    init(_ range: ClosedRange<UInt8>) { for byte in range { insert(byte) } }

    /// The bytes of `characters` (ASCII).
    init(ascii characters: String) { for byte in characters.utf8 { insert(byte) } }

    mutating func insert(_ byte: UInt8) {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    mutating func remove(_ byte: UInt8) {
        let bit = ~(UInt64(1) << UInt64(byte & 63))
        switch byte >> 6 {
        case 0: words.0 &= bit
        case 1: words.1 &= bit
        case 2: words.2 &= bit
        default: words.3 &= bit
        }
    }

    func contains(_ byte: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    func union(_ other: ByteSet) -> ByteSet {
        var out = self
        out.words = (words.0 | other.words.0, words.1 | other.words.1, words.2 | other.words.2, words.3 | other.words.3)
        return out
    }

    var isEmpty: Bool { words == (0, 0, 0, 0) }

    /// The same bytes.
    public static func == (lhs: ByteSet, rhs: ByteSet) -> Bool { lhs.words == rhs.words }

    /// Hashes the 256 bits.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
