import _CEmberAPI
import Ember
import Foundation

// Text generation through the C API: from text, from token ids or from a conversation, with the sampler's options,
// and what a finished generation reports beyond its text (usage, log-probabilities). Tokenizing lives here too: it is
// how a host makes the ids `ember_generate_tokens_submit` takes.

/// The C token callback's type.
public typealias CTokenFunction = @convention(c) (UnsafePointer<CChar>?, Int, UnsafeMutableRawPointer?) -> Void

@_cdecl("ember_generate_options_default")
public func ember_generate_options_default() -> ember_generate_options_t {
    var options = ember_generate_options_t()
    options.size = UInt32(MemoryLayout<ember_generate_options_t>.size)
    (options.temperature, options.top_k, options.top_p, options.seed) = (0, 40, 0.95, 0)
    (options.min_p, options.repetition_penalty, options.frequency_penalty, options.presence_penalty) = (0.05, 1, 0, 0)
    return options // NULL schema, stop and bias arrays, counts 0, no log-probabilities
}

@_cdecl("ember_generate_submit")
public func ember_generate_submit(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ prompt: UnsafePointer<CChar>?,
                                  _ maxTokens: Int32, _ tier: ember_tier_t, _ onToken: CTokenFunction?,
                                  _ userData: UnsafeMutableRawPointer?,
                                  _ outRequest: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    submitGeneration(runtime, model, maxTokens, tier, nil, onToken, userData, outRequest) { _ in textPrompt(prompt) }
}

@_cdecl("ember_generate_submit_with_options")
public func ember_generate_submit_with_options(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ prompt: UnsafePointer<CChar>?,
                                               _ maxTokens: Int32, _ tier: ember_tier_t,
                                               _ options: UnsafePointer<ember_generate_options_t>?, _ onToken: CTokenFunction?,
                                               _ userData: UnsafeMutableRawPointer?,
                                               _ outRequest: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    submitGeneration(runtime, model, maxTokens, tier, options, onToken, userData, outRequest) { _ in textPrompt(prompt) }
}

@_cdecl("ember_generate_tokens_submit")
public func ember_generate_tokens_submit(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ tokens: UnsafePointer<Int32>?,
                                         _ count: Int, _ maxTokens: Int32, _ tier: ember_tier_t,
                                         _ options: UnsafePointer<ember_generate_options_t>?, _ onToken: CTokenFunction?,
                                         _ userData: UnsafeMutableRawPointer?,
                                         _ outRequest: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    submitGeneration(runtime, model, maxTokens, tier, options, onToken, userData, outRequest) { llm in
        guard count > 0, let tokens else {
            return .failure(.init(CStatus.invalid("tokens", found: count > 0 ? "NULL" : "count \(count)", expected: "at least one token id")))
        }
        let vocabulary = llm.tokenizer.count
        var ids: [Int] = []
        ids.reserveCapacity(count)
        for index in 0..<count {
            let id = Int(tokens[index])
            guard (0..<vocabulary).contains(id) else {
                return .failure(.init(CStatus.invalid("tokens[\(index)]", found: "\(id)",
                                                      expected: "a token id from 0 to \(vocabulary - 1), the model's vocabulary")))
            }
            ids.append(id)
        }
        return .success(.tokens(ids))
    }
}

@_cdecl("ember_chat_submit")
public func ember_chat_submit(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ messages: UnsafePointer<ember_chat_message_t>?,
                              _ count: Int, _ maxTokens: Int32, _ tier: ember_tier_t,
                              _ options: UnsafePointer<ember_generate_options_t>?, _ onToken: CTokenFunction?,
                              _ userData: UnsafeMutableRawPointer?,
                              _ outRequest: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    submitGeneration(runtime, model, maxTokens, tier, options, onToken, userData, outRequest) { llm in
        guard count > 0, let messages else {
            return .failure(.init(CStatus.invalid("messages", found: count > 0 ? "NULL" : "count \(count)", expected: "at least one message")))
        }
        var conversation: [ChatMessage] = []
        for index in 0..<count {
            let message = messages[index]
            guard let role = message.role.map({ String(cString: $0) }), ["system", "user", "assistant"].contains(role) else {
                let found = message.role.map { "\"\(String(cString: $0))\"" } ?? "NULL"
                return .failure(.init(CStatus.invalid("messages[\(index)].role", found: found, expected: "\"system\", \"user\" or \"assistant\"")))
            }
            guard let content = message.content else {
                return .failure(.init(CStatus.invalid("messages[\(index)].content", found: "NULL", expected: "a UTF-8 string (it may be empty)")))
            }
            conversation.append(ChatMessage(role: role, content: String(cString: content)))
        }
        do {
            return .success(.text(try ChatTemplate.resolve(for: llm).format(conversation)))
        } catch {
            return .failure(.init(CStatus.invalid("model", found: "a model without a chat template (\(error))",
                                                  expected: "a chat model, or ember_generate_submit with the prompt formatted by the host")))
        }
    }
}

/// A C string prompt, checked: not NULL, not empty.
private func textPrompt(_ prompt: UnsafePointer<CChar>?) -> Result<PromptInput, CStatus.Refusal> {
    guard let prompt else { return .failure(.init(CStatus.invalid("prompt", found: "NULL", expected: "a UTF-8 string"))) }
    let text = String(cString: prompt)
    guard !text.isEmpty else { return .failure(.init(CStatus.invalid("prompt", found: "an empty string", expected: "some text"))) }
    return .success(.text(text))
}

/// Checks a generation's handles and arguments — `prompt` makes the prompt from the language model, or refuses it —
/// then starts it as a request and stores the request's handle.
private func submitGeneration(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ maxTokens: Int32, _ tier: ember_tier_t,
                              _ options: UnsafePointer<ember_generate_options_t>?, _ onToken: CTokenFunction?,
                              _ userData: UnsafeMutableRawPointer?, _ outRequest: UnsafeMutablePointer<OpaquePointer?>?,
                              prompt: (any TextGenerator) -> Result<PromptInput, CStatus.Refusal>) -> ember_status_t {
    guard let outRequest else { return CStatus.invalid("out_request", found: "NULL", expected: "a pointer to store the handle") }
    outRequest.pointee = nil
    let (owner, box): (CRuntime, CModel.Box)
    switch (CHandleTable.shared.lookup(runtime, .runtime, as: CRuntime.self, argument: "runtime"),
            CHandleTable.shared.lookup(model, .model, as: CModel.Box.self, argument: "model")) {
    case let (.success(a), .success(b)): (owner, box) = (a, b)
    case let (.failure(refusal), _), let (_, .failure(refusal)): return refusal.status
    }
    guard case let .language(llm) = box.model else {
        return CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "model: found an embedding model, expected a language model")
    }
    let input: PromptInput
    switch prompt(llm) {
    case let .success(made): input = made
    case let .failure(refusal): return refusal.status
    }
    guard maxTokens > 0 else { return CStatus.invalid("max_tokens", found: "\(maxTokens)", expected: "at least 1") }
    guard let tier = CConversions.tier(tier) else {
        return CStatus.invalid("tier", found: "\(tier.rawValue)", expected: "an ember_tier_t (0 critical, 1 standard, 2 background)")
    }
    let (sampler, stop): (SamplerSettings, [String])
    switch CConversions.sampler(options, vocabulary: llm.tokenizer.count) {
    case let .success(settings): (sampler, stop) = settings
    case let .failure(error): return CStatus.fail(EMBER_ERROR_INVALID_ARGUMENT, error.message)
    }
    let callback = CCallback(function: onToken, userData: userData)
    let request = CRequest(callback: callback)
    owner.track(request)
    request.start({
        .generation(try await owner.runtime.generateText(llm, from: input, maxTokens: Int(maxTokens), tier: tier, sampler: sampler,
                                                         stop: stop, onPiece: { piece in callback.call(piece) }))
    }, then: { owner.untrack(request) })
    outRequest.pointee = CHandleTable.shared.insert(request, as: .request)
    return EMBER_OK
}

/// The request behind `handle` once it ended with EMBER_OK, and its generation report; or the status refusing the call.
private func finishedGeneration(_ handle: OpaquePointer?) -> Result<CGenerationReport, CStatus.Refusal> {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return .failure(refusal)
    }
    let (status, message) = request.current
    guard status == EMBER_OK else {
        return .failure(.init(CStatus.fail(status, status == EMBER_ERROR_PENDING ? "the request has not finished: call ember_request_wait first" : message)))
    }
    guard let report = request.report else {
        return .failure(.init(CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "request: an embedding request has no usage or log-probabilities")))
    }
    return .success(report)
}

@_cdecl("ember_request_usage")
public func ember_request_usage(_ handle: OpaquePointer?, _ outUsage: UnsafeMutablePointer<ember_usage_t>?) -> ember_status_t {
    let report: CGenerationReport
    switch finishedGeneration(handle) {
    case let .success(found): report = found
    case let .failure(refusal): return refusal.status
    }
    guard let outUsage else { return CStatus.invalid("out_usage", found: "NULL", expected: "a pointer to an ember_usage_t") }
    switch Int(outUsage.pointee.size) {
    case MemoryLayout<ember_usage_t>.size:
        outUsage.pointee = report.usage
    case CConversions.usageSizeFirst:
        // The host's structure ends at decode_ms: only that much is written, its size left as the host set it.
        var usage = report.usage
        usage.size = UInt32(CConversions.usageSizeFirst)
        withUnsafeBytes(of: &usage) { UnsafeMutableRawPointer(outUsage).copyMemory(from: $0.baseAddress!, byteCount: CConversions.usageSizeFirst) }
    default:
        return CStatus.invalid("out_usage->size", found: "\(outUsage.pointee.size)",
                               expected: "sizeof(ember_usage_t) = \(MemoryLayout<ember_usage_t>.size), or \(CConversions.usageSizeFirst) (ABI 2's first header)")
    }
    return EMBER_OK
}

@_cdecl("ember_request_logprobs")
public func ember_request_logprobs(_ handle: OpaquePointer?, _ outSteps: UnsafeMutablePointer<UnsafePointer<ember_step_logprobs_t>?>?,
                                   _ outCount: UnsafeMutablePointer<Int>?) -> ember_status_t {
    guard let outSteps, let outCount else {
        return CStatus.invalid(outSteps == nil ? "out_steps" : "out_count", found: "NULL", expected: "a pointer to store the result")
    }
    (outSteps.pointee, outCount.pointee) = (nil, 0)
    switch finishedGeneration(handle) {
    case let .success(report):
        (outSteps.pointee, outCount.pointee) = (UnsafePointer(report.steps.baseAddress), report.steps.count)
        return EMBER_OK
    case let .failure(refusal): return refusal.status
    }
}

@_cdecl("ember_model_tokenize")
public func ember_model_tokenize(_ model: OpaquePointer?, _ text: UnsafePointer<CChar>?, _ outTokens: UnsafeMutablePointer<Int32>?,
                                 _ capacity: Int, _ outCount: UnsafeMutablePointer<Int>?) -> ember_status_t {
    let box: CModel.Box
    switch CHandleTable.shared.lookup(model, .model, as: CModel.Box.self, argument: "model") {
    case let .success(object): box = object
    case let .failure(refusal): return refusal.status
    }
    guard let text else { return CStatus.invalid("text", found: "NULL", expected: "a UTF-8 string") }
    guard let outCount else { return CStatus.invalid("out_count", found: "NULL", expected: "a pointer to a size_t") }
    let string = String(cString: text)
    let ids: [Int] = switch box.model {
    case let .language(llm): llm.tokenizer.encode(string)
    case let .embedding(encoder): encoder.tokenize(string)
    }
    outCount.pointee = ids.count
    guard capacity >= ids.count else {
        return CStatus.fail(EMBER_ERROR_BUFFER_TOO_SMALL, "capacity: found \(capacity) token ids, expected at least \(ids.count) (*out_count holds it)")
    }
    guard let outTokens else {
        if ids.isEmpty { return EMBER_OK }
        return CStatus.invalid("out_tokens", found: "NULL", expected: "a buffer of `capacity` int32_t")
    }
    for (index, id) in ids.enumerated() { outTokens[index] = Int32(id) }
    return EMBER_OK
}
