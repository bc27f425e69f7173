import Ember
import EmberServer
import Foundation
import Hummingbird
import NIOCore

/// Each choice's `system_fingerprint` for a stream's chunks, set as its run starts (``Runtime``'s `onStart`), before
/// the run's first piece: the chunks of a choice, written from its first piece on, name the precision and unit its text
/// comes from.
final class StreamFingerprints: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String?]

    init(choices: Int) { values = Array(repeating: nil, count: choices) }

    /// The fingerprint of the run answering `choices`.
    func set(_ choices: [Int], to fingerprint: String) {
        lock.withLock { for index in choices where values.indices.contains(index) { values[index] = fingerprint } }
    }

    /// Choice `index`'s fingerprint, nil until its run starts.
    subscript(index: Int) -> String? { lock.withLock { values.indices.contains(index) ? values[index] : nil } }
}

/// Writes a generation's events as OpenAI's Server-Sent Events: per choice, its role (chat) or echoed prompt first,
/// a chunk per piece, the last chunk with the finish reason and the `ember` object; the usage chunk when asked, then
/// `data: [DONE]`. A choice's first chunk goes out with its first piece (or its end), when its run has started, so
/// every chunk carries its choice's `system_fingerprint` (the usage chunk the first choice's).
/// Log-probabilities, when asked, come with the chunk whose text their tokens complete (a token held back while it
/// could start a stop string comes with the chunk that releases it), and a client joins the chunks' `logprobs` as it
/// joins their text.
struct SSEStream: Sendable {
    let chat: Bool
    let id: String
    let created: Int
    let model: String
    let tier: Tier
    /// How many choices stream (`n` for each prompt; their chunks interleave, each with its index).
    let choices: Int
    /// `n`: choice p·n is prompt p's first, whose run's cached prompt tokens the usage counts.
    let choicesPerPrompt: Int
    /// The prompts' tokens, counted once each (the usage chunk's).
    let promptTokens: Int
    let includeUsage: Bool
    /// Whether the request asked for log-probabilities.
    let logprobs: Bool
    /// Each choice's prompt, sent first, when a text completion asked for `echo`.
    let echoes: [String]?
    /// Each choice's fingerprint, as its run starts.
    let fingerprints: StreamFingerprints
    let metrics: ServerMetrics
    let log: @Sendable (String) -> Void
    /// Called once the first event is written.
    let firstWritten: @Sendable () -> Void

    func write(first: GenerationEvent?, rest: inout AsyncStream<GenerationEvent>.Iterator, to writer: inout any ResponseBodyWriter) async throws {
        var opened = [Bool](repeating: false, count: choices)
        // Choice `index`'s role (chat) or echoed prompt, once, before its first piece or its end.
        func open(_ index: Int, writer: inout any ResponseBodyWriter) async throws {
            guard !opened[index] else { return }
            opened[index] = true
            if chat {
                try await send(OpenAIResponses.chunk(chat: true, id: id, created: created, model: model, fingerprint: fingerprints[index],
                                                     index: index, piece: nil, role: true), to: &writer)
            } else if let echoes {
                try await send(OpenAIResponses.chunk(chat: false, id: id, created: created, model: model, fingerprint: fingerprints[index],
                                                     index: index, piece: echoes[index]), to: &writer)
            }
        }
        var event = first
        var announced = false
        // Per choice: log-probabilities sent so far, and the text's length (characters) before its next chunk.
        var streamedTokens = [Int](repeating: 0, count: choices), streamedCharacters = [Int](repeating: 0, count: choices)
        var (generatedTokens, cachedTokens, finished, failed) = (0, 0, 0, false)
        while let current = event {
            switch current {
            case let .piece(index, piece, tokens):
                try await open(index, writer: &writer)
                let chunkLogprobs = logprobs ? OpenAIResponses.logprobs(chat: chat, tokens, offset: streamedCharacters[index]) : .null
                try await send(OpenAIResponses.chunk(chat: chat, id: id, created: created, model: model, fingerprint: fingerprints[index],
                                                     index: index, piece: piece, logprobs: chunkLogprobs), to: &writer)
                streamedTokens[index] += tokens.count
                streamedCharacters[index] += piece.unicodeScalars.count
            case let .finished(index, completion, ran):
                try await open(index, writer: &writer)
                let generation = completion.output
                if ran { metrics.ran(completion, promptTokens: generation.promptTokenIDs.count, generatedTokens: generation.tokenIDs.count) }
                // Every token of the text came with a piece; any other (one whose bytes decoded to nothing) comes here.
                let rest = Array(generation.logprobs.dropFirst(streamedTokens[index]))
                try await send(OpenAIResponses.chunk(chat: chat, id: id, created: created, model: model,
                                                     fingerprint: OpenAIResponses.fingerprint(completion.decision), index: index,
                                                     piece: chat ? nil : "", finish: OpenAIResponses.finishReason(generation.stopReason),
                                                     logprobs: logprobs && !rest.isEmpty
                                                        ? OpenAIResponses.logprobs(chat: chat, rest, offset: streamedCharacters[index]) : .null,
                                                     extra: [("ember", OpenAIResponses.ember(completion, tier: tier))]), to: &writer)
                (generatedTokens, finished) = (generatedTokens + generation.tokenIDs.count, finished + 1)
                if ran, index % choicesPerPrompt == 0 { cachedTokens += generation.cachedPromptTokens }
                if includeUsage, finished == choices, !failed {
                    let usage = OpenAIResponses.usage(prompt: promptTokens, completion: generatedTokens, cached: cachedTokens)
                    try await send(OpenAIResponses.usageChunk(chat: chat, id: id, created: created, model: model,
                                                              fingerprint: fingerprints[0], usage: usage), to: &writer)
                }
            case let .failed(error):
                // The headers are out: the error goes in the stream, in OpenAI's shape (once, if several choices fail).
                let apiError = OpenAIServer.apiError(error)
                log("stream \(id) ended by \(apiError.status) \(apiError.message)")
                if !failed { try await send(apiError.body, to: &writer) }
                failed = true
            }
            if !announced {
                announced = true
                firstWritten()
            }
            event = await rest.next()
        }
        if !announced { firstWritten() }
        try await writer.write(ByteBuffer(string: "data: [DONE]\n\n"))
    }

    private func send(_ value: JSONValue, to writer: inout any ResponseBodyWriter) async throws {
        try await writer.write(ByteBuffer(string: "data: " + value.text + "\n\n"))
    }
}
