import Foundation

extension BertModel {
    /// Embeds `texts` through `scheduler` as one request of `tier`: the power
    /// policy picks precision, units, QoS and threads (or defers or refuses
    /// the request); identical calls within the coalescing window run once,
    /// and calls arriving within the batching window under the same decision
    /// run as one batch. Returns one L2-normalised embedding per text.
    public func embed(_ texts: [String], scheduler: InferenceScheduler, tier: Tier = .standard,
                      requirements: RequestRequirements? = nil) async throws -> [[Float]] {
        guard !texts.isEmpty else { return [] }
        let result = try await scheduler.submit(embeddingRequest(texts, tier: tier, requirements: requirements), tier: tier)
        return try Self.embeddings(in: result)
    }

    /// The scheduler request that embeds `texts` (batched with other requests
    /// of this model under the same decision; identical calls coalesce).
    public func embeddingRequest(_ texts: [String], tier: Tier = .standard,
                                 requirements: RequestRequirements? = nil) -> InferenceRequest {
        var needs = requirements ?? RequestRequirements(tier: tier)
        needs.tier = tier
        let batchKey = "bert-embed-\(ObjectIdentifier(self).hashValue)"
        return InferenceRequest(
            requirements: needs, signature: batchKey + "|" + texts.joined(separator: "\u{1F}"),
            batch: InferenceRequest.Batch(key: batchKey, input: texts) { [self] inputs, decision, context in
                let groups = inputs.map { $0 as? [String] ?? [] }
                let embeddings = try await run(groups.flatMap { $0 }, decision: decision, context: context)
                var outputs: [any Sendable] = []
                var start = 0
                for group in groups {
                    outputs.append(Array(embeddings[start..<(start + group.count)]))
                    start += group.count
                }
                return outputs
            },
            run: { [self] decision, context in try await run(texts, decision: decision, context: context) })
    }

    /// The vectors in the result of an ``embeddingRequest(_:tier:requirements:)``.
    static func embeddings(in result: InferenceResult) throws -> [[Float]] {
        guard let embeddings = result.output as? [[Float]] else {
            throw KernelError.invalidArgument(argument: "result", found: "\(type(of: result.output))", expected: "[[Float]]")
        }
        return embeddings
    }

    private func run(_ texts: [String], decision: Decision, context: RunContext) async throws -> [[Float]] {
        await context.checkpoint() // let critical work on the same route pass first
        let qos = context.qos
        let batch = try await QoSThread.value(qos: qos) { [self] in
            try embed(texts, units: decision.computeUnits, precision: decision.precision, threads: decision.threads, qos: qos)
        }
        context.report(energy: batch.energy)
        return batch.embeddings
    }
}
