import Foundation
import EmberTestSupport
import Testing
@testable import EmberModels
@testable import Ember

/// The host-facing `Runtime` on the real models (needs `make models`).
@Suite("Runtime API", .serialized, .enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")
                                             && FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
struct RuntimeTests {
    static let models = References.root.appendingPathComponent("models")

    @Test func generatesAndEmbedsThroughThePolicy() async throws {
        let runtime = try Runtime(configuration: .init(power: .injected(.mains), modelsDirectory: Self.models, calibration: .sharedForTests))
        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        var text = ""
        for try await piece in runtime.generate(llm, prompt: "The capital of France is", maxTokens: 8, tier: .critical) { text += piece }
        #expect(text.hasPrefix(" Paris"), "\(text)")
        let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
        let vectors = try await runtime.embed(minilm, ["a cat", "a kitten", "stock prices fell"], tier: .standard)
        #expect(vectors.count == 3 && vectors.allSatisfy { $0.count == 384 })
        #expect(cosineSimilarity(vectors[0], vectors[1]) > cosineSimilarity(vectors[0], vectors[2]))
        let records = await runtime.scheduler.metrics.records
        #expect(records.count == 2)
        #expect(records.allSatisfy { $0.outcome == "completed" })
        // Both models' weight copies are what the scheduler's memory budget counts: the embedder's int8 copies too.
        let int8 = try await runtime.embedding(minilm, ["a cat"], requirements: RequestRequirements(tier: .standard, precision: .int8))
        #expect(int8.decision.precision == .int8)
        #expect(minilm.heldWeightCopyBytes > 0, "int8 binds requantized copies")
        #expect(await runtime.scheduler.weightCopyBytes == llm.heldWeightCopyBytes + minilm.heldWeightCopyBytes)
    }

    /// A conversation's next turn restores what the last turn's prompt and reply left in the runtime's prompt cache
    /// and computes only the rest; its text is the text of the same run without the cache; the scheduler's budget
    /// counts the cache's bytes; a runtime configured without one has none.
    @Test func theNextTurnOfAConversationRestoresTheLastOne() async throws {
        var configuration = Runtime.Configuration(power: .injected(.mains), modelsDirectory: Self.models, calibration: .sharedForTests)
        let runtime = try Runtime(configuration: configuration)
        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        let template = try ChatTemplate.resolve(for: llm)
        // Pinned: the cache keys by precision and units, and the policy could pick either otherwise.
        let requirements = RequestRequirements(tier: .standard, precision: .int8, computeUnits: .cpuAndNeuralEngine)
        var messages = [ChatMessage(role: "user", content: "Name a fruit that is yellow.")]
        let first = try await runtime.generateText(llm, prompt: template.format(messages), maxTokens: 12, requirements: requirements)
        #expect(first.output.cachedPromptTokens == 0)
        let cache = try #require(runtime.promptCache)
        #expect(cache.count == 1 && cache.bytes > 0)
        #expect(runtime.scheduler.releasableMemory?.held() == cache.bytes)
        messages += [ChatMessage(role: "assistant", content: first.output.text), ChatMessage(role: "user", content: "And a red one?")]
        let second = try await runtime.generateText(llm, prompt: template.format(messages), maxTokens: 12, requirements: requirements)
        #expect(second.output.cachedPromptTokens >= first.output.promptTokenIDs.count,
                "\(second.output.cachedPromptTokens) of \(second.output.promptTokenIDs.count) restored")
        #expect(second.output.cachedPromptTokens < second.output.promptTokenIDs.count)
        #expect(second.decision.computeUnits == .cpuAndNeuralEngine && second.decision.precision == .int8)
        let uncached = try llm.generate(prompt: template.format(messages), maxTokens: 12, options: second.decision.executionOptions())
        #expect(uncached.cachedPromptTokens == 0)
        #expect(uncached.text == second.output.text)
        // The policy of the next turn sees it: the prompt tokenized, and the route the cache holds predicted without
        // the tokens it restores (every other route computes the whole prompt).
        messages += [ChatMessage(role: "assistant", content: second.output.text), ChatMessage(role: "user", content: "And a green one?")]
        let third = template.format(messages)
        let seen = cache.statistics
        let next = runtime.generationRequest(llm, prompt: .text(third), maxTokens: 12, requirements: RequestRequirements(tier: .standard),
                                             sampler: SamplerSettings())
        let workload = try #require(next.requirements.workload)
        let perToken = 2 * Double(llm.matmulParameters) / 1e9
        let tokens = try llm.promptTokenIDs(.text(third))
        #expect(abs(workload.batchedGigaOps - perToken * Double(tokens.count)) < 1e-9)
        #expect(Set(workload.restoredBatchedGigaOps.keys) == ["neural-engine/int8"], "\(workload.restoredBatchedGigaOps)")
        let restored = (workload.restoredBatchedGigaOps["neural-engine/int8"] ?? 0) / perToken
        #expect(restored >= Double(second.output.promptTokenIDs.count) && restored < Double(tokens.count), "\(restored) of \(tokens.count)")
        #expect(cache.statistics == seen, "looking up what a route would restore is not a lookup of a run")
        configuration.promptCacheBytes = 0
        configuration.calibration = .defaults
        #expect(try Runtime(configuration: configuration).promptCache == nil)
    }

    /// Background work waits while the battery is low and runs when the charger returns.
    @Test func backgroundWorkWaitsForPower() async throws {
        let low = PowerState(batteryLevel: 0.12, charging: .unplugged, externalPower: false)
        let runtime = try Runtime(configuration: .init(power: .injected(low), modelsDirectory: Self.models, calibration: .sharedForTests))
        let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
        let job = Task { try await runtime.embed(minilm, ["re-index me"], tier: .background) }
        #expect(await eventually { await runtime.scheduler.deferredCount == 1 }, "deferred on a low battery")
        try runtime.setPowerState(.mains)
        let vectors = try await job.value
        #expect(vectors.count == 1)
        #expect(throws: KernelError.self) { try Runtime(configuration: .init(power: .system)).setPowerState(.mains) }
    }

    /// Bad arguments are refused before the request reaches the scheduler (even one that would be deferred),
    /// and a path that does not exist is "no such file", not an unknown model name.
    @Test func badArgumentsAreRefusedUpFront() async throws {
        let low = PowerState(batteryLevel: 0.12, charging: .unplugged, externalPower: false)
        let runtime = try Runtime(configuration: .init(power: .injected(low), modelsDirectory: Self.models, calibration: .sharedForTests))
        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        await #expect(throws: KernelError.invalidArgument(argument: "maxTokens", found: "0", expected: "at least 1")) {
            try await runtime.generateText(llm, prompt: "Hi", maxTokens: 0, tier: .background)
        }
        await #expect(throws: KernelError.self) {
            try await runtime.generateText(llm, prompt: "Hi", tier: .background, sampler: SamplerSettings(temperature: .nan))
        }
        #expect(await runtime.scheduler.deferredCount == 0)
        await #expect(throws: ModelCatalogError.unreadable(file: "/nonexistent/x.gguf", reason: "no such file")) {
            try await runtime.loadLanguageModel(named: "/nonexistent/x.gguf")
        }
        await #expect(throws: ModelCatalogError.self) { try await runtime.loadLanguageModel(named: Self.models.path) }
    }
}

/// The README's "In a Swift app" lines and the Getting-started article's, kept compiling and correct.
@Suite("README host snippet", .serialized, .enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")
                                                     && FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
struct ReadmeHostSnippetTests {
    @Test func theReadmeSwiftSnippetRuns() async throws {
        let runtime = try Runtime(configuration: .init(computeUnits: .all, power: .system, modelsDirectory: RuntimeTests.models))

        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        var text = ""
        for try await piece in runtime.generate(llm, prompt: "The capital of France is", maxTokens: 16, tier: .critical) {
            text += piece
        }
        #expect(text.hasPrefix(" Paris."), "\(text)")

        let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
        let vectors = try await runtime.embed(minilm, ["A man is playing a guitar.", "Someone plays music on a guitar."],
                                              tier: .background)
        let cosine = cosineSimilarity(vectors[0], vectors[1])
        #expect(abs(cosine - 0.81) < 0.03, "\(cosine)")

        let done = try await runtime.generateText(llm, prompt: "Hello", maxTokens: 8, tier: .standard)
        #expect(done.decision.action == .run && done.decision.qos == .utility)
        #expect(done.runSeconds > 0 && (done.energy?.joules ?? 0) > 0)
        #expect(done.output.tokenIDs.count <= 8)
    }

    /// Getting started: an injected state drives the decision the completion reports.
    @Test func injectedPowerStateShowsInTheCompletion() async throws {
        let runtime = try Runtime(configuration: .init(power: .injected(PowerState(batteryLevel: 0.6, charging: .unplugged)),
                                                       modelsDirectory: RuntimeTests.models))
        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        let onBattery = try await runtime.generateText(llm, prompt: "The capital of France is", maxTokens: 8)
        // On battery the fastest within +2 %: SmolLM2's measured int8/int4 losses are ~0.3 %, so a quantized route.
        #expect(onBattery.decision.precision != .fp32 && onBattery.decision.computeUnits == .cpuAndNeuralEngine,
                "\(onBattery.decision.explanation)")
        #expect((onBattery.decision.predicted?.qualityLoss ?? 1) < 0.02)
        #expect(onBattery.output.text.hasPrefix(" Paris"), "\(onBattery.output.text)")
        try runtime.setPowerState(PowerState(batteryLevel: 0.15, charging: .unplugged))
        let low = try await runtime.generateText(llm, prompt: "The capital of France is", maxTokens: 8)
        #expect(low.decision.explanation.contains("reduced budget"), "energy within 1.25× the least: \(low.decision.explanation)")
        if low.decision.precision == .int4 && low.decision.computeUnits == .cpuAndNeuralEngine {
            // The int4 path of the neural-engine route is the file's Q4_1 with 8-bit activations, as llama.cpp computes:
            // its greedy text for this prompt. (The GPU route, which the policy may pick from its measured costs, runs the
            // same weights dequantized to fp32 with fp32 activations, and says " Paris.\n\nThe answer is:".)
            #expect(low.output.text == " Paris.\n\nThe United States has", "\(low.output.text)")
        }
        let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
        let embedded = try await runtime.embedding(minilm, ["a cat"], tier: .critical)
        // The reduced budget holds the embedding too. Which precision that allows comes from the measured costs: for one
        // short sentence fp32 on the GPU route and int8 measure within 1.25× each other's energy, and a loaded machine
        // (the test run itself) has chosen either.
        #expect(embedded.decision.explanation.contains("reduced budget"), "\(embedded.decision.explanation)")
        #expect(embedded.output.count == 1 && embedded.output[0].count == 384)
        // Standard work waits at 15 %; cancelling it ends the wait.
        let waiting = Task { try await runtime.embedding(minilm, ["later"], tier: .standard) }
        #expect(await eventually { await runtime.scheduler.deferredCount == 1 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }
}

@Suite("Runtime API: stopping generation", .enabled(if: FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
struct RuntimeCancellationTests {
    /// A caller that stops reading ends the generation within a token, not after 2000 of them.
    @Test func leavingTheStreamStopsGenerating() async throws {
        let runtime = try Runtime(configuration: .init(power: .injected(.mains), modelsDirectory: RuntimeTests.models, calibration: .sharedForTests))
        let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        var pieces = 0
        for try await _ in runtime.generate(llm, prompt: "Count from one to a thousand:", maxTokens: 2000, tier: .standard,
                                            sampler: SamplerSettings(temperature: 0)) {
            pieces += 1
            if pieces == 3 { break }
        }
        #expect(pieces == 3)
        #expect(await eventually { await runtime.scheduler.metrics.records.count == 1 }, "the request ended")
        let record = try #require(await runtime.scheduler.metrics.records.first)
        #expect(record.outcome != "completed" || record.runSeconds < 5, "\(record.outcome) after \(record.runSeconds) s")
    }
}
