import EmberCore
import Foundation

/// BERT's tokenizer: basic pre-tokenization (text cleanup, CJK characters
/// split apart, accents stripped and lower-cased for uncased models,
/// punctuation split off), then greedy longest-match WordPiece with `##`
/// continuations, `[UNK]` for words it cannot cover, and `[CLS] … [SEP]`
/// around the result, truncated to `maxLength` tokens.
public final class WordPiece: @unchecked Sendable {
    /// Token text to id; continuation pieces carry `continuingPrefix`.
    public let vocabulary: [String: Int]
    /// Whether text is lower-cased before matching (uncased models).
    public let lowercase: Bool
    /// Whether accents (combining marks after canonical decomposition) are removed; defaults to `lowercase`.
    public let stripAccents: Bool
    /// Whether each CJK ideograph becomes a word of its own.
    public let splitsCJK: Bool
    /// Whether NUL, U+FFFD and control characters are dropped and every whitespace character becomes a space.
    public let cleansText: Bool
    /// The id of `[UNK]`, used for a word the vocabulary cannot cover.
    public let unknownID: Int
    /// The id of `[CLS]`, the first token of every sequence.
    public let clsID: Int
    /// The id of `[SEP]`, the last token of every sequence.
    public let sepID: Int
    /// The id of `[PAD]`, 0 when the vocabulary has none.
    public let padID: Int
    /// The prefix marking a piece that continues a word, `##` by default.
    public let continuingPrefix: String
    /// Words longer than this many Unicode scalars become `[UNK]` (1…1000, default 100).
    public let maxCharactersPerWord: Int
    /// Scalars of the longest vocabulary entry: no match can be longer.
    let longestToken: Int
    /// Tokens per sequence at most, [CLS] and [SEP] included.
    public var maxLength: Int

    /// A tokenizer over `vocabulary`, which must hold `[UNK]`, `[CLS]` and `[SEP]`; `file` names the source in errors.
    /// `maxLength` is raised to at least 2 and `maxCharactersPerWord` clamped to 1…1000.
    public init(vocabulary: [String: Int], lowercase: Bool = true, stripAccents: Bool? = nil, splitsCJK: Bool = true,
                cleansText: Bool = true, continuingPrefix: String = "##", maxCharactersPerWord: Int = 100,
                maxLength: Int = 512, file: String = "vocabulary") throws {
        func id(_ token: String) throws -> Int {
            guard let id = vocabulary[token] else {
                throw ModelFileError.invalidField(file: file, field: "vocab[\(token)]", found: "missing", expected: "the special token \(token)")
            }
            return id
        }
        self.vocabulary = vocabulary
        self.lowercase = lowercase
        self.stripAccents = stripAccents ?? lowercase // BERT strips accents whenever it lower-cases, unless told otherwise
        self.splitsCJK = splitsCJK
        self.cleansText = cleansText
        self.continuingPrefix = continuingPrefix
        self.maxCharactersPerWord = min(max(1, maxCharactersPerWord), 1000) // matching is quadratic in a word's length
        longestToken = vocabulary.keys.reduce(0) { max($0, $1.unicodeScalars.count) }
        self.maxLength = max(2, maxLength)
        unknownID = try id("[UNK]")
        clsID = try id("[CLS]")
        sepID = try id("[SEP]")
        padID = vocabulary["[PAD]"] ?? 0
    }

    /// Reads `tokenizer.json` (Hugging Face tokenizers: a WordPiece model and a BertNormalizer).
    public convenience init(tokenizerJSON path: String, maxLength: Int) throws {
        let root = try JSONFields.load(path)!
        guard let model = try root.object("model") else {
            throw ModelFileError.invalidField(file: path, field: "model", found: "missing", expected: "a tokenizer.json object")
        }
        guard try model.string("type") == "WordPiece", let entries = model.object["vocab"] as? [String: Any] else {
            throw ModelFileError.invalidField(file: path, field: "model.type", found: "\(model.object["type"].map(JSONFields.describe) ?? "missing")",
                                              expected: "WordPiece with a vocab")
        }
        var vocabulary: [String: Int] = [:]
        vocabulary.reserveCapacity(entries.count)
        for (token, value) in entries {
            guard let id = JSONFields.integer(value), id >= 0, id < 10_000_000 else {
                throw ModelFileError.invalidField(file: path, field: "model.vocab[\(token)]", found: JSONFields.describe(value),
                                                  expected: "a token id (a whole number 0…9999999)")
            }
            vocabulary[token] = id
        }
        let normalizer = try root.object("normalizer") ?? JSONFields([:], file: path)
        try self.init(vocabulary: vocabulary, lowercase: try normalizer.bool("lowercase", default: true),
                      stripAccents: try normalizer.optionalBool("strip_accents"),
                      splitsCJK: try normalizer.bool("handle_chinese_chars", default: true),
                      cleansText: try normalizer.bool("clean_text", default: true),
                      continuingPrefix: try model.string("continuing_subword_prefix", default: "##") ?? "##",
                      maxCharactersPerWord: try model.integer("max_input_chars_per_word", in: 1...1000, default: 100),
                      maxLength: maxLength, file: path)
    }

    /// Token ids for `text`: [CLS], the WordPiece tokens (cut to fit), [SEP].
    public func encode(_ text: String) -> [Int] {
        var ids = [clsID]
        for word in words(normalize(text)) {
            ids += pieces(of: word)
            if ids.count >= maxLength - 1 { break }
        }
        if ids.count > maxLength - 1 { ids.removeSubrange((maxLength - 1)...) }
        ids.append(sepID)
        return ids
    }

    // MARK: Normalisation and pre-tokenisation

    func normalize(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if cleansText {
                if scalar.value == 0 || scalar.value == 0xFFFD || Self.isControl(scalar) { continue }
                if Self.isWhitespace(scalar) {
                    scalars.append(" ")
                    continue
                }
            }
            if splitsCJK, Self.isCJK(scalar) {
                scalars.append(" ")
                scalars.append(scalar)
                scalars.append(" ")
            } else {
                scalars.append(scalar)
            }
        }
        var result = String(scalars)
        if stripAccents {
            result = String(String.UnicodeScalarView(result.decomposedStringWithCanonicalMapping.unicodeScalars.filter {
                $0.properties.generalCategory != .nonspacingMark
            }))
        }
        if lowercase { result = result.lowercased() }
        return result
    }

    /// Whitespace-separated words, with every punctuation character a word of its own.
    func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = String.UnicodeScalarView()
        func flush() {
            if !current.isEmpty { words.append(String(current)) }
            current = String.UnicodeScalarView()
        }
        for scalar in text.unicodeScalars {
            if Self.isWhitespace(scalar) {
                flush()
            } else if Self.isPunctuation(scalar) {
                flush()
                words.append(String(scalar))
            } else {
                current.append(scalar)
            }
        }
        flush()
        return words
    }

    /// Greedy longest-match WordPiece; a word it cannot cover whole is [UNK].
    func pieces(of word: String) -> [Int] {
        let characters = Array(word.unicodeScalars)
        guard characters.count <= maxCharactersPerWord else { return [unknownID] }
        var ids: [Int] = []
        var start = 0
        while start < characters.count {
            var end = min(characters.count, start + longestToken)
            var found: Int?
            while start < end {
                var piece = String(String.UnicodeScalarView(characters[start..<end]))
                if start > 0 { piece = continuingPrefix + piece }
                if let id = vocabulary[piece] {
                    found = id
                    break
                }
                end -= 1
            }
            guard let id = found else { return [unknownID] }
            ids.append(id)
            start = end
        }
        return ids
    }

    // MARK: Character classes (as BERT defines them)

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar.properties.isWhitespace
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "\t" || scalar == "\n" || scalar == "\r" { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .surrogate, .privateUse, .unassigned: return true
        default: return false
        }
    }

    static func isPunctuation(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if (33...47).contains(value) || (58...64).contains(value) || (91...96).contains(value) || (123...126).contains(value) {
            return true
        }
        switch scalar.properties.generalCategory {
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
             .initialPunctuation, .finalPunctuation, .otherPunctuation:
            return true
        default:
            return false
        }
    }

    static func isCJK(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x4E00...0x9FFF, 0x3400...0x4DBF, 0x20000...0x2A6DF, 0x2A700...0x2B73F, 0x2B740...0x2B81F,
             0x2B820...0x2CEAF, 0xF900...0xFAFF, 0x2F800...0x2FA1F:
            return true
        default:
            return false
        }
    }
}
