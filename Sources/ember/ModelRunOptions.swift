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

    /// The policy's decision for a critical (interactive) request in the
    /// current power state, with the flags' overrides applied; also stops
    /// OpenBLAS's idle pool and starts the workers of the decision's class.
    func decision() throws -> Decision {
        let ceiling = Self.unitSets[units] ?? .all
        let forced = precision == "auto" ? nil : Precision(rawValue: precision)
        let state = (try? SystemPower.source().current()) ?? .mains
        var decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, precision: forced, computeUnits: ceiling),
                                            state: state, configuration: PolicyConfiguration(computeUnits: ceiling))
        if case let .drop(reason) = decision.action {
            throw ValidationError("the power policy refuses to run now: \(reason)")
        }
        if let threads { decision.threads = threads }
        _ = WorkerPool.shared.threadIDs(for: decision.qos)
        return decision
    }
}

/// The options of the commands that run a GGUF text model (`generate`,
/// `chat`, `bench generate`): which model, and the policy overrides.
struct ModelRunOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "A model name from models/manifest.json, or a GGUF path.")
    var model = "smollm2-135m-instruct"

    @OptionGroup var overrides: DecisionOptions

    func decision() throws -> Decision { try overrides.decision() }

    /// Opens and validates the model, and binds its matmuls for `decision`; returns it with the milliseconds taken.
    func load(for decision: Decision) throws -> (LlamaModel, milliseconds: Double) {
        let path = try ModelLocator.path(for: model)
        let start = DispatchTime.now().uptimeNanoseconds
        let llama = try LlamaModel(file: GGUFFile(path: path))
        try llama.prepare(units: decision.computeUnits, precision: decision.precision)
        return (llama, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
}
