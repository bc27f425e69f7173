import ArgumentParser
import Ember

/// `ember policy`: the backend policy's table and its decisions.
struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Print the backend policy: budgets, tier rules, and the decision for each tier in representative states.")

    @Option(help: "Threads in the configuration shown.")
    var threads = 2

    @Option(help: "A power state to decide for instead, as EMBER_POWER spells it (e.g. battery=0.15,thermal=serious).")
    var state: String?

    @Flag(help: "Print one JSON object: {\"states\": [{\"name\", \"state\", \"decisions\": [{\"tier\", \"action\", \"reason\", \"precision\", \"units\", \"qos\", \"threads\"}]}]}.")
    var json = false

    /// One tier's decision as `--json` prints it.
    struct DecisionJSON: Encodable {
        var tier: String
        var action: String
        var reason: String?
        var precision: String
        var units: String
        var qos: String
        var threads: Int

        init(tier: Tier, _ decision: Decision) {
            self.tier = tier.rawValue
            action = decision.action.name
            reason = decision.action.reason
            precision = decision.precisionName
            units = decision.computeUnits.description
            qos = decision.qos.description
            threads = decision.threads
        }
    }

    /// The decisions for every tier in one power state.
    struct StateJSON: Encodable {
        var name: String
        var state: String
        var decisions: [DecisionJSON]
    }

    func validate() throws {
        guard (1...1024).contains(threads) else { throw ValidationError("--threads \(threads): expected 1 to 1024") }
        if let state {
            do { _ = try PowerOverride.parse(state) } catch { throw ValidationError("--state: \(error)") }
        }
    }

    func run() throws {
        let configuration = PolicyConfiguration(threads: threads)
        if json {
            let states = try state.map { [("--state", try PowerOverride.parse($0))] } ?? PolicyReport.states.map { ($0.name, $0.state) }
            let report = states.map { name, state in
                StateJSON(name: name, state: state.description, decisions: Tier.allCases.reversed().map { tier in
                    DecisionJSON(tier: tier, BackendPolicy.decide(request: RequestRequirements(tier: tier), state: state, configuration: configuration))
                })
            }
            try printJSON(["states": report])
            return
        }
        if let state {
            let parsed = try PowerOverride.parse(state)
            print("state: \(parsed)")
            for tier in Tier.allCases.reversed() {
                print("  \(tier.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) "
                    + "\(BackendPolicy.decide(request: RequestRequirements(tier: tier), state: parsed, configuration: configuration))")
            }
            return
        }
        PolicyReport.lines(configuration: configuration).forEach { print($0) }
    }
}
