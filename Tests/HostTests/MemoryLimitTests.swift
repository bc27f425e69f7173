import EmberTestSupport
import Foundation
import Testing

/// `ember` under an address-space limit (`ulimit -v`): it either runs or says it is out of memory and exits 1 —
/// never a crash, never a hang. Before, OpenBLAS retried its 128 MiB buffer forever (a hang at 200–600 MiB),
/// packing weights aborted ("failed to allocate"), and libdispatch waited forever for a thread it could not create.
@Suite("ember under ulimit -v", .serialized)
struct MemoryLimitTests {
    static let ember = CLIArgumentTests.ember

    static func run(limitMiB: Int, _ arguments: [String]) async throws -> ExternalProcess.Outcome {
        let command = "ulimit -v \(limitMiB << 10) && exec \"$0\" \"$@\""
        return try await ExternalProcess.run("/bin/sh", ["-c", command, ember] + arguments,
                                             environment: ["EMBER_MODELS_DIR": CLIArgumentTests.models],
                                             workingDirectory: ExternalProcess.repositoryRoot, timeout: 90)
    }

    @Test(arguments: [150, 300, 600, 900, 1000, 1100, 1250, 1400, 2000, 4000])
    func generationRunsOrSaysItIsOutOfMemory(limitMiB: Int) async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let run = try await Self.run(limitMiB: limitMiB, ["generate", "-m", "smollm2-135m-instruct", "-n", "4", "The capital of France is"])
        let said = run.standardError + run.standardOutput
        #expect(!run.timedOut, "\(limitMiB) MiB: a hang")
        #expect(run.status == 0 || (run.status == 1 && said.contains("out of memory")), "\(limitMiB) MiB: exit \(run.status): \(said.suffix(400))")
        #expect(!said.contains("Fatal error") && !said.contains("Backtrace"), "\(limitMiB) MiB: \(said.suffix(400))")
        if limitMiB >= 2000 { #expect(run.status == 0, "enough memory: \(said.suffix(300))") }
    }

    @Test(arguments: [300, 1000, 4000])
    func embeddingRunsOrSaysItIsOutOfMemory(limitMiB: Int) async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let run = try await Self.run(limitMiB: limitMiB, ["embed", "-m", "all-minilm-l6-v2", "a sentence to embed"])
        let said = run.standardError + run.standardOutput
        #expect(!run.timedOut, "\(limitMiB) MiB: a hang")
        #expect(run.status == 0 || (run.status == 1 && said.contains("out of memory")), "\(limitMiB) MiB: exit \(run.status): \(said.suffix(400))")
        if limitMiB >= 4000 { #expect(run.status == 0, "enough memory: \(said.suffix(300))") }
    }
}
