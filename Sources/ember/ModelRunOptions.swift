import ArgumentParser
import Ember
import Foundation

/// The policy overrides every model-running command takes: precision,
/// compute units and threads.
struct DecisionOptions: ParsableArguments {
    @Option(help: """
        native (the weights as the file stores them: Q4_K, Q6_K, Q5_0 …), auto (the policy decides from the power state), \
        fp32 (dequantized), fp16 (16-bit floats: F16, a BF16 file's weights kept as BF16; fp32 arithmetic), int8 (as \
        Q8_0) or int4 (the stored 4-bit types, other tensors as Q4_1; a 4-bit mix such as Q4_K_M as stored). \
        Default: native for a file whose weight matrices are all quantized or 16-bit, auto otherwise.
        """)
    var precision: String?

    @Option(help: "all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine.")
    var units = "all"

    @Option(parsing: .unconditional, help: "Compute threads (default: the policy's choice, at most the cores).")
    var threads: Int?

    static let unitSets: [String: ComputeUnits] = [
        "all": .all, "cpuOnly": .cpuOnly, "cpuAndGPU": .cpuAndGPU, "cpuAndNeuralEngine": .cpuAndNeuralEngine,
    ]

    func validate() throws {
        guard Self.unitSets[units] != nil else {
            throw ValidationError("--units \(units): expected all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine")
        }
        if let precision, !["auto", "native"].contains(precision), Precision(rawValue: precision) == nil {
            throw ValidationError("--precision \(precision): expected native, auto, \(Precision.names)")
        }
        if let threads, !(1...ProcessInfo.processInfo.activeProcessorCount).contains(threads) {
            throw ValidationError("--threads \(threads): expected 1 to \(ProcessInfo.processInfo.activeProcessorCount) (the cores)")
        }
    }

    /// The units ceiling the flags ask for.
    var ceiling: ComputeUnits { Self.unitSets[units] ?? .all }
    /// The precision the flags force, nil for auto and native.
    var forcedPrecision: Precision? { precision.flatMap(Precision.init(rawValue:)) }

    /// What a critical request of this command needs, for a model whose weight matrices are all quantized or
    /// 16-bit (`quantizedFile`: then no `--precision` means native) or not.
    func requirements(quantizedFile: Bool) -> RequestRequirements {
        let native = precision == "native" || (precision == nil && quantizedFile)
        return RequestRequirements(tier: .critical, precision: forcedPrecision, computeUnits: ceiling, storedWeights: native)
    }

    /// A runtime as the environment configures it, within these flags' units and threads.
    func makeRuntime() throws -> Runtime { try CommandEnvironment.runtime(units: ceiling, threads: threads) }

    /// The policy's decision for a critical (interactive) request in the runtime's power state, with the flags'
    /// overrides applied; also starts the workers of the decision's class.
    func decision(in runtime: Runtime, quantizedFile: Bool) throws -> Decision {
        var decision = runtime.decide(requirements(quantizedFile: quantizedFile))
        if case let .drop(reason) = decision.action {
            throw ValidationError("the power policy refuses to run now: \(reason)")
        }
        if let threads { decision.threads = threads }
        _ = runtime.context.pool.threadIDs(for: decision.qos)
        return decision
    }
}

/// The options of the commands that run a GGUF text model (`generate`,
/// `chat`, `bench generate`, `plan`): which model, and the policy overrides.
struct ModelRunOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "A model name from models/manifest.json, or a GGUF path.")
    var model = "smollm2-135m-instruct"

    @OptionGroup var overrides: DecisionOptions

    /// Opens and validates the model through `runtime`, decides how to run it (the flags, else the policy; native
    /// for an all-quantized file without `--precision`) and binds its weights for that; returns the model, the
    /// decision, what requests of the command need, and the milliseconds taken.
    func load(in runtime: Runtime) throws -> LoadedModel {
        let start = DispatchTime.now().uptimeNanoseconds
        try FirstUseFetch.ensure(model)
        let generator = try runtime.languageModel(named: model)
        let quantized = generator.filePrecision != .fp32
        let decision = try overrides.decision(in: runtime, quantizedFile: quantized)
        try generator.prepare(decision.executionOptions())
        return LoadedModel(model: generator, decision: decision, requirements: overrides.requirements(quantizedFile: quantized),
                           milliseconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
}

/// A text model opened and bound by a command, and how it runs.
struct LoadedModel {
    let model: any TextGenerator
    let decision: Decision
    let requirements: RequestRequirements
    let milliseconds: Double
}

/// What the JSON reports say of a decision.
struct DecisionReport: Encodable {
    var precision: String
    var units: String
    var qos: String
    var threads: Int

    init(_ decision: Decision) {
        precision = decision.precisionName
        units = decision.computeUnits.description
        qos = decision.qos.description
        threads = decision.threads
    }
}
