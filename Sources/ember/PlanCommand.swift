import ArgumentParser
import Ember
import Foundation

/// `ember plan`: where every op of a model's forward pass runs, and why — Core ML's `MLComputePlan`, for Ember.
struct PlanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show the backend, unit and precision of every op of a model's forward pass, with the reason for each fallback.",
        discussion: "Plugins named by EMBER_PLUGIN_PATH take part in the placement; `--precision auto` plans what the policy would run now.")

    @Option(name: .shortAndLong, help: "A model name from models/manifest.json, a GGUF path, or a sentence-transformers folder.")
    var model = "smollm2-135m-instruct"

    @OptionGroup var overrides: DecisionOptions

    @Flag(help: "Print one JSON object: backends[{name, plugin, unit, ops, supports, disabled}], ops[{op, layer, role, backend, unit, type, precision, fallback_reason}].")
    var json = false

    struct Report: Encodable {
        struct Backend: Encodable {
            var name: String
            var plugin: Bool
            var unit: String
            /// Op kinds this plan places on it.
            var ops: [String]
            /// Op kinds it declares it runs.
            var supports: [String]
            var disabled: String?
        }
        var model: String
        var architecture: String
        var units: String
        var precision: String
        var route: String
        var joules_per_token: Double
        var backends: [Backend]
        var ops: [ExecutionPlan.Step]
    }

    func run() throws {
        let runtime = try overrides.makeRuntime()
        let (architecture, plan, decision): (String, ExecutionPlan, Decision)
        if let generator = try? runtime.languageModel(named: model) {
            let chosen = try overrides.decision(in: runtime, quantizedFile: generator.filePrecision != .fp32)
            (architecture, plan, decision) = (generator.architecture, try generator.plan(chosen.executionOptions()), chosen)
        } else if let embedder = try? runtime.embeddingModel(named: model) {
            let chosen = try overrides.decision(in: runtime, quantizedFile: false)
            (architecture, plan, decision) = (embedder.architecture, try embedder.plan(chosen.executionOptions()), chosen)
        } else {
            _ = try runtime.languageModel(named: model) // throws the text model's error
            throw ValidationError("\(model): not a model Ember reads")
        }
        let used = Dictionary(uniqueKeysWithValues: plan.backendsUsed.map { ($0.backend, $0.ops.map(\.rawValue)) })
        let registry = runtime.context.backends
        let backends = registry.all.map { backend in
            Report.Backend(name: backend.descriptor.name, plugin: backend.descriptor.source.isPlugin, unit: backend.descriptor.unit.rawValue,
                           ops: used[backend.descriptor.name] ?? [], supports: backend.descriptor.opsByKind.map(\.op.rawValue),
                           disabled: registry.health(of: backend.descriptor.name)?.reason)
        }
        if json {
            try printJSON(Report(model: model, architecture: architecture, units: plan.units.description,
                                 precision: decision.precisionName, route: plan.route.rawValue, joules_per_token: plan.joulesPerToken,
                                 backends: backends, ops: plan.steps))
            return
        }
        print("\(model) (\(architecture)): \(decision.precisionName) on \(plan.units), the pass on the \(plan.route) route; "
              + String(format: "%.3g J per token modelled", plan.joulesPerToken))
        for backend in backends where !backend.ops.isEmpty || backend.plugin {
            print("  backend \(pad(backend.name, 18)) \(pad(backend.unit, 14)) \(backend.plugin ? "plugin " : "built-in")  "
                  + (backend.ops.isEmpty ? "no ops in this plan" : backend.ops.joined(separator: ", "))
                  + (backend.disabled.map { " — DISABLED: \($0)" } ?? ""))
        }
        let layers = Set(plan.steps.compactMap(\.layer)).sorted()
        func line(_ step: ExecutionPlan.Step) -> String {
            "  " + pad(step.layer.map { "L\($0)" } ?? "", 5) + pad(step.op.rawValue, 21) + pad(step.role, 28) + pad(step.type.description, 6)
                + pad(step.backend, 18) + pad(step.unit.rawValue, 14) + (step.fallbackReason ?? "")
        }
        print("  " + pad("", 5) + pad("op", 21) + pad("role", 28) + pad("type", 6) + pad("backend", 18) + pad("unit", 14) + "fallback reason")
        var previous: [String]? = nil
        var repeated: [Int] = []
        for layer in layers {
            let steps = plan.steps.filter { $0.layer == layer }
            let signature = steps.map { "\($0.op)|\($0.role)|\($0.type)|\($0.backend)|\($0.fallbackReason ?? "")" }
            if signature == previous {
                repeated.append(layer)
                continue
            }
            flush(&repeated)
            steps.forEach { print(line($0)) }
            previous = signature
        }
        flush(&repeated)
        let before = plan.steps.prefix { $0.layer == nil }, after = plan.steps.reversed().prefix { $0.layer == nil }.reversed()
        print("  before the blocks: " + before.map { "\($0.op) [\($0.backend)]" }.joined(separator: ", "))
        print("  after the blocks:  " + after.map { "\($0.op) \($0.type) [\($0.backend)]" }.joined(separator: ", "))
    }

    private func flush(_ repeated: inout [Int]) {
        guard let first = repeated.first, let last = repeated.last else { return }
        print("  L\(first)\(first == last ? "" : "–L\(last)"): the same placements as the block above")
        repeated.removeAll()
    }
}
