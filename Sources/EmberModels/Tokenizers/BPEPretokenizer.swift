import EmberCore

/// How byte-level BPE cuts text into words before merging, chosen by the
/// file's `tokenizer.ggml.pre`, with llama.cpp's semantics: each step of the
/// kind re-splits every piece the previous steps left, and a piece never
/// merges with its neighbours.
///
/// - `gpt2`: GPT-2's pattern — `'s|'t|'re|'ve|'m|'ll|'d`, ` ?` + a run of
///   letters, of numbers or of other symbols, and whitespace that leaves its
///   last space to the next word;
/// - `smollm`: every number character alone, then GPT-2's pattern;
/// - `llama3` (Llama 3's `llama-bpe`): contractions in any case, an optional
///   non-letter before a run of letters, numbers in runs of up to three,
///   symbols with the line breaks after them, line breaks with the
///   whitespace before them; whole words that are tokens skip the merges;
/// - `qwen2`: Llama 3's, with every number character alone;
/// - `standard` (no or `default` pre-tokenizer): runs of punctuation, GPT-2's
///   pattern, runs of numbers, then ASCII digits in threes.
public enum BPEPretokenizer: String, Sendable, CaseIterable {
    /// GPT-2's pattern.
    case gpt2
    /// Every number character alone, then GPT-2's pattern (SmolLM2, StarCoder).
    case smollm
    /// Llama 3's `llama-bpe` pattern; whole words that are tokens skip the merges.
    case llama3
    /// Llama 3's pattern with every number character alone (Qwen2, Qwen3).
    case qwen2
    /// The pre-tokenizer for files that name none (or `default`).
    case standard

    /// The kind `tokenizer.ggml.pre` names (nil or "default": the standard one); nil for a name Ember does not know.
    public init?(ggufName: String?) {
        switch ggufName ?? "default" {
        case "", "default": self = .standard
        case "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion": self = .gpt2
        case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b": self = .smollm
        case "llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe": self = .llama3
        case "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2": self = .qwen2
        default: return nil
        }
    }

    /// The `tokenizer.ggml.pre` names Ember reads, for error messages.
    public static let knownNames = "default, gpt-2, phi-2, mpt, olmo, smollm, starcoder, refact, command-r, llama-bpe, llama3, falcon3, dbrx, qwen2, deepseek-r1-qwen, megrez, stablelm2"

    /// Whether a whole word that is already a token skips the merges (llama.cpp's `ignore_merges`).
    var wordsThatAreTokensStayWhole: Bool { self == .llama3 }

    /// Whether files of this kind put BOS first when they do not say (`add_bos_token` absent).
    var addsBOSByDefault: Bool { self == .llama3 }

    /// The words of `text`, in order.
    func split(_ text: Substring) -> [String] {
        let scalars = Array(text.unicodeScalars)
        var pieces = [0..<scalars.count]
        for step in steps { pieces = pieces.flatMap { step(scalars, $0) } }
        return pieces.filter { !$0.isEmpty }.map { range in
            var view = String.UnicodeScalarView()
            view.append(contentsOf: scalars[range])
            return String(view)
        }
    }

    private typealias Step = ([Unicode.Scalar], Range<Int>) -> [Range<Int>]

    private var steps: [Step] {
        switch self {
        case .gpt2: [Self.gpt2Words]
        case .smollm: [Self.isolating { $0.isNumber }, Self.gpt2Words]
        case .llama3: [{ Self.llama3Words($0, $1, digitsPerNumber: 3) }]
        case .qwen2: [{ Self.llama3Words($0, $1, digitsPerNumber: 1) }]
        case .standard: [Self.runs { $0.isPunctuation || "$+<=>^~|".unicodeScalars.contains($0) }, Self.gpt2Words,
                         Self.runs { $0.isNumber }, Self.asciiDigitTriples]
        }
    }

    // MARK: Steps

    /// Every scalar for which `matches` holds alone, the runs between them whole.
    private static func isolating(_ matches: @escaping (Unicode.Scalar) -> Bool) -> Step {
        { scalars, range in
            var pieces: [Range<Int>] = [], start = range.lowerBound
            for index in range where matches(scalars[index]) {
                pieces += [start..<index, index..<(index + 1)]
                start = index + 1
            }
            return pieces + [start..<range.upperBound]
        }
    }

    /// Maximal runs of scalars for which `matches` holds, and the gaps between them.
    private static func runs(_ matches: @escaping (Unicode.Scalar) -> Bool) -> Step {
        { scalars, range in
            var pieces: [Range<Int>] = [], start = range.lowerBound, index = range.lowerBound
            while index < range.upperBound {
                guard matches(scalars[index]) else { index += 1; continue }
                var end = index
                while end < range.upperBound, matches(scalars[end]) { end += 1 }
                pieces += [start..<index, index..<end]
                start = end
                index = end
            }
            return pieces + [start..<range.upperBound]
        }
    }

    /// `[0-9][0-9][0-9]`: each three ASCII digits in a row apart from the rest.
    private static func asciiDigitTriples(_ scalars: [Unicode.Scalar], _ range: Range<Int>) -> [Range<Int>] {
        var pieces: [Range<Int>] = [], start = range.lowerBound, index = range.lowerBound
        while index + 3 <= range.upperBound {
            if scalars[index..<(index + 3)].allSatisfy({ $0.isASCIIDigit }) {
                pieces += [start..<index, index..<(index + 3)]
                index += 3
                start = index
            } else {
                index += 1
            }
        }
        return pieces + [start..<range.upperBound]
    }

    /// GPT-2's pattern: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`, and any other
    /// whitespace run whole.
    private static func gpt2Words(_ scalars: [Unicode.Scalar], _ range: Range<Int>) -> [Range<Int>] {
        var cutter = Cutter(scalars: scalars, range: range)
        while cutter.position < range.upperBound {
            let scalar = scalars[cutter.position]
            if cutter.takeContraction(caseInsensitive: false) { continue }
            let start = scalar == " " ? cutter.position + 1 : cutter.position
            let next = cutter.kind(at: start)
            if let run = next, run == .letter || run == .number {
                cutter.advance(to: cutter.end(of: run, from: start))
                continue
            }
            if next == .other {
                cutter.advance(to: cutter.end(of: .other, from: start))
                continue
            }
            cutter.takeWhitespace(lineBreaksEndIt: false)
        }
        return cutter.pieces
    }

    /// Llama 3's pattern (`qwen2`'s with one digit per number):
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    private static func llama3Words(_ scalars: [Unicode.Scalar], _ range: Range<Int>, digitsPerNumber: Int) -> [Range<Int>] {
        var cutter = Cutter(scalars: scalars, range: range)
        while cutter.position < range.upperBound {
            let position = cutter.position, scalar = scalars[position]
            let kind = cutter.kind(at: position)
            if cutter.takeContraction(caseInsensitive: true) { continue }
            if scalar != "\r", scalar != "\n", kind != .number, kind == .letter || cutter.kind(at: position + 1) == .letter {
                cutter.advance(to: cutter.end(of: .letter, from: position + 1))
                continue
            }
            if kind == .number {
                let end = cutter.end(of: .number, from: position)
                var start = position
                while start < end {
                    cutter.advance(to: min(start + digitsPerNumber, end))
                    start = min(start + digitsPerNumber, end)
                }
                continue
            }
            let symbolStart = scalar == " " ? position + 1 : position
            if cutter.kind(at: symbolStart) == .other || (scalar == " " && cutter.kind(at: symbolStart) == nil) {
                var end = cutter.end(of: .other, from: symbolStart)
                while end < range.upperBound, scalars[end] == "\r" || scalars[end] == "\n" { end += 1 }
                cutter.advance(to: end)
                continue
            }
            cutter.takeWhitespace(lineBreaksEndIt: true)
        }
        return cutter.pieces
    }

    /// Cuts one range into pieces from left to right.
    private struct Cutter {
        enum Kind { case letter, number, whitespace, other }

        let scalars: [Unicode.Scalar]
        let range: Range<Int>
        private(set) var position: Int
        private(set) var pieces: [Range<Int>] = []

        init(scalars: [Unicode.Scalar], range: Range<Int>) {
            self.scalars = scalars
            self.range = range
            position = range.lowerBound
        }

        /// The kind of the scalar at `index`, nil past the range.
        func kind(at index: Int) -> Kind? {
            guard range.contains(index) else { return nil }
            let scalar = scalars[index]
            if scalar.properties.isWhitespace { return .whitespace }
            if scalar.isLetter { return .letter }
            if scalar.isNumber { return .number }
            return .other
        }

        /// Where the run of `kind` starting at `start` ends.
        func end(of kind: Kind, from start: Int) -> Int {
            var end = start
            while self.kind(at: end) == kind { end += 1 }
            return end
        }

        mutating func advance(to end: Int) {
            if end > position { pieces.append(position..<end) }
            position = end
        }

        /// `'s|'t|'m|'d|'re|'ve|'ll` here (letters in any case when asked).
        mutating func takeContraction(caseInsensitive: Bool) -> Bool {
            guard scalars[position] == "'", position + 1 < range.upperBound else { return false }
            func letter(_ index: Int) -> Character? {
                guard index < range.upperBound else { return nil }
                let character = Character(scalars[index])
                return caseInsensitive && scalars[index].isASCII ? Character(character.lowercased()) : character
            }
            if let next = letter(position + 1), "stmd".contains(next) {
                advance(to: position + 2)
                return true
            }
            if let first = letter(position + 1), let second = letter(position + 2), ["re", "ve", "ll"].contains(String([first, second])) {
                advance(to: position + 3)
                return true
            }
            return false
        }

        /// A whitespace run: with `lineBreaksEndIt`, up to its last line break when it has one; else all of it but
        /// its last space when more follows (that space starts the next word); else one scalar.
        mutating func takeWhitespace(lineBreaksEndIt: Bool) {
            var count = 0, afterLastBreak = 0
            while kind(at: position + count) == .whitespace {
                if scalars[position + count] == "\r" || scalars[position + count] == "\n" { afterLastBreak = position + count + 1 }
                count += 1
            }
            if lineBreaksEndIt, afterLastBreak > 0 { return advance(to: afterLastBreak) }
            if count > 1, position + count < range.upperBound { return advance(to: position + count - 1) }
            advance(to: position + max(count, 1))
        }
    }
}

private extension Unicode.Scalar {
    var isLetter: Bool {
        switch properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter: true
        default: false
        }
    }

    var isNumber: Bool {
        switch properties.generalCategory {
        case .decimalNumber, .letterNumber, .otherNumber: true
        default: false
        }
    }

    var isPunctuation: Bool {
        switch properties.generalCategory {
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation, .initialPunctuation,
             .finalPunctuation, .otherPunctuation: true
        default: false
        }
    }

    var isASCIIDigit: Bool { value >= 0x30 && value <= 0x39 }
}
