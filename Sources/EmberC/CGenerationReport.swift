import _CEmberAPI
import Ember
import Foundation

/// What `ember_request_usage` and `ember_request_logprobs` read from a finished generation: its usage as a C
/// structure and its log-probabilities as C arrays, allocated once when the request ends and freed with the request,
/// so the pointers a host reads stay valid until it releases the request.
final class CGenerationReport: @unchecked Sendable {
    /// Token counts, finish reason and times (`size` set).
    let usage: ember_usage_t
    /// One entry per text token when log-probabilities were asked for; empty otherwise.
    let steps: UnsafeMutableBufferPointer<ember_step_logprobs_t>
    private var tops: [UnsafeMutableBufferPointer<ember_token_logprob_t>] = []
    private var strings: [UnsafeMutablePointer<CChar>] = []

    init(_ generation: Generation) {
        var usage = ember_usage_t()
        usage.size = UInt32(MemoryLayout<ember_usage_t>.size)
        usage.prompt_tokens = Int32(clamping: generation.promptTokenIDs.count)
        usage.generated_tokens = Int32(clamping: generation.tokenIDs.count)
        usage.finish_reason = CConversions.finishReason(generation.stopReason)
        usage.prefill_ms = generation.prefillSeconds * 1000
        usage.decode_ms = generation.decodeSeconds * 1000
        usage.cached_prompt_tokens = Int32(clamping: generation.cachedPromptTokens)
        self.usage = usage
        steps = .allocate(capacity: generation.logprobs.count)
        for (index, step) in generation.logprobs.enumerated() {
            let top = UnsafeMutableBufferPointer<ember_token_logprob_t>.allocate(capacity: step.top.count)
            tops.append(top)
            for (rank, candidate) in step.top.enumerated() { top[rank] = entry(candidate) }
            steps[index] = ember_step_logprobs_t(chosen: entry(step.chosen), top: UnsafePointer(top.baseAddress), top_count: step.top.count)
        }
    }

    deinit {
        for string in strings { string.deallocate() }
        for top in tops { top.deallocate() }
        steps.deallocate()
    }

    /// A C entry for `token`, its bytes copied NUL-terminated (a token's bytes may hold a 0 byte: `length` counts them).
    private func entry(_ token: TokenProbability) -> ember_token_logprob_t {
        let bytes = UnsafeMutablePointer<CChar>.allocate(capacity: token.bytes.count + 1)
        strings.append(bytes)
        for (offset, byte) in token.bytes.enumerated() { bytes[offset] = CChar(bitPattern: byte) }
        bytes[token.bytes.count] = 0
        return ember_token_logprob_t(token: Int32(token.token), logprob: token.logprob, bytes: UnsafePointer(bytes), length: token.bytes.count)
    }
}
