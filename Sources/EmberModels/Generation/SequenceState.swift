import EmberCore
import Foundation

/// One generation between its forward passes: what it has sampled and said, and whether it is done. The same
/// per-token rules serve a sequence decoded alone and one decoded in a batch: sample (with the repetition penalty
/// over the history), stop at an end-of-generation token, stream the piece (holding back what could start a stop
/// string), stop at a stop string, at `maxTokens`, or when the context is full. With an output format
/// (``SamplerSettings/format``) only tokens its grammar allows are sampled, and the generation ends ("eos") as soon
/// as the value is complete.
struct SequenceState {
    let tokenizer: any TextTokenizer
    let session: any GenerationSession
    let maxTokens: Int
    let promptTokens: [Int]
    /// How many of the first `promptTokens` the session held before the prompt pass (a ``PromptCache`` restored them;
    /// set by ``TextGenerator/prefill(_:promptCache:options:)``).
    var cachedTokens: Int
    var sampler: Sampler
    private(set) var generated: [Int] = []
    private(set) var text = ""
    private(set) var stopReason = "max_tokens"
    private(set) var finished = false
    /// Each text token's log-probabilities when the settings ask for them (``SamplerSettings/logprobs``).
    private(set) var logprobs: [TokenLogprobs] = []
    /// Where each of `logprobs`' tokens starts in the decoded bytes, to drop those a stop string cuts away.
    private var logprobStarts: [Int] = []
    /// How many of `logprobs` went out with a piece: a token's go with the piece that first holds its text.
    private var logprobsStreamed = 0
    private var decodedBytes = 0
    private var seen: [Int]
    private var decoder = StreamingDecoder()
    private var stops: StopSequences
    /// The output format's grammar state, nil for free text.
    let constraint: TokenConstraint?
    let energyBefore: Double
    var prefillSeconds = 0.0
    var decodeStart: UInt64 = 0

    init(tokenizer: any TextTokenizer, session: any GenerationSession, promptTokens: [Int], history: [Int], maxTokens: Int,
         sampler: Sampler, stop: [String]) throws {
        self.tokenizer = tokenizer
        self.session = session
        self.promptTokens = promptTokens
        cachedTokens = 0
        self.maxTokens = maxTokens
        self.sampler = sampler
        seen = history
        stops = StopSequences(stop)
        constraint = try sampler.settings.format.constraint(for: tokenizer)
        if constraint != nil, !stops.strings.isEmpty {
            throw KernelError.invalidArgument(argument: "stop", found: stops.strings.map { "\"\($0)\"" }.joined(separator: ", "),
                                              expected: "no stop strings with a JSON output format (the value ends the output itself; a stop "
                                                        + "string could cut it)")
        }
        energyBefore = session.energy.joules
        finished = maxTokens == 0
    }

    /// The token the next pass feeds.
    var lastToken: Int { generated.last ?? 0 }

    /// Samples the next token from `logits` and streams its text with the log-probabilities of the tokens that text
    /// completes (none unless the settings ask for them); sets ``finished`` when the generation ends.
    mutating func accept(logits: [Float], onPiece: (String, [TokenLogprobs]) -> Void) {
        constraint?.remainingTokens = min(maxTokens - generated.count, session.capacity - session.position)
        let next = sampler.next(logits: logits, history: seen, constraint: constraint)
        generated.append(next)
        seen.append(next)
        if tokenizer.endsGeneration(next) {
            stopReason = "eos"
            finished = true
            return
        }
        if let constraint {
            guard constraint.allows(next) else {
                // Nothing the grammar allows was left to pick (a vocabulary without an end token): end here.
                stopReason = "eos"
                finished = true
                return
            }
            constraint.accept(next)
        }
        let bytes = tokenizer.bytes(of: next)
        if let count = sampler.settings.logprobs { // only for tokens of the text: not an end token
            logprobs.append(TokenLogprobs.measure(logits, chosen: next, count: count, tokenizer: tokenizer))
            logprobStarts.append(decodedBytes)
        }
        decodedBytes += bytes.count
        let piece = stops.append(decoder.append(bytes))
        text += piece
        if !piece.isEmpty { onPiece(piece, streamLogprobs()) }
        if stops.stopped {
            stopReason = "stop"
            finished = true
        } else if constraint?.isComplete == true {
            stopReason = "eos" // the value is whole: nothing more may follow it
            finished = true
        } else if generated.count >= maxTokens {
            finished = true
        } else if session.position >= session.capacity {
            stopReason = "context_full"
            finished = true
        }
    }

    /// Ends the generation where it is (the user stopped it): stop reason "interrupted".
    mutating func interrupt() {
        guard !finished else { return }
        stopReason = "interrupted"
        finished = true
    }

    /// The log-probabilities of the tokens whose text starts within `text` and that no piece carried yet.
    private mutating func streamLogprobs() -> [TokenLogprobs] {
        let start = logprobsStreamed
        while logprobsStreamed < logprobs.count, logprobStarts[logprobsStreamed] < text.utf8.count { logprobsStreamed += 1 }
        return Array(logprobs[start..<logprobsStreamed])
    }

    /// The finished generation, the text held back by the decoder or the stop strings flushed to `onPiece`.
    mutating func finish(onPiece: (String, [TokenLogprobs]) -> Void) -> Generation {
        let tail = stops.append(decoder.finish()) + stops.finish()
        if stops.stopped { stopReason = "stop" }
        text += tail
        if stops.stopped {
            // The tokens from the one where the stop string starts on are not in the text: nor in its log-probabilities.
            let kept = logprobStarts.prefix { $0 < text.utf8.count }.count
            logprobs.removeSubrange(kept...)
        }
        if !tail.isEmpty { onPiece(tail, streamLogprobs()) }
        let decodeSeconds = Double(DispatchTime.now().uptimeNanoseconds - decodeStart) / 1e9
        return Generation(promptTokenIDs: promptTokens, cachedPromptTokens: cachedTokens, tokenIDs: generated, text: text,
                          stopReason: stopReason, prefillSeconds: prefillSeconds, decodeSeconds: decodeSeconds,
                          energy: EnergyEstimate(joules: session.energy.joules - energyBefore, source: session.energy.source),
                          logprobs: logprobs)
    }
}
