import Foundation
import Testing
@testable import EmberModels
import Ember
import EmberTestSupport

/// ``SamplerSettings/logprobs``: what a generation reports of each token's probability, checked against the logits
/// recomputed here step by step.
@Suite("Log-probabilities")
struct LogprobTests {
    static let prompt = "Once upon a time there was"

    /// ln softmax(logits)[token], in Double.
    static func logSoftmax(_ logits: [Float], _ token: Int) -> Double {
        let maximum = Double(logits.max()!)
        return Double(logits[token]) - maximum - log(logits.reduce(0.0) { $0 + exp(Double($1) - maximum) })
    }

    /// A sampled generation (temperature 1.3, so the pick is often not the best): each reported token is a token of the
    /// text with the log-softmax of the logits the model gave at its step — not of the tempered ones — and the top
    /// list holds the step's most likely tokens, best first.
    @Test func eachTokenCarriesItsLogSoftmaxAndTheStepsBest() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let options = ExecutionOptions()
        let settings = SamplerSettings(temperature: 1.3, topK: 0, topP: 1, minP: 0, seed: 7, logprobs: 4)
        let generation = try model.generate(prompt: Self.prompt, maxTokens: 16, sampler: settings, options: options)
        let textTokens = generation.tokenIDs.filter { !model.tokenizer.endsGeneration($0) }
        #expect(!textTokens.isEmpty)
        #expect(generation.logprobs.map(\.chosen.token) == textTokens)
        #expect(String(decoding: generation.logprobs.flatMap(\.chosen.bytes), as: UTF8.self) == generation.text)

        let session = model.makeSession(contextLength: 64)
        var logits = try model.forward(generation.promptTokenIDs, session: session, options: options).scalars()
        var notBest = 0
        for (token, reported) in zip(textTokens, generation.logprobs) {
            #expect(abs(Double(reported.chosen.logprob) - Self.logSoftmax(logits, token)) < 1e-4)
            #expect(reported.top.count == 4)
            let ranked = logits.indices.sorted { logits[$0] > logits[$1] || (logits[$0] == logits[$1] && $0 < $1) }
            #expect(reported.top.map(\.token) == Array(ranked.prefix(4)))
            for entry in reported.top {
                #expect(abs(Double(entry.logprob) - Self.logSoftmax(logits, entry.token)) < 1e-4)
                #expect(entry.bytes == model.tokenizer.bytes(of: entry.token))
            }
            if token != ranked[0] { notBest += 1 }
            logits = try model.forward([token], session: session, options: options).scalars()
        }
        #expect(notBest > 0, "at temperature 1.3 some pick should not be the best one, or this test shows nothing about it")
    }

    /// Greedy: the pick is the first of the top list. None asked: none reported. A stop string: only the tokens whose
    /// text reaches into what is returned.
    @Test func greedyStopAndNone() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let greedy = try model.generate(prompt: Self.prompt, maxTokens: 16, sampler: SamplerSettings(logprobs: 1), options: ExecutionOptions())
        #expect(!greedy.logprobs.isEmpty && greedy.logprobs.allSatisfy { $0.top.map(\.token) == [$0.chosen.token] && $0.chosen.logprob <= 0 })
        let plain = try model.generate(prompt: Self.prompt, maxTokens: 16, options: ExecutionOptions())
        #expect(plain.logprobs.isEmpty && plain.tokenIDs == greedy.tokenIDs, "asking for log-probabilities changes no pick")

        let text = greedy.text
        guard let cut = text.dropFirst(2).firstIndex(where: { !$0.isWhitespace }) else { return }
        let stop = String(text[cut...].prefix(2))
        let stopped = try model.generate(prompt: Self.prompt, maxTokens: 16, sampler: SamplerSettings(logprobs: 0),
                                         options: ExecutionOptions(), stop: [stop])
        #expect(stopped.stopReason == "stop")
        let reported = stopped.logprobs.map(\.chosen.bytes)
        #expect(stopped.logprobs.allSatisfy { $0.top.isEmpty })
        #expect(String(decoding: reported.joined(), as: UTF8.self).hasPrefix(stopped.text))
        #expect(reported.dropLast().joined().count < stopped.text.utf8.count, "no token past the text's end is reported")
    }

    /// Streamed: each piece's tokens come just before it (a token held back while it could start a stop string comes
    /// with the piece that releases it); together they are the generation's list — alone and batched.
    @Test func eachPieceComesWithItsOwnTokens() throws {
        let model = try TestCompute.textGenerator(path: TinyFamilyFixture.load("llama3").path)
        let whole = try model.generate(prompt: Self.prompt, maxTokens: 16, sampler: SamplerSettings(logprobs: 2), options: ExecutionOptions())
        let text = whole.text
        let cut = text.index(text.startIndex, offsetBy: text.count / 2)
        let stop = String(text[cut...].prefix(3))
        final class Received: @unchecked Sendable { var pending: [TokenLogprobs] = []; var pieces: [(String, [TokenLogprobs])] = [] }
        for batched in [false, true] {
            let received = Received()
            let onPiece: (String) -> Void = { piece in received.pieces.append((piece, received.pending)); received.pending = [] }
            let onLogprobs: ([TokenLogprobs]) -> Void = { received.pending += $0 }
            let generation = batched
                ? try model.generate(from: .text(Self.prompt), maxTokens: 16, sampler: SamplerSettings(logprobs: 2), stop: [stop],
                                     batcher: ContinuousBatcher(), batchKey: "test", onPiece: onPiece, onLogprobs: onLogprobs)
                : try model.generate(prompt: Self.prompt, maxTokens: 16, sampler: SamplerSettings(logprobs: 2), stop: [stop],
                                     onPiece: onPiece, onLogprobs: onLogprobs)
            #expect(generation.stopReason == "stop" && !generation.text.contains(stop), "\(generation.text.debugDescription)")
            #expect(received.pending.isEmpty, "log-probabilities reported after the last piece")
            #expect(received.pieces.flatMap(\.1) == generation.logprobs, "batched: \(batched)")
            #expect(received.pieces.map(\.0).joined() == generation.text)
            // Through each piece: the tokens sent so far start with the text sent so far, and each of them starts within it
            // (a token whose text the stop-string hold-back splits goes with the piece holding its first bytes).
            var (textBytes, tokenBytes): ([UInt8], [UInt8]) = ([], [])
            for (piece, tokens) in received.pieces {
                textBytes += Array(piece.utf8)
                tokenBytes += tokens.flatMap(\.chosen.bytes)
                #expect(tokenBytes.starts(with: textBytes), "batched: \(batched), piece \(piece.debugDescription)")
                if let last = tokens.last { #expect(tokenBytes.count - last.chosen.bytes.count < textBytes.count) }
            }
        }
    }

    @Test func moreThanTwentyAlternativesAreRefused() {
        #expect(throws: KernelError.self) { try SamplerSettings(logprobs: 21).validate() }
        #expect(throws: KernelError.self) { try SamplerSettings(logprobs: -1).validate() }
        #expect(throws: Never.self) { try SamplerSettings(logprobs: 20).validate() }
    }
}
