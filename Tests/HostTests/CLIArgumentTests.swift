import EmberTestSupport
import Foundation
import Testing

/// Bad arguments to the `ember` tool: a clear message naming the argument and a
/// non-zero exit, never a trap, a backtrace or a silent success.
@Suite("ember: bad arguments")
struct CLIArgumentTests {
    static let ember = ExternalProcess.productsDirectory.appendingPathComponent("ember").path
    static let models = ExternalProcess.repositoryRoot.appendingPathComponent("models").path

    @Test(arguments: [
        (["generate", "-n", "0", "Hi"], "-n: found 0, expected at least 1"),
        (["generate", "--temperature", "nan", "Hi"], "--temperature: found nan, expected a finite number"),
        (["generate", "--temperature=-1", "Hi"], "--temperature: found -1.0, expected a finite number"),
        (["generate", "--temperature", "-1", "Hi"], "--temperature: found -1.0, expected a finite number"),
        (["generate", "--top-p", "5", "Hi"], "--top-p: found 5.0, expected a number in (0, 1]"),
        (["generate", "--top-k=-1", "Hi"], "--top-k: found -1, expected ≥ 0"),
        (["generate", "--top-k", "-3", "Hi"], "--top-k: found -3, expected ≥ 0"),
        (["chat", "--top-p", "0"], "--top-p: found 0.0, expected a number in (0, 1]"),
        (["chat", "--temperature", "-0.5"], "--temperature: found -0.5, expected a finite number"),
        (["generate", "-m", "/nonexistent/model.gguf", "Hi"], "/nonexistent/model.gguf: cannot read: no such file"),
        (["generate", "-m", "models/all-minilm-l6-v2", "Hi"], "a folder; expected a model file"),
        (["policy", "--threads", "0"], "--threads 0: expected 1 to 1024"),
        (["policy", "--state", "battery=2"], "--state: EMBER_POWER: battery=2: expected a level 0…1"),
        (["serve", "--stdio", "--power-timeline", "/nonexistent/timeline.json"], "/nonexistent/timeline.json: (file): no such file"),
        (["serve", "--stdio", "--chunk-bytes", "300"], "--chunk-bytes: found 300, expected at least 512"),
        (["serve", "--stdio", "--max-queued-bytes", "100"], "--max-queued-bytes: found 100, expected at least 65536"),
        (["serve", "--http", "8080", "--threads", "-1"], "--threads -1: expected 1 to"),
        (["serve", "--http", "8080", "--max-connections", "0"], "--max-connections: found 0, expected at least 1"),
        (["demo", "--tokens", "0"], "--tokens: found 0, expected at least 1"),
        (["chat", "--chat-template", "foo"], "--chat-template: found foo, expected one of chatml"),
        (["generate", "--stop", "x", "--json-object", "Hi"], "--stop with --json-object: give one of them"),
        (["bench", "structured", "--temperature", "-1"], "--temperature: found -1.0, expected a finite number"),
        (["bench", "qos", "--repetitions", "5"], "--repetitions: found 5, expected at least 10"),
        (["perplexity", "-f", "README.md", "-c", "20000"], "-c: found 20000, expected"),
        (["serve", "--stdio", "--model", "nope"], "--model nope: no model named \"nope\" in the manifest"),
        (["serve", "--stdio", "--precision", "int2"], "--precision int2: expected native, auto, fp32, fp16, int8 or int4"),
        (["serve", "--http", "localhost:99999"], "--http localhost:99999: expected HOST:PORT"),
        (["serve", "--http", "8080", "--stdio"], "give exactly one of --http HOST:PORT, --socket PATH and --stdio"),
        (["serve", "--stdio", "--model", "a", "--model", "b"], "repeat them with --http"),
        (["generate", "-n", "-1", "Hi"], "-n: found -1, expected at least 1"),
        (["generate", "--logprobs", "21", "--json", "Hi"], "--logprobs: found 21, expected 0 to 20"),
        (["generate", "--logprobs", "2", "Hi"], "--logprobs 2: add --json"),
        (["generate", "--token-ids", "1,x,3"], "--token-ids: item 1 of the prompt is \"x\", expected a token id"),
        (["generate", "--token-ids", "1,99999999"], "prompt[1]: token id 99999999, expected an id from 0 to 49151"),
        (["generate", "--chat", "--token-ids", "1,2"], "--chat and --token-ids: give one of them"),
        (["generate", "--stop", "", "Hi"], "--stop: string 1 is empty"),
        (["generate", "--min-p", "2", "Hi"], "--min-p: found 2.0, expected a number in [0, 1]"),
        (["generate", "--repeat-penalty", "0", "Hi"], "--repeat-penalty: found 0.0, expected a finite number > 0"),
        (["perplexity", "-f", "README.md", "--compare", "int8,fp32"], "--compare int8,fp32: found \"fp32\", expected a comma-separated list"),
        (["perplexity", "-f", "/dev/zero"], "-f /dev/zero: a character device, not a text file; expected a text file or a pipe"),
        (["perplexity", "-f", "models"], "-f models: a directory, not a text file; expected a text file or a pipe"),
        (["perplexity", "-f", "/nonexistent/text.txt"], "-f /nonexistent/text.txt: cannot read: no such file"),
        (["generate", "-m", "all-minilm-l6-v2", "Hi"], "is an embedding model (a folder with config.json), expected a GGUF text-generation model"),
        (["embed", "-m", "smollm2-135m-instruct", "Hi"], "is a GGUF text-generation model, expected an embedding model"),
        (["generate", "-n", "4", String(repeating: "word ", count: 20_000)], "prompt: 20001 tokens, expected fewer than the model's context of 8192 tokens"),
    ])
    func badArgumentsAreNamed(arguments: [String], message: String) async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let run = try await ExternalProcess.run(Self.ember, arguments, environment: ["EMBER_MODELS_DIR": Self.models],
                                                workingDirectory: ExternalProcess.repositoryRoot, timeout: 120)
        let said = run.standardError + run.standardOutput
        #expect(run.status != 0 && !run.timedOut, "\(arguments) exited \(run.status): \(said)")
        #expect(said.contains(message), "\(arguments): \(said)")
        #expect(!said.contains("Fatal error") && !said.contains("Backtrace") && !said.contains("NSCocoaErrorDomain"), "\(said)")
    }

    /// `ember policy --json`: every tier's decision in a state, as objects with the action, its reason and the choice —
    /// from the documented reference costs (this machine's cached calibration may have been measured under load, where
    /// int8 and int4, 15 % apart, can swap).
    @Test func policyPrintsJSON() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let run = try await ExternalProcess.run(Self.ember, ["policy", "--json", "--state", "battery=0.1", "--reference-costs"], timeout: 60)
        #expect(run.status == 0, "\(run.standardError)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        let decisions = try #require(object["decisions"] as? [[String: Any]])
        #expect(decisions.map { $0["tier"] as? String } == ["critical", "standard", "background"])
        #expect(decisions[0]["action"] as? String == "run" && decisions[0]["precision"] as? String == "int4")
        #expect(decisions[1]["action"] as? String == "defer" && (decisions[1]["reason"] as? String)?.contains("20%") == true)
        let predicted = try #require(decisions[0]["predicted"] as? [String: Any])
        #expect((predicted["seconds"] as? Double ?? 0) > 0 && (predicted["joules"] as? Double ?? 0) > 0 && predicted["quality_loss"] is Double)
        #expect(decisions[0]["unit"] is String && decisions[0]["qos"] as? String == "userInitiated" && decisions[0]["threads"] is Int)
    }

    /// `ember policy --calibration FILE`: the issue's file shape decides; quantized routes made 5× slower and costlier
    /// send a battery-powered standard request to fp32; a bad file is an error naming the field.
    @Test func policyDecidesFromACalibrationFile() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-calibration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func standard(_ json: String) async throws -> [String: Any] {
            let file = folder.appendingPathComponent("\(UUID().uuidString).json")
            try Data(json.utf8).write(to: file)
            let run = try await ExternalProcess.run(Self.ember, ["policy", "--json", "--state", "battery=0.5", "--calibration", file.path],
                                                    timeout: 60)
            #expect(run.status == 0, "\(run.standardError)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
            return try #require((object["decisions"] as? [[String: Any]])?.first { $0["tier"] as? String == "standard" })
        }
        func file(_ scale: Double) -> String {
            // Decoding too (`decode_gops`): without it every route's decode is bound by the same memory, and a 5×
            // slower quantized kernel would still decode faster than fp32 streams four bytes a weight.
            String(format: #"{"units": {"neural-engine": {"int8": {"gops": %g, "joules_per_gop": %g, "decode_gops": %g}, "#
                   + #""int4": {"gops": %g, "joules_per_gop": %g, "decode_gops": %g}}, "#
                   + #""gpu": {"fp32": {"gops": 100, "joules_per_gop": 0.123, "decode_gops": 10}}, "cpu": {"fp32": {"gops": 20, "joules_per_gop": 0.5}}}}"#,
                   120 / scale, 0.096 * scale, 30 / scale, 150 / scale, 0.069 * scale, 35 / scale)
        }
        let usual = try await standard(file(1))
        #expect(usual["precision"] as? String == "int4" && usual["unit"] as? String == "neural-engine", "\(usual)")
        let penalised = try await standard(file(5))
        #expect(penalised["precision"] as? String == "fp32" && penalised["unit"] as? String == "gpu", "\(penalised)")
        let bad = folder.appendingPathComponent("bad.json")
        try Data(#"{"units": {"gpu": {"fp32": {"gops": "fast", "joules_per_gop": 1}}}}"#.utf8).write(to: bad)
        let refused = try await ExternalProcess.run(Self.ember, ["policy", "--json", "--state", "battery=0.5", "--calibration", bad.path], timeout: 60)
        #expect(refused.status != 0 && refused.standardError.contains("units.gpu.fp32.gops") && refused.standardError.contains("fast"),
                "\(refused.standardError)")
    }

    /// `ember fetch --when charging` is a discretionary job of the scheduler: on battery it waits for external power
    /// up to `--within` seconds and then runs anyway; on the charger it runs at once. (The models are there already, so
    /// both end by verifying them: nothing is downloaded.)
    @Test func discretionaryFetchWaitsForPower() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let onBattery = try await ExternalProcess.run(Self.ember, ["fetch", "all-minilm-l6-v2", "--when", "charging", "--within", "2"],
                                                      environment: ["EMBER_MODELS_DIR": Self.models, "EMBER_POWER": "battery=0.5"], timeout: 120)
        #expect(onBattery.status == 0, "\(onBattery.standardError)")
        #expect(onBattery.standardError.contains("waiting: needs external power"), "\(onBattery.standardError)")
        #expect(onBattery.standardError.contains("no external power within 2 s: fetching now"), "\(onBattery.standardError)")
        #expect(onBattery.standardOutput.contains("all-minilm-l6-v2/model.safetensors: already present, sha256 verified"), "\(onBattery.standardOutput)")
        let charging = try await ExternalProcess.run(Self.ember, ["fetch", "all-minilm-l6-v2", "--when", "charging", "--within", "600"],
                                                     environment: ["EMBER_MODELS_DIR": Self.models, "EMBER_POWER": "charging=charging"], timeout: 120)
        #expect(charging.status == 0 && !charging.standardError.contains("waiting"), "\(charging.standardError)")
        let bad = try await ExternalProcess.run(Self.ember, ["fetch", "all-minilm-l6-v2", "--when", "later"], timeout: 60)
        #expect(bad.status != 0 && bad.standardError.contains("--when later: expected now or charging"), "\(bad.standardError)")
    }

    /// `ember info` reads performance and efficiency cores from the sysfs tree `EMBER_SYSFS_ROOT` names, and the
    /// policy sizes each tier's threads to its cores.
    @Test func coresComeFromSysfs() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let tree = try FakeFileTree(name: "cores")
        try tree.write("sys/devices/system/cpu/online", "0-1\n")
        try tree.write("sys/devices/system/cpu/cpu0/cpu_capacity", "1024\n")
        try tree.write("sys/devices/system/cpu/cpu1/cpu_capacity", "512\n")
        let run = try await ExternalProcess.run(Self.ember, ["info"], environment: ["EMBER_SYSFS_ROOT": tree.root.path], timeout: 60)
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.contains("cores      1 performance + 1 efficiency"), "\(run.standardOutput)")
        let policy = try await ExternalProcess.run(Self.ember, ["policy", "--json", "--state", "external=1"],
                                                   environment: ["EMBER_SYSFS_ROOT": tree.root.path], timeout: 60)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(policy.standardOutput.utf8)) as? [String: Any])
        let decisions = try #require(object["decisions"] as? [[String: Any]])
        #expect(decisions.allSatisfy { $0["threads"] as? Int == 1 }, "one core per class: \(decisions)")
    }

    /// `ember info` names the kernel path in use and warns when it is a fallback (here the scalar one, forced).
    @Test func infoWarnsAboutAFallbackKernelPath() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        // A cache of its own: the calibration file holds one machine+ISA, and a scalar one written there would make the
        // next process of the suite re-measure its own under the suite's load.
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("ember-scalar-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let forced = try await ExternalProcess.run(Self.ember, ["info"], environment: ["EMBER_ISA": "scalar", "XDG_CACHE_HOME": cache.path],
                                                   timeout: 60)
        #expect(forced.status == 0, "\(forced.standardError)")
        #expect(forced.standardOutput.contains("kernels    scalar (EMBER_ISA=scalar; best for this CPU:"), "\(forced.standardOutput)")
        #expect(forced.standardOutput.contains("warning: kernels: running the scalar path, a fallback slower than this CPU's best"),
                "\(forced.standardOutput)")
        let best = try await ExternalProcess.run(Self.ember, ["info"], timeout: 60)
        #expect(!best.standardOutput.contains("a fallback slower"), "\(best.standardOutput)")
    }

    /// `ember chat` commands: /save writes the conversation as JSON, /load restores it, unknown commands are named;
    /// a message continued with a backslash is one turn.
    @Test func chatSavesAndLoadsAConversation() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ember-chat-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let script = "Hi\n/save \(file.path)\n/reset\n/load \(file.path)\n/nope\ntwo \\\nlines\n/exit\n"
        let run = try await ExternalProcess.run(Self.ember, ["chat", "-n", "4", "--temperature", "0"], input: Data(script.utf8),
                                                environment: ["EMBER_MODELS_DIR": Self.models], timeout: 120)
        #expect(run.status == 0, "\(run.standardError)")
        let saved = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [[String: String]]
        #expect(saved?.map { $0["role"] ?? "" } == ["user", "assistant"] && saved?.first?["content"] == "Hi")
        #expect(run.standardError.contains("[2 messages loaded from") && run.standardError.contains("/nope: unknown command"))
        #expect(run.standardError.components(separatedBy: "new prompt tokens").count == 3, "two turns: Hi, and the two lines as one")
    }

    /// `ember list`: every model of the manifest, fetched or not, in the folder the environment names.
    @Test func listSaysWhatIsFetchedAndWhere() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("ember-list-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: empty) }
        for (folder, fetched) in [(Self.models, true), (empty.path, false)] {
            let run = try await ExternalProcess.run(Self.ember, ["list", "--json"], environment: ["EMBER_MODELS_DIR": folder], timeout: 60)
            #expect(run.status == 0, "\(run.standardError)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
            let models = try #require(object["models"] as? [[String: Any]])
            #expect(models.contains { $0["name"] as? String == "smollm2-135m-instruct" && $0["default"] as? Bool == true })
            let smollm = models.first { $0["name"] as? String == "smollm2-135m-instruct" }
            #expect(smollm?["fetched"] as? Bool == fetched && (smollm?["path"] as? String)?.hasPrefix(folder) == true, "\(folder)")
            if fetched { #expect((smollm?["bytes"] as? Int ?? 0) > 50_000_000) }
        }
    }

    /// `--chat` sends the prompt through the model's chat template (more prompt tokens, another text than the bare
    /// question's continuation); `--stop` ends the text before the string, with stop reason "stop".
    @Test func chatAndStopShapeTheReply() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        func generate(_ arguments: [String]) async throws -> [String: Any] {
            let run = try await ExternalProcess.run(Self.ember, ["generate", "--json", "-n", "24"] + arguments,
                                                    environment: ["EMBER_MODELS_DIR": Self.models], timeout: 120)
            try #require(run.status == 0, "\(arguments): \(run.standardError)")
            return try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        }
        let plain = try await generate(["What is the capital of France?"])
        let chat = try await generate(["--chat", "What is the capital of France?"])
        let chatText = try #require(chat["text"] as? String)
        #expect((chat["prompt_token_ids"] as? [Any])?.count ?? 0 > (plain["prompt_token_ids"] as? [Any])?.count ?? 0,
                "the template adds the turn's tokens")
        #expect(chatText != plain["text"] as? String, "\(chatText)")
        // A stop string from the middle of the reply: the reply up to it.
        let characters = Array(chatText)
        try #require(characters.count >= 12, "\(chatText)")
        let stop = String(characters[8..<11])
        let cut = try await generate(["--chat", "--stop", stop, "What is the capital of France?"])
        let cutText = try #require(cut["text"] as? String)
        let expected = String(chatText[..<chatText.range(of: stop)!.lowerBound])
        #expect(cut["stop_reason"] as? String == "stop" && cutText == expected, "\(stop.debugDescription): \(cutText.debugDescription)")
        // A stop string that begins with dashes (a Markdown rule) is a value, not an option; absent here, the reply is whole.
        if !chatText.contains("---") {
            let rule = try await generate(["--chat", "--stop", "---", "What is the capital of France?"])
            #expect(rule["text"] as? String == chatText, "\(String(describing: rule["text"]))")
        }
    }

    /// Extreme but valid values run: a top-k far above the vocabulary is the whole vocabulary.
    @Test func aHugeTopKRuns() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.ember), "the ember binary is built next to the tests")
        let run = try await ExternalProcess.run(Self.ember, ["generate", "--temperature", "0.8", "--top-k", "\(Int.max)", "-n", "2",
                                                             "--precision", "int4", "--json", "Hi"],
                                                environment: ["EMBER_MODELS_DIR": Self.models], timeout: 120)
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.contains("\"token_ids\""))
    }
}
