import EmberTestSupport
import Foundation
import Testing

/// `ember demo` (what `make demo` runs) end to end on the real models: every
/// step prints its table, low power defers, the charger drains the deferred work.
@Suite("ember demo")
struct DemoTests {
    @Test func theDemoTellsThePowerStory() async throws {
        let ember = ExternalProcess.productsDirectory.appendingPathComponent("ember").path
        try #require(FileManager.default.fileExists(atPath: ember), "the ember binary is built next to the tests")
        let models = ExternalProcess.repositoryRoot.appendingPathComponent("models").path
        let run = try await ExternalProcess.run(ember, ["demo", "--tokens", "8"], environment: ["EMBER_MODELS_DIR": models], timeout: 300)
        #expect(run.status == 0 && !run.timedOut, "\(run.standardError)")
        let output = run.standardOutput
        for step in ["[1/6] on the charger", "[2/6] unplugged, 60%", "[3/6] unplugged, 15%", "[4/6] low-power mode",
                     "[5/6] thermal serious", "[6/6] back on the charger"] {
            #expect(output.contains(step), "missing \(step)")
        }
        let lines = output.split(separator: "\n").map(String.init)
        // On the charger everything runs at fp32; at 15 % the critical chat runs at int4 and the rest waits.
        #expect(lines.contains { $0.contains("critical chat") && $0.contains("fp32 / cpuAndGPU / userInitiated") })
        #expect(lines.contains { $0.contains("critical chat") && $0.contains("int4 / cpuAndNeuralEngine / userInitiated") })
        #expect(lines.filter { $0.contains("defer (battery at or below 20%)") }.count == 2)
        #expect(lines.contains { $0.contains("defer (low-power mode") })
        #expect(lines.contains { $0.contains("background re-index") && $0.contains("defer (thermal state serious)") })
        #expect(output.contains("deferred request(s) drain"))
        #expect(lines.contains { $0.contains("(step 3)") && $0.contains("run") })
        #expect(lines.contains { $0.contains(" J modelled") || $0.contains(" J measured") })
        #expect(output.contains("requests completed"))
    }
}
