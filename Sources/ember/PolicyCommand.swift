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

    func validate() throws {
        guard (1...1024).contains(threads) else { throw ValidationError("--threads \(threads): expected 1 to 1024") }
        if let state {
            do { _ = try PowerOverride.parse(state) } catch { throw ValidationError("--state: \(error)") }
        }
    }

    func run() throws {
        let configuration = PolicyConfiguration(threads: threads)
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
