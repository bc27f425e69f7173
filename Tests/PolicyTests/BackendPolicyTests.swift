import Foundation
import Testing
@testable import Ember

@Suite("Backend policy")
struct BackendPolicyTests {
    static let configuration = PolicyConfiguration(threads: 2)

    /// Every row of docs/POLICY.md, decided from the reference machine's costs for the reference workload of a model
    /// not yet measured (int8 +0.2 %, int4 +2 % assumed): state, tier → verdict, precision, units, QoS, threads.
    /// Mains (budget 0.5 %) keeps int4 out; battery (2 %) lets it in; thermal serious halves the power (1 thread of 2);
    /// thermal critical's 25 % cap cannot be met, so the lowest power (1 thread) runs.
    static let rows: [(state: String, tier: Tier, verdict: String, precision: Precision, units: ComputeUnits, qos: QoSClass, threads: Int)] = [
        ("mains, no battery", .critical, "run", .int8, .cpuAndNeuralEngine, .userInitiated, 2),
        ("mains, no battery", .standard, "run", .int8, .cpuAndNeuralEngine, .utility, 2),
        ("mains, no battery", .background, "run", .int8, .cpuAndNeuralEngine, .background, 2),
        ("charging 60%", .critical, "run", .int8, .cpuAndNeuralEngine, .userInitiated, 2),
        ("charging 60%", .standard, "run", .int8, .cpuAndNeuralEngine, .utility, 2),
        ("charging 60%", .background, "run", .int8, .cpuAndNeuralEngine, .background, 2),
        ("battery 50%", .critical, "run", .int4, .cpuAndNeuralEngine, .userInitiated, 2),
        ("battery 50%", .standard, "run", .int4, .cpuAndNeuralEngine, .utility, 2),
        ("battery 50%", .background, "run", .int4, .cpuAndNeuralEngine, .background, 2),
        ("battery 15%", .critical, "run", .int4, .cpuAndNeuralEngine, .userInitiated, 2),
        ("battery 15%", .standard, "defer", .int4, .cpuAndNeuralEngine, .utility, 2),
        ("battery 15%", .background, "defer", .int4, .cpuAndNeuralEngine, .background, 2),
        ("battery 50%, low-power", .critical, "run", .int4, .cpuAndNeuralEngine, .userInitiated, 2),
        ("battery 50%, low-power", .standard, "defer", .int4, .cpuAndNeuralEngine, .utility, 2),
        ("battery 50%, low-power", .background, "defer", .int4, .cpuAndNeuralEngine, .background, 2),
        ("charging, thermal serious", .critical, "run", .int8, .cpuAndNeuralEngine, .userInitiated, 1),
        ("charging, thermal serious", .standard, "run", .int8, .cpuAndNeuralEngine, .utility, 1),
        ("charging, thermal serious", .background, "defer", .int8, .cpuAndNeuralEngine, .background, 1),
        ("battery 50%, thermal serious", .critical, "run", .int4, .cpuAndNeuralEngine, .userInitiated, 1),
        ("battery 50%, thermal serious", .standard, "run", .int4, .cpuAndNeuralEngine, .utility, 1),
        ("battery 50%, thermal serious", .background, "defer", .int4, .cpuAndNeuralEngine, .background, 1),
        ("mains, thermal critical", .critical, "run", .int8, .cpuAndNeuralEngine, .userInitiated, 1),
        ("mains, thermal critical", .standard, "defer", .int8, .cpuAndNeuralEngine, .utility, 1),
        ("mains, thermal critical", .background, "defer", .int8, .cpuAndNeuralEngine, .background, 1),
    ]

    @Test func everyDocumentedRowHolds() throws {
        #expect(Self.rows.count == PolicyReport.states.count * Tier.allCases.count)
        for row in Self.rows {
            let state = try #require(PolicyReport.states.first { $0.name == row.state }?.state)
            let decision = BackendPolicy.decide(request: RequestRequirements(tier: row.tier), state: state, configuration: Self.configuration)
            let verdict: String = switch decision.action {
            case .run: "run"
            case .defer: "defer"
            case .drop: "drop"
            }
            #expect(verdict == row.verdict, "\(row.state) \(row.tier)")
            #expect(decision.precision == row.precision, "\(row.state) \(row.tier)")
            #expect(decision.computeUnits == row.units, "\(row.state) \(row.tier)")
            #expect(decision.qos == row.qos, "\(row.state) \(row.tier)")
            #expect(decision.threads == row.threads, "\(row.state) \(row.tier)")
        }
    }

    /// docs/POLICY.md quotes `ember policy` exactly, so the doc cannot drift from the code.
    @Test func documentQuotesThePolicyAsItIs() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/POLICY.md"), encoding: .utf8)
        let block = PolicyReport.lines(configuration: Self.configuration).joined(separator: "\n")
        #expect(document.contains("```text\n" + block + "\n```"))
    }

    @Test func userInteractiveFlagLiftsCriticalRequests() {
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, userInteractive: true), state: .mains)
        #expect(decision.qos == .userInteractive)
        let standard = BackendPolicy.decide(request: RequestRequirements(tier: .standard, userInteractive: true), state: .mains)
        #expect(standard.qos == .utility, "only critical requests are lifted")
    }

    @Test func requestPrecisionWinsAndMayUseTheGPU() {
        let battery = PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false)
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, precision: .fp32), state: battery)
        #expect(decision.action == .run)
        #expect(decision.precision == .fp32)
        #expect(decision.computeUnits == .cpuAndGPU)
        let capped = BackendPolicy.decide(request: RequestRequirements(tier: .critical, precision: .fp32), state: battery,
                                          configuration: PolicyConfiguration(computeUnits: .cpuAndNeuralEngine))
        #expect(capped.computeUnits == .cpuOnly, "the host's ceiling wins: fp32 on the CPU route")
    }

    @Test func unitsBeyondTheHostCeilingAreDropped() {
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, computeUnits: .all), state: .mains,
                                            configuration: PolicyConfiguration(computeUnits: .cpuAndNeuralEngine))
        guard case let .drop(reason) = decision.action else { Issue.record("expected a drop, got \(decision)"); return }
        #expect(reason.contains("beyond the host's cpuAndNeuralEngine"))
    }

    @Test func externalPowerRequirementDefers() {
        let battery = PowerState(batteryLevel: 0.9, charging: .unplugged, externalPower: false)
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .background, requiresExternalPower: true), state: battery)
        #expect(decision.action == .defer(reason: "needs external power, none connected"))
        let charging = PowerState(batteryLevel: 0.9, charging: .charging, externalPower: true)
        #expect(BackendPolicy.decide(request: RequestRequirements(tier: .background, requiresExternalPower: true), state: charging).action == .run)
    }

    @Test func thresholdIsConfigurable() {
        var table = PolicyTable()
        table.lowBatteryThreshold = 0.10
        let state = PowerState(batteryLevel: 0.15, charging: .unplugged, externalPower: false)
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .standard), state: state,
                                            configuration: PolicyConfiguration(table: table))
        #expect(decision.action == .run)
        #expect(decision.precision == .int4, "15 % is above a 10 % threshold: the battery budget (2 %) lets int4 in")
        table.rules[.background]?.runsInLowPowerMode = true
        let lowPower = PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false, lowPowerMode: true)
        #expect(BackendPolicy.decide(request: RequestRequirements(tier: .background), state: lowPower,
                                     configuration: PolicyConfiguration(table: table)).action == .run)
    }
}
