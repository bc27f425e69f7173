import _CEmberAPI
import Ember
import Foundation

// The functions `include/ember.h` declares, exported with C names. Each one
// checks its arguments, runs Ember, and turns every Swift error into a status
// code and a message for `ember_last_error()`.

@_cdecl("ember_abi_version")
public func ember_abi_version() -> UInt32 { UInt32(EMBER_ABI_VERSION) }

@_cdecl("ember_last_error")
public func ember_last_error() -> UnsafePointer<CChar> { LastError.pointer }

// MARK: - Runtime

@_cdecl("ember_runtime_create")
public func ember_runtime_create(_ options: UnsafePointer<ember_runtime_options_t>?,
                                 _ outRuntime: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    guard let outRuntime else { return CStatus.invalid("out_runtime", found: "NULL", expected: "a pointer to store the handle") }
    outRuntime.pointee = nil
    var configuration = Runtime.Configuration()
    if let options {
        var o = ember_runtime_options_t()
        switch Int(options.pointee.size) {
        case MemoryLayout<ember_runtime_options_t>.size: o = options.pointee
        case let size where size == CConversions.runtimeOptionsSizeFirst || size == CConversions.runtimeOptionsSizeSecond:
            // Only an earlier header's fields are read: the host's structure ends there (the later fields stay 0 / NULL).
            withUnsafeMutableBytes(of: &o) { $0.copyMemory(from: UnsafeRawBufferPointer(start: options, count: size)) }
        default:
            return CStatus.invalid("options.size", found: "\(options.pointee.size)",
                                   expected: "sizeof(ember_runtime_options_t) = \(MemoryLayout<ember_runtime_options_t>.size), "
                                       + "\(CConversions.runtimeOptionsSizeSecond) (ABI 2's second header) or "
                                       + "\(CConversions.runtimeOptionsSizeFirst) (its first)")
        }
        guard let units = CConversions.units(o.compute_units) else {
            return CStatus.invalid("options.compute_units", found: "\(o.compute_units.rawValue)", expected: "an ember_compute_units_t (0…3)")
        }
        configuration = Runtime.Configuration(computeUnits: units)
        switch o.prompt_cache_bytes {
        case 0: break
        case -1: configuration.promptCacheBytes = 0
        case 1...: configuration.promptCacheBytes = Int(o.prompt_cache_bytes)
        default:
            return CStatus.invalid("options.prompt_cache_bytes", found: "\(o.prompt_cache_bytes)",
                                   expected: "0 (the default, 256 MB), -1 (no prompt cache) or a number of bytes")
        }
        if let directory = o.models_directory {
            configuration.modelsDirectory = URL(fileURLWithPath: String(cString: directory))
        }
        switch o.power_mode {
        case EMBER_POWER_SYSTEM: break
        case EMBER_POWER_INJECTED:
            switch CConversions.powerState(o.initial_power, name: "options.initial_power") {
            case let .success(state): configuration.power = .injected(state)
            case let .failure(error): return CStatus.fail(EMBER_ERROR_INVALID_ARGUMENT, error.message)
            }
        default:
            return CStatus.invalid("options.power_mode", found: "\(o.power_mode.rawValue)", expected: "EMBER_POWER_SYSTEM (0) or EMBER_POWER_INJECTED (1)")
        }
        // Last: it is the one check that makes something (the folder), so a refused create leaves nothing behind.
        if let directory = o.cache_directory {
            switch CConversions.cacheDirectory(String(cString: directory)) {
            case let .success(url): configuration.calibration = .cached(url.appendingPathComponent("calibration.json"))
            case let .failure(error): return CStatus.fail(EMBER_ERROR_INVALID_ARGUMENT, error.message)
            }
        }
    }
    do {
        let runtime = CRuntime(try Runtime(configuration: configuration))
        outRuntime.pointee = CHandleTable.shared.insert(runtime, as: .runtime)
        return EMBER_OK
    } catch {
        return CStatus.fail(error)
    }
}

@_cdecl("ember_runtime_release")
public func ember_runtime_release(_ runtime: OpaquePointer?) -> ember_status_t {
    guard runtime != nil else { return EMBER_OK }
    switch CHandleTable.shared.remove(runtime, .runtime, as: CRuntime.self, argument: "runtime") {
    case let .success(object):
        object.cancelAll()
        return EMBER_OK
    case let .failure(refusal): return refusal.status
    }
}

@_cdecl("ember_runtime_set_power_state")
public func ember_runtime_set_power_state(_ handle: OpaquePointer?, _ state: UnsafePointer<ember_power_state_t>?) -> ember_status_t {
    let runtime: CRuntime
    switch CHandleTable.shared.lookup(handle, .runtime, as: CRuntime.self, argument: "runtime") {
    case let .success(object): runtime = object
    case let .failure(refusal): return refusal.status
    }
    guard let state else { return CStatus.invalid("state", found: "NULL", expected: "an ember_power_state_t") }
    switch CConversions.powerState(state.pointee, name: "state") {
    case let .success(power):
        do { try runtime.runtime.setPowerState(power) } catch {
            return CStatus.invalid("runtime", found: "a runtime reading the system's power state",
                                   expected: "one created with power_mode = EMBER_POWER_INJECTED")
        }
        return EMBER_OK
    case let .failure(error):
        return CStatus.fail(EMBER_ERROR_INVALID_ARGUMENT, error.message)
    }
}

// MARK: - Models

@_cdecl("ember_model_load")
public func ember_model_load(_ handle: OpaquePointer?, _ nameOrPath: UnsafePointer<CChar>?, _ kind: ember_model_kind_t,
                             _ outModel: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    guard let outModel else { return CStatus.invalid("out_model", found: "NULL", expected: "a pointer to store the handle") }
    outModel.pointee = nil
    let runtime: Runtime
    switch CHandleTable.shared.lookup(handle, .runtime, as: CRuntime.self, argument: "runtime") {
    case let .success(object): runtime = object.runtime
    case let .failure(refusal): return refusal.status
    }
    guard let nameOrPath else { return CStatus.invalid("name_or_path", found: "NULL", expected: "a model name or path") }
    let name = String(cString: nameOrPath)
    let loaded: Result<CModel, Error>
    switch kind {
    case EMBER_MODEL_LANGUAGE: loaded = blocking { .language(try await runtime.loadLanguageModel(named: name)) }
    case EMBER_MODEL_EMBEDDING: loaded = blocking { .embedding(try await runtime.loadEmbeddingModel(named: name)) }
    default: return CStatus.invalid("kind", found: "\(kind.rawValue)", expected: "EMBER_MODEL_LANGUAGE (0) or EMBER_MODEL_EMBEDDING (1)")
    }
    switch loaded {
    case let .success(model):
        outModel.pointee = CHandleTable.shared.insert(CModel.Box(model), as: .model)
        return EMBER_OK
    case let .failure(error):
        return CStatus.fail(error)
    }
}

@_cdecl("ember_model_embedding_dimension")
public func ember_model_embedding_dimension(_ model: OpaquePointer?, _ outDimension: UnsafeMutablePointer<Int>?) -> ember_status_t {
    let box: CModel.Box
    switch CHandleTable.shared.lookup(model, .model, as: CModel.Box.self, argument: "model") {
    case let .success(object): box = object
    case let .failure(refusal): return refusal.status
    }
    guard let outDimension else { return CStatus.invalid("out_dimension", found: "NULL", expected: "a pointer to a size_t") }
    guard case let .embedding(bert) = box.model else {
        return CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "model: found a language model, expected an embedding model")
    }
    outDimension.pointee = bert.dimension
    return EMBER_OK
}

@_cdecl("ember_model_release")
public func ember_model_release(_ model: OpaquePointer?) -> ember_status_t {
    guard model != nil else { return EMBER_OK }
    switch CHandleTable.shared.remove(model, .model, as: CModel.Box.self, argument: "model") {
    case .success: return EMBER_OK
    case let .failure(refusal): return refusal.status
    }
}

// MARK: - Text generation

@_cdecl("ember_request_wait")
public func ember_request_wait(_ handle: OpaquePointer?) -> ember_status_t {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return refusal.status
    }
    let (status, message) = request.wait()
    return status == EMBER_OK ? status : CStatus.fail(status, message)
}

@_cdecl("ember_request_cancel")
public func ember_request_cancel(_ handle: OpaquePointer?) -> ember_status_t {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return refusal.status
    }
    request.cancel()
    return EMBER_OK
}

@_cdecl("ember_request_text")
public func ember_request_text(_ handle: OpaquePointer?, _ outText: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> ember_status_t {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return refusal.status
    }
    guard let outText else { return CStatus.invalid("out_text", found: "NULL", expected: "a pointer to a const char *") }
    let (status, message) = request.current
    guard status == EMBER_OK else {
        outText.pointee = nil
        return CStatus.fail(status, status == EMBER_ERROR_PENDING ? "the request has not finished: call ember_request_wait first" : message)
    }
    guard let text = request.text else {
        outText.pointee = nil
        return CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "request: an embedding request has no text: use ember_request_embeddings")
    }
    outText.pointee = UnsafePointer(text)
    return EMBER_OK
}

@_cdecl("ember_request_decision")
public func ember_request_decision(_ handle: OpaquePointer?, _ outDecision: UnsafeMutablePointer<ember_decision_t>?) -> ember_status_t {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return refusal.status
    }
    guard let outDecision else { return CStatus.invalid("out_decision", found: "NULL", expected: "a pointer to an ember_decision_t") }
    guard outDecision.pointee.size == MemoryLayout<ember_decision_t>.size else {
        return CStatus.invalid("out_decision->size", found: "\(outDecision.pointee.size)",
                               expected: "sizeof(ember_decision_t) = \(MemoryLayout<ember_decision_t>.size)")
    }
    let (status, message) = request.current
    guard status == EMBER_OK, let decision = request.decision else {
        return CStatus.fail(status, status == EMBER_ERROR_PENDING ? "the request has not finished: call ember_request_wait first" : message)
    }
    outDecision.pointee = decision
    return EMBER_OK
}

@_cdecl("ember_request_release")
public func ember_request_release(_ request: OpaquePointer?) -> ember_status_t {
    guard request != nil else { return EMBER_OK }
    switch CHandleTable.shared.remove(request, .request, as: CRequest.self, argument: "request") {
    case let .success(object):
        object.callback.close() // after this returns the host's user data is no longer touched
        object.cancel()
        return EMBER_OK
    case let .failure(refusal): return refusal.status
    }
}

// MARK: - Embeddings

/// The checked inputs of an embedding call, or the status that refuses them (the message already set).
private func embeddingInputs(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ texts: UnsafePointer<UnsafePointer<CChar>?>?,
                             _ count: Int, _ tier: ember_tier_t) -> Result<(CRuntime, any Embedder, [String], Tier), CStatus.Refusal> {
    let (owner, box): (CRuntime, CModel.Box)
    switch (CHandleTable.shared.lookup(runtime, .runtime, as: CRuntime.self, argument: "runtime"),
            CHandleTable.shared.lookup(model, .model, as: CModel.Box.self, argument: "model")) {
    case let (.success(a), .success(b)): (owner, box) = (a, b)
    case let (.failure(refusal), _), let (_, .failure(refusal)): return .failure(refusal)
    }
    guard case let .embedding(bert) = box.model else {
        return .failure(.init(CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "model: found a language model, expected an embedding model")))
    }
    guard count > 0, let texts else {
        return .failure(.init(CStatus.invalid("texts", found: count > 0 ? "NULL" : "count \(count)", expected: "at least one text")))
    }
    guard let tier = CConversions.tier(tier) else {
        return .failure(.init(CStatus.invalid("tier", found: "\(tier.rawValue)", expected: "an ember_tier_t (0 critical, 1 standard, 2 background)")))
    }
    var strings: [String] = []
    for index in 0..<count {
        guard let text = texts[index] else {
            return .failure(.init(CStatus.invalid("texts[\(index)]", found: "NULL", expected: "a UTF-8 string")))
        }
        strings.append(String(cString: text))
    }
    return .success((owner, bert, strings, tier))
}

/// Copies `vectors` into the caller's buffer of `capacity` floats, row after row.
private func copy(_ vectors: [[Float]], to outVectors: UnsafeMutablePointer<Float>?, capacity: Int) -> ember_status_t {
    let needed = vectors.reduce(0) { $0 + $1.count }
    guard let outVectors else { return CStatus.invalid("out_vectors", found: "NULL", expected: "a buffer of count × dimension floats") }
    guard capacity >= needed else {
        return CStatus.fail(EMBER_ERROR_BUFFER_TOO_SMALL,
                            "capacity: found \(capacity) floats, expected at least \(needed) (\(vectors.count) texts × \(vectors.first?.count ?? 0))")
    }
    var offset = 0
    for vector in vectors {
        vector.withUnsafeBufferPointer { (outVectors + offset).update(from: $0.baseAddress!, count: vector.count) }
        offset += vector.count
    }
    return EMBER_OK
}

@_cdecl("ember_embed")
public func ember_embed(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ texts: UnsafePointer<UnsafePointer<CChar>?>?,
                        _ count: Int, _ tier: ember_tier_t, _ outVectors: UnsafeMutablePointer<Float>?, _ capacity: Int,
                        _ outDecision: UnsafeMutablePointer<ember_decision_t>?) -> ember_status_t {
    let (owner, bert, input, requestTier): (CRuntime, any Embedder, [String], Tier)
    switch embeddingInputs(runtime, model, texts, count, tier) {
    case let .success(inputs): (owner, bert, input, requestTier) = inputs
    case let .failure(refusal): return refusal.status
    }
    guard let outVectors else { return CStatus.invalid("out_vectors", found: "NULL", expected: "a buffer of count × dimension floats") }
    let needed = count * bert.dimension
    guard capacity >= needed else {
        return CStatus.fail(EMBER_ERROR_BUFFER_TOO_SMALL, "capacity: found \(capacity) floats, expected at least \(needed) (\(count) texts × \(bert.dimension))")
    }
    if let outDecision, outDecision.pointee.size != MemoryLayout<ember_decision_t>.size {
        return CStatus.invalid("out_decision->size", found: "\(outDecision.pointee.size)",
                               expected: "sizeof(ember_decision_t) = \(MemoryLayout<ember_decision_t>.size)")
    }
    let runtime = owner.runtime
    switch blocking({ try await runtime.embedding(bert, input, tier: requestTier) }) {
    case let .success(completion):
        let status = copy(completion.output, to: outVectors, capacity: capacity)
        if status == EMBER_OK { outDecision?.pointee = CConversions.decision(completion) }
        return status
    case let .failure(error):
        return CStatus.fail(error)
    }
}

@_cdecl("ember_embed_submit")
public func ember_embed_submit(_ runtime: OpaquePointer?, _ model: OpaquePointer?, _ texts: UnsafePointer<UnsafePointer<CChar>?>?,
                               _ count: Int, _ tier: ember_tier_t, _ outRequest: UnsafeMutablePointer<OpaquePointer?>?) -> ember_status_t {
    guard let outRequest else { return CStatus.invalid("out_request", found: "NULL", expected: "a pointer to store the handle") }
    outRequest.pointee = nil
    let (owner, bert, input, requestTier): (CRuntime, any Embedder, [String], Tier)
    switch embeddingInputs(runtime, model, texts, count, tier) {
    case let .success(inputs): (owner, bert, input, requestTier) = inputs
    case let .failure(refusal): return refusal.status
    }
    let request = CRequest(callback: CCallback(function: nil, userData: nil))
    owner.track(request)
    request.start({ .embeddings(try await owner.runtime.embedding(bert, input, tier: requestTier)) }, then: { owner.untrack(request) })
    outRequest.pointee = CHandleTable.shared.insert(request, as: .request)
    return EMBER_OK
}

@_cdecl("ember_request_embeddings")
public func ember_request_embeddings(_ handle: OpaquePointer?, _ outVectors: UnsafeMutablePointer<Float>?, _ capacity: Int,
                                     _ outCount: UnsafeMutablePointer<Int>?) -> ember_status_t {
    let request: CRequest
    switch CHandleTable.shared.lookup(handle, .request, as: CRequest.self, argument: "request") {
    case let .success(object): request = object
    case let .failure(refusal): return refusal.status
    }
    let (status, message) = request.current
    guard status == EMBER_OK else {
        return CStatus.fail(status, status == EMBER_ERROR_PENDING ? "the request has not finished: call ember_request_wait first" : message)
    }
    guard let vectors = request.vectors else {
        return CStatus.fail(EMBER_ERROR_WRONG_MODEL_KIND, "request: a generation request has no vectors: use ember_request_text")
    }
    let copied = copy(vectors, to: outVectors, capacity: capacity)
    if copied == EMBER_OK { outCount?.pointee = vectors.reduce(0) { $0 + $1.count } }
    return copied
}
