import ArgumentParser
import Ember

/// A sampling setting the library refused (``SamplerSettings/validate()``), said in the command line's words: the
/// library names its own fields (`topK: -3`), the user typed a flag (`--top-k -3`).
enum SamplerOptionError {
    /// The flag of each setting the commands take.
    static let flags = [
        "temperature": "--temperature", "topK": "--top-k", "topP": "--top-p", "minP": "--min-p",
        "repetitionPenalty": "--repeat-penalty", "logprobs": "--logprobs",
    ]

    /// `settings` checked; a refused setting becomes a `ValidationError` naming its flag, and a refused output format
    /// one that starts with `format` (the flag that gave it, such as "--json-schema schema.json").
    static func validate(_ settings: SamplerSettings, format: String? = nil) throws {
        do {
            try settings.validate()
        } catch KernelError.invalidArgument(let argument, let found, let expected) {
            throw ValidationError("\(flags[argument] ?? argument): found \(found), expected \(expected)")
        } catch {
            throw ValidationError("\(format.map { "\($0): " } ?? "")\(error)")
        }
    }
}
