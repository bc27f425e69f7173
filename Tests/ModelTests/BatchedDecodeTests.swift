import Foundation
import Testing
@testable import EmberModels
import EmberCore
import EmberTestSupport

/// Continuous batching: one pass over several sessions computes what each session's own pass computes, and
/// generations sharing a batcher each get their own text; stop strings never leak into the text.
@Suite("Batched decoding and stop strings")
struct BatchedDecodeTests {
    static let prompts = ["The capital of France is", "Once upon a time there was", "1, 2, 3, 4,"]

    /// Three sessions at different positions: the batched pass's logits equal each session's own pass's, within
    /// the rounding of a matrix product over more rows, at fp32 and on the file's own (quantized) weights.
    @Test(arguments: ["llama3", "qwen2"])
    func aBatchedPassComputesWhatEachSessionsOwnPassComputes(family: String) throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load(family).path)
        for options in [ExecutionOptions(units: .cpu, precision: .fp32, threads: 2), ExecutionOptions(units: .cpu, precision: nil, threads: 2)] {
            let prompts = Self.prompts.map { model.tokenizer.encode($0) }
            let batched = prompts.map { _ in model.makeSession(contextLength: 64) }
            let alone = prompts.map { _ in model.makeSession(contextLength: 64) }
            for (index, prompt) in prompts.enumerated() {
                _ = try model.forward(prompt, session: batched[index], options: options)
                _ = try model.forward(prompt, session: alone[index], options: options)
            }
            var next = [5, 17, 42]
            for step in 0..<4 {
                let logits = try model.forwardBatch(next, sessions: batched, options: options).scalars()
                try #require(logits.count == 3 * model.vocabularySize)
                for index in 0..<3 {
                    let own = try model.forward([next[index]], session: alone[index], options: options).scalars()
                    let row = Array(logits[(index * model.vocabularySize)..<((index + 1) * model.vocabularySize)])
                    let scale = own.map(abs).max() ?? 1
                    let worst = zip(row, own).map { abs($0 - $1) }.max() ?? 0
                    #expect(worst <= 1e-3 * scale, "\(family) \(options.precision.map { "\($0)" } ?? "native") step \(step) row \(index): \(worst) of \(scale)")
                    #expect(batched[index].position == alone[index].position)
                }
                next = next.map { ($0 * 7 + step) % model.vocabularySize }
            }
        }
    }

    @Test func aBatchRefusesMismatchedInput() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let session = model.makeSession(contextLength: 8)
        #expect(throws: KernelError.self) { try model.forwardBatch([1, 2], sessions: [session], options: ExecutionOptions()) }
        #expect(throws: KernelError.self) { try model.forwardBatch([1, 2], sessions: [session, session], options: ExecutionOptions()) }
        #expect(throws: KernelError.self) { try model.forwardBatch([], sessions: [], options: ExecutionOptions()) }
        let full = model.makeSession(contextLength: 1)
        _ = try model.forward([1], session: full, options: ExecutionOptions())
        #expect(throws: KernelError.self) { try model.forwardBatch([2], sessions: [full], options: ExecutionOptions()) }
    }

    /// Six generations at once through one batcher: each ends as its own settings say, the steps really batched,
    /// and greedy text equals the text of the same generation alone (the tiny model's margins are wide).
    @Test func generationsSharingABatcherEachGetTheirOwnText() async throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let options = ExecutionOptions(units: .cpu, precision: .fp32, threads: 1)
        let prompts = Self.prompts + ["Hello", "A B C", "Zebra"]
        let alone = try prompts.map { try model.generate(prompt: $0, maxTokens: 12, options: options) }
        let batcher = ContinuousBatcher()
        let together = try await withThrowingTaskGroup(of: (Int, Generation).self) { group in
            for (index, prompt) in prompts.enumerated() {
                group.addTask {
                    try await QoSThread.value(qos: .utility) {
                        // A pause between tokens (as a scheduler's checkpoint may take) keeps the six generations
                        // running at the same time on the tiny model, which would otherwise finish one by one.
                        (index, try model.generate(prompt: prompt, maxTokens: 12, options: options, batcher: batcher, batchKey: "tiny",
                                                   betweenTokens: { usleep(5000) }))
                    }
                }
            }
            var results = [Generation?](repeating: nil, count: prompts.count)
            for try await (index, generation) in group { results[index] = generation }
            return results.compactMap { $0 }
        }
        try #require(together.count == prompts.count)
        for (index, generation) in together.enumerated() {
            #expect(generation.tokenIDs.count <= 12 && ["eos", "max_tokens"].contains(generation.stopReason))
            #expect(generation.tokenIDs == alone[index].tokenIDs, "prompt \(prompts[index].debugDescription)")
        }
        #expect(batcher.largestStep >= 2, "the sequences decoded together")
        #expect(batcher.activeSequences.isEmpty, "an idle batcher keeps no batch (nor its model)")
    }

    @Test func stopStringsAreHeldBackAndCut() {
        var stops = StopSequences(["END", "\n\n"])
        var sent = ""
        for piece in ["Hello", " E", "N", "o", "ugh E", "ND of it"] { sent += stops.append(piece) }
        #expect(sent == "Hello ENough " && stops.stopped)
        #expect(stops.finish() == "")

        var partial = StopSequences(["END"])
        #expect(partial.append("abc EN") == "abc ")
        #expect(!partial.stopped)
        #expect(partial.finish() == "EN", "held-back text that never became a stop string is sent at the end")

        var earliest = StopSequences(["zzz", "b"])
        #expect(earliest.append("a b zzz") == "a " && earliest.stopped)

        var none = StopSequences(["", ""])
        #expect(none.append("text END") == "text END" && !none.stopped)
    }

    /// A generation's text ends before its stop string, which is never streamed, and says why it stopped.
    @Test func aGenerationStopsAtAStopString() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let free = try model.generate(prompt: "Once upon a time there was", maxTokens: 16, options: ExecutionOptions())
        let text = free.text
        guard let cut = text.dropFirst(2).firstIndex(where: { !$0.isWhitespace }) else { return }
        let stop = String(text[cut...].prefix(2))
        var streamed = ""
        let stopped = try model.generate(prompt: "Once upon a time there was", maxTokens: 16, options: ExecutionOptions(), stop: [stop], onPiece: { streamed += $0 })
        #expect(stopped.stopReason == "stop")
        #expect(!stopped.text.contains(stop) && streamed == stopped.text)
        #expect(text.hasPrefix(stopped.text + stop))
    }
}
