import EmberCore

/// A model that continues text: what the runtime, the scheduler, the C API,
/// the CLI and the server hold — never a concrete architecture. An
/// ``ArchitectureRegistry`` makes one from a file (`general.architecture`
/// picks the family); sampling, streaming and stop handling are written once,
/// over ``forward(_:session:options:allLogits:)`` (`TextGeneration.swift`).
public protocol TextGenerator: WeightCopyHolder {
    /// The family, as the file names it (`general.architecture`, e.g. "llama").
    var architecture: String { get }
    /// The file the model was read from.
    var path: String { get }
    /// Tokens the model was trained to attend over; sessions are capped at it.
    var contextLength: Int { get }
    /// Number of token ids: the logits' width.
    var vocabularySize: Int { get }
    /// The precision class of most of the file's weights (what runs when no precision is asked for).
    var filePrecision: Precision { get }
    /// The tokenizer from the file.
    var tokenizer: any TextTokenizer { get }
    /// The file's chat format, nil when it has none Ember can apply.
    var chatTemplate: ChatTemplate? { get }

    /// Binds every weight for `options` now (packing, requantizing, converting) instead of on the first pass;
    /// returns where each op runs.
    @discardableResult
    func prepare(_ options: ExecutionOptions) throws -> ExecutionPlan

    /// Where each op of one forward pass runs under `options` (binding the weights if needed).
    func plan(_ options: ExecutionOptions) throws -> ExecutionPlan

    /// Bytes a session of `contextLength` tokens takes at most while it runs (its fp16 KV cache and pass buffers):
    /// what a scheduler admits requests against.
    func sessionBytes(contextLength: Int) -> Int

    /// A new, empty conversation state whose KV cache holds `contextLength` tokens (capped at ``contextLength``);
    /// fp16 keys and values unless `halfPrecisionCache` is false.
    func makeSession(contextLength: Int, halfPrecisionCache: Bool) -> any GenerationSession

    /// Runs `tokens` from the session's position and returns the logits of the last `lastLogits` of them
    /// [lastLogits, vocabulary] (1 to tokens.count; the output projection runs for those rows only); the session
    /// then holds the tokens.
    func forward(_ tokens: [Int], session: any GenerationSession, options: ExecutionOptions, lastLogits: Int) throws -> Tensor

    /// Weights multiplied per token (every matrix product of one pass): what the policy's cost model counts as
    /// 2 operations each.
    var matmulParameters: Int { get }

    /// Drops every bound plan and every copy of the weights made for a precision or a backend; the next pass binds
    /// again what it needs.
    func releaseBoundWeights()

    /// Feeds `tokens[i]` to `sessions[i]` at its own position, all in one pass where the family can (continuous
    /// batching: one matrix product per weight over every sequence), and returns the logits [sessions.count,
    /// vocabulary]; each session then holds its token. The default runs ``forward(_:session:options:lastLogits:)``
    /// once per session.
    func forwardBatch(_ tokens: [Int], sessions: [any GenerationSession], options: ExecutionOptions) throws -> Tensor
}

extension TextGenerator {
    /// One pass per session, the logits stacked: for families without a batched pass.
    public func forwardBatch(_ tokens: [Int], sessions: [any GenerationSession], options: ExecutionOptions) throws -> Tensor {
        guard tokens.count == sessions.count, !tokens.isEmpty else {
            throw KernelError.invalidArgument(argument: "tokens", found: "\(tokens.count) for \(sessions.count) sessions",
                                              expected: "one token per session, at least one")
        }
        var values: [Float] = []
        values.reserveCapacity(tokens.count * vocabularySize)
        for (token, session) in zip(tokens, sessions) {
            values += try forward([token], session: session, options: options, lastLogits: 1).scalars()
        }
        return try Tensor(shape: [tokens.count, vocabularySize], values: values)
    }
}

extension TextGenerator {
    /// Runs `tokens` from the session's position and returns the logits [tokens.count, vocabulary] with `allLogits`,
    /// else [1, vocabulary] for the last token; the session then holds them.
    public func forward(_ tokens: [Int], session: any GenerationSession, options: ExecutionOptions, allLogits: Bool) throws -> Tensor {
        try forward(tokens, session: session, options: options, lastLogits: allLogits ? tokens.count : 1)
    }
}

/// One conversation's state with a ``TextGenerator``: the KV cache and what the passes cost.
public protocol GenerationSession: AnyObject, Sendable {
    /// Tokens the KV cache holds at most.
    var capacity: Int { get }
    /// Tokens the KV cache holds now; the next token fed goes at this position.
    var position: Int { get }
    /// Energy of every forward pass of this session so far.
    var energy: EnergyEstimate { get }
    /// Bytes the KV cache takes.
    var cacheBytes: Int { get }
    /// Forgets everything after `position` (for example to re-run from a shared prefix).
    func rewind(to position: Int)
    /// Makes this session hold the first `tokens` tokens `source` holds (its keys and values copied, this session's
    /// own forgotten), as if they had been fed here: false, with nothing changed, when `source`'s cache has another shape
    /// or precision, holds fewer tokens, or this session's cache is too small. That `source` is the same model's is
    /// the caller's to know (a ``PromptCache`` keys its sessions by model).
    func copyPrefix(of source: any GenerationSession, tokens: Int) -> Bool
}

extension GenerationSession {
    /// No copying: a session type that cannot copy another's cache always recomputes (a ``PromptCache`` then
    /// reuses nothing for it).
    public func copyPrefix(of source: any GenerationSession, tokens: Int) -> Bool { false }
}

/// A tokenizer of a ``TextGenerator``: text to ids and back, and its special tokens.
public protocol TextTokenizer: AnyObject, Sendable {
    /// Number of tokens.
    var count: Int { get }
    /// Beginning-of-sequence id, if the vocabulary has one.
    var bosID: Int? { get }
    /// End-of-sequence id, if the vocabulary has one.
    var eosID: Int? { get }
    /// Whether encoding puts the BOS token first.
    var addBOS: Bool { get }
    /// Ids of `text`; with `parseSpecial`, special tokens written in the text become their ids; `withBOS` nil: the file's rule.
    func encode(_ text: String, parseSpecial: Bool, withBOS: Bool?) -> [Int]
    /// The bytes token `id` stands for (a piece of UTF-8, possibly partial).
    func bytes(of id: Int) -> [UInt8]
    /// The id of the token spelled `token` exactly (special tokens included), if any.
    func id(of token: String) -> Int?
    /// Whether `id` ends a generation (the end-of-sequence token, or an end-of-turn token of the chat format).
    func endsGeneration(_ id: Int) -> Bool
    /// Whether `id` stands for text (not a control, unknown or unused token): what a constrained generation may pick.
    func isText(_ id: Int) -> Bool
    /// The vocabulary's text tokens as a byte trie, built on first use and kept (structured output's token masks).
    var tokenTrie: TokenTrie { get }
}

extension TextTokenizer {
    /// Ids of `text` with special tokens parsed and the file's BOS rule.
    public func encode(_ text: String) -> [Int] { encode(text, parseSpecial: true, withBOS: nil) }

    /// The text of `ids` (invalid UTF-8 replaced).
    public func decode(_ ids: [Int]) -> String { String(decoding: ids.flatMap { bytes(of: $0) }, as: UTF8.self) }
}

/// A model that turns sentences into vectors: what the runtime, the C API,
/// the CLI and the server hold. An ``ArchitectureRegistry`` makes one from a
/// model folder (`config.json`'s `model_type` picks the family).
public protocol Embedder: WeightCopyHolder {
    /// The family, as its configuration names it (`model_type`, e.g. "bert").
    var architecture: String { get }
    /// The folder the model was read from.
    var path: String { get }
    /// Values per embedding.
    var dimension: Int { get }
    /// Tokens per sentence at most (longer sentences are truncated).
    var maxSequenceLength: Int { get }

    /// Binds every weight for `options` now; returns where each op runs.
    @discardableResult
    func prepare(_ options: ExecutionOptions) throws -> ExecutionPlan
    /// Where each op of one pass runs under `options`.
    func plan(_ options: ExecutionOptions) throws -> ExecutionPlan
    /// One embedding per text, in order, with what producing them took.
    func embed(_ texts: [String], options: ExecutionOptions) throws -> EmbeddingBatch
    /// The token ids `text` becomes (truncated to ``maxSequenceLength``).
    func tokenize(_ text: String) -> [Int]
    /// Weights multiplied per token: what the policy's cost model counts as 2 operations each.
    var matmulParameters: Int { get }
    /// Drops every bound plan and every copy of the weights made for a precision or a backend.
    func releaseBoundWeights()
    /// Bytes embedding texts of `tokens` tokens in all takes at most while it runs (the passes' buffers): what a
    /// scheduler admits embedding requests against. 0 for a family that does not say.
    func passBytes(tokens: Int) -> Int
}

extension Embedder {
    /// Not counted: 0.
    public func passBytes(tokens: Int) -> Int { 0 }
}

/// A model whose weights a route copies (other precisions, the layouts the kernels read, fp32 for BLAS) and keeps:
/// what it holds and what binding a route would add, which a scheduler's memory budget counts. Text generators and
/// embedders both are.
public protocol WeightCopyHolder: AnyObject, Sendable {
    /// Bytes of the weight copies the model holds now beyond its files. 0 for a family that does not count them.
    var heldWeightCopyBytes: Int { get }

    /// Bytes binding the weights for `options` would add to ``heldWeightCopyBytes`` (0 once bound; a plugin
    /// backend's own copies are not known): what a scheduler checks against its budget before it binds a route.
    func weightCopyBytes(for options: ExecutionOptions) -> Int
}

extension WeightCopyHolder {
    /// Not counted: 0.
    public var heldWeightCopyBytes: Int { 0 }

    /// Not counted: 0.
    public func weightCopyBytes(for options: ExecutionOptions) -> Int { 0 }
}

/// Sentence embeddings and what producing them took.
public struct EmbeddingBatch: Sendable {
    /// One embedding per input text, in input order.
    public var embeddings: [[Float]]
    /// The token ids each text was encoded to (truncated to the model's maximum).
    public var tokenIDs: [[Int]]
    /// Seconds spent tokenizing all texts.
    public var tokenizeSeconds: Double
    /// Seconds spent encoding and pooling the batch (tokenization excluded).
    public var encodeSeconds: Double
    /// Energy the encoding took, measured or modelled.
    public var energy: EnergyEstimate

    /// A batch; see each property.
    public init(embeddings: [[Float]], tokenIDs: [[Int]], tokenizeSeconds: Double, encodeSeconds: Double, energy: EnergyEstimate) {
        self.embeddings = embeddings
        self.tokenIDs = tokenIDs
        self.tokenizeSeconds = tokenizeSeconds
        self.encodeSeconds = encodeSeconds
        self.energy = energy
    }
}

/// The cosine of the angle between two vectors (1 for equal directions, 0 when either is zero).
public func cosineSimilarity(_ a: [Float], _ b: [Float]) -> Double {
    var (dot, na, nb) = (0.0, 0.0, 0.0)
    for (x, y) in zip(a, b) {
        dot += Double(x) * Double(y)
        na += Double(x) * Double(x)
        nb += Double(y) * Double(y)
    }
    return na > 0 && nb > 0 ? dot / (na.squareRoot() * nb.squareRoot()) : 0
}
