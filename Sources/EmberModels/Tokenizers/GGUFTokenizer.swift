import EmberCore

/// Makes the tokenizer a GGUF file describes (`tokenizer.ggml.model`): byte-level BPE for `gpt2` (SmolLM2, Llama 3,
/// Qwen), SentencePiece for `llama` (Gemma, Llama 2); another model is refused naming the field.
public enum GGUFTokenizer {
    /// The tokenizer of `file`.
    public static func load(_ file: GGUFFile) throws -> any TextTokenizer {
        let model = try file.require("tokenizer.ggml.model").string
        switch model {
        case "gpt2": return try ByteLevelBPE(gguf: file)
        case "llama": return try SentencePieceTokenizer(gguf: file)
        default:
            throw ModelFileError.invalidField(file: file.path, field: "tokenizer.ggml.model", found: model.map { "\"\($0)\"" } ?? "not a string",
                                              expected: "gpt2 (byte-level BPE) or llama (SentencePiece)")
        }
    }
}
