import EmberCore
import Foundation

/// Byte-level BPE as GPT-2 defined it, read from a GGUF's tokenizer metadata
/// (`tokenizer.ggml.model = gpt2`): special tokens are found in the text
/// first; the rest is cut into words by the file's pre-tokenizer
/// (``BPEPretokenizer``: SmolLM's, GPT-2's, Llama 3's, Qwen2's…), each word's
/// UTF-8 bytes are mapped to printable characters, and merges are applied by
/// rank.
public final class ByteLevelBPE: TextTokenizer, @unchecked Sendable {
    /// The vocabulary, indexed by token id, in GPT-2's byte-to-character form (special tokens as their text).
    public let tokens: [String]
    let ids: [String: Int]
    private let ranks: [String: Int]         // "left right" → rank
    /// Control and user-defined tokens, split out of raw text before the rest is tokenized.
    private let splitter: SpecialTokenSplitter
    /// The beginning-of-sequence token id, nil when the file names none.
    public let bosID: Int?
    /// The end-of-sequence token id, nil when the file names none.
    public let eosID: Int?
    /// Whether `encode` puts `bosID` first by default (`tokenizer.ggml.add_bos_token`, false when absent).
    public let addBOS: Bool
    /// The ids that end a generation: the end of sequence and of turn, and the usual end markers (`<|im_end|>`, …).
    public let endOfGenerationIDs: Set<Int>
    /// Each token's type, control for the end-of-generation tokens.
    private let types: [GGUFTokenType]
    /// How text is cut into words before merging.
    public let pretokenizer: BPEPretokenizer

    /// GPT-2's byte ⇄ character table: printable bytes stand for themselves, the rest map to U+0100…
    static let byteToCharacter: [Character] = {
        var table = [Character](repeating: " ", count: 256)
        var next = 256
        for byte in 0..<256 {
            let printable = (33...126).contains(byte) || (161...172).contains(byte) || (174...255).contains(byte)
            if printable {
                table[byte] = Character(Unicode.Scalar(UInt8(byte)))
            } else {
                table[byte] = Character(Unicode.Scalar(UInt32(next))!)
                next += 1
            }
        }
        return table
    }()

    static let characterToByte: [Character: UInt8] = Dictionary(
        uniqueKeysWithValues: byteToCharacter.enumerated().map { ($0.element, UInt8($0.offset)) })

    /// A tokenizer from its parts: `merges` as "left right" pairs by rank, `tokenTypes` as GGUF's (3 control and 4 user-defined tokens are matched whole in text).
    public init(tokens: [String], merges: [String], tokenTypes: [Int], bosID: Int?, eosID: Int?, addBOS: Bool, endOfTurnID: Int? = nil,
                pretokenizer: BPEPretokenizer = .smollm) {
        self.pretokenizer = pretokenizer
        self.tokens = tokens
        var ids: [String: Int] = [:]
        ids.reserveCapacity(tokens.count)
        for (id, token) in tokens.enumerated() where ids[token] == nil { ids[token] = id }
        self.ids = ids
        var ranks: [String: Int] = [:]
        ranks.reserveCapacity(merges.count)
        for (rank, merge) in merges.enumerated() where ranks[merge] == nil { ranks[merge] = rank }
        self.ranks = ranks
        let fileTypes = (0..<tokens.count).map { index in
            index < tokenTypes.count ? GGUFTokenType(rawValue: tokenTypes[index]) ?? .normal : .normal
        }
        let conventions = VocabularyConventions(ids: ids, types: fileTypes, eosID: eosID, endOfTurnID: endOfTurnID)
        types = conventions.types
        endOfGenerationIDs = conventions.endOfGeneration
        splitter = SpecialTokenSplitter(tokens: tokens, types: types)
        self.bosID = bosID
        self.eosID = eosID
        self.addBOS = addBOS
    }

    /// Reads the tokenizer from GGUF metadata; a missing or malformed field is a ``ModelFileError``.
    public convenience init(gguf: GGUFFile) throws {
        func strings(_ key: String) throws -> [String] {
            guard let values = try gguf.require(key).array, let strings = Optional(values.compactMap(\.string)),
                  strings.count == values.count else {
                throw ModelFileError.invalidField(file: gguf.path, field: key, found: "not an array of strings", expected: "an array of strings")
            }
            return strings
        }
        let model = try gguf.require("tokenizer.ggml.model").string
        guard model == "gpt2" else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.ggml.model", found: model ?? "?", expected: "gpt2")
        }
        let pre = gguf.metadata["tokenizer.ggml.pre"]
        guard let pretokenizer = BPEPretokenizer(ggufName: pre?.string) else {
            throw ModelFileError.invalidField(file: gguf.path, field: "tokenizer.ggml.pre", found: pre.map { "\($0)" } ?? "?",
                                              expected: "a pre-tokenizer Ember knows (\(BPEPretokenizer.knownNames))")
        }
        let tokens = try strings("tokenizer.ggml.tokens")
        let merges = try strings("tokenizer.ggml.merges")
        let types = gguf.metadata["tokenizer.ggml.token_type"]?.array?.compactMap(\.integer) ?? []
        func tokenID(_ key: String) throws -> Int? {
            guard let value = gguf.metadata[key] else { return nil }
            guard let id = value.integer, tokens.indices.contains(id) else {
                throw ModelFileError.invalidField(file: gguf.path, field: key, found: "\(value)", expected: "a token id below \(tokens.count)")
            }
            return id
        }
        self.init(tokens: tokens, merges: merges, tokenTypes: types,
                  bosID: try tokenID("tokenizer.ggml.bos_token_id"), eosID: try tokenID("tokenizer.ggml.eos_token_id"),
                  addBOS: gguf.metadata["tokenizer.ggml.add_bos_token"]?.bool ?? pretokenizer.addsBOSByDefault,
                  endOfTurnID: try tokenID("tokenizer.ggml.eot_token_id"), pretokenizer: pretokenizer)
    }

    // MARK: Encoding

    /// Token ids for `text`; special tokens written in the text become their ids.
    /// With `parseSpecial: false` control-token text is ordinary text (for user content; user-defined tokens are
    /// still matched, as llama.cpp does);
    /// `withBOS` overrides the file's `add_bos_token`.
    public func encode(_ text: String, parseSpecial: Bool = true, withBOS: Bool? = nil) -> [Int] {
        var result: [Int] = (withBOS ?? addBOS) ? bosID.map { [$0] } ?? [] : []
        let bytes = Array(text.utf8)
        for fragment in splitter.split(bytes, parseSpecial: parseSpecial) {
            switch fragment {
            case let .token(id): result.append(id)
            case let .text(range):
                for word in pretokenizer.split(Substring(String(decoding: bytes[range], as: UTF8.self))) { result += bpe(word) }
            }
        }
        return result
    }

    /// Merges one pre-token's byte characters by rank and maps them to ids.
    private func bpe(_ piece: String) -> [Int] {
        var symbols = piece.utf8.map { String(Self.byteToCharacter[Int($0)]) }
        guard !symbols.isEmpty else { return [] }
        if pretokenizer.wordsThatAreTokensStayWhole, let id = ids[symbols.joined()] { return [id] }
        while symbols.count > 1 {
            var best: (rank: Int, index: Int)?
            for index in 0..<(symbols.count - 1) {
                if let rank = ranks[symbols[index] + " " + symbols[index + 1]], best == nil || rank < best!.rank {
                    best = (rank, index)
                }
            }
            guard let merge = best else { break }
            symbols[merge.index] += symbols[merge.index + 1]
            symbols.remove(at: merge.index + 1)
        }
        return symbols.flatMap { symbol -> [Int] in
            if let id = ids[symbol] { return [id] }
            // Not in the vocabulary as a whole: its single byte characters are.
            return symbol.map { ids[String($0)] }.compactMap { $0 }
        }
    }

    // MARK: Decoding

    /// Whether `id` stands for text: a normal, byte or user-defined token.
    public func isText(_ id: Int) -> Bool {
        guard types.indices.contains(id) else { return false }
        return [.normal, .byte, .userDefined].contains(types[id])
    }

    /// The text tokens as a byte trie, built on first use.
    public var tokenTrie: TokenTrie { trieCache.value { TokenTrie(self) } }
    private let trieCache = BuiltOnce<TokenTrie>()

    /// The bytes a token stands for (special tokens: their text).
    public func bytes(of id: Int) -> [UInt8] {
        guard tokens.indices.contains(id) else { return [] }
        let token = tokens[id]
        if types[id] != .normal { return Array(token.utf8) }
        return token.compactMap { Self.characterToByte[$0] }
    }

    /// Number of tokens in the vocabulary.
    public var count: Int { tokens.count }

    /// The id of the token spelled `token`, if any.
    public func id(of token: String) -> Int? { ids[token] }

    /// Whether `id` ends a generation (end of sequence, end of turn, or another end marker).
    public func endsGeneration(_ id: Int) -> Bool { endOfGenerationIDs.contains(id) }

    /// The text of `ids` (invalid UTF-8 replaced).
    public func decode(_ ids: [Int]) -> String {
        String(decoding: ids.flatMap { bytes(of: $0) }, as: UTF8.self)
    }
}

/// Turns a stream of tokens into text pieces without splitting a UTF-8
/// character: bytes of an incomplete character wait for the next token.
public struct StreamingDecoder {
    private var pending: [UInt8] = []
    /// A decoder with nothing pending.
    public init() {}

    /// The complete text the bytes so far make, keeping an unfinished character back.
    public mutating func append(_ bytes: [UInt8]) -> String {
        pending += bytes
        var end = pending.count
        // Find where the last (possibly unfinished) character starts.
        var back = 0
        while back < 4 && back < pending.count && (pending[pending.count - 1 - back] & 0xC0) == 0x80 { back += 1 }
        if back < pending.count {
            let lead = pending[pending.count - 1 - back]
            let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
            if length > back + 1 { end = pending.count - 1 - back }
        }
        let text = String(decoding: pending[0..<end], as: UTF8.self)
        pending.removeFirst(end)
        return text
    }

    /// Whatever is left (an unfinished character becomes U+FFFD).
    public mutating func finish() -> String {
        defer { pending.removeAll() }
        return String(decoding: pending, as: UTF8.self)
    }
}
