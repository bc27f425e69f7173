import ArgumentParser
import Ember
import Foundation

/// The policy overrides every model-running command takes: precision,
/// compute units and threads.
struct DecisionOptions: ParsableArguments {
    @Option(help: "auto (the policy decides from the power state), fp32, int8 or int4.")
    var precision = "auto"

    @Option(help: "all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine.")
    var units = "all"

    @Option(help: "Compute threads (default: the policy's choice, at most the cores).")
    var threads: Int?

    static let unitSets: [String: ComputeUnits] = [
        "all": .all, "cpuOnly": .cpuOnly, "cpuAndGPU": .cpuAndGPU, "cpuAndNeuralEngine": .cpuAndNeuralEngine,
    ]

    func validate() throws {
        guard Self.unitSets[units] != nil else {
            throw ValidationError("--units \(units): expected all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine")
        }
        guard precision == "auto" || Precision(rawValue: precision) != nil else {
            throw ValidationError("--precision \(precision): expected auto, fp32, int8 or int4")
        }
        if let threads, !(1...ProcessInfo.processInfo.activeProcessorCount).contains(threads) {
            throw ValidationError("--threads \(threads): expected 1 to \(ProcessInfo.processInfo.activeProcessorCount) (the cores)")
        }
    }

    /// The units ceiling the flags ask for.
    var ceiling: ComputeUnits { Self.unitSets[units] ?? .all }
    /// The precision the flags force, nil for auto.
    var forcedPrecision: Precision? { precision == "auto" ? nil : Precision(rawValue: precision) }
    /// What a critical request of this command needs.
    var requirements: RequestRequirements { RequestRequirements(tier: .critical, precision: forcedPrecision, computeUnits: ceiling) }

    /// A runtime as the environment configures it, within these flags' units and threads.
    func makeRuntime() throws -> Runtime { try CommandEnvironment.runtime(units: ceiling, threads: threads) }

    /// The policy's decision for a critical (interactive) request in the runtime's power state, with the flags'
    /// overrides applied; also starts the workers of the decision's class.
    func decision(in runtime: Runtime) throws -> Decision {
        var decision = BackendPolicy.decide(request: requirements, state: runtime.powerSource.current(),
                                            configuration: runtime.configuration.policy)
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

    /// Opens and validates the model through `runtime`, and binds its weights for `decision`; returns it with the
    /// milliseconds taken.
    func load(in runtime: Runtime, for decision: Decision) throws -> (any TextGenerator, milliseconds: Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        let generator = try runtime.languageModel(named: model)
        try generator.prepare(decision.executionOptions())
        return (generator, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
}

/// What the JSON reports say of a decision.
struct DecisionReport: Encodable {
    var precision: String
    var units: String
    var qos: String
    var threads: Int

    init(_ decision: Decision) {
        precision = decision.precision.rawValue
        units = decision.computeUnits.description
        qos = decision.qos.description
        threads = decision.threads
    }
}
