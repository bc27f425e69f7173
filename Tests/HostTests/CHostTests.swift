import EmberModels
import EmberTestSupport
import Foundation
import Testing

/// examples/c-host: compiled with the system C compiler against `ember.h` and
/// libEmberC.so, run against the real models; its generated text checked
/// against llama.cpp's reference output.
@Suite("C host example", .serialized) // each test runs a model in a process of its own: one at a time, not four
struct CHostTests {
    /// ember.h is usable from C++ too (extern "C", no C-only constructs).
    @Test func theHeaderCompilesAsCPlusPlus() async throws {
        let header = ExternalProcess.repositoryRoot.appendingPathComponent("Sources/EmberC/include/ember.h").path
        let check = try await ExternalProcess.run("c++", ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-x", "c++", header],
                                            timeout: 60)
        #expect(check.status == 0, "\(check.standardError)")
    }

    /// Compiles a C host program with `cc -Werror -pedantic` against ember.h and libEmberC.so into `binary`.
    static func compile(_ source: String, _ binary: String, flags: [String] = []) async throws -> ExternalProcess.Outcome {
        let root = ExternalProcess.repositoryRoot
        let products = ExternalProcess.productsDirectory
        return try await ExternalProcess.run("cc", flags + [
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
            "-I", root.appendingPathComponent("Sources/EmberC/include").path, source,
            "-L", products.path, "-lEmberC", "-lm", "-Wl,-rpath," + products.path, "-o", binary,
        ], timeout: 120)
    }

    /// The cache directory the test programs' runtimes share (`ember_runtime_options_t.cache_directory`), one per test
    /// run: the first runtime measures the backends' costs and SmolLM2's quality, the others read them. The folder
    /// goes when the test process exits.
    static let cacheDirectory = ProcessTemporaryFolder.named("ember-c-host-cache")

    /// Compiles `Tests/HostTests/Programs/<name>` (under AddressSanitizer when `sanitized`) and runs it with the
    /// checkout's models folder and the shared cache directory; fails the test if libEmberC.so is not built or the
    /// program does not compile.
    static func runProgram(_ name: String, sanitized: Bool = false) async throws -> ExternalProcess.Outcome {
        let root = ExternalProcess.repositoryRoot
        try #require(FileManager.default.fileExists(atPath: ExternalProcess.productsDirectory.appendingPathComponent("libEmberC.so").path),
                     "libEmberC.so is not built: `make test` builds it (swift build -c release --product EmberC)")
        let binary = FileManager.default.temporaryDirectory.appendingPathComponent("ember-c-\(name)-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: binary) }
        let compile = try await compile(root.appendingPathComponent("Tests/HostTests/Programs/\(name)").path, binary,
                                        flags: sanitized ? ["-fsanitize=address", "-fno-omit-frame-pointer"] : [])
        try #require(compile.status == 0, "cc failed: \(compile.standardError)")
        return try await ExternalProcess.run(binary, [root.appendingPathComponent("models").path, cacheDirectory.path],
                                             environment: sanitized ? ["ASAN_OPTIONS": "detect_leaks=0"] : [:], timeout: 300)
    }

    /// After ember_request_release returns, the token callback never runs again (the host may free
    /// its user data); a callback may release its own request; an empty prompt is refused at submission.
    @Test func releasingARequestStopsItsCallbacks() async throws {
        let run = try await Self.runProgram("release_stops_callbacks.c")
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.contains("release checks passed"))
        #expect(run.standardOutput.contains("released from inside its own callback"))
        #expect(run.standardOutput.contains("empty prompt: status 1 (prompt: found an empty string"))
    }

    /// Double release, use after release, wrong-kind and forged handles: EMBER_ERROR_INVALID_HANDLE with a message,
    /// the host under AddressSanitizer (which reports any use of freed or wild memory on its side of the boundary).
    @Test func checkedHandlesRefuseWhatACarelessHostPasses() async throws {
        let run = try await Self.runProgram("checked_handles.c", sanitized: true)
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.contains("handle checks passed"))
        #expect(!run.standardError.contains("AddressSanitizer"), "\(run.standardError)")
    }

    /// ember_generate_submit_with_options with a JSON Schema: the text parses and has the required keys and types;
    /// an unsupported keyword, a wrong options.size and two formats at once are refused with messages.
    @Test func aCHostGetsJSONValidAgainstItsSchema() async throws {
        let run = try await Self.runProgram("structured_output.c")
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.contains("structured output checks passed"), "\(run.standardOutput)")
        let start = try #require(run.standardOutput.range(of: "json: "))
        let end = try #require(run.standardOutput.range(of: "\n--\n", range: start.upperBound..<run.standardOutput.endIndex))
        let line = String(run.standardOutput[start.upperBound..<end.lowerBound])
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["city"] is String, "\(line)")
        #expect((object?["population"] as? NSNumber).map { $0.doubleValue >= 0 && $0.doubleValue == $0.doubleValue.rounded() } == true, "\(line)")
    }

    /// ABI 2 from C, under AddressSanitizer: tokenizing, a prompt as token ids (the same greedy text as from text),
    /// log-probabilities (the chosen tokens spell the text, greedy picks each step's best), usage and finish reasons,
    /// a banned token, a stop string, a chat reply through the model's template, ABI 1's smaller options structure
    /// (its appended fields not read), the prompt cache's count in the usage and ABI 2's first, smaller usage
    /// structure (filled to its end, no further), the cache directory (read by a later runtime, made when missing,
    /// ABI 2's second options structure taken without it), and a refusal naming the C field for each bad option.
    @Test func aCHostUsesABI2GenerationOptionsAndReports() async throws {
        let run = try await Self.runProgram("generation_options.c", sanitized: true)
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.contains("generation option checks passed"), "\(run.standardOutput)")
        #expect(!run.standardOutput.contains("FAIL"), "\(run.standardOutput)")
        #expect(run.standardOutput.contains("ok a later runtime and model load read them"), "\(run.standardOutput)")
        #expect(!run.standardError.contains("AddressSanitizer"), "\(run.standardError)")
        // llama.cpp's greedy continuation of this prompt on the F32 file starts " Paris" (Tests/ModelTests/Fixtures).
        #expect(run.standardOutput.contains("greedy: \" Paris"), "\(run.standardOutput)")
    }

    @Test func cHostBuildsRunsAndGeneratesTheReferenceText() async throws {
        let root = ExternalProcess.repositoryRoot
        let products = ExternalProcess.productsDirectory
        let library = products.appendingPathComponent("libEmberC.so").path
        try #require(FileManager.default.fileExists(atPath: library),
                     "libEmberC.so is not built: `make test` builds it (swift build -c release --product EmberC)")
        let binary = FileManager.default.temporaryDirectory.appendingPathComponent("ember-c-host-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: binary) }
        let compile = try await Self.compile(root.appendingPathComponent("examples/c-host/main.c").path, binary)
        #expect(compile.status == 0, "cc failed: \(compile.standardError)")
        try #require(compile.status == 0)

        let run = try await ExternalProcess.run(binary, [root.appendingPathComponent("models").path], timeout: 300)
        #expect(run.status == 0, "c-host failed:\n\(run.standardOutput)\n\(run.standardError)")
        let lines = run.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.last == "c-host: all checks passed")

        // The text it generated is the start of llama.cpp's greedy output for the precision the policy chose (int4 as
        // Q4_1 off the GPU route, which computes from fp32 weights: units=2 is EMBER_UNITS_CPU_AND_GPU).
        let generated = try #require(lines.first { $0.hasPrefix("generated: ") })
        let text = String(generated.dropFirst("generated: \"".count).dropLast())
            .replacingOccurrences(of: "\\n", with: "\n").replacingOccurrences(of: "\\\"", with: "\"")
        let decision = try #require(lines.first { $0.hasPrefix("decision: ") })
        let reference: String? = if decision.contains("precision=fp32") { "smollm2_greedy_f32.jsonl" }
            else if decision.contains("precision=int4"), !decision.contains("units=2 ") { "smollm2_greedy_q4_1.jsonl" } else { nil }
        if let reference {
            let fixture = root.appendingPathComponent("Tests/ModelTests/Fixtures/\(reference)")
            let first = try #require(String(contentsOf: fixture, encoding: .utf8).split(separator: "\n").first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
            let expected = try #require(object["gen_text"] as? String)
            #expect(text.count >= 10 && expected.hasPrefix(text), "c-host generated \(text.debugDescription), reference \(expected.debugDescription)")
        } else {
            #expect(text.hasPrefix(" Paris"))
        }
        #expect(lines.contains { $0.hasPrefix("cancelled: status 6") })
        #expect(lines.contains { $0.hasPrefix("deferred embedding, cancelled: status 6") })
        // At 15 % battery the policy picks the least energy: a quantized precision. MiniLM's int4 and int8 embed at
        // the same speed on these CPUs (b1 965–985 vs 968–1410 sentences/s), so which of the two wins follows the
        // calibration's noise; fp32 would be the defect.
        #expect(lines.contains { $0.hasPrefix("submitted embedding: precision=int4") || $0.hasPrefix("submitted embedding: precision=int8") },
                "\(lines.filter { $0.contains("embedding") })")
        #expect(lines.contains { $0.hasPrefix("missing model: status 2") && $0.contains("no-such-model") })
    }

    /// The README's C program, extracted as written, compiled in a folder outside the checkout and run there: it
    /// generates and embeds with the checkout's models; without them (an empty home, no models folder) it exits 1
    /// with the error saying where it looked and how to fetch.
    @Test func theReadmeCProgramBuildsAndRunsOutsideTheCheckout() async throws {
        let root = ExternalProcess.repositoryRoot
        try #require(FileManager.default.fileExists(atPath: ExternalProcess.productsDirectory.appendingPathComponent("libEmberC.so").path),
                     "libEmberC.so is not built: `make test` builds it (swift build -c release --product EmberC)")
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "```c\n/* hello.c"))
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        let program = String(readme[readme.index(start.lowerBound, offsetBy: 5)..<end.lowerBound]) + "\n"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-newcomer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("home"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("hello.c"), binary = folder.appendingPathComponent("hello").path
        try Data(program.utf8).write(to: source)
        let compile = try await Self.compile(source.path, binary)
        try #require(compile.status == 0, "the README's C program does not compile: \(compile.standardError)")

        let run = try await ExternalProcess.run(binary, [root.appendingPathComponent("models").path], workingDirectory: folder, timeout: 300)
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError)")
        #expect(run.standardOutput.hasPrefix(" Paris"), "\(run.standardOutput)")
        #expect(run.standardOutput.contains("embedding[0..2] = "))

        // The library's per-user cache is the account's home from the password database (Foundation on Linux does
        // not read $HOME): when SmolLM2 was fetched there, the program rightly finds it and there is nothing to test.
        let accountCache = ModelLocator.defaultModelsDirectory(currentDirectory: folder.path, cacheHome: nil)
        guard !FileManager.default.fileExists(atPath: accountCache.appendingPathComponent("smollm2-135m-instruct").path) else {
            print("skipped the no-models run: \(accountCache.path) holds SmolLM2")
            return
        }
        let lost = try await ExternalProcess.run(binary, [], environment: ["HOME": folder.appendingPathComponent("home").path,
                                                                           "XDG_CACHE_HOME": ""],
                                                 workingDirectory: folder, timeout: 300)
        #expect(lost.status == 1, "\(lost.standardOutput)\n\(lost.standardError)")
        #expect(lost.standardError.contains("ember_model_load") && lost.standardError.contains("ember fetch"), "\(lost.standardError)")
        #expect(!lost.standardError.contains("Fatal error"))
    }
}
