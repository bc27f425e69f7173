import EmberTestSupport
import Foundation
import Testing

/// The acceptance, end to end with the real binary and model: the example backend plugin named by
/// `EMBER_PLUGIN_PATH` takes ops in `ember plan` and in a real generation, and greedy tokens do not change.
@Suite("ember with a backend plugin", .serialized,
       .enabled(if: FileManager.default.fileExists(atPath: ExternalProcess.repositoryRoot.appendingPathComponent("models/smollm2-135m-instruct").path)))
struct PluginHostTests {
    static let ember = ExternalProcess.productsDirectory.appendingPathComponent("ember").path
    static let models = ExternalProcess.repositoryRoot.appendingPathComponent("models").path

    struct Plan: Decodable {
        struct Backend: Decodable {
            var name: String
            var plugin: Bool
            var ops: [String]
        }
        struct Step: Decodable {
            var op: String
            var layer: Int?
            var backend: String
            var precision: String?
            var fallback_reason: String?
        }
        var backends: [Backend]
        var ops: [Step]
    }

    struct Generated: Decodable {
        var token_ids: [Int]
        var text: String
    }

    static func run(_ arguments: [String], plugin: String?) async throws -> String {
        var environment = ["EMBER_MODELS_DIR": models]
        if let plugin { environment["EMBER_PLUGIN_PATH"] = plugin }
        let run = try await ExternalProcess.run(ember, arguments, environment: environment, timeout: 300)
        try #require(run.status == 0 && !run.timedOut, "\(arguments): \(run.standardError)")
        return run.standardOutput
    }

    @Test(arguments: ["int4", "fp32"])
    func pluginTakesOpsAndGreedyTokensAreUnchanged(precision: String) async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let plugin = try PluginBuilder.build(name: "example_backend_host")
        let plan = try JSONDecoder().decode(Plan.self, from: Data(try await Self.run(["plan", "--precision", precision, "--json"],
                                                                                     plugin: plugin).utf8))
        let example = try #require(plan.backends.first { $0.plugin })
        #expect(example.name == "example-c")
        #expect(Set(example.ops) == ["rms_norm", "swiglu", "add"], "\(example.ops)")
        let onPlugin = plan.ops.filter { $0.backend == "example-c" }
        #expect(Set(onPlugin.map(\.op)).count >= 3)
        #expect(onPlugin.allSatisfy { $0.layer != nil || $0.op == "rms_norm" }, "every block's ops, and the output norm")
        #expect(plan.ops.filter { $0.op == "matmul" }.allSatisfy { $0.precision == (precision == "fp32" ? "fp32" : $0.precision) })

        let prompt = "The capital of France is"
        let arguments = ["generate", "--precision", precision, "-n", "24", "--json", prompt]
        let with = try JSONDecoder().decode(Generated.self, from: Data(try await Self.run(arguments, plugin: plugin).utf8))
        let without = try JSONDecoder().decode(Generated.self, from: Data(try await Self.run(arguments, plugin: nil).utf8))
        #expect(with.token_ids == without.token_ids, "\(precision): \(with.text.debugDescription) vs \(without.text.debugDescription)")
        #expect(with.token_ids.count >= 8)
    }

    /// A plugin that crashes in Ember's check is disabled with the reason; the tool still runs and says so.
    @Test func aCrashingPluginIsReportedAndSkipped() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let plugin = try PluginBuilder.build(defines: ["BROKEN_CRASH"], name: "crashing_host")
        var environment = ["EMBER_MODELS_DIR": Self.models]
        environment["EMBER_PLUGIN_PATH"] = plugin
        let run = try await ExternalProcess.run(Self.ember, ["info", "--json"], environment: environment, timeout: 300)
        #expect(run.status == 0, "\(run.standardError)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        let backends = try #require(report["backends"] as? [[String: Any]])
        let example = try #require(backends.first { $0["name"] as? String == "example-c" })
        #expect((example["disabled"] as? String)?.contains("crashed with signal SIGSEGV") == true)
        #expect(run.standardError.contains("example-c") && run.standardError.contains("SIGSEGV"))
    }
}
