import ArgumentParser
import Ember

/// A value the library refused, said in the command line's words: the library names its own fields (`topK: -3`,
/// `chunkBytes: 300`), the user typed a flag (`--top-k -3`).
enum FlagError {
    /// "FLAG: found FOUND, expected EXPECTED".
    static func refused(_ flag: String, found: String, expected: String) -> ValidationError {
        ValidationError("\(flag): found \(found), expected \(expected)")
    }

    /// The flag of each sampling setting the commands take.
    static let samplerFlags = [
        "temperature": "--temperature", "topK": "--top-k", "topP": "--top-p", "minP": "--min-p",
        "repetitionPenalty": "--repeat-penalty", "logprobs": "--logprobs",
    ]

    /// `settings` checked (``SamplerSettings/validate()``); a refused setting becomes an error naming its flag, and a
    /// refused output format one that starts with `format` (the flag that gave it, such as "--json-schema schema.json").
    static func validate(_ settings: SamplerSettings, format: String? = nil) throws {
        do {
            try settings.validate()
        } catch KernelError.invalidArgument(let argument, let found, let expected) {
            throw refused(samplerFlags[argument] ?? argument, found: found, expected: expected)
        } catch {
            throw ValidationError("\(format.map { "\($0): " } ?? "")\(error)")
        }
    }
}
