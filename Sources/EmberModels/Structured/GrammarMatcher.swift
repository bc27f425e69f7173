/// Runs a ``Grammar`` over bytes as a pushdown automaton whose configurations are interned: a *state* is the set of
/// stacks still alive after the bytes so far, numbered the first time it is seen, and the move from a state on a
/// byte is computed once and remembered. A JSON value walks through few distinct states (inside a string the
/// state repeats), so after warming up a byte costs one table lookup — what lets ``TokenMask`` test a whole
/// vocabulary quickly.
///
/// Not thread-safe: ``SharedGrammar`` serialises the generations that share one.
final class GrammarMatcher {
    /// One way the grammar can still go: positions in `grammar.elements`, innermost last; `partial` is the number
    /// being read when the innermost position is a number element.
    struct Stack: Hashable {
        var frames: [Int32]
        var partial: [UInt8] = []
    }

    /// A state's number: an index into ``states``.
    typealias State = Int32
    /// The state of no live stack: the bytes so far cannot be continued to a match.
    static let dead: State = -1

    let grammar: Grammar
    private(set) var states: [[Stack]] = []
    private var stateNumbers: [Set<Stack>: State] = [:]
    /// `transitions[state * 256 + byte]`: the next state, `dead`, or `unknown` before it is first asked.
    private var transitions: [State] = []
    private static let unknown: State = -2
    /// Whether each state has matched the whole grammar (a stack with no frames left).
    private(set) var accepting: [Bool] = []
    /// The bytes each state can take — a superset (a byte may still lead only to stacks that cannot finish), so a
    /// byte outside it is dead without looking further.
    private var liveBytes: [ByteSet] = []
    /// The state before any byte.
    private(set) var initial: State = 0

    /// States past which a shared matcher is replaced by a fresh one for new generations (each costs 1 KB of transitions).
    static let stateLimit = 20_000

    private func startStacks() -> Set<Stack> {
        var start = Set<Stack>()
        for position in grammar.rules[grammar.root] { expand(Stack(frames: [Int32(position)]), into: &start) }
        return start
    }

    /// Fewest bytes that finish the alternative from each position of `grammar.elements`.
    private let shortestRest: [Int]
    /// Fewest bytes that finish a match from each state.
    private(set) var shortestFinish: [Int] = []
    /// The most bytes one position can still require (its finite shortest rest at most): how far from a token limit
    /// a single token can matter.
    let largestRest: Int

    init(_ grammar: Grammar) {
        self.grammar = grammar
        shortestRest = grammar.shortestRests(ruleLengths: grammar.shortestRuleLengths())
        largestRest = shortestRest.filter { $0 < Grammar.never }.max() ?? 0
        initial = intern(startStacks())
    }

    /// Fewest bytes that finish a match from `state` (0 when it accepts; large when it cannot finish).
    func shortestFinish(_ state: State) -> Int { state >= 0 ? shortestFinish[Int(state)] : Int(Int32.max) }

    /// The state after `byte` from `state` (``dead`` when the byte cannot follow).
    func step(_ state: State, _ byte: UInt8) -> State {
        guard state >= 0 else { return Self.dead }
        guard liveBytes[Int(state)].contains(byte) else { return Self.dead }
        let slot = Int(state) &* 256 &+ Int(byte)
        let known = transitions[slot]
        if known != Self.unknown { return known }
        var next = Set<Stack>()
        for stack in states[Int(state)] { advance(stack, byte, into: &next) }
        let result = next.isEmpty ? Self.dead : intern(next)
        transitions[slot] = result
        return result
    }

    /// The state after all of `bytes` from `state`.
    func step(_ state: State, _ bytes: [UInt8]) -> State {
        var current = state
        for byte in bytes {
            current = step(current, byte)
            if current == Self.dead { break }
        }
        return current
    }

    func isAccepting(_ state: State) -> Bool { state >= 0 && accepting[Int(state)] }
    /// Whether `state` can take more bytes.
    func canContinue(_ state: State) -> Bool { state >= 0 && !liveBytes[Int(state)].isEmpty }

    // MARK: - Stacks

    /// The number of the state of `candidates` (stacks that can never finish dropped), ``dead`` when none is left.
    private func intern(_ candidates: Set<Stack>) -> State {
        var stacks = candidates
        var finishes: [Stack: Int] = [:]
        for stack in candidates {
            let finish = finishLength(stack)
            if finish >= Grammar.never { stacks.remove(stack) } else { finishes[stack] = finish }
        }
        guard !stacks.isEmpty else { return Self.dead }
        if let known = stateNumbers[stacks] { return known }
        let number = State(states.count)
        states.append(Array(stacks))
        stateNumbers[stacks] = number
        transitions += repeatElement(Self.unknown, count: 256)
        accepting.append(stacks.contains { $0.frames.isEmpty })
        var live = ByteSet()
        for stack in stacks {
            guard let top = stack.frames.last else { continue }
            switch grammar.elements[Int(top)] {
            case .bytes(let set): live = live.union(set)
            case .number(let index):
                for byte in "-0123456789.".utf8 where grammar.numbers[index].canExtend(stack.partial + [byte]) { live.insert(byte) }
            case .rule, .end: break
            }
        }
        liveBytes.append(live)
        shortestFinish.append(finishes.values.min() ?? Grammar.never)
        return number
    }

    /// Fewest bytes that finish `stack`.
    private func finishLength(_ stack: Stack) -> Int {
        var total = 0
        for (level, frame) in stack.frames.enumerated() {
            if level == stack.frames.count - 1, case .number(let index) = grammar.elements[Int(frame)], !stack.partial.isEmpty {
                total += (grammar.numbers[index].canComplete(stack.partial) ? 0 : 1) + shortestRest[Int(frame) + 1]
            } else {
                total += shortestRest[Int(frame)]
            }
            if total >= Grammar.never { return Grammar.never }
        }
        return total
    }

    /// Adds to `out` every stack `stack` becomes once its innermost position is a byte set or a number (or it has
    /// no frames left: a match). A worklist with the stacks already seen, so a part of the grammar that can match
    /// nothing costs once, not once per way of reaching it; a stack deeper than 4,096 frames is dropped (the
    /// compiler refuses the left recursion that would build one).
    private func expand(_ stack: Stack, into out: inout Set<Stack>) {
        var work = [stack]
        var seen = Set<Stack>()
        while let current = work.popLast() {
            guard current.frames.count <= 4096, seen.insert(current).inserted else { continue }
            guard let top = current.frames.last else {
                out.insert(current)
                continue
            }
            switch grammar.elements[Int(top)] {
            case .bytes:
                out.insert(current)
            case .number(let index):
                out.insert(current)
                if grammar.numbers[index].canComplete(current.partial) {
                    var done = current
                    done.partial = []
                    done.frames[done.frames.count - 1] += 1
                    work.append(done)
                }
            case .end:
                var popped = current
                popped.frames.removeLast()
                work.append(popped)
            case .rule(let rule):
                var base = current
                // The return position, unless the rule ends the alternative (then the frame is dropped: a chain of
                // rules each ending in the next keeps the stack short).
                if grammar.elements[Int(top) + 1] == .end { base.frames.removeLast() } else { base.frames[base.frames.count - 1] = top + 1 }
                for start in grammar.rules[rule] {
                    var next = base
                    next.frames.append(Int32(start))
                    work.append(next)
                }
            }
        }
    }

    private func advance(_ stack: Stack, _ byte: UInt8, into out: inout Set<Stack>) {
        guard let top = stack.frames.last else { return }
        switch grammar.elements[Int(top)] {
        case .bytes(let set):
            guard set.contains(byte) else { return }
            var next = stack
            next.frames[next.frames.count - 1] = top + 1
            expand(next, into: &out)
        case .number(let index):
            let digits = stack.partial + [byte]
            guard grammar.numbers[index].canExtend(digits) else { return }
            var next = stack
            next.partial = digits
            expand(next, into: &out)
        case .rule, .end:
            return // expanded stacks never stop here
        }
    }
}
