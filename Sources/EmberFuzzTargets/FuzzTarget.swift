import Ember
import EmberCore
import EmberHTTP
import EmberModels
import EmberServer
import Foundation

/// What Ember reads from outside, one entry point per reader, for fuzzing: each
/// takes arbitrary bytes and must return — an error is fine, a trap, a hang or
/// unbounded memory is a bug. `ember-fuzz` runs them under libFuzzer
/// (`make fuzz`) and replays corpora with random mutations (`make test`).
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A GGUF file: the reader, then the tokenizer and the model loaded from it (and one forward pass).
    case gguf
    /// A safetensors file: the header and every tensor's bytes.
    case safetensors
    /// A `tokenizer.json` (WordPiece), then a sentence through it.
    case tokenizerJSON = "tokenizer-json"
    /// Text (and ids) through every kind of tokenizer: byte-level BPE (Llama 3's and Qwen2's pre-tokenizers),
    /// SentencePiece, WordPiece — encode, then decode what came out and ids that were never made.
    case tokenizers
    /// One line of the JSON-lines worker protocol.
    case protocolLine = "protocol"
    /// An HTTP API request as `ember serve --http` checks it: an endpoint byte, header lines up to a blank line,
    /// then the JSON body.
    case http
    /// A JSON Schema for structured output: compiled; when it compiles, the input's own bytes are run through its
    /// grammar and a token mask is computed over each tokenizer's vocabulary after them.
    case jsonSchema = "json-schema"

    /// Files the target needs besides its input (tokenizer models), found under `fixtures`.
    public final class Environment: @unchecked Sendable {
        let tokenizers: [any TextTokenizer]
        let wordPiece: WordPiece?
        let context: ComputeContext
        let scratch: String

        /// Loads the tokenizers from the tiny fixture models and the MiniLM vocabulary when present.
        public init(repositoryRoot: URL) {
            let tiny = repositoryRoot.appendingPathComponent("Tests/ModelTests/Fixtures/tiny")
            tokenizers = ["tiny-llama3.gguf", "tiny-qwen2.gguf"].compactMap {
                try? GGUFTokenizer.load(GGUFFile(path: tiny.appendingPathComponent($0).path))
            } + [repositoryRoot.appendingPathComponent("models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf").path]
                .filter { FileManager.default.fileExists(atPath: $0) }
                .compactMap { try? GGUFTokenizer.load(GGUFFile(path: $0)) }
            wordPiece = try? WordPiece(tokenizerJSON: repositoryRoot.appendingPathComponent("models/all-minilm-l6-v2/tokenizer.json").path,
                                       maxLength: 128)
            context = ComputeContext(configuration: .init(threadsPerClass: 1))
            let directory = Self.scratchDirectory
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            atexit { try? FileManager.default.removeItem(at: Environment.scratchDirectory) }
            scratch = directory.appendingPathComponent("input").path
        }

        /// This process's folder for the inputs written to files, removed when the process exits.
        static var scratchDirectory: URL {
            FileManager.default.temporaryDirectory.appendingPathComponent("ember-fuzz-\(getpid())")
        }
    }

    /// Runs the target on `data`; returns normally whatever the bytes are.
    public func run(_ data: Data, in environment: Environment) {
        switch self {
        case .gguf:
            guard let path = environment.write(data) else { return }
            guard let file = try? GGUFFile(path: path) else { return }
            _ = try? GGUFTokenizer.load(file)
            if let model = try? ArchitectureRegistry.standard.loadTextGenerator(path: path, context: environment.context) {
                let session = model.makeSession(contextLength: 8, halfPrecisionCache: true)
                _ = try? model.forward([0], session: session, options: ExecutionOptions(units: .cpu, threads: 1), allLogits: false)
            }
        case .safetensors:
            guard let path = environment.write(data), let file = try? SafetensorsFile(path: path) else { return }
            for info in file.tensors.values { _ = file.bytes(of: info).reduce(0, &+) }
        case .tokenizerJSON:
            guard let path = environment.write(data), let tokenizer = try? WordPiece(tokenizerJSON: path, maxLength: 64) else { return }
            _ = tokenizer.encode("Hello, world! Ünïcödé 日本語 — 42")
        case .tokenizers:
            let text = String(decoding: data, as: UTF8.self)
            let ids = data.count >= 4 ? stride(from: 0, to: data.count - 3, by: 4).map { offset in
                Int(Int32(bitPattern: data[data.startIndex + offset ..< data.startIndex + offset + 4].reduce(0) { $0 << 8 | UInt32($1) }))
            } : []
            for tokenizer in environment.tokenizers {
                for parse in [true, false] { _ = tokenizer.decode(tokenizer.encode(text, parseSpecial: parse, withBOS: nil)) }
                _ = tokenizer.decode(ids)
            }
            _ = environment.wordPiece?.encode(text)
        case .protocolLine:
            _ = try? WorkerMessage.parse(data)
        case .http:
            guard let selector = data.first else { return }
            let rest = data.dropFirst()
            let separator = rest.firstRange(of: Data("\n\n".utf8))
            let headerText = String(decoding: separator.map { rest[..<$0.lowerBound] } ?? Data(), as: UTF8.self)
            let body = Data(separator.map { rest[$0.upperBound...] } ?? rest)
            let headers = headerText.split(separator: "\n").map { line -> (String, String) in
                let parts = line.split(separator: ":", maxSplits: 1)
                return (String(parts.first ?? ""), parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : "")
            }
            let endpoint = OpenAIRequestCheck.endpoints[Int(selector) % OpenAIRequestCheck.endpoints.count]
            _ = try? OpenAIRequestCheck.validate(endpoint: endpoint, body: body, headers: headers)
        case .jsonSchema:
            let format = OutputFormat.jsonSchema(String(decoding: data, as: UTF8.self))
            for tokenizer in environment.tokenizers.prefix(1) {
                guard let constraint = try? format.constraint(for: tokenizer) else { return }
                for id in tokenizer.encode(String(decoding: data.prefix(64), as: UTF8.self), parseSpecial: false, withBOS: false) {
                    guard constraint.allows(id) else { break }
                    constraint.accept(id)
                }
                _ = constraint.allowedTokens()
            }
        }
    }
}

extension FuzzTarget.Environment {
    /// Writes `data` to this process's scratch file and returns its path.
    func write(_ data: Data) -> String? {
        FileManager.default.createFile(atPath: scratch, contents: data) ? scratch : nil
    }
}
