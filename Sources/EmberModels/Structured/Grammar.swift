/// A context-free grammar over bytes, the form every output constraint is compiled to: rules of alternatives, each
/// alternative a sequence of elements — a byte from a set, another rule, or a JSON number with bounds (checked
/// digit by digit, which a grammar of digits cannot do for bounds like 0…150). `GrammarMatcher` runs it.
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

    /// The length standing for "no finite match".
    static let never = Int(Int32.max)

    /// Fewest bytes each rule matches (``never`` when it has no finite match): Knuth's generalisation of Dijkstra's
    /// algorithm — a rule is settled at its cheapest alternative once every rule that alternative uses is settled.
    func shortestRuleLengths() -> [Int] {
        struct Alternative { var owner: Int; var known: Int; var pending: Int }
        var alternatives: [Alternative] = []
        var users = [[Int]](repeating: [], count: rules.count) // alternatives using each rule, once per use
        for (owner, starts) in rules.enumerated() {
            for start in starts {
                var alternative = Alternative(owner: owner, known: 0, pending: 0)
                var position = start
                while elements[position] != .end {
                    switch elements[position] {
                    case .bytes: alternative.known += 1
                    case .number(let index): alternative.known += numbers[index].shortestLength
                    case .rule(let used):
                        alternative.pending += 1
                        users[used].append(alternatives.count)
                    case .end: break
                    }
                    position += 1
                }
                alternatives.append(alternative)
            }
        }
        var length = [Int](repeating: Self.never, count: rules.count)
        var settled = [Bool](repeating: false, count: rules.count)
        var queue = MinimumQueue()
        for (index, alternative) in alternatives.enumerated() where alternative.pending == 0 { queue.push(alternative.known, alternatives[index].owner) }
        while let (cost, rule) = queue.pop() {
            guard !settled[rule] else { continue }
            settled[rule] = true
            length[rule] = cost
            for index in users[rule] {
                alternatives[index].known = min(Self.never, alternatives[index].known + cost)
                alternatives[index].pending -= 1
                if alternatives[index].pending == 0 { queue.push(alternatives[index].known, alternatives[index].owner) }
            }
        }
        return length
    }

    /// Fewest bytes that finish the alternative from each position of ``elements``.
    func shortestRests(ruleLengths: [Int]) -> [Int] {
        var rest = [Int](repeating: 0, count: elements.count)
        for position in stride(from: elements.count - 1, through: 0, by: -1) {
            switch elements[position] {
            case .end: rest[position] = 0
            case .bytes: rest[position] = min(Self.never, 1 + rest[position + 1])
            case .number(let index): rest[position] = min(Self.never, numbers[index].shortestLength + rest[position + 1])
            case .rule(let used): rest[position] = min(Self.never, ruleLengths[used] + rest[position + 1])
            }
        }
        return rest
    }

    /// Throws unless every match can end: the root has a finite match, and no rule reaches itself before reading a
    /// byte (a `$ref` or `anyOf` that comes back to itself first, which would recurse forever).
    func checkFinite() throws {
        let lengths = shortestRuleLengths()
        guard lengths[root] < Self.never else {
            throw StructuredOutputError.unsatisfiable(path: "#", reason: "every value would nest forever (a reference that is never optional)")
        }
        // Left corners: the rules an alternative can start with, reading nothing before them. One in tail position
        // (last of its alternative) replaces its caller's frame; any other one adds a frame. A cycle of left corners
        // with a frame-adding step would grow the matcher's stacks without reading a byte: refused. A cycle of tail
        // steps only comes back to the same stack, which the matcher notices.
        var corners = [[Int]](repeating: [], count: rules.count)
        var growing: [(from: Int, to: Int)] = []
        for (owner, starts) in rules.enumerated() {
            for start in starts {
                var position = start
                scan: while true {
                    switch elements[position] {
                    case .rule(let used):
                        corners[owner].append(used)
                        if elements[position + 1] != .end { growing.append((owner, used)) }
                        if lengths[used] != 0 { break scan }
                    default: break scan
                    }
                    position += 1
                }
            }
        }
        let component = Self.components(corners)
        if let loop = growing.first(where: { component[$0.from] == component[$0.to] }) {
            throw StructuredOutputError.unsupported(path: "#", keyword: "$ref",
                                                    hint: "\(ruleNames[loop.to]) can reach itself without writing anything; put a value before the recursion")
        }
    }

    /// The strongly connected component of each node of `edges` (Kosaraju, iterative).
    static func components(_ edges: [[Int]]) -> [Int] {
        let count = edges.count
        var reversed = [[Int]](repeating: [], count: count)
        for (from, targets) in edges.enumerated() { for to in targets { reversed[to].append(from) } }
        var visited = [Bool](repeating: false, count: count)
        var order: [Int] = []
        for start in 0..<count where !visited[start] {
            visited[start] = true
            var path: [(node: Int, next: Int)] = [(start, 0)]
            while let top = path.last {
                if top.next < edges[top.node].count {
                    path[path.count - 1].next += 1
                    let to = edges[top.node][top.next]
                    if !visited[to] { visited[to] = true; path.append((to, 0)) }
                } else {
                    order.append(top.node)
                    path.removeLast()
                }
            }
        }
        var component = [Int](repeating: -1, count: count)
        var next = 0
        for start in order.reversed() where component[start] < 0 {
            var work = [start]
            component[start] = next
            while let node = work.popLast() {
                for from in reversed[node] where component[from] < 0 {
                    component[from] = next
                    work.append(from)
                }
            }
            next += 1
        }
        return component
    }
}

/// A binary min-heap of (cost, item) pairs.
struct MinimumQueue {
    private var heap: [(cost: Int, item: Int)] = []

    mutating func push(_ cost: Int, _ item: Int) {
        heap.append((cost, item))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].cost < heap[parent].cost else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (Int, Int)? {
        guard let first = heap.first else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var least = parent
                if left < heap.count, heap[left].cost < heap[least].cost { least = left }
                if right < heap.count, heap[right].cost < heap[least].cost { least = right }
                if least == parent { break }
                heap.swapAt(parent, least)
                parent = least
            }
        }
        return (first.cost, first.item)
    }
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
