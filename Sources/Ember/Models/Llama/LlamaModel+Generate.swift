import Foundation

/// The outcome of one generation.
public struct Generation: Sendable {
    /// The token ids fed before sampling (in a chat, only those the KV cache did not already hold).
    public var promptTokenIDs: [Int]
    /// The sampled token ids, in order, including the end-of-generation token when that stopped it.
    public var tokenIDs: [Int]
    /// The decoded text of the sampled tokens, without the end-of-generation token.
    public var text: String
    /// "eos" (an end-of-generation token), "max_tokens", or "context_full".
    public var stopReason: String
    /// Seconds spent on the forward pass over the prompt tokens.
    public var prefillSeconds: Double
    /// Seconds from the end of prefill to the end of generation (sampling and the per-token forward passes).
    public var decodeSeconds: Double
    /// Energy of the forward passes, measured (RAPL) or modelled (the route's cost model).
    public var energy: EnergyEstimate
}

extension LlamaModel {
    /// Binds every matmul for `units` and `precision` now (packing, requantizing
    /// or dequantizing weights as the kernels need) instead of on the first
    /// forward pass; returns the plan's placements.
    @discardableResult
    public func prepare(units: ComputeUnits, precision: Precision? = nil) throws -> ComputePlan {
        try computePlan(units: units, precision: precision)
    }

    /// Generates from `prompt` (special tokens parsed), streaming each text piece to `onPiece`.
    public func generate(prompt: String, maxTokens: Int, sampler settings: SamplerSettings = SamplerSettings(),
                         units: ComputeUnits = .cpuAndNeuralEngine, precision: Precision? = nil,
                         threads: Int = KernelThreads.default, qos: QoSClass = .current,
                         onPiece: (String) -> Void = { _ in }, betweenTokens: () throws -> Void = {}) throws -> Generation {
        let promptIDs = tokenizer.encode(prompt)
        guard !promptIDs.isEmpty else { throw KernelError.invalidArgument(argument: "prompt", found: "no tokens", expected: "some text") }
        // Capped before adding: a huge maxTokens must not overflow (the session is capped at the context anyway).
        let session = makeSession(contextLength: promptIDs.count + min(max(maxTokens, 0), config.contextLength) + 1)
        var sampler = Sampler(settings)
        return try continueGeneration(session: session, feeding: promptIDs, history: promptIDs, maxTokens: maxTokens,
                                      sampler: &sampler, units: units, precision: precision, threads: threads, qos: qos,
                                      onPiece: onPiece, betweenTokens: betweenTokens)
    }

    /// Feeds `tokens` after what `session` holds, then samples up to
    /// `maxTokens` new ones (each fed back), stopping at end-of-generation or
    /// when the context is full. `history` is what the repetition penalty sees.
    /// The session keeps everything fed, so a conversation continues from it.
    /// `betweenTokens` runs before each decode step (a scheduler's checkpoint); it may throw to stop.
    public func continueGeneration(session: Session, feeding tokens: [Int], history: [Int], maxTokens: Int,
                                   sampler: inout Sampler, units: ComputeUnits = .cpuAndNeuralEngine, precision: Precision? = nil,
                                   threads: Int = KernelThreads.default, qos: QoSClass = .current,
                                   onPiece: (String) -> Void = { _ in }, betweenTokens: () throws -> Void = {}) throws -> Generation {
        guard !tokens.isEmpty else { throw KernelError.invalidArgument(argument: "tokens", found: "none", expected: "at least one") }
        guard maxTokens >= 0 else { throw KernelError.invalidArgument(argument: "maxTokens", found: "\(maxTokens)", expected: "≥ 0") }
        try sampler.settings.validate()
        let energyBefore = session.energy.joules
        var decoder = StreamingDecoder()
        let prefillStart = DispatchTime.now().uptimeNanoseconds
        var logits = try forward(tokens, session: session, units: units, precision: precision, threads: threads, qos: qos)
        let prefillSeconds = Double(DispatchTime.now().uptimeNanoseconds - prefillStart) / 1e9
        var generated: [Int] = []
        var stop = "max_tokens"
        let decodeStart = DispatchTime.now().uptimeNanoseconds
        var text = ""
        var seen = history // what the repetition penalty sees: the history, then each new token
        while generated.count < maxTokens {
            let next = sampler.next(logits: try logits.scalars(), history: seen)
            generated.append(next)
            seen.append(next)
            if next == tokenizer.eosID || tokenizer.tokens[next] == "<|im_end|>" {
                stop = "eos"
                break
            }
            let piece = decoder.append(tokenizer.bytes(of: next))
            text += piece
            if !piece.isEmpty { onPiece(piece) }
            if generated.count == maxTokens { break }
            if session.position >= session.capacity {
                stop = "context_full"
                break
            }
            try betweenTokens()
            logits = try forward([next], session: session, units: units, precision: precision, threads: threads, qos: qos)
        }
        let tail = decoder.finish()
        text += tail
        if !tail.isEmpty { onPiece(tail) }
        let decodeSeconds = Double(DispatchTime.now().uptimeNanoseconds - decodeStart) / 1e9
        return Generation(promptTokenIDs: tokens, tokenIDs: generated, text: text, stopReason: stop,
                          prefillSeconds: prefillSeconds, decodeSeconds: decodeSeconds,
                          energy: EnergyEstimate(joules: session.energy.joules - energyBefore, source: session.energy.source))
    }
}
