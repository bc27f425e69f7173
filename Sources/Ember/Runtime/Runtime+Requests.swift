import EmberCore
import EmberModels
import Foundation

extension Decision {
    /// The decision as the models take it: units, precision (nil: the weights as stored), threads, and the class to run at.
    public func executionOptions(qos: QoSClass? = nil) -> ExecutionOptions {
        ExecutionOptions(units: computeUnits, precision: storedWeights ? nil : precision, threads: threads, qos: qos ?? self.qos)
    }
}

extension Runtime {
    /// The scheduler request that generates from `prompt` with `model` at `tier`. Pieces go through the scheduler
    /// (its sink); `onLogprobs`, the log-probabilities of the tokens each piece completes, goes to the caller directly,
    /// just before the piece; `onStart`, the decision, as the run starts.
    func generationRequest(_ model: any TextGenerator, prompt: PromptInput, maxTokens: Int, requirements: RequestRequirements,
                           sampler: SamplerSettings, stop: [String] = [], deadline: Date? = nil,
                           onLogprobs: (@Sendable ([TokenLogprobs]) -> Void)? = nil,
                           onStart: (@Sendable (Decision) -> Void)? = nil) -> InferenceRequest {
        let tier = requirements.tier
        var requirements = requirements
        // About four bytes per token until the prompt is tokenized, and the reply this model's replies have been (at most
        // maxTokens); the run reports what it really did.
        let parameters = model.matmulParameters
        let replyLengths = self.replyLengths
        let (batcher, batching, promptCache) = (self.batcher, configuration.continuousBatching, self.promptCache)
        var input = prompt
        if requirements.workload == nil {
            let newTokens = replyLengths.expected(model: model.path, maxTokens: maxTokens)
            var workload = Workload.generation(parameters: parameters, promptTokens: prompt.estimatedTokens, newTokens: newTokens,
                                               model: model.path)
            // When the prompt cache holds some of this model's sessions, the prompt is tokenized now (the run then feeds
            // these ids rather than tokenizing the text again) and each route predicted without the tokens it would
            // restore: the route the conversation ran on last computes only the new turn.
            if let promptCache, !requirements.storedWeights, promptCache.holdsEntries(of: model),
               let tokens = try? model.promptTokenIDs(prompt) {
                workload = .generation(parameters: parameters, promptTokens: tokens.count, newTokens: newTokens, model: model.path)
                workload.restoredBatchedGigaOps = Self.restoredGigaOps(tokens, of: model, in: promptCache)
                input = .tokens(tokens)
            }
            requirements.workload = workload
        }
        // Tokens are at most the prompt's bytes (and BOS): the session's size is known before anything runs.
        let contextLength = min(model.contextLength, input.maximumTokens + min(max(maxTokens, 0), model.contextLength))
        let runInput = input
        var request = InferenceRequest(requirements: requirements, deadline: deadline,
                                       memoryBytes: model.sessionBytes(contextLength: contextLength)) { decision, context in
            onStart?(decision)
            await context.checkpoint()
            let cancelled = CancellationFlag()
            let result = try await withTaskCancellationHandler {
                try await QoSThread.value(qos: context.qos) {
                    // Every token: stop if the caller went away; below critical, a checkpoint
                    // where critical work on the route goes first.
                    let checkpoint: () throws -> Void = {
                        if cancelled.isSet { throw CancellationError() }
                        guard tier != .critical else { return }
                        let done = DispatchSemaphore(value: 0)
                        Task { await context.checkpoint(); done.signal() }
                        done.wait()
                    }
                    let options = decision.executionOptions(qos: context.qos)
                    try Self.bind(model.prepare, options, context: context)
                    guard batching else {
                        return try model.generate(from: runInput, maxTokens: maxTokens, sampler: sampler, options: options,
                                                  stop: stop, promptCache: promptCache, onPiece: { context.emit($0) },
                                                  onLogprobs: { onLogprobs?($0) }, betweenTokens: checkpoint)
                    }
                    // Critical sequences batch apart: a batch of other tiers may wait at its checkpoints for them.
                    let key = "\(ObjectIdentifier(model).hashValue)|\(options)|\(tier == .critical ? "critical" : "other")"
                    return try model.generate(from: runInput, maxTokens: maxTokens, sampler: sampler, options: options,
                                              stop: stop, promptCache: promptCache, batcher: batcher, batchKey: key,
                                              onPiece: { context.emit($0) },
                                              onLogprobs: { onLogprobs?($0) }, betweenTokens: checkpoint)
                }
            } onCancel: {
                cancelled.set()
            }
            context.report(energy: result.energy)
            replyLengths.record(model: model.path, tokens: result.tokenIDs.count, stopReason: result.stopReason)
            // The prompt tokens computed: those a prompt cache restored cost a copy, not a pass.
            let computed = result.promptTokenIDs.count - result.cachedPromptTokens
            context.report(work: .generation(parameters: parameters, promptTokens: computed, newTokens: result.tokenIDs.count,
                                             model: model.path))
            return result
        }
        request.weightCopies = Self.weightCopies(of: model)
        return request
    }

    /// Route ("unit/precision") → billions of operations `promptCache` would save a generation of `tokens` on it: the
    /// prefix it restores for the options a decision of that route runs with.
    static func restoredGigaOps(_ tokens: [Int], of model: any TextGenerator, in promptCache: PromptCache) -> [String: Double] {
        let perToken = Workload.gigaOpsPerToken(parameters: model.matmulParameters)
        var restored: [String: Double] = [:]
        for unit in ComputeUnit.allCases {
            for precision in Precision.allCases {
                let options = ExecutionOptions(units: ComputeUnits(unit).union(.cpu), precision: precision)
                let count = promptCache.restorableTokens(tokens, model: model, options: options)
                if count > 0 { restored["\(unit.rawValue)/\(precision.rawValue)"] = perToken * Double(count) }
            }
        }
        return restored
    }

    /// The scheduler request that embeds `texts` with `model` (batched with other requests of this model under the
    /// same decision; identical calls coalesce).
    public func embeddingRequest(_ model: any Embedder, _ texts: [String], tier: Tier = .standard,
                                 requirements: RequestRequirements? = nil, deadline: Date? = nil) -> InferenceRequest {
        var needs = requirements ?? RequestRequirements(tier: tier)
        needs.tier = tier
        needs.workload = needs.workload ?? .embedding(parameters: model.matmulParameters,
                                                      tokens: texts.reduce(0) { $0 + $1.utf8.count / 4 + 2 }, model: model.path)
        let batchKey = "embed-\(ObjectIdentifier(model).hashValue)"
        // A text is at most a token a byte and its two markers, and at most the model's longest sequence.
        let tokens = texts.reduce(0) { $0 + min($1.utf8.count + 2, model.maxSequenceLength) }
        var request = InferenceRequest(
            requirements: needs, signature: batchKey + "|" + texts.joined(separator: "\u{1F}"), deadline: deadline,
            batch: InferenceRequest.Batch(key: batchKey, input: texts) { inputs, decision, context in
                let groups = inputs.map { $0 as? [String] ?? [] }
                let embeddings = try await Self.run(model, groups.flatMap { $0 }, decision: decision, context: context)
                var outputs: [any Sendable] = []
                var start = 0
                for group in groups {
                    outputs.append(Array(embeddings[start..<(start + group.count)]))
                    start += group.count
                }
                return outputs
            },
            memoryBytes: model.passBytes(tokens: tokens),
            run: { decision, context in try await Self.run(model, texts, decision: decision, context: context) })
        request.weightCopies = Self.weightCopies(of: model)
        return request
    }

    /// A model's ``WeightCopyAccount``: the copies a route binds stay with the model, and the budget counts them
    /// (weakly held: a model dropped holds none).
    static func weightCopies(of model: any WeightCopyHolder) -> WeightCopyAccount {
        WeightCopyAccount(owner: "\(ObjectIdentifier(model))", held: { [weak model] in model?.heldWeightCopyBytes ?? 0 },
                          adding: { [weak model] in model?.weightCopyBytes(for: $0.executionOptions()) ?? 0 })
    }

    /// The vectors in the result of an ``embeddingRequest(_:_:tier:requirements:)``.
    static func embeddings(in result: InferenceResult) throws -> [[Float]] {
        guard let embeddings = result.output as? [[Float]] else {
            throw KernelError.invalidArgument(argument: "result", found: "\(type(of: result.output))", expected: "[[Float]]")
        }
        return embeddings
    }

    private static func run(_ model: any Embedder, _ texts: [String], decision: Decision, context: RunContext) async throws -> [[Float]] {
        await context.checkpoint() // let critical work on the same route pass first
        let qos = context.qos
        let batch = try await QoSThread.value(qos: qos) {
            let options = decision.executionOptions(qos: qos)
            try bind(model.prepare, options, context: context)
            return try model.embed(texts, options: options)
        }
        context.report(energy: batch.energy)
        context.report(work: .embedding(parameters: model.matmulParameters, tokens: batch.tokenIDs.reduce(0) { $0 + $1.count },
                                        model: model.path))
        return batch.embeddings
    }
}

extension Runtime {
    /// Binds the model's weights for `options` if this is their first run (a lookup otherwise) and tells the
    /// scheduler how long that took, so one-time conversions do not teach the cost model that a route is slow.
    static func bind(_ prepare: (ExecutionOptions) throws -> ExecutionPlan, _ options: ExecutionOptions, context: RunContext) throws {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try prepare(options)
        context.report(setupSeconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}

/// A flag one thread sets and another polls.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
