import Ember
import EmberServer
import Foundation
import Hummingbird
import NIOCore

/// What a generation's choices send their HTTP response: each choice's pieces in order (each with the
/// log-probabilities of the tokens it completes, when asked), then its end; or a failure.
enum GenerationEvent: Sendable {
    /// Choice `index`'s next piece.
    case piece(Int, String, [TokenLogprobs])
    /// Choice `index` ended; `ran` is false for the copies of a run that answered several (greedy) choices.
    case finished(Int, Completion<Generation>, ran: Bool)
    /// A choice failed (the others are stopped).
    case failed(Error)
}

extension OpenAIServer {
    /// `/v1/chat/completions` (`chat`) and `/v1/completions`: checked, run through the scheduler, answered whole
    /// or as Server-Sent Events.
    func generation(_ fields: RequestFields, chat: Bool, headers: RequestHeaders, request: Request) async throws -> Response {
        let name = try servedName(fields, embedding: false)
        let parameters = try GenerationParameters(fields, chat: chat)
        let messages = chat ? try chatMessages(fields) : []
        let given = chat ? [] : try GenerationParameters.completionPrompts(fields)
        let model = try await models.language(named: name)
        try parameters.checkTokens(vocabulary: model.tokenizer.count)
        let inputs: [PromptInput]
        if chat {
            do { inputs = [.text(try ChatTemplate.resolve(for: model).format(messages))] } catch {
                throw HTTPAPIError(status: 400, code: "no_chat_template", param: "model",
                                   message: "\(error); use /v1/completions with a prompt of your own format")
            }
        } else {
            inputs = given
        }
        guard inputs.count * parameters.choices <= 16 else {
            throw HTTPAPIError.invalid("prompt", found: "\(inputs.count) prompts × n = \(parameters.choices)",
                                       expected: "at most 16 choices in all: send several requests for more")
        }
        let prompts = try inputs.enumerated().map { index, input in
            try PreparedPrompt(input, field: chat ? "messages" : inputs.count > 1 ? "prompt[\(index)]" : "prompt", model: model,
                               parameters: parameters)
        }
        // Choice p·n + i is prompt p's i-th, as OpenAI numbers them. Sampled choices draw from the seed plus i, a run
        // each; greedy choices are the same text, so one run answers all n of a prompt.
        let greedy = parameters.sampler.temperature == 0
        let runs = prompts.enumerated().flatMap { number, prompt in
            (0..<(greedy ? 1 : parameters.choices)).map { index in
                var sampler = parameters.sampler
                sampler.seed &+= UInt64(index)
                let first = number * parameters.choices
                return (prompt: prompt, sampler: sampler, choices: greedy ? Array(first..<(first + parameters.choices)) : [first + index])
            }
        }
        let choiceCount = prompts.count * parameters.choices
        let id = (chat ? "chatcmpl-" : "cmpl-") + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(24)
        let created = Int(Date().timeIntervalSince1970)
        let deferral = DeferralNote()
        let runtime = runtime
        let requirements = configuration.requirements

        guard parameters.stream else {
            let completions = try await Self.translatingDrop(deferral, headers) {
                try await request.body.consumeWithCancellationOnInboundClose { _ in
                    try await withThrowingTaskGroup(of: (Int, Completion<Generation>).self) { group in
                        for (number, run) in runs.enumerated() {
                            group.addTask {
                                (number, try await runtime.generateText(model, from: run.prompt.input, maxTokens: run.prompt.maxTokens,
                                                                        tier: headers.tier, sampler: run.sampler, requirements: requirements,
                                                                        stop: parameters.stop, deadline: headers.deadline,
                                                                        onDeferred: { deferral.reason = $0 }))
                            }
                        }
                        var done: [(Int, Completion<Generation>)] = []
                        for try await result in group { done.append(result) }
                        return done.sorted { $0.0 < $1.0 }.map(\.1)
                    }
                }
            }
            var choices = [Completion<Generation>?](repeating: nil, count: choiceCount)
            var echoes = [String](repeating: "", count: choiceCount)
            for (run, completion) in zip(runs, completions) {
                metrics.ran(completion, promptTokens: completion.output.promptTokenIDs.count, generatedTokens: completion.output.tokenIDs.count)
                for index in run.choices { (choices[index], echoes[index]) = (completion, run.prompt.echoed) }
            }
            // Each prompt's tokens the cache held, as its first choice's run found them.
            let cached = zip(runs, completions).filter { $0.0.choices[0] % parameters.choices == 0 }
                .reduce(0) { $0 + $1.1.output.cachedPromptTokens }
            return Self.json(OpenAIResponses.completion(chat: chat, id: String(id), created: created, model: name,
                                                        generations: choices.compactMap { $0 }, promptTokens: prompts.reduce(0) { $0 + $1.tokens },
                                                        cachedTokens: cached, tier: headers.tier, logprobs: parameters.sampler.logprobs != nil,
                                                        echoes: echoes), status: .ok)
        }

        // Streamed: the runs start now; the headers go out with the first piece (or end), so a request the policy
        // keeps deferred past X-Ember-Max-Wait still gets a 503 rather than an empty stream. With `n` > 1 the choices'
        // chunks interleave, each with its index; a choice that fails stops the others.
        let (events, sink) = AsyncStream<GenerationEvent>.makeStream(bufferingPolicy: .unbounded)
        let firstChunk = FirstChunkGate()
        let fingerprints = StreamFingerprints(choices: choiceCount)
        let task = Task {
            await withTaskGroup(of: Bool.self) { group in
                for run in runs {
                    group.addTask {
                        let pendingLogprobs = PendingLogprobs()
                        do {
                            let completion = try await runtime.generateText(
                                model, from: run.prompt.input, maxTokens: run.prompt.maxTokens, tier: headers.tier, sampler: run.sampler,
                                requirements: requirements, stop: parameters.stop, deadline: headers.deadline,
                                onPiece: { piece in
                                    let logprobs = pendingLogprobs.take()
                                    for index in run.choices { sink.yield(.piece(index, piece, logprobs)) }
                                    firstChunk.waitAfterFirstPiece()
                                }, onLogprobs: { pendingLogprobs.add($0) }, onDeferred: { deferral.reason = $0 },
                                onStart: { fingerprints.set(run.choices, to: OpenAIResponses.fingerprint($0)) })
                            for index in run.choices { sink.yield(.finished(index, completion, ran: index == run.choices[0])) }
                            return true
                        } catch {
                            sink.yield(.failed(error))
                            return false
                        }
                    }
                }
                for await succeeded in group where !succeeded { group.cancelAll() }
            }
            sink.finish()
        }
        var iterator = events.makeAsyncIterator()
        let first = await withTaskCancellationHandler { await iterator.next() } onCancel: { task.cancel() }
        if case let .failed(error)? = first {
            _ = try await Self.translatingDrop(deferral, headers) { throw error }
        }
        let stream = SSEStream(chat: chat, id: String(id), created: created, model: name, tier: headers.tier, choices: choiceCount,
                               choicesPerPrompt: parameters.choices, promptTokens: prompts.reduce(0) { $0 + $1.tokens },
                               includeUsage: parameters.includeUsage, logprobs: parameters.sampler.logprobs != nil,
                               echoes: parameters.echo ? prompts.flatMap { Array(repeating: $0.echoed, count: parameters.choices) } : nil,
                               fingerprints: fingerprints, metrics: metrics, log: configuration.log,
                               firstWritten: { firstChunk.open() })
        let pending = UnsafeTransfer(iterator)
        var responseHeaders = HTTPFields()
        responseHeaders[.contentType] = "text/event-stream"
        responseHeaders[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: responseHeaders, body: ResponseBody { writer in
            var rest = pending.value
            do {
                try await stream.write(first: first, rest: &rest, to: &writer)
            } catch {
                firstChunk.open()
                task.cancel() // the client went away (a write failed): stop at the next token
                throw error
            }
            try await writer.finish(nil)
        })
    }
}

/// The log-probabilities a generation reported for the piece it is about to stream (they come just before it, on the
/// same thread).
final class PendingLogprobs: @unchecked Sendable {
    private let lock = NSLock()
    private var tokens: [TokenLogprobs] = []

    func add(_ more: [TokenLogprobs]) { lock.withLock { tokens += more } }

    /// What was added since the last call.
    func take() -> [TokenLogprobs] { lock.withLock { defer { tokens = [] }; return tokens } }
}

/// One prompt of a generation request, checked: its token count, the room its reply has in the model's context, and
/// its text for `echo`.
struct PreparedPrompt: Sendable {
    let input: PromptInput
    let tokens: Int
    /// `max_tokens`, or all the room the context leaves.
    let maxTokens: Int
    /// The prompt as text when a completion echoes it ("" otherwise).
    let echoed: String

    /// 400s name `field` for a token id beyond the vocabulary, no tokens, or a prompt and reply the context cannot hold.
    init(_ input: PromptInput, field: String, model: any TextGenerator, parameters: GenerationParameters) throws {
        self.input = input
        switch input {
        case let .text(text): (tokens, echoed) = (model.tokenizer.encode(text).count, parameters.echo ? text : "")
        case let .tokens(ids):
            if let index = ids.firstIndex(where: { !(0..<model.tokenizer.count).contains($0) }) {
                throw HTTPAPIError.invalid("\(field)[\(index)]", found: "token id \(ids[index])",
                                           expected: "an id from 0 to \(model.tokenizer.count - 1), the model's vocabulary")
            }
            (tokens, echoed) = (ids.count, parameters.echo ? model.tokenizer.decode(ids) : "")
        }
        guard tokens > 0 else { throw HTTPAPIError.invalid(field, found: "no tokens", expected: "some text") }
        let room = model.contextLength - tokens
        guard room >= 1 else {
            throw HTTPAPIError(status: 400, code: "context_length_exceeded", param: field,
                               message: "the prompt is \(tokens) tokens, the model's context is \(model.contextLength); shorten it")
        }
        if let maxTokens = parameters.maxTokens, maxTokens > room {
            throw HTTPAPIError(status: 400, code: "context_length_exceeded", param: "max_tokens",
                               message: "max_tokens: found \(maxTokens), expected at most \(room): the prompt's \(tokens) tokens and the reply must fit the model's context of \(model.contextLength) tokens")
        }
        maxTokens = parameters.maxTokens ?? room
    }
}

/// Holds a generation after its first piece until the stream has written it, at most 20 ms: the generation's
/// compute threads outrank the threads that write responses, and on a machine with few cores the first chunk would
/// otherwise wait behind the next tokens' passes. Later pieces never wait.
final class FirstChunkGate: @unchecked Sendable {
    private let written = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var waited = false
    private var opened = false

    /// In the generation's piece callback: the first call waits for ``open()`` (20 ms at most); later calls return.
    func waitAfterFirstPiece() {
        let first: Bool = lock.withLock {
            defer { waited = true }
            return !waited && !opened
        }
        if first { _ = written.wait(timeout: .now() + .milliseconds(20)) }
    }

    /// The first chunk is out (or never will be): let the generation go on.
    func open() {
        let signal: Bool = lock.withLock {
            defer { opened = true }
            return !opened
        }
        if signal { written.signal() }
    }
}

/// Moves a value that is used by one task at a time across a `@Sendable` boundary.
struct UnsafeTransfer<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}
