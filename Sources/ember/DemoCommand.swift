import ArgumentParser
import Ember
import EmberBenchmarks
import Foundation

/// `ember demo`: the whole product in a minute — both models behind the
/// scheduler while a scripted power timeline plays, a table per step.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Replay a power timeline (charger → 60% → 15% → low-power → hot → charger) and show what Ember decides for each request.")

    @Option(parsing: .unconditional, help: "Tokens per chat reply.") var tokens = 24

    func validate() throws {
        guard tokens >= 1 else { throw ValidationError("--tokens: found \(tokens), expected at least 1") }
    }

    struct Step {
        let name: String
        let state: PowerState
    }

    static let steps = [
        Step(name: "on the charger", state: PowerState(batteryLevel: 0.8, charging: .charging, externalPower: true)),
        Step(name: "unplugged, 60%", state: PowerState(batteryLevel: 0.6, charging: .unplugged, externalPower: false)),
        Step(name: "unplugged, 15%", state: PowerState(batteryLevel: 0.15, charging: .unplugged, externalPower: false)),
        Step(name: "low-power mode, 15%", state: PowerState(batteryLevel: 0.15, charging: .unplugged, externalPower: false, lowPowerMode: true)),
        Step(name: "thermal serious, 40%", state: PowerState(batteryLevel: 0.4, charging: .unplugged, externalPower: false, thermal: .serious)),
        Step(name: "back on the charger", state: PowerState(batteryLevel: 0.42, charging: .charging, externalPower: true)),
    ]

    /// What one request did.
    struct Outcome: Sendable {
        var label: String
        var decision: Decision
        var result: String
        var seconds: Double?
        var rate: String
        var energy: EnergyEstimate? = nil
        var batchSize = 1
        var coalesced = false
        /// Predicted and measured run seconds (not the wait).
        var predicted: (Double, Double)? = nil
    }

    /// What a finished request reports: its speed, the decision it ran under, its energy, its batch.
    struct Measured: Sendable {
        var rate: String
        var decision: Decision
        var energy: EnergyEstimate?
        var batchSize: Int
        var coalesced: Bool
        var predicted: Double?
        var run: Double

        init<Output>(rate: String, _ completion: Completion<Output>) {
            (self.rate, decision, energy, batchSize, coalesced, predicted, run) =
                (rate, completion.decision, completion.energy, completion.batchSize, completion.coalesced, completion.predictedSeconds,
                 completion.runSeconds)
        }
    }

    func run() async throws {
        for name in ["smollm2-135m-instruct", "all-minilm-l6-v2"] { try FirstUseFetch.ensure(name) }
        let runtime = try CommandEnvironment.runtime(power: .injected(Self.steps[0].state))
        print("Ember demo — both models behind the scheduler; the power state follows a script.")
        let llm = try await Self.timed("loading smollm2-135m-instruct (GGUF, Q4_1)") {
            try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
        }
        let minilm = try await Self.timed("loading all-minilm-l6-v2 (safetensors, fp32)") {
            try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
        }
        guard let template = llm.chatTemplate else { throw ValidationError("smollm2-135m-instruct has no chat template") }
        let prompt = template.format([ChatMessage(role: "user", content: "Give me one tip for saving battery.")])
        let sentences = EmbeddingBenchmark.sentences(16, seed: 1)
        let archive = EmbeddingBenchmark.sentences(64, seed: 2)
        // Each request's work, as the runtime will describe it to the policy.
        let chatWork = Workload.generation(parameters: llm.matmulParameters, promptTokens: prompt.utf8.count / 4 + 1, newTokens: tokens,
                                           model: llm.path)
        func embedWork(_ texts: [String]) -> Workload {
            .embedding(parameters: minilm.matmulParameters, tokens: texts.reduce(0) { $0 + $1.utf8.count / 4 + 2 }, model: minilm.path)
        }
        let works: [(Tier, Workload)] = [(.critical, chatWork), (.standard, embedWork(sentences)), (.background, embedWork(archive))]
        // Bind each model's weights for every (units, precision) the script will ask for, so the
        // table shows steady-state speed rather than one-time conversions.
        var plans = Set<String>()
        for step in Self.steps {
            for (tier, work) in works {
                let decision = runtime.decide(RequestRequirements(tier: tier, workload: work), state: step.state)
                guard plans.insert("\(decision.computeUnits.rawValue)-\(decision.precision)").inserted else { continue }
                try await Self.timed("binding weights for \(decision.precision) on \(decision.computeUnits)") {
                    try llm.prepare(decision.executionOptions())
                    try minilm.prepare(decision.executionOptions())
                }
            }
        }
        var pending: [(String, Task<Outcome, Never>)] = []
        var waited = 0

        for (index, step) in Self.steps.enumerated() {
            try runtime.setPowerState(step.state)
            print("\n[\(index + 1)/\(Self.steps.count)] \(step.name): \(step.state)")
            let decide = { (tier: Tier, work: Workload) in runtime.decide(RequestRequirements(tier: tier, workload: work), state: step.state) }
            let (critical, standard, background, tokens) = (decide(.critical, chatWork), decide(.standard, embedWork(sentences)),
                                                            decide(.background, embedWork(archive)), tokens)
            let chat = Task { await Self.measure("critical chat", critical) {
                let done = try await runtime.generateText(llm, prompt: prompt, maxTokens: tokens, tier: .critical)
                let pieces = done.output.tokenIDs.count
                return Measured(rate: String(format: "%d tokens, %.0f tok/s", pieces, Double(pieces) / done.runSeconds), done)
            } }
            // The chat first, then the two embedding requests together (they batch into one run): each run then has
            // the machine to itself, and the cost model learns from it step by step.
            if case .run = critical.action { _ = await chat.value }
            let batch = Task { await Self.measure("standard embeddings ×16", standard) {
                let done = try await runtime.embedding(minilm, sentences, tier: .standard)
                return Measured(rate: String(format: "%.0f sentences/s", 16 / done.runSeconds), done)
            } }
            let reindex = Task { await Self.measure("background re-index ×64", background) {
                let done = try await runtime.embedding(minilm, archive, tier: .background)
                return Measured(rate: String(format: "%.0f sentences/s", 64 / done.runSeconds), done)
            } }
            var rows: [Outcome] = []
            for (task, decision, label) in [(chat, critical, "critical chat"), (batch, standard, "standard embeddings ×16"),
                                            (reindex, background, "background re-index ×64")] {
                if case .defer = decision.action {
                    pending.append(("step \(index + 1)", task))
                    rows.append(Outcome(label: label, decision: decision, result: "waiting for power", seconds: nil, rate: "—"))
                } else {
                    rows.append(await task.value)
                }
            }
            Self.printTable(rows)
            if step.state.onExternalPower && !pending.isEmpty {
                print("  power is back: \(pending.count) deferred request(s) drain (latency counts the wait)")
                waited += pending.count
                var drained: [Outcome] = []
                for (origin, task) in pending {
                    var outcome = await task.value
                    outcome.label += " (\(origin))"
                    drained.append(outcome)
                }
                pending.removeAll()
                Self.printTable(drained)
            }
        }
        let metrics = await runtime.scheduler.metrics
        let energy = metrics.energy ?? EnergyEstimate(joules: 0, source: .modelled)
        let how = energy.source == .measured ? "measured: the package's RAPL counter" : "modelled: no RAPL counter here → the units' cost model"
        print(String(format: "\n%d requests completed in %d runs, %d of them after waiting for power; energy %.2f J, each run once (%@).",
                     metrics.records.filter { $0.outcome == "completed" }.count, metrics.executions, waited, energy.joules, how))
    }

    static func timed<Value>(_ label: String, _ work: () async throws -> Value) async throws -> Value {
        print("  \(label)… ", terminator: "")
        fflush(nil)
        let start = DispatchTime.now().uptimeNanoseconds
        let value = try await work()
        print(String(format: "%.0f ms", Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6))
        return value
    }

    /// Runs one request; its row shows the decision it actually ran under (for a deferred
    /// one, the decision when power came back), its latency from submission, rate and energy.
    static func measure(_ label: String, _ decision: Decision, _ work: @Sendable () async throws -> Measured) async -> Outcome {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let done = try await work()
            return Outcome(label: label, decision: done.decision, result: "done", seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9,
                           rate: done.rate, energy: done.energy, batchSize: done.batchSize, coalesced: done.coalesced,
                           predicted: done.predicted.map { ($0, done.run) })
        } catch {
            return Outcome(label: label, decision: decision, result: "\(error)", seconds: nil, rate: "—")
        }
    }

    static func printTable(_ rows: [Outcome]) {
        print("  " + pad("request", 34) + pad("decision", 50) + pad("precision / units / QoS", 46) + pad("latency", 10)
              + pad("rate", 30) + pad("energy", 18) + pad("run: predicted / measured", 28) + "notes")
        for row in rows {
            let action = row.decision.action.name + (row.decision.action.reason.map { " (\($0))" } ?? "")
            let how = "\(row.decision.precisionName) / \(row.decision.computeUnits) / \(row.decision.qos)"
            let latency = row.seconds.map { String(format: "%.0f ms", $0 * 1000) } ?? "—"
            let rate = row.seconds == nil ? row.result : row.rate
            let energy = row.energy.map { String(format: "%.2f J %@", $0.joules, $0.source.rawValue) } ?? "—"
            var notes: [String] = []
            if row.batchSize > 1 { notes.append("one batch of \(row.batchSize) requests (energy of the batch)") }
            if row.coalesced { notes.append("joined an identical request: ran once") }
            let prediction = row.predicted.map { String(format: "%.0f / %.0f ms (%+.0f%%)", $0.0 * 1000, $0.1 * 1000, ($0.0 / $0.1 - 1) * 100) }
                ?? (row.seconds == nil ? "—" : "— (batch)")
            print("  " + pad(row.label, 34) + pad(action, 50) + pad(how, 46) + pad(latency, 10) + pad(rate, 30) + pad(energy, 18)
                  + pad(prediction, 28) + notes.joined(separator: "; "))
            if row.seconds != nil, !row.decision.explanation.isEmpty { print("    why: \(row.decision.explanation)") }
        }
    }
}
