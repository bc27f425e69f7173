import ArgumentParser
import Ember
import Foundation

/// `ember policy`: the backend policy's table and its decisions, predicted from this machine's calibration (or a
/// calibration file, or the reference machine's) for a model's work and quality.
struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Print the backend policy: budgets, tier rules, and each tier's decision with its predicted time, energy and quality loss.")

    @Option(parsing: .unconditional, help: "Threads in the configuration shown (default: this machine's cores).")
    var threads: Int?

    @Option(help: "A power state to decide for instead, as EMBER_POWER spells it (e.g. battery=0.15,thermal=serious).")
    var state: String?

    @Option(help: "A calibration file to predict from: {\"units\": {UNIT: {PRECISION: {\"gops\", \"joules_per_gop\"}}}} (default: this machine's).")
    var calibration: String?

    @Flag(help: "Predict from the reference machine's costs (the numbers docs/POLICY.md quotes) instead of this machine's.")
    var referenceCosts = false

    @Option(help: "A model (manifest name or path) whose size and measured quality the decisions use (default: a 135M-parameter generator, unmeasured).")
    var model: String?

    @Flag(help: "Print this machine's calibration as a calibration file and exit.")
    var printCalibration = false

    @Flag(help: "Print JSON: {\"decisions\": [{\"tier\", \"action\", \"precision\", \"unit\", \"qos\", \"threads\", \"predicted\": {\"seconds\", \"joules\", \"quality_loss\"}, \"reason\"}]} with --state, else {\"states\": [{\"name\", \"state\", \"decisions\"}]}.")
    var json = false

    /// One tier's decision as `--json` prints it.
    struct DecisionJSON: Encodable {
        var tier: String
        var action: String
        var precision: String
        var unit: String
        var units: String
        var qos: String
        var threads: Int
        var predicted: Prediction?
        var reason: String

        init(tier: Tier, _ decision: Decision) {
            self.tier = tier.rawValue
            action = decision.action.name
            precision = decision.precisionName
            unit = decision.unit.rawValue
            units = decision.computeUnits.description
            qos = decision.qos.description
            threads = decision.threads
            predicted = decision.predicted
            reason = decision.action.reason.map { "\($0); would run as \(decision.explanation)" } ?? decision.explanation
        }
    }

    /// The decisions for every tier in one power state.
    struct StateJSON: Encodable {
        var name: String
        var state: String
        var decisions: [DecisionJSON]
    }

    /// `--json --state`: one state's decisions, with what they were predicted from.
    struct OneStateJSON: Encodable {
        var state: String
        var costs: String
        var workload: Workload
        var quality: QualityProfile
        var decisions: [DecisionJSON]
    }

    func validate() throws {
        if let threads, !(1...1024).contains(threads) { throw ValidationError("--threads \(threads): expected 1 to 1024") }
        if let state {
            do { _ = try PowerOverride.parse(state) } catch { throw ValidationError("--state: \(error)") }
        }
        if calibration != nil && referenceCosts { throw ValidationError("--calibration and --reference-costs: give one") }
    }

    func run() throws {
        var costs = CostModel.reference
        var costsSource = "the reference machine's costs"
        var workload = Workload.reference
        var policy = PolicyConfiguration(threads: threads ?? 2)
        if let calibration {
            do { costs = CostModel(units: try UnitCostTable.read(from: calibration)) } catch { throw ValidationError("--calibration \(error)") }
            costsSource = calibration
        }
        if !referenceCosts && (calibration == nil || model != nil || printCalibration) {
            let runtime = try CommandEnvironment.runtime(threads: threads)
            policy = runtime.scheduler.configuration
            if calibration == nil {
                costs = runtime.costModel
                costsSource = "this machine's calibration (\(runtime.calibrationSource))"
            }
            if printCalibration {
                print(String(decoding: try runtime.costModel.units.json(), as: UTF8.self))
                return
            }
            if let model {
                try FirstUseFetch.ensure(model)
                (workload, costs.qualities) = try Self.workload(of: model, in: runtime)
            }
        }
        let decide = { (tier: Tier, state: PowerState) in
            BackendPolicy.decide(request: RequestRequirements(tier: tier, workload: workload), state: state, configuration: policy, costs: costs)
        }
        let quality = costs.quality(for: workload)
        if let state {
            let parsed = try PowerOverride.parse(state)
            let decisions = Tier.allCases.reversed().map { ($0, decide($0, parsed)) }
            if json {
                try printJSON(OneStateJSON(state: parsed.description, costs: costsSource, workload: workload, quality: quality,
                                           decisions: decisions.map { DecisionJSON(tier: $0, $1) }))
                return
            }
            print("state: \(parsed)")
            print("costs: \(costsSource); quality: \(quality.metric), \(quality.source)")
            for (tier, decision) in decisions {
                print("  \(tier.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) \(decision)")
                print("             \(decision.action.reason == nil ? "" : "would run as ")\(decision.explanation)")
            }
            return
        }
        if json {
            let report = PolicyReport.states.map { name, state in
                StateJSON(name: name, state: state.description, decisions: Tier.allCases.reversed().map { DecisionJSON(tier: $0, decide($0, state)) })
            }
            try printJSON(["states": report])
            return
        }
        print("costs: \(costsSource)")
        PolicyReport.lines(configuration: policy, costs: costs, workload: workload).forEach { print($0) }
    }

    /// The work of one typical request of `name` (a generator: a 32-token prompt and 64 new tokens; an embedder:
    /// 16 sentences of 12 tokens) and its quality profile, measured or read from the cache as the runtime loads it.
    static func workload(of name: String, in runtime: Runtime) throws -> (Workload, [String: QualityProfile]) {
        do {
            let model = try runtime.languageModel(named: name)
            return (.generation(parameters: model.matmulParameters, promptTokens: 32, newTokens: 64, model: model.path),
                    runtime.scheduler.qualities.all)
        } catch let generatorError {
            guard let model = try? runtime.embeddingModel(named: name) else { throw generatorError }
            return (.embedding(parameters: model.matmulParameters, tokens: 16 * 12, model: model.path), runtime.scheduler.qualities.all)
        }
    }
}
