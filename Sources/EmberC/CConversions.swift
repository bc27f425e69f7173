import _CEmberAPI
import Ember
import Foundation

/// Between the C API's enums and structures and Ember's Swift types; every
/// value from C is checked.
enum CConversions {
    struct Invalid: Error { let message: String }

    static func tier(_ tier: ember_tier_t) -> Tier? {
        switch tier {
        case EMBER_TIER_CRITICAL: .critical
        case EMBER_TIER_STANDARD: .standard
        case EMBER_TIER_BACKGROUND: .background
        default: nil
        }
    }

    static func units(_ units: ember_compute_units_t) -> ComputeUnits? {
        switch units {
        case EMBER_UNITS_ALL: .all
        case EMBER_UNITS_CPU_ONLY: .cpuOnly
        case EMBER_UNITS_CPU_AND_GPU: .cpuAndGPU
        case EMBER_UNITS_CPU_AND_NEURAL_ENGINE: .cpuAndNeuralEngine
        default: nil
        }
    }

    static func units(_ units: ComputeUnits) -> ember_compute_units_t {
        switch units {
        case .cpuOnly: EMBER_UNITS_CPU_ONLY
        case .cpuAndGPU: EMBER_UNITS_CPU_AND_GPU
        case .cpuAndNeuralEngine: EMBER_UNITS_CPU_AND_NEURAL_ENGINE
        default: EMBER_UNITS_ALL
        }
    }

    /// The size of `ember_runtime_options_t` in ABI 2's first header, which ended at `models_directory` (a pointer, so
    /// no padding after it); still taken.
    static let runtimeOptionsSizeFirst = MemoryLayout<ember_runtime_options_t>.offset(of: \.prompt_cache_bytes)!

    /// The size of `ember_runtime_options_t` in ABI 2's second header, which ended at `prompt_cache_bytes` (8 bytes, so
    /// no padding after it); still taken.
    static let runtimeOptionsSizeSecond = MemoryLayout<ember_runtime_options_t>.offset(of: \.cache_directory)!

    /// The size of `ember_usage_t` in ABI 2's first header, which ended at `decode_ms` (no padding after it); still taken.
    static let usageSizeFirst = MemoryLayout<ember_usage_t>.offset(of: \.cached_prompt_tokens)!

    /// Where ABI 1's fields of `ember_generate_options_t` end (after `json_object`): all an ABI 1 structure holds.
    static let generateOptionsFields1 = MemoryLayout<ember_generate_options_t>.offset(of: \.json_object)! + MemoryLayout<Int32>.size

    /// The size of ABI 1's `ember_generate_options_t`: its fields and the padding to the structure's alignment; still taken.
    static let generateOptionsSize1 = {
        let alignment = max(MemoryLayout<UInt64>.alignment, MemoryLayout<UnsafeRawPointer>.alignment)
        return (generateOptionsFields1 + alignment - 1) / alignment * alignment
    }()

    /// Checked sampling settings and stop strings from `options` (NULL: greedy free text). An ABI 1 structure (its
    /// smaller size) gets the defaults for the fields ABI 2 appended; a schema Ember cannot enforce is refused here,
    /// naming the keyword; bias token ids are checked against `vocabulary` tokens.
    static func sampler(_ options: UnsafePointer<ember_generate_options_t>?, vocabulary: Int) -> Result<(SamplerSettings, [String]), Invalid> {
        guard let options else { return .success((SamplerSettings(), [])) }
        let size = Int(options.pointee.size) // `size` is the first field of every ABI's structure
        var o = ember_generate_options_default()
        switch size {
        case MemoryLayout<ember_generate_options_t>.size: o = options.pointee
        case generateOptionsSize1:
            // Only ABI 1's fields are read: the host's structure ends there.
            withUnsafeMutableBytes(of: &o) { $0.copyMemory(from: UnsafeRawBufferPointer(start: options, count: generateOptionsFields1)) }
        default:
            return .failure(Invalid(message: "options.size: found \(size), expected sizeof(ember_generate_options_t) = \(MemoryLayout<ember_generate_options_t>.size) (ABI 2) or \(generateOptionsSize1) (ABI 1)"))
        }
        var settings = SamplerSettings(temperature: o.temperature, topK: Int(o.top_k), topP: o.top_p, minP: o.min_p,
                                       repetitionPenalty: o.repetition_penalty, frequencyPenalty: o.frequency_penalty,
                                       presencePenalty: o.presence_penalty, seed: o.seed)
        guard o.json_object == 0 || o.json_object == 1 else {
            return .failure(Invalid(message: "options.json_object: found \(o.json_object), expected 0 or 1"))
        }
        if let schema = o.json_schema {
            guard o.json_object == 0 else {
                return .failure(Invalid(message: "options: found both json_schema and json_object, expected one of them"))
            }
            settings.format = .jsonSchema(String(cString: schema))
        } else if o.json_object == 1 {
            settings.format = .jsonObject
        }
        guard o.logprobs == 0 || o.logprobs == 1 else {
            return .failure(Invalid(message: "options.logprobs: found \(o.logprobs), expected 0 (none) or 1"))
        }
        guard (0...20).contains(o.top_logprobs), o.logprobs == 1 || o.top_logprobs == 0 else {
            return .failure(Invalid(message: "options.top_logprobs: found \(o.top_logprobs) with logprobs \(o.logprobs), expected 0…20 with logprobs 1 (0 without)"))
        }
        if o.logprobs == 1 { settings.logprobs = Int(o.top_logprobs) }
        switch logitBias(o, vocabulary: vocabulary) {
        case let .success(bias): settings.logitBias = bias
        case let .failure(error): return .failure(error)
        }
        let stop: [String]
        switch stopStrings(o) {
        case let .success(strings): stop = strings
        case let .failure(error): return .failure(error)
        }
        do { try settings.validate() } catch let KernelError.invalidArgument(argument, found, expected) {
            // The sampler names its Swift fields (topK); the host wrote the C ones (top_k).
            let field = argument.replacing(/[A-Z]/) { "_" + $0.output.lowercased() }
            return .failure(Invalid(message: "options.\(field): found \(found), expected \(expected)"))
        } catch {
            let field = "\(error)".hasPrefix("JSON schema") ? "options.json_schema" : "options"
            return .failure(Invalid(message: "\(field): \(error)"))
        }
        return .success((settings, stop))
    }

    /// `options.logit_bias_*` as a map, each id checked against the vocabulary.
    private static func logitBias(_ o: ember_generate_options_t, vocabulary: Int) -> Result<[Int: Float], Invalid> {
        let count = o.logit_bias_count
        guard count > 0 else { return .success([:]) }
        guard count <= 1024 else {
            return .failure(Invalid(message: "options.logit_bias_count: found \(count), expected at most 1024 biased tokens"))
        }
        guard let tokens = o.logit_bias_tokens, let values = o.logit_bias_values else {
            return .failure(Invalid(message: "options.logit_bias_tokens / logit_bias_values: found NULL with logit_bias_count \(count), expected two arrays of that many"))
        }
        var bias: [Int: Float] = [:]
        for index in 0..<count {
            let (token, value) = (Int(tokens[index]), values[index])
            guard (0..<vocabulary).contains(token) else {
                return .failure(Invalid(message: "options.logit_bias_tokens[\(index)]: found \(token), expected a token id from 0 to \(vocabulary - 1), the model's vocabulary"))
            }
            guard value.isFinite, abs(value) <= 100 else {
                return .failure(Invalid(message: "options.logit_bias_values[\(index)]: found \(value), expected a number from -100 to 100"))
            }
            bias[token] = value
        }
        return .success(bias)
    }

    /// `options.stop` as strings: at most 16, none empty.
    private static func stopStrings(_ o: ember_generate_options_t) -> Result<[String], Invalid> {
        let count = o.stop_count
        guard count > 0 else { return .success([]) }
        guard count <= 16 else { return .failure(Invalid(message: "options.stop_count: found \(count), expected at most 16 stop strings")) }
        guard let stop = o.stop else {
            return .failure(Invalid(message: "options.stop: found NULL with stop_count \(count), expected an array of that many strings"))
        }
        var strings: [String] = []
        for index in 0..<count {
            guard let pointer = stop[index], pointer.pointee != 0 else {
                return .failure(Invalid(message: "options.stop[\(index)]: found \(stop[index] == nil ? "NULL" : "an empty string"), expected a non-empty UTF-8 string"))
            }
            strings.append(String(cString: pointer))
        }
        return .success(strings)
    }

    /// Why a generation ended, from its stop reason.
    static func finishReason(_ stopReason: String) -> ember_finish_reason_t {
        switch stopReason {
        case "eos": EMBER_FINISH_END
        case "stop": EMBER_FINISH_STOP_STRING
        case "context_full": EMBER_FINISH_CONTEXT_FULL
        default: EMBER_FINISH_LENGTH
        }
    }

    /// `options.cache_directory` as a folder Ember can keep its calibration and quality caches in: made if missing
    /// (with its parents); refused when empty, when it names something else than a folder, or when it cannot be
    /// made or written.
    static func cacheDirectory(_ path: String) -> Result<URL, Invalid> {
        func refused(_ found: String) -> Result<URL, Invalid> {
            .failure(Invalid(message: "options.cache_directory: found \(found), expected a folder Ember can write "
                             + "(made if missing), or NULL to measure at every start"))
        }
        guard !path.isEmpty else { return refused("an empty string") }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { return refused("\"\(path)\", which is not a folder") }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                return refused("\"\(path)\", which cannot be made (\((error as NSError).localizedDescription))")
            }
        }
        guard access(path, W_OK) == 0 else { return refused("\"\(path)\", which cannot be written (\(String(cString: strerror(errno))))") }
        return .success(URL(fileURLWithPath: path, isDirectory: true))
    }

    /// A checked ``PowerState`` from a C structure; `name` is how errors call it.
    static func powerState(_ state: ember_power_state_t, name: String) -> Result<PowerState, Invalid> {
        guard state.size == MemoryLayout<ember_power_state_t>.size else {
            return .failure(Invalid(message: "\(name).size: found \(state.size), expected sizeof(ember_power_state_t) = \(MemoryLayout<ember_power_state_t>.size)"))
        }
        guard state.battery_percent == -1 || (0...100).contains(state.battery_percent) else {
            return .failure(Invalid(message: "\(name).battery_percent: found \(state.battery_percent), expected 0…100 or -1 (unknown)"))
        }
        guard (0...1).contains(state.charging), (0...1).contains(state.low_power_mode), (-1...1).contains(state.external_power) else {
            return .failure(Invalid(message: "\(name): found charging \(state.charging), low_power_mode \(state.low_power_mode), external_power \(state.external_power); expected 0 or 1 (external_power also -1)"))
        }
        let thermal: PowerState.Thermal
        switch state.thermal {
        case EMBER_THERMAL_NOMINAL: thermal = .nominal
        case EMBER_THERMAL_FAIR: thermal = .fair
        case EMBER_THERMAL_SERIOUS: thermal = .serious
        case EMBER_THERMAL_CRITICAL: thermal = .critical
        default: return .failure(Invalid(message: "\(name).thermal: found \(state.thermal.rawValue), expected an ember_thermal_t (0…3)"))
        }
        let external: Bool? = state.external_power == -1 ? nil : state.external_power == 1
        return .success(PowerState(batteryLevel: state.battery_percent < 0 ? nil : Double(state.battery_percent) / 100,
                                   charging: state.charging == 1 ? .charging : (external == true ? .unknown : .unplugged),
                                   externalPower: external, lowPowerMode: state.low_power_mode == 1, thermal: thermal))
    }

    static func decision<Output>(_ completion: Completion<Output>) -> ember_decision_t {
        var decision = ember_decision_t()
        decision.size = UInt32(MemoryLayout<ember_decision_t>.size)
        decision.precision = switch completion.decision.precision {
        case .fp32: EMBER_PRECISION_FP32
        case .fp16: EMBER_PRECISION_FP16
        case .int8: EMBER_PRECISION_INT8
        case .int4: EMBER_PRECISION_INT4
        }
        decision.compute_units = units(completion.decision.computeUnits)
        decision.qos_class = completion.decision.qos.rawValue
        decision.threads = Int32(completion.decision.threads)
        decision.wait_ms = completion.waitSeconds * 1000
        decision.run_ms = completion.runSeconds * 1000
        decision.energy_joules = completion.energy?.joules ?? -1
        decision.energy_measured = completion.energy?.source == .measured ? 1 : 0
        return decision
    }
}

/// A C token callback and its user data, called with each piece as a C string,
/// until ``close()``: once that returns, the callback is never entered again and
/// no call is still running on another thread (the host may free `userData`).
final class CCallback: @unchecked Sendable {
    typealias Function = @convention(c) (UnsafePointer<CChar>?, Int, UnsafeMutableRawPointer?) -> Void
    // Recursive: a callback may release its own request (close() on the calling thread).
    private let lock = NSRecursiveLock()
    private var function: Function?
    private let userData: UnsafeMutableRawPointer?

    init(function: Function?, userData: UnsafeMutableRawPointer?) {
        self.function = function
        self.userData = userData
    }

    func call(_ piece: String) {
        lock.withLock {
            guard let function else { return }
            let bytes = piece.utf8CString // NUL-terminated
            bytes.withUnsafeBufferPointer { function($0.baseAddress, bytes.count - 1, userData) }
        }
    }

    /// Stops further calls; waits for a call running on another thread to return.
    func close() { lock.withLock { function = nil } }
}
