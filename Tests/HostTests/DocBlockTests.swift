import EmberTestSupport
import Foundation
import Testing

/// The fenced code blocks of the README and of `docs/`, taken from the files as written: every block says its
/// language; Swift programs compile against the built modules and run in a folder outside the checkout; JSON
/// parses; the worker-protocol transcripts match what `ember serve --stdio` answers. (C programs: CHostTests;
/// Python against a live server: Tests/HTTP/openai_client_test.py; the Swift program as a package of its own:
/// `make check-swift-package`.)
@Suite("Documentation code blocks")
struct DocBlockTests {
    /// One fenced block: the file it is in, its first line number, its info string and its text.
    struct Block: CustomStringConvertible {
        var file: String
        var line: Int
        var language: String
        var text: String
        var description: String { "\(file):\(line) (```\(language))" }
    }

    /// The documents whose blocks are checked.
    static let documents = ["README.md"] + ((try? FileManager.default.contentsOfDirectory(
        atPath: ExternalProcess.repositoryRoot.appendingPathComponent("docs").path)) ?? [])
        .filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }

    /// Every fenced block of `documents`.
    static func blocks() throws -> [Block] {
        var result = [Block]()
        for document in documents {
            let text = try String(contentsOf: ExternalProcess.repositoryRoot.appendingPathComponent(document), encoding: .utf8)
            var open: Block?
            for (index, line) in text.components(separatedBy: "\n").enumerated() {
                if line.hasPrefix("```") {
                    if var block = open {
                        block.text = String(block.text.dropLast())
                        result.append(block)
                        open = nil
                    } else {
                        open = Block(file: document, line: index + 1, language: String(line.dropFirst(3)), text: "")
                    }
                } else if open != nil {
                    open!.text += line + "\n"
                }
            }
            if let open { Issue.record("\(open): never closed") }
        }
        return result
    }

    /// The languages a block may have: the ones checked here or elsewhere, `console` for a transcript (commands after
    /// `$ `, their output below) and `text` for a synopsis or a sketch that is not a program.
    static let languages: Set<String> = ["swift", "c", "python", "sh", "console", "json", "text"]

    @Test func everyBlockSaysWhatItIsAndJSONParses() throws {
        let blocks = try Self.blocks()
        #expect(blocks.count >= 10, "found \(blocks.count) blocks")
        for block in blocks {
            #expect(Self.languages.contains(block.language), "\(block): expected one of \(Self.languages.sorted())")
            guard block.language == "json" else { continue }
            // A block is one JSON value, or one per line (JSON lines).
            if (try? JSONSerialization.jsonObject(with: Data(block.text.utf8))) != nil { continue }
            for line in block.text.split(separator: "\n") {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(block): not JSON: \(line)")
            }
        }
    }

    /// The Swift compiler and the flags that find the built modules (the Swift ones and the C module maps).
    static func swiftcArguments() throws -> [String] {
        let products = ExternalProcess.productsDirectory
        var arguments = ["-I", products.appendingPathComponent("Modules").path]
        for folder in try FileManager.default.contentsOfDirectory(atPath: products.path).sorted()
        where folder.hasSuffix(".build") && !folder.hasSuffix("-tool.build") {
            for map in ["module.modulemap", "include/module.modulemap"] {
                let path = products.appendingPathComponent(folder).appendingPathComponent(map).path
                if FileManager.default.fileExists(atPath: path) { arguments += ["-Xcc", "-fmodule-map-file=" + path] }
            }
        }
        for folder in ["Sources/CBLAS", "Sources/CEditLine"] {
            arguments += ["-Xcc", "-fmodule-map-file=" + ExternalProcess.repositoryRoot.appendingPathComponent(folder)
                .appendingPathComponent("module.modulemap").path]
        }
        // libEmberC.so carries the Ember modules; linking against it runs the program on the built code.
        return arguments + ["-L", products.path, "-lEmberC", "-Xlinker", "-rpath", "-Xlinker", products.path]
    }

    /// Each Swift block of the README, as written, compiled into a program in a folder outside the checkout and run
    /// there, its `models` folder a link to the checkout's: the model program streams text and prints the cosine; the
    /// tensor program prints its products. From a folder without models (and none in the user's cache) the model
    /// program exits 1 saying how to fetch them or where to point it.
    @Test func readmeSwiftProgramsCompileAndRunOutsideTheCheckout() async throws {
        let products = ExternalProcess.productsDirectory
        try #require(FileManager.default.fileExists(atPath: products.appendingPathComponent("libEmberC.so").path),
                     "libEmberC.so is not built: `make test` builds it")
        let programs = try Self.blocks().filter { $0.file == "README.md" && $0.language == "swift" }
        #expect(programs.count == 2, "\(programs)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ember-swift-newcomer-\(UUID().uuidString)")
        let elsewhere = folder.appendingPathComponent("no-models")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let flags = try Self.swiftcArguments()
        for (index, program) in programs.enumerated() {
            let app = folder.appendingPathComponent("app\(index)")
            try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: app.appendingPathComponent("models"),
                                                       withDestinationURL: ExternalProcess.repositoryRoot.appendingPathComponent("models"))
            try Data(program.text.utf8).write(to: app.appendingPathComponent("main.swift"))
            let compile = try await ExternalProcess.run("swiftc", ["main.swift", "-o", "app"] + flags, workingDirectory: app, timeout: 300)
            try #require(compile.status == 0, "\(program) does not compile:\n\(compile.standardError)")
            let run = try await ExternalProcess.run(app.appendingPathComponent("app").path, [], workingDirectory: app, timeout: 300)
            #expect(run.status == 0, "\(program):\n\(run.standardOutput)\n\(run.standardError)")
            if program.text.contains("loadLanguageModel") {
                let lines = run.standardOutput.split(separator: "\n").map(String.init)
                #expect(run.standardOutput.hasPrefix(" Paris"), "\(run.standardOutput)")
                let cosine = try #require(lines.compactMap { Float($0) }.first, "\(run.standardOutput)")
                #expect(abs(cosine - 0.81) < 0.03, "the README says ≈ 0.81: \(cosine)")
                let userCache = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/ember/models/smollm2-135m-instruct")
                guard !FileManager.default.fileExists(atPath: userCache.path) else { continue } // the user's cache has it
                let lost = try await ExternalProcess.run(app.appendingPathComponent("app").path, [], workingDirectory: elsewhere, timeout: 300)
                #expect(lost.status == 1, "\(lost.standardOutput)\n\(lost.standardError)")
                #expect(lost.standardOutput.contains("ember fetch smollm2-135m-instruct") && lost.standardOutput.contains("modelsDirectory"),
                        "\(lost.standardOutput)")
                #expect(!lost.standardError.contains("Fatal error"), "\(lost.standardError)")
            } else {
                #expect(run.standardOutput.hasPrefix("[8.0, 26.0, 44.0, 62.0, 17.0, 62.0, 107.0, 152.0]"), "\(run.standardOutput)")
            }
        }
    }

    /// The worker-protocol transcripts (`$ printf … | ember serve --stdio` in a console block) run as written with
    /// the built `ember`: every line answered is JSON, and each shown line's keys are among the real line's keys.
    @Test func stdioTranscriptsMatchWhatTheServerAnswers() async throws {
        let ember = ExternalProcess.productsDirectory.appendingPathComponent("ember").path
        try #require(FileManager.default.isExecutableFile(atPath: ember), "the ember binary is built next to the tests")
        let transcripts = try Self.blocks().filter { $0.language == "console" && $0.text.contains("ember serve --stdio") }
        #expect(!transcripts.isEmpty)
        for block in transcripts {
            let lines = block.text.split(separator: "\n").map(String.init)
            let command = try #require(lines.first(where: { $0.hasPrefix("$ ") && $0.contains("ember serve --stdio") }))
            let request = try #require(command.components(separatedBy: "'").dropFirst(3).first, "\(block): no quoted request")
            let shown = lines.drop { $0 != command }.dropFirst().filter { $0.hasPrefix("{") }
            let run = try await ExternalProcess.run(ember, ["serve", "--stdio"], input: Data((request + "\n").utf8),
                                                    workingDirectory: ExternalProcess.repositoryRoot, timeout: 300)
            #expect(run.status == 0, "\(block): \(run.standardError)")
            let answered = try run.standardOutput.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\(block): not a JSON object: \($0)")
            }
            for example in shown {
                // The shown line elides values with "…"; it stands for the first line the server wrote that has its
                // first key (a status line, or the answer to its request).
                let keys = Self.keys(in: example)
                let first = try #require(keys.first, "\(block): no keys in \(example)")
                let real = try #require(answered.first { $0[first] != nil }, "\(block): the server wrote no line with \"\(first)\": \(run.standardOutput)")
                for key in keys { #expect(real[key] != nil, "\(block): the server's line has no \"\(key)\": \(real.keys.sorted())") }
            }
        }
    }

    /// The top-level keys of a JSON object line that may elide values with "…".
    static func keys(in line: String) -> [String] {
        var keys = [String](), depth = 0, index = line.startIndex, inString = false, current = ""
        while index < line.endIndex {
            let character = line[index]
            if inString {
                if character == "\\" { index = line.index(after: index) } else if character == "\"" {
                    inString = false
                    let after = line[line.index(after: index)...].drop { $0 == " " }
                    if depth == 1, after.first == ":" { keys.append(current) }
                } else { current.append(character) }
            } else if character == "\"" {
                inString = true
                current = ""
            } else if character == "{" || character == "[" {
                depth += 1
            } else if character == "}" || character == "]" {
                depth -= 1
            }
            index = line.index(after: index)
        }
        return keys
    }
}
