import EmberTestSupport
import Foundation
import Testing

/// `ember serve` as a host would run it: the real binary, the real models,
/// and a real client process (Python's `socket`) — Tests/ServiceTests/Client/worker_client.py.
@Suite("ember serve", .serialized)
struct WorkerServerTests {
    static let ember = ExternalProcess.productsDirectory.appendingPathComponent("ember").path
    static let client = ExternalProcess.repositoryRoot.appendingPathComponent("Tests/ServiceTests/Client/worker_client.py").path
    static let models = ExternalProcess.repositoryRoot.appendingPathComponent("models").path

    /// A server process in the background; `stop()` sends SIGTERM and returns what it logged.
    final class Server {
        let process = Process()
        let errors = Pipe()
        let socket: String

        init(_ arguments: [String], socket: String) throws {
            self.socket = socket
            process.executableURL = URL(fileURLWithPath: WorkerServerTests.ember)
            process.arguments = ["serve", "--socket", socket] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging(["EMBER_MODELS_DIR": WorkerServerTests.models]) { $1 }
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
        }

        func stop() -> String {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
    }

    private func report(_ scenario: String, socket: String) async throws -> [String: Any] {
        let outcome = try await ExternalProcess.run("python3", [Self.client, socket, scenario], timeout: 600)
        #expect(outcome.status == 0 && !outcome.timedOut, "client: \(outcome.standardError)")
        return try #require(try JSONSerialization.jsonObject(with: Data(outcome.standardOutput.utf8)) as? [String: Any])
    }

    private static func socketPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("ember-\(name)-\(getpid()).sock").path
    }

    @Test func answersAPythonClientStreamsChunksAndSurvivesBadClients() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let server = try Server([], socket: Self.socketPath("protocol"))
        var log = ""
        defer { if server.process.isRunning { _ = server.stop() } }
        let report = try await report("protocol", socket: server.socket)
        log = server.stop()

        // Status first, on connect, with the fields the protocol promises; then pushed when models are ready.
        #expect(report["first_message_keys"] as? [String] == ["batteryPct", "charging", "lowPower", "modelState", "models", "runOnlyWhileCharging", "thermal"])
        #expect((report["model_states_seen"] as? [String])?.last == "ready")

        // A generation: the reference text's start, with a decision and a duration.
        let generate = try #require(report["generate"] as? [String: Any])
        #expect(generate["ok"] as? Bool == true)
        let output = try #require(generate["output"] as? String)
        #expect(output.hasPrefix(" Paris."), "\(output)")
        #expect((generate["durationMs"] as? Int).map { $0 >= 0 } == true)
        let decision = try #require(generate["decision"] as? [String: Any])
        #expect(decision["action"] as? String == "run" && decision["precision"] is String && decision["qos"] as? String == "userInitiated")
        // Streamed: the pieces make the response's text; at the same precision and unit it is the same text (the
        // policy decides each request afresh, and a loaded machine's measured times may move the second elsewhere).
        let streamed = try #require(report["stream_output"] as? String)
        #expect((report["stream_pieces"] as? [String])?.joined() == streamed)
        let streamDecision = try #require(report["stream_decision"] as? [String: Any])
        if streamDecision["precision"] as? String == decision["precision"] as? String,
           streamDecision["unit"] as? String == decision["unit"] as? String {
            #expect(streamed == output)
        } else {
            #expect(streamed.hasPrefix(" Paris."), "\(streamed) (\(streamDecision))")
        }

        // Embeddings: 2 × 384, chunked (no line over 512 bytes), the guitar pair close.
        #expect(report["embed_ok"] as? Bool == true)
        #expect(report["embed_shape"] as? [Int] == [2, 384])
        #expect((report["embed_chunks"] as? Int ?? 0) > 1)
        #expect((report["embed_cosine"] as? Double ?? 0) > 0.75)
        #expect((report["longest_line"] as? Int ?? .max) <= 512)

        // Bad input: an error each, with the id when it could be read, null otherwise.
        let errors = try #require(report["errors"] as? [String: [String: Any]])
        for (name, id, mentions) in [("malformed", nil, "malformed JSON"), ("wrong_type", "wrong-type", "maxTokens"),
                                     ("number_id", nil, "id:"), ("array", nil, "object"), ("no_prompt", "no-prompt", "prompt"),
                                     ("bad_tier", "bad-tier", "tier"), ("oversized", nil, "longer than"),
                                     ("unknown_model", "no-model", "no-such-model")] as [(String, String?, String)] {
            let error = try #require(errors[name], "\(name)")
            #expect(error["ok"] as? Bool == false)
            if let id { #expect(error["id"] as? String == id, "\(name)") } else { #expect(error["id"] is NSNull, "\(name)") }
            #expect((error["error"] as? String)?.contains(mentions) == true, "\(name): \(error)")
        }
        #expect((report["after_errors"] as? [String: Any])?["ok"] as? Bool == true)
        #expect(report["statuses_naming_unknown_model"] as? Int == 0, "an unknown model never shows as loading")

        // Cancelling by message, and a client that leaves mid-stream: cancelled cleanly, others served.
        #expect((report["cancelled"] as? [String: Any])?["error"] as? String == "cancelled")
        #expect(log.contains("went away: 1 request(s) cancelled"), "server log: \(log)")
        #expect(report["concurrent"] as? [Bool] == [true, true])
        #expect(!FileManager.default.fileExists(atPath: server.socket), "the socket file is removed on SIGTERM")
    }

    @Test func runOnlyWhileChargingRefusesOnBatteryAndStatusFollowsThePowerTimeline() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        // A fake power source for this test: a scripted timeline, unplugged at 15 %, on the charger after 8 s.
        let timeline = FileManager.default.temporaryDirectory.appendingPathComponent("ember-timeline-\(getpid()).json")
        try Data(#"{"steps": [{"at": 0, "battery": 0.15, "charging": "unplugged", "external": false}, {"at": 8, "battery": 0.16, "charging": "charging", "external": true}]}"#.utf8).write(to: timeline)
        defer { try? FileManager.default.removeItem(at: timeline) }
        let server = try Server(["--no-preload", "--power-timeline", timeline.path], socket: Self.socketPath("charging"))
        defer { if server.process.isRunning { _ = server.stop() } }
        let report = try await report("charging", socket: server.socket)
        _ = server.stop()

        let first = try #require(report["first"] as? [String: Any])
        #expect(first["batteryPct"] as? Int == 15 && first["charging"] as? Bool == false && first["modelState"] as? String == "unloaded")
        #expect((report["setting"] as? [String: Any])?["runOnlyWhileCharging"] as? Bool == true)
        let refusal = try #require(report["refusal"] as? [String: Any])
        #expect(refusal["ok"] as? Bool == false && (refusal["error"] as? String)?.contains("runOnlyWhileCharging") == true)
        #expect((report["refusal_status"] as? [String: Any])?["reason"] is String)
        // Deferred on the low battery, said so at once, answered when the charger came (at the policy's choice then).
        #expect((report["deferred"] as? [String: Any])?["deferred"] as? String == "battery at or below 20%", "\(report["deferred"] ?? "nil")")
        let charging = try #require(report["charging_status"] as? [String: Any])
        #expect(charging["batteryPct"] as? Int == 16)
        let answered = try #require(report["deferred_answer"] as? [String: Any])
        #expect(answered["ok"] as? Bool == true && ["fp32", "fp16", "int8", "int4"].contains(answered["precision"] as? String ?? ""), "\(answered)")
        #expect((answered["waitMs"] as? Int ?? 0) > 1000, "it waited for the charger")
        #expect((report["after_charging"] as? [String: Any])?["ok"] as? Bool == true)
    }

    @Test func stdioAnswersUntilInputEnds() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let input = [
            #"{"id":"g","prompt":"The capital of France is","maxTokens":6,"tier":"critical"}"#,
            #"{"id":"bad","prompt":"x","maxTokens":-3}"#,
            "not json at all",
            #"{"id":"e","kind":"embed","input":"a cat"}"#,
        ].joined(separator: "\n") + "\n"
        let outcome = try await ExternalProcess.run(Self.ember, ["serve", "--stdio"], input: Data(input.utf8),
                                              environment: ["EMBER_MODELS_DIR": Self.models], timeout: 300)
        #expect(outcome.status == 0 && !outcome.timedOut, "\(outcome.standardError)")
        let messages = try outcome.standardOutput.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "not JSON: \($0)")
        }
        #expect(messages.first?["modelState"] != nil, "status first")
        let generated = try #require(messages.first { $0["id"] as? String == "g" })
        #expect((generated["output"] as? String)?.hasPrefix(" Paris") == true)
        #expect(messages.contains { $0["id"] as? String == "bad" && ($0["error"] as? String)?.hasPrefix("maxTokens") == true })
        #expect(messages.contains { $0["id"] is NSNull && ($0["error"] as? String)?.contains("malformed") == true })
        let chunks = messages.filter { $0["id"] as? String == "e" }
        #expect(chunks.count > 1 && chunks.last?["last"] as? Bool == true && chunks.last?["ok"] as? Bool == true)
    }

    /// Limits hold: a connection beyond the limit is told so and closed, requests beyond the per-connection limit
    /// are refused naming it, a client that asks for large answers and reads none is dropped (not buffered), and
    /// the other clients are served all along.
    @Test func connectionRequestAndBacklogLimitsHold() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let server = try Server(["--max-connections", "3", "--max-requests-per-connection", "2", "--max-queued-bytes", "65536"],
                                socket: Self.socketPath("limits"))
        defer { if server.process.isRunning { _ = server.stop() } }
        let report = try await report("limits", socket: server.socket)
        let log = server.stop()
        let fourth = try #require(report["fourth_connection"] as? [String: Any])
        #expect((fourth["error"] as? String)?.contains("3 connections, its limit") == true, "\(fourth)")
        #expect(report["fourth_closed"] as? Bool == true)
        let answers = try #require(report["per_connection"] as? [[String: Any]])
        #expect(answers.filter { $0["ok"] as? Bool == true }.count == 2, "\(answers)")
        #expect(answers.filter { ($0["error"] as? String)?.contains("2 requests are running on this connection, the limit") == true }.count == 3)
        #expect(report["slow_reader_dropped"] as? Bool == true)
        #expect(log.contains("dropped: it read its answers too slowly"), "\(log)")
        #expect(report["others_served"] as? Bool == true)
    }
}
