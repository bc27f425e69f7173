import EmberCore
import Foundation

/// The outcome of one generation.
public struct Generation: Sendable {
    /// The token ids fed before sampling (in a chat, only those the KV cache did not already hold).
    public var promptTokenIDs: [Int]
    /// How many of the first `promptTokenIDs` a ``PromptCache`` held, so were restored rather than computed (0
    /// without one).
    public var cachedPromptTokens = 0
    /// The sampled token ids, in order, including the end-of-generation token when that stopped it.
    public var tokenIDs: [Int]
    /// The decoded text of the sampled tokens, without the end-of-generation token.
    public var text: String
    /// "eos" (an end-of-generation token, or the value of a JSON output format complete), "stop" (one of the stop strings), "max_tokens", "context_full", or
    /// "interrupted" (the caller's `interrupted` said so).
    public var stopReason: String
    /// Seconds spent on the forward pass over the prompt tokens.
    public var prefillSeconds: Double
    /// Seconds from the end of prefill to the end of generation (sampling and the per-token forward passes).
    public var decodeSeconds: Double
    /// Energy of the forward passes, measured (RAPL) or modelled (the backends' calibrated costs).
    public var energy: EnergyEstimate
    /// When ``SamplerSettings/logprobs`` asked for them: each token of `text` with its log-probability and the step's
    /// most likely tokens, in order — not the end-of-generation token, nor the tokens a stop string cut away. Empty
    /// otherwise.
    public var logprobs: [TokenLogprobs] = []
}

/// What a generation starts from: text (tokenized with special tokens such as `<|im_start|>` parsed, BOS as the model
/// adds it) or token ids taken as they are (each checked to be in the vocabulary) — as OpenAI's completions take a
/// prompt of either kind.
public enum PromptInput: Sendable, Equatable {
    /// Text, tokenized by the model's tokenizer.
    case text(String)
    /// Token ids, fed as they are.
    case tokens([Int])

    /// The most tokens this prompt can come to, before it is tokenized: a text's bytes and a BOS.
    public var maximumTokens: Int {
        switch self {
        case let .text(text): text.utf8.count + 1
        case let .tokens(ids): ids.count
        }
    }

    /// About how many tokens it is, before it is tokenized: four bytes a token of text.
    public var estimatedTokens: Int {
        switch self {
        case let .text(text): text.utf8.count / 4 + 1
        case let .tokens(ids): ids.count
        }
    }
}

/// Generation written once for every ``TextGenerator``: prompt in, tokens
/// sampled one at a time and fed back, text streamed as it decodes, stopped
/// at an end-of-generation token, `maxTokens`, or a full context.
extension TextGenerator {
    /// A new session with an fp16 KV cache of `contextLength` tokens (capped at the model's context).
    public func makeSession(contextLength: Int) -> any GenerationSession { makeSession(contextLength: contextLength, halfPrecisionCache: true) }

    /// The logits of the last of `tokens` run from the session's position.
    public func forward(_ tokens: [Int], session: any GenerationSession, options: ExecutionOptions) throws -> Tensor {
        try forward(tokens, session: session, options: options, allLogits: false)
    }

    /// Greedy generation: up to `maxTokens` new ids, stopping at end-of-generation.
    public func generateGreedy(prompt: [Int], maxTokens: Int, options: ExecutionOptions = ExecutionOptions()) throws -> [Int] {
        let session = makeSession(contextLength: prompt.count + maxTokens + 1)
        var logits = try forward(prompt, session: session, options: options)
        var generated: [Int] = []
        for _ in 0..<maxTokens {
            let values = try logits.scalars()
            let next = values.indices.max { values[$0] < values[$1] }!
            generated.append(next)
            if tokenizer.endsGeneration(next) { break }
            logits = try forward([next], session: session, options: options)
        }
        return generated
    }

    /// Generates from `prompt` (special tokens parsed), streaming each text piece to `onPiece`;
    /// `betweenTokens` runs before each decode step (a scheduler's checkpoint) and may throw to stop.
    /// The generation ends at the first of the `stop` strings, which is neither streamed nor in the text.
    /// When the settings ask for log-probabilities, `onLogprobs` gets those of the tokens a piece completes just before
    /// `onPiece` gets the piece (together they are ``Generation/logprobs``).
    public func generate(prompt: String, maxTokens: Int, sampler settings: SamplerSettings = SamplerSettings(),
                         options: ExecutionOptions = ExecutionOptions(), stop: [String] = [], onPiece: (String) -> Void = { _ in },
                         onLogprobs: ([TokenLogprobs]) -> Void = { _ in }, betweenTokens: () throws -> Void = {}) throws -> Generation {
        try generate(from: .text(prompt), maxTokens: maxTokens, sampler: settings, options: options, stop: stop, onPiece: onPiece,
                     onLogprobs: onLogprobs, betweenTokens: betweenTokens)
    }

    /// ``generate(prompt:maxTokens:sampler:options:stop:onPiece:onLogprobs:betweenTokens:)`` from text or from token ids.
    /// With a `promptCache`, the longest prefix of the prompt it holds for this model and options is restored rather
    /// than computed (``Generation/cachedPromptTokens``), and the session is stored there when the generation ends.
    public func generate(from input: PromptInput, maxTokens: Int, sampler settings: SamplerSettings = SamplerSettings(),
                         options: ExecutionOptions = ExecutionOptions(), stop: [String] = [], promptCache: PromptCache? = nil,
                         onPiece: (String) -> Void = { _ in }, onLogprobs: ([TokenLogprobs]) -> Void = { _ in },
                         betweenTokens: () throws -> Void = {}) throws -> Generation {
        let (promptIDs, session) = try promptSession(input, maxTokens: maxTokens)
        var sampler = Sampler(settings)
        let generation = try generate(session: session, prompt: promptIDs, promptCache: promptCache, history: promptIDs,
                                      maxTokens: maxTokens, sampler: &sampler, options: options, stop: stop, onPiece: onPiece,
                                      onLogprobs: onLogprobs, betweenTokens: betweenTokens, interrupted: { false })
        promptCache?.keep(session, after: generation, model: self, options: options)
        return generation
    }

    /// The prompt's token ids as a generation from it feeds them: a text tokenized with its special tokens parsed,
    /// ids checked to be some, in the vocabulary and to fit the context.
    public func promptTokenIDs(_ input: PromptInput) throws -> [Int] {
        let promptIDs: [Int]
        switch input {
        case let .text(prompt): promptIDs = tokenizer.encode(prompt)
        case let .tokens(ids):
            if let index = ids.firstIndex(where: { !(0..<tokenizer.count).contains($0) }) {
                throw KernelError.invalidArgument(argument: "prompt[\(index)]", found: "token id \(ids[index])",
                                                  expected: "an id from 0 to \(tokenizer.count - 1), the model's vocabulary")
            }
            promptIDs = ids
        }
        guard !promptIDs.isEmpty else { throw KernelError.invalidArgument(argument: "prompt", found: "no tokens", expected: "some text") }
        guard promptIDs.count < contextLength else {
            throw KernelError.invalidArgument(argument: "prompt", found: "\(promptIDs.count) tokens",
                                              expected: "fewer than the model's context of \(contextLength) tokens, with room for the reply — shorten it")
        }
        return promptIDs
    }

    /// The prompt's token ids (``promptTokenIDs(_:)``) and a session sized for them and `maxTokens` more (capped at
    /// the context).
    func promptSession(_ input: PromptInput, maxTokens: Int) throws -> ([Int], any GenerationSession) {
        let promptIDs = try promptTokenIDs(input)
        // Capped before adding: a huge maxTokens must not overflow (the session is capped at the context anyway).
        return (promptIDs, makeSession(contextLength: promptIDs.count + min(max(maxTokens, 0), contextLength) + 1))
    }

    /// Feeds `tokens` after what `session` holds, then samples up to
    /// `maxTokens` new ones (each fed back), stopping at end-of-generation or
    /// when the context is full, or at the first of the `stop` strings. `history` is what the repetition penalty sees.
    /// The session keeps everything fed, so a conversation continues from it. `interrupted` is asked after each
    /// token: true ends the generation there, with what it has so far (stop reason "interrupted").
    public func continueGeneration(session: any GenerationSession, feeding tokens: [Int], history: [Int], maxTokens: Int,
                                   sampler: inout Sampler, options: ExecutionOptions = ExecutionOptions(), stop stopStrings: [String] = [],
                                   onPiece: (String) -> Void = { _ in }, onLogprobs: ([TokenLogprobs]) -> Void = { _ in },
                                   betweenTokens: () throws -> Void = {}, interrupted: () -> Bool = { false }) throws -> Generation {
        guard !tokens.isEmpty else { throw KernelError.invalidArgument(argument: "tokens", found: "none", expected: "at least one") }
        return try generate(session: session, prompt: tokens, promptCache: nil, history: history, maxTokens: maxTokens,
                            sampler: &sampler, options: options, stop: stopStrings, onPiece: onPiece, onLogprobs: onLogprobs,
                            betweenTokens: betweenTokens, interrupted: interrupted)
    }

    /// The prompt pass of `state`: with a `promptCache`, the longest prefix of the prompt it holds restored into the
    /// empty session first (``SequenceState/cachedTokens``), then the rest fed; the pass timed and the decode clock
    /// started. The logits of the prompt's last token. Both the batched and the unbatched generation start here.
    func prefill(_ state: inout SequenceState, promptCache: PromptCache?, options: ExecutionOptions) throws -> Tensor {
        state.cachedTokens = promptCache?.restore(into: state.session, tokens: state.promptTokens, model: self, options: options) ?? 0
        let start = DispatchTime.now().uptimeNanoseconds
        let logits = try forward(Array(state.promptTokens[state.cachedTokens...]), session: state.session, options: options)
        state.prefillSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        state.decodeStart = DispatchTime.now().uptimeNanoseconds
        return logits
    }

    /// Feeds `prompt` after what `session` holds — with a `promptCache`, first the longest prefix of it the cache
    /// holds, restored into the empty session once the request is checked — then samples as
    /// ``continueGeneration(session:feeding:history:maxTokens:sampler:options:stop:onPiece:onLogprobs:betweenTokens:interrupted:)``.
    func generate(session: any GenerationSession, prompt: [Int], promptCache: PromptCache?, history: [Int], maxTokens: Int,
                  sampler: inout Sampler, options: ExecutionOptions, stop stopStrings: [String],
                  onPiece: (String) -> Void, onLogprobs: ([TokenLogprobs]) -> Void,
                  betweenTokens: () throws -> Void, interrupted: () -> Bool) throws -> Generation {
        guard maxTokens >= 0 else { throw KernelError.invalidArgument(argument: "maxTokens", found: "\(maxTokens)", expected: "≥ 0") }
        try sampler.settings.validate()
        var state = try SequenceState(tokenizer: tokenizer, session: session, promptTokens: prompt, history: history,
                                      maxTokens: maxTokens, sampler: sampler, stop: stopStrings)
        defer { sampler = state.sampler }
        var logits = try prefill(&state, promptCache: promptCache, options: options)
        while !state.finished {
            state.accept(logits: try logits.scalars()) { piece, logprobs in
                if !logprobs.isEmpty { onLogprobs(logprobs) }
                onPiece(piece)
            }
            if !state.finished, interrupted() { state.interrupt() }
            if state.finished { break }
            try betweenTokens()
            logits = try forward([state.lastToken], session: session, options: options)
        }
        return state.finish { piece, logprobs in
            if !logprobs.isEmpty { onLogprobs(logprobs) }
            onPiece(piece)
        }
    }
}
