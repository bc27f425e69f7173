/// A GGUF token's type (`tokenizer.ggml.token_type`).
public enum GGUFTokenType: Int, Sendable {
    /// An ordinary piece of text.
    case normal = 1
    /// The unknown token.
    case unknown = 2
    /// A control token (BOS, EOS, turn markers): matched in text only when special tokens are parsed, printed only
    /// when asked.
    case control = 3
    /// A token added by the model's authors (Gemma's runs of newlines and spaces): always matched whole in text.
    case userDefined = 4
    /// A token never used.
    case unused = 5
    /// A byte-fallback token `<0xXX>` (SentencePiece).
    case byte = 6

    /// The types of a GGUF vocabulary (`tokenizer.ggml.token_type`), normal where the file says nothing.
    static func list(_ values: [GGUFValue]?, count: Int) -> [GGUFTokenType] {
        (0..<count).map { index in
            guard let values, index < values.count, let raw = values[index].integer else { return .normal }
            return GGUFTokenType(rawValue: raw) ?? .normal
        }
    }
}

/// What llama.cpp makes of a GGUF vocabulary's special tokens: each token's
/// type, with the end-of-generation tokens — the end of sequence, the end of
/// turn (the file's, or the first of the usual names the vocabulary has) and
/// every token spelled like a known end marker (`<|im_end|>`,
/// `<end_of_turn>`, `<|eot_id|>`, `</s>`, …) — made control tokens: they
/// stop generation and are matched in text only when special tokens are
/// parsed.
struct VocabularyConventions: Sendable {
    /// Each token's type, control for the end-of-generation tokens.
    let types: [GGUFTokenType]
    /// The tokens that end a generation.
    let endOfGeneration: Set<Int>

    /// The end-of-turn names llama.cpp looks for when the file names no end-of-turn token, in its order.
    static let endOfTurnNames = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                                 "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"]
    /// Tokens llama.cpp takes as the end of a generation by their spelling.
    static let endOfGenerationNames: Set<String> = [
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>",
        "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<|fim_pad|>",
        "<|repo_name|>", "<|file_sep|>",
    ]

    /// The conventions for a vocabulary whose tokens spelled as the names above have the ids `ids`.
    init(ids: [String: Int], types fileTypes: [GGUFTokenType], eosID: Int?, endOfTurnID: Int?) {
        let endOfTurn = endOfTurnID ?? Self.endOfTurnNames.lazy.compactMap { ids[$0] }.first
        var stops = Set(Self.endOfGenerationNames.compactMap { ids[$0] })
        for id in [eosID, endOfTurn].compactMap({ $0 }) where fileTypes.indices.contains(id) { stops.insert(id) }
        var types = fileTypes
        for id in stops { types[id] = .control }
        self.types = types
        endOfGeneration = stops
    }
}

/// Splits text into runs of plain text and special tokens as llama.cpp does
/// before tokenizing: the special tokens — control, user-defined and unknown
/// ones — longest first, each cutting every plain run it occurs in, left to
/// right, at non-overlapping occurrences. User-defined tokens are always
/// matched; control and unknown tokens only when special tokens are parsed.
/// Works on UTF-8 bytes, so the matching is exact.
struct SpecialTokenSplitter: Sendable {
    /// One piece of the split text: a run of plain text (a range of the UTF-8 bytes) or a token.
    enum Fragment: Equatable {
        case text(Range<Int>)
        case token(Int)
    }

    private struct Special {
        let bytes: [UInt8]
        let id: Int
        let always: Bool
    }

    /// The specials in priority order: longest first, equal lengths by id.
    private let specials: [Special]
    /// A trie over the specials' bytes: node → (byte → child); terminal specials per node.
    private let children: [[UInt8: Int]]
    private let terminals: [[Int]]

    /// The splitter for a vocabulary (`types` indexed like `tokens`).
    init(tokens: [String], types: [GGUFTokenType]) {
        var specials: [Special] = []
        for (id, type) in types.enumerated() where id < tokens.count && !tokens[id].isEmpty {
            switch type {
            case .control, .unknown: specials.append(Special(bytes: Array(tokens[id].utf8), id: id, always: false))
            case .userDefined: specials.append(Special(bytes: Array(tokens[id].utf8), id: id, always: true))
            default: break
            }
        }
        specials.sort { ($0.bytes.count, -$0.id) > ($1.bytes.count, -$1.id) }
        var children: [[UInt8: Int]] = [[:]], terminals: [[Int]] = [[]]
        for (rank, special) in specials.enumerated() {
            var node = 0
            for byte in special.bytes {
                if let child = children[node][byte] {
                    node = child
                } else {
                    children.append([:])
                    terminals.append([])
                    children[node][byte] = children.count - 1
                    node = children.count - 1
                }
            }
            terminals[node].append(rank)
        }
        self.specials = specials
        self.children = children
        self.terminals = terminals
    }

    /// `bytes` (UTF-8 text) as fragments; with `parseSpecial` false only user-defined tokens are matched.
    func split(_ bytes: [UInt8], parseSpecial: Bool) -> [Fragment] {
        guard !bytes.isEmpty else { return [] }
        guard !specials.isEmpty else { return [.text(0..<bytes.count)] }
        // Every occurrence of every special that may be matched, as (rank, start).
        var occurrences: [(rank: Int, start: Int)] = []
        for start in bytes.indices {
            var node = 0, index = start
            while index < bytes.count, let child = children[node][bytes[index]] {
                node = child
                index += 1
                for rank in terminals[node] where specials[rank].always || parseSpecial { occurrences.append((rank, start)) }
            }
        }
        guard !occurrences.isEmpty else { return [.text(0..<bytes.count)] }
        occurrences.sort { ($0.rank, $0.start) < ($1.rank, $1.start) }
        // In priority order, each special takes its leftmost non-overlapping occurrences that lie in text no
        // special has taken yet: what cutting the plain runs one special after another leaves.
        var claimed = [Bool](repeating: false, count: bytes.count)
        var matches: [(start: Int, end: Int, id: Int)] = []
        var previous: (rank: Int, end: Int) = (-1, 0)
        for occurrence in occurrences {
            let end = occurrence.start + specials[occurrence.rank].bytes.count
            if occurrence.rank == previous.rank, occurrence.start < previous.end { continue }
            guard !claimed[occurrence.start..<end].contains(true) else { continue }
            for index in occurrence.start..<end { claimed[index] = true }
            matches.append((occurrence.start, end, specials[occurrence.rank].id))
            previous = (occurrence.rank, end)
        }
        matches.sort { $0.start < $1.start }
        var fragments: [Fragment] = []
        var cursor = 0
        for match in matches {
            if match.start > cursor { fragments.append(.text(cursor..<match.start)) }
            fragments.append(.token(match.id))
            cursor = match.end
        }
        if cursor < bytes.count { fragments.append(.text(cursor..<bytes.count)) }
        return fragments
    }
}
