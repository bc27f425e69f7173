import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberBenchmarks
import EmberTestSupport

extension References {
    static let miniLM = root.appendingPathComponent("models/all-minilm-l6-v2").path
}

struct ReferenceEmbedding: Decodable {
    var text: String
    var input_ids: [Int]
    var embedding: [Float]
}

/// all-MiniLM-L6-v2 against sentence-transformers' fp32 output (needs `make models`).
@Suite("all-MiniLM-L6-v2 against sentence-transformers", .serialized,
       .enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")))
struct BertTests {
    static let model: (any Embedder)? = try? TestCompute.embedder(named: "all-minilm-l6-v2")
    static let references: [ReferenceEmbedding] = {
        let text = (try? String(contentsOf: References.fixtures.appendingPathComponent("minilm_public.jsonl"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(ReferenceEmbedding.self, from: Data($0.utf8)) }
    }()

    static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        let dot = zip(a, b).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        let na = a.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot(), nb = b.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
        return dot / (na * nb)
    }

    @Test func tokenIDsEqualTheReference() throws {
        let model = try #require(Self.model)
        #expect(Self.references.count == 20)
        for reference in Self.references {
            #expect(model.tokenize(reference.text) == reference.input_ids, "\(reference.text)")
        }
    }

    /// Batched (all 20 at once, back to back) and one by one; every precision on every route the policy may pick:
    /// the neural-engine route's block kernels, the GPU route's BLAS on the same weights converted to fp32 (int8's
    /// smoothed weights, their columns divided by the activations' scales, must come back whole there — 0.995 cosine
    /// between sentences that are 0.81 apart was what it gave when they did not), the CPU route's scalar reference.
    @Test(arguments: [(Precision.fp32, ComputeUnits.cpuAndGPU, 0.99999), (.int8, .cpuAndNeuralEngine, 0.995), (.int4, .cpuAndNeuralEngine, 0.98),
                      (.int8, .cpuAndGPU, 0.995), (.int4, .cpuAndGPU, 0.98), (.int8, .cpuOnly, 0.995), (.int4, .cpuOnly, 0.98),
                      (.fp32, .cpuOnly, 0.99999), (.fp16, .cpuAndGPU, 0.9999), (.fp16, .cpuAndNeuralEngine, 0.9999)])
    func embeddingsMatchTheReference(precision: Precision, units: ComputeUnits, minimumCosine: Double) throws {
        let model = try #require(Self.model)
        let batch = try model.embed(Self.references.map(\.text), units: units, precision: precision).embeddings
        var cosines: [Double] = []
        var largestDifference: Float = 0
        for (index, reference) in Self.references.enumerated() {
            let single = try model.embed([reference.text], units: units, precision: precision).embeddings[0]
            #expect(Self.cosine(single, batch[index]) > 0.999999, "batched and alone agree: \(reference.text)")
            cosines.append(Self.cosine(batch[index], reference.embedding))
            largestDifference = max(largestDifference, zip(batch[index], reference.embedding).map { abs($0 - $1) }.max()!)
        }
        let (minimum, mean) = (cosines.min()!, cosines.reduce(0, +) / Double(cosines.count))
        print("\(precision): cosine to sentence-transformers min \(minimum), mean \(mean), max |Δ| \(largestDifference)")
        #expect(minimum >= minimumCosine, "\(precision): min cosine \(minimum), mean \(mean)")
        if precision == .fp32 { #expect(largestDifference <= 1e-4) }
    }

    /// What binding a route adds to the model's weight copies is known before it is bound (what a scheduler's memory
    /// budget checks), for every precision on every route: the prediction equals the growth measured, is 0 once
    /// bound, and releasing the plans gives everything back.
    @Test func weightCopiesArePredictedBeforeBinding() throws {
        let model = try TestCompute.embedder(named: "all-minilm-l6-v2") // its own: the shared one has bound plans
        #expect(model.heldWeightCopyBytes == 0, "a model read from its files holds no copy")
        var grew: [String] = []
        for units in [ComputeUnits.cpuAndGPU, .cpuAndNeuralEngine, .cpuOnly] {
            for precision in [nil] + Precision.allCases.map(Optional.some) {
                let options = ExecutionOptions(units: units, precision: precision)
                let name = "\(units)/\(precision.map { "\($0)" } ?? "native")"
                let (before, predicted) = (model.heldWeightCopyBytes, model.weightCopyBytes(for: options))
                try model.prepare(options)
                let made = model.heldWeightCopyBytes - before
                #expect(made == predicted, "\(name): made \(made), predicted \(predicted)")
                #expect(model.weightCopyBytes(for: options) == 0, "\(name) bound: nothing more")
                if made > 0 { grew.append(name) }
                print("MiniLM weight copies, \(name): \(made) bytes")
            }
        }
        // The block kernels pack requantized weights, the BLAS route keeps fp16's fp32 copy: not passing on zeros.
        #expect(grew.contains("cpuAndNeuralEngine/int8") && grew.contains("cpuAndNeuralEngine/int4") && grew.contains("cpuAndGPU/int8"),
                "\(grew)")
        model.releaseBoundWeights()
        #expect(model.heldWeightCopyBytes == 0)
    }

    /// What an embedding request's passes take is known before they run (what a scheduler admits it against, from the
    /// texts' bytes): never less than the buffers the encoder then makes, for one word, a few sentences and a whole
    /// pass; a workspace that large goes back once its batch is done.
    @Test func thePassBuffersAreKnownBeforeTheyAreMade() throws {
        let model = try #require(try TestCompute.embedder(named: "all-minilm-l6-v2") as? BertModel)
        let options = ExecutionOptions(units: .cpuAndNeuralEngine, precision: .int8, threads: 2)
        func said(_ texts: [String]) -> Int {
            model.passBytes(tokens: texts.reduce(0) { $0 + min($1.utf8.count + 2, model.maxSequenceLength) })
        }
        var made: [Int] = []
        for texts in [["a"], Self.references.map(\.text)] {
            _ = try model.embed(texts, options: options)
            let used = try #require(model.lock.withLock { model.workspace?.byteCount }, "a small workspace is kept")
            #expect(used <= said(texts), "\(texts.count) texts: made \(used), said \(said(texts))")
            print("MiniLM pass buffers, \(texts.count) texts: made \(used) bytes, said \(said(texts))")
            made.append(used)
        }
        #expect(made[0] < made[1], "\(made)")
        let long = EmbeddingBenchmark.sentences(256) // two passes
        _ = try model.embed(long, options: options)
        #expect(model.lock.withLock { model.workspace == nil }, "a whole pass's workspace goes back")
        let plan = try model.boundPlan(options)
        let whole = EncoderWorkspace(config: model.config, rows: BertModel.tokensPerPass, threads: 2, preparedBytes: plan.preparedBytes)
        #expect(whole.byteCount > BertModel.keptWorkspaceBytes && whole.byteCount <= said(long), "made \(whole.byteCount), said \(said(long))")
        #expect(model.passBytes(tokens: 1_000_000) == model.passBytes(tokens: BertModel.tokensPerPass), "a batch runs in passes")
    }

    /// Texts of three tokens ([CLS] word [SEP]) run the encoder's private stages, every thread all rows; beside a
    /// sentence as short, two threads each run one of them alone through every stage (lanes owning their rows, the
    /// threads drifting apart between stages of different widths); beside a long sentence the same rows run the
    /// shared, row-split stages. All three give the same embedding at every precision.
    @Test(arguments: [(Precision.fp32, ComputeUnits.cpuAndGPU), (.int8, .cpuAndNeuralEngine), (.int4, .cpuAndNeuralEngine)])
    func shortTextsAloneAndInABatchAgree(precision: Precision, units: ComputeUnits) throws {
        let model = try #require(Self.model)
        let short = Self.references[0].text, long = try #require(Self.references.max { $0.input_ids.count < $1.input_ids.count }).text
        for text in ["!", "a", "ok"] {
            #expect(model.tokenize(text).count <= 4, "\(text) is a private stage")
            #expect(EncoderPass.sentenceGroups([text, short].map { model.tokenize($0).count }, parts: 2) != nil, "owned beside \(short)")
            #expect(EncoderPass.sentenceGroups([text, long].map { model.tokenize($0).count }, parts: 2) == nil, "shared beside the long one")
            let alone = try model.embed([text], units: units, precision: precision).embeddings[0]
            for companion in [short, long] {
                let batch = try model.embed([text, companion], units: units, precision: precision).embeddings[0]
                #expect(Self.cosine(alone, batch) > 0.999999, "\(precision) \(text) beside \(companion.prefix(20)): \(Self.cosine(alone, batch))")
            }
        }
    }

    /// The benchmark's first 24 sentences on two threads: each thread runs its own twelve or so through every layer
    /// alone (a lane owning its rows); the embeddings equal one thread's. (On a one-core machine both run one thread.)
    @Test(arguments: [(Precision.fp32, ComputeUnits.cpuAndGPU), (.int8, .cpuAndNeuralEngine), (.int4, .cpuAndNeuralEngine)])
    func threadsOwningTheirSentencesAgreeWithOneThread(precision: Precision, units: ComputeUnits) throws {
        let model = try #require(Self.model)
        let texts = EmbeddingBenchmark.sentences(24)
        #expect(EncoderPass.sentenceGroups(texts.map { model.tokenize($0).count }, parts: 2) != nil, "two threads own sentences")
        let two = try model.embed(texts, options: ExecutionOptions(units: units, precision: precision, threads: 2)).embeddings
        let one = try model.embed(texts, options: ExecutionOptions(units: units, precision: precision, threads: 1)).embeddings
        for (index, text) in texts.enumerated() {
            #expect(Self.cosine(two[index], one[index]) > 0.999999, "\(precision) \(text): \(Self.cosine(two[index], one[index]))")
        }
    }

    /// One sentence at a time on two threads: they share every stage and deal each matmul's columns out as they go
    /// (the faster one taking over the other's last columns, `EncoderPass`'s steal sites); the embeddings equal one
    /// thread's. (On a one-core machine both run one thread.)
    @Test(arguments: [(Precision.fp32, ComputeUnits.cpuAndGPU), (.int8, .cpuAndNeuralEngine), (.int4, .cpuAndNeuralEngine)])
    func oneSentenceSharedByTwoThreadsAgreesWithOneThread(precision: Precision, units: ComputeUnits) throws {
        let model = try #require(Self.model)
        for text in EmbeddingBenchmark.sentences(4) + ["a", "where is the nearest train station"] {
            #expect(EncoderPass.sentenceGroups([model.tokenize(text).count], parts: 2) == nil, "two threads share one sentence")
            let two = try model.embed([text], options: ExecutionOptions(units: units, precision: precision, threads: 2)).embeddings
            let one = try model.embed([text], options: ExecutionOptions(units: units, precision: precision, threads: 1)).embeddings
            #expect(Self.cosine(two[0], one[0]) > 0.999999, "\(precision) \(text): \(Self.cosine(two[0], one[0]))")
        }
    }

    /// Text unlike the reference sentences — punctuation alone, fragments, chat, numbers, code-ish and legal
    /// prose — where 4-bit weights hurt most: int4 stays within 0.98 cosine of fp32 (the mix of 4- and 8-bit layers
    /// in `EncoderPlan.weights`; all 4-bit, "!!!" fell to 0.966).
    @Test func int4StaysCloseToFP32OnUnusualText() throws {
        let model = try #require(Self.model)
        let texts = ["!!!", "???", "ok", "maybe I missed something..", "Thanks a lot!!", "lol that was so funny 😂",
                     "Error 404: page not found", "2024-01-01T12:00:00Z", "SELECT name FROM users WHERE id = 7;",
                     "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND.",
                     "Return the number of items in a container.", "Raise KeyError if the key is not found.",
                     "where is the nearest train station", "I can't log in to my account since yesterday",
                     "Mix the flour and butter, then add two eggs.", "The meeting was moved to Thursday at 3 pm.",
                     "def main(): pass", "1 2 3 4 5 6 7 8 9 10", "Bonjour, comment allez-vous ?", "a", "the the the the"]
        let fp32 = try model.embed(texts, units: .cpuAndGPU, precision: .fp32).embeddings
        let int4 = try model.embed(texts, units: .cpuAndNeuralEngine, precision: .int4).embeddings
        let cosines = zip(fp32, int4).map { Self.cosine($0, $1) }
        let worst = cosines.indices.min { cosines[$0] < cosines[$1] }!
        print("int4 vs fp32 on unusual text: min \(cosines[worst]) (\(texts[worst])), mean \(cosines.reduce(0, +) / Double(cosines.count))")
        #expect(cosines[worst] >= 0.98, "\(texts[worst]): \(cosines[worst])")
    }

    @Test func benchmarkRefusesAnEmptyBatch() throws {
        let model = try #require(Self.model)
        var benchmark = EmbeddingBenchmark(batch: 0, options: ExecutionOptions(units: .cpuOnly, precision: .int8))
        #expect(throws: KernelError.invalidArgument(argument: "batch", found: "0", expected: "at least 1 sentence per call")) {
            try benchmark.run(model)
        }
        benchmark.batch = 4
        benchmark.sentences = 0
        #expect(throws: KernelError.self) { try benchmark.run(model) }
    }
}

@Suite("all-MiniLM-L6-v2 through the scheduler", .enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")))
struct BertSchedulerTests {
    /// Concurrent callers each get their own sentences' embeddings, whatever the policy chose and however they were batched.
    @Test(arguments: [PowerState.mains, PowerState(batteryLevel: 0.3, charging: .unplugged, externalPower: false)])
    func concurrentCallsGetTheirOwnEmbeddings(state: PowerState) async throws {
        let model = try #require(BertTests.model)
        let runtime = try Runtime.forTests(power: .source(FixedPowerSource(state)))
        let references = BertTests.references
        let groups = [Array(references[0..<3]), Array(references[3..<4]), Array(references[4..<9])]
        let results = try await withThrowingTaskGroup(of: (Int, [[Float]]).self) { group in
            for (index, sentences) in groups.enumerated() {
                group.addTask { (index, try await runtime.embed(model, sentences.map(\.text), tier: .standard)) }
            }
            var results: [Int: [[Float]]] = [:]
            for try await (index, embeddings) in group { results[index] = embeddings }
            return results
        }
        for (index, sentences) in groups.enumerated() {
            let embeddings = try #require(results[index])
            #expect(embeddings.count == sentences.count)
            for (embedding, reference) in zip(embeddings, sentences) {
                #expect(cosineSimilarity(embedding, reference.embedding) > 0.98, "\(reference.text)")
            }
        }
        #expect(await runtime.scheduler.metrics.records.count == 3)
    }
}

/// The README's model lines (models through a runtime, run directly with chosen options), kept compiling and working.
@Test(.enabled(if: FileManager.default.fileExists(atPath: References.miniLM + "/model.safetensors")
               && FileManager.default.fileExists(atPath: GGUFReaderTests.smolLM2)))
func readmeModelSnippetWorks() async throws {
    let models = References.root.appendingPathComponent("models")
    let runtime = try Runtime(configuration: .init(power: .injected(.mains), modelsDirectory: models, calibration: .defaults))
    let llm = try runtime.languageModel(named: "smollm2-135m-instruct")
    let text = try llm.generate(prompt: "The capital of France is", maxTokens: 8, options: ExecutionOptions(precision: .int4))
    let minilm = try runtime.embeddingModel(named: "all-minilm-l6-v2")
    let vectors = try await runtime.embed(minilm, ["a cat", "a kitten"])
    #expect(text.text.hasPrefix(" Paris"))
    #expect(cosineSimilarity(vectors[0], vectors[1]) > 0.7)
}
