import Foundation
import Testing
@testable import EmberServer
@testable import Ember

/// The worker protocol's pieces, without a model: parsing, errors, chunking.
@Suite("Worker protocol messages")
struct WorkerProtocolTests {
    private func parse(_ text: String) throws -> WorkerMessage { try WorkerMessage.parse(Data(text.utf8)) }

    private func invalid(_ text: String) -> WorkerMessage.Invalid? {
        do {
            _ = try WorkerMessage.parse(Data(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test func aFullRequestIsRead() throws {
        let message = try parse(#"{"id":"r1","prompt":"Hi","maxTokens":12,"tier":"background","model":"m","stream":true,"chat":true}"#)
        guard case let .request(request) = message else { Issue.record("not a request: \(message)"); return }
        #expect(request.id == "r1" && request.prompt == "Hi" && request.maxTokens == 12)
        #expect(request.tier == .background && request.model == "m" && request.stream && request.chat && request.kind == .generate)
    }

    /// Sampling per request, as the CLI and the HTTP API offer it; every setting out of range names itself.
    @Test func samplingAndStopStringsPerRequest() throws {
        guard case let .request(request) = try parse(
            #"{"id":"s","prompt":"Hi","temperature":0.7,"topK":20,"topP":0.9,"minP":0.1,"repetitionPenalty":1.1,"frequencyPenalty":0.5,"presencePenalty":-0.25,"logitBias":{"42":-100,"7":2.5},"seed":42,"stop":["\n","END"]}"#)
        else { Issue.record("not a request"); return }
        #expect(request.sampler == SamplerSettings(temperature: 0.7, topK: 20, topP: 0.9, minP: 0.1, repetitionPenalty: 1.1,
                                                   frequencyPenalty: 0.5, presencePenalty: -0.25, logitBias: [42: -100, 7: 2.5], seed: 42))
        #expect(request.stop == ["\n", "END"])
        guard case let .request(plain) = try parse(#"{"id":"p","prompt":"Hi","stop":"."}"#) else { Issue.record("not a request"); return }
        #expect(plain.sampler == SamplerSettings() && plain.stop == ["."])
        for (line, field) in [(#"{"id":"x","prompt":"hi","temperature":-1}"#, "temperature"), (#"{"id":"x","prompt":"hi","topP":0}"#, "topP"),
                              (#"{"id":"x","prompt":"hi","seed":1.5}"#, "seed"), (#"{"id":"x","prompt":"hi","seed":1e300}"#, "seed"),
                              (#"{"id":"x","prompt":"hi","topK":"many"}"#, "topK"), (#"{"id":"x","prompt":"hi","stop":[1]}"#, "stop"),
                              (#"{"id":"x","prompt":"hi","stop":["a","b","c","d","e"]}"#, "stop"),
                              (#"{"id":"x","prompt":"hi","presencePenalty":3}"#, "presencePenalty"),
                              (#"{"id":"x","prompt":"hi","logitBias":{"a":1}}"#, "logitBias"), (#"{"id":"x","prompt":"hi","logitBias":{"1":200}}"#, "logitBias"),
                              (#"{"id":"x","prompt":"hi","logitBias":[1]}"#, "logitBias")] {
            #expect(invalid(line)?.message.hasPrefix(field) == true, "\(line)")
        }
    }

    @Test func defaultsAndEmbedInputs() throws {
        guard case let .request(plain) = try parse(#"{"id":"a","prompt":"Hi"}"#) else { Issue.record("not a request"); return }
        #expect(plain.maxTokens == 256 && plain.tier == .standard && plain.model == nil && !plain.stream)
        guard case let .request(one) = try parse(#"{"id":"b","kind":"embed","input":"a cat"}"#),
              case let .request(many) = try parse(#"{"id":"c","kind":"embed","input":["a","b"]}"#),
              case let .request(fromPrompt) = try parse(#"{"id":"d","kind":"embed","prompt":"p"}"#)
        else { Issue.record("not requests"); return }
        #expect(one.texts == ["a cat"] && many.texts == ["a", "b"] && fromPrompt.texts == ["p"])
    }

    /// Numbers no integer holds were a trap in the error message itself (issue: `{"id":1e19}` ended the server).
    @Test(arguments: [#"{"id":1e19}"#, #"{"id":"x","prompt":"hi","maxTokens":1e308}"#, #"{"id":"x","prompt":"hi","maxTokens":9223372036854775807}"#,
                      #"{"id":"x","prompt":"hi","maxTokens":-1e19}"#, #"{"runOnlyWhileCharging":1e300}"#, #"{"cancel":-9.3e18}"#,
                      #"{"id":"x","prompt":"hi","maxTokens":18446744073709551616}"#, #"{"id":-0.0}"#])
    func hugeNumbersAreRefusedNotTrapped(line: String) throws {
        let error = try #require(invalid(line))
        #expect(!error.message.isEmpty)
    }

    @Test func settingsAndCancel() throws {
        #expect(try parse(#"{"runOnlyWhileCharging":true}"#) == .settings(runOnlyWhileCharging: true))
        #expect(try parse(#"{"cancel":"r1"}"#) == .cancel(id: "r1"))
        #expect(invalid(#"{"runOnlyWhileCharging":1}"#)?.message.contains("runOnlyWhileCharging") == true)
    }

    @Test(arguments: [
        (#"{"id":"x","prompt":"hi","maxTokens":"ten"}"#, "x", "maxTokens"),
        (#"{"id":"x","prompt":"hi","maxTokens":0}"#, "x", "maxTokens"),
        (#"{"id":"x","prompt":"hi","maxTokens":2.5}"#, "x", "maxTokens"),
        (#"{"id":"x","prompt":"hi","maxTokens":true}"#, "x", "maxTokens"),
        (#"{"id":"x","prompt":"hi","tier":"urgent"}"#, "x", "tier"),
        (#"{"id":"x","prompt":42}"#, "x", "prompt"),
        (#"{"id":"x"}"#, "x", "prompt"),
        (#"{"id":"x","kind":"embed","input":[1,2]}"#, "x", "input"),
        (#"{"id":"x","kind":"embed"}"#, "x", "input"),
        (#"{"id":"x","kind":"translate","prompt":"hi"}"#, "x", "kind"),
        (#"{"id":"x","prompt":"hi","stream":"yes"}"#, "x", "stream"),
        (#"{"id":"x","prompt":"hi","model":7}"#, "x", "model"),
    ])
    func wrongFieldsNameTheFieldAndKeepTheID(line: String, id: String, field: String) throws {
        let error = try #require(invalid(line))
        #expect(error.id == id)
        #expect(error.message.hasPrefix(field + ":"), "\(error.message)")
    }

    @Test(arguments: [#"{"prompt":"hi"}"#, #"{"id":5,"prompt":"hi"}"#, #"{"id":"","prompt":"hi"}"#, "[1]", "\"text\"", "{nope", ""])
    func linesWithoutAReadableIDGetANullID(line: String) throws {
        let error = try #require(invalid(line))
        #expect(error.id == nil)
        #expect(!error.message.isEmpty)
    }

    @Test func numbersAreNotBooleansAndBooleansAreNotNumbers() throws {
        #expect(try JSONValue.parse(Data("true".utf8)) == .bool(true))
        #expect(try JSONValue.parse(Data("1".utf8)) == .number(1))
        #expect(try JSONValue.parse(Data(#"{"a":[1,"x",null,false]}"#.utf8))["a"] == .array([.number(1), .string("x"), .null, .bool(false)]))
    }

    @Test func errorsAreOneLineOfJSON() throws {
        let line = WorkerResponse.error(id: nil, "bad \"thing\"\nhere")
        #expect(!line.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["id"] is NSNull)
        #expect(object["ok"] as? Bool == false)
        #expect(object["error"] as? String == "bad \"thing\"\nhere")
    }

    @Test func aSmallResponseIsOneLine() throws {
        let lines = WorkerResponse.lines(id: "r", output: .string("Paris."), metadata: [("durationMs", .number(12))], limit: 512)
        #expect(lines.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(object["output"] as? String == "Paris." && object["ok"] as? Bool == true && object["durationMs"] as? Int == 12)
    }

    /// Random text with quotes, backslashes, control characters, accents and emoji:
    /// every chunk fits the limit, chunks are numbered in order, only the last says so
    /// and carries the metadata, and the outputs concatenate to the text.
    /// The metadata at its longest: the server's fields with the widest values they take.
    static let longestMetadata: [(String, JSONValue)] = [
        ("durationMs", .number(12_345_678)), ("tokens", .number(4096)), ("stopReason", .string("context_full")),
        ("cachedPromptTokens", .number(16_777_215)), ("decision", JSONValue.decision(Decision(action: .defer(reason: "battery at or below 20%"), precision: .fp32,
                                                      computeUnits: .cpuAndNeuralEngine, qos: .userInteractive, threads: 128))),
        ("waitMs", .number(12_345_678)), ("energyJoules", .number(12345.6789)), ("energySource", .string("measured")),
    ]

    @Test(arguments: [512, 600, 1000, 4096])
    func largeResponsesAreChunkedWithinTheLimit(limit: Int) throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [String] = ["a", "b", " ", "\"", "\\", "\n", "\t", "\u{01}", "é", "€", "😀", "👩‍👩‍👧", "/", "{", "}"]
        // The longest id the parser accepts, itself needing escapes.
        let id = String(repeating: "\"", count: 20) + String(repeating: "é", count: (WorkerRequest.maxIDBytes - 20) / 2)
        #expect(id.utf8.count <= WorkerRequest.maxIDBytes)
        for length in [0, 1, 100, 511, 2000, 9000] {
            let text = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            let lines = WorkerResponse.lines(id: id, output: .string(text), metadata: Self.longestMetadata, limit: limit)
            var joined = ""
            for (index, line) in lines.enumerated() {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let whole = lines.count == 1
                if whole {
                    joined = try #require(object["output"] as? String)
                    #expect(line.utf8.count <= limit)
                    continue
                }
                #expect(line.utf8.count <= limit, "chunk \(index) is \(line.utf8.count) bytes, limit \(limit)")
                #expect(object["id"] as? String == id)
                #expect(object["chunk"] as? Int == index)
                #expect(object["last"] as? Bool == (index == lines.count - 1))
                #expect((object["durationMs"] != nil) == (index == lines.count - 1))
                joined += try #require(object["output"] as? String)
            }
            #expect(joined == text, "length \(length), limit \(limit): \(lines.count) lines")
        }
    }

    /// Embeddings are chunked as numbers: whole vectors when one fits the limit, slices in order otherwise; every
    /// line within the limit, the last carrying ok, count and the metadata; reassembled they are the vectors.
    @Test(arguments: [512, 1024, 4096, 8192])
    func embeddingsAreChunkedAsNumbers(limit: Int) throws {
        var generator = SystemRandomNumberGenerator()
        let id = String(repeating: "é", count: WorkerRequest.maxIDBytes / 2)
        for count in [1, 3, 17] {
            let vectors = (0..<count).map { _ in (0..<384).map { _ in Float.random(in: -1...1, using: &generator) } }
            let lines = WorkerResponse.vectorLines(id: id, vectors: vectors, metadata: Self.longestMetadata, limit: limit)
            var rebuilt = [[Float]](repeating: [], count: count)
            if lines.count == 1 {
                // Small enough for one line: the vectors as the output, as numbers.
                #expect(lines[0].utf8.count <= limit)
                let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
                rebuilt = try #require(object["output"] as? [[Double]]).map { $0.map(Float.init) }
                #expect(rebuilt == vectors)
                continue
            }
            for (index, line) in lines.enumerated() {
                #expect(line.utf8.count <= limit, "chunk \(index) is \(line.utf8.count) bytes, limit \(limit)")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(object["chunk"] as? Int == index && object["last"] as? Bool == (index == lines.count - 1))
                #expect(object["output"] == nil, "numbers, never text")
                if index == lines.count - 1 {
                    #expect(object["ok"] as? Bool == true && object["count"] as? Int == count && object["durationMs"] != nil)
                    continue
                }
                let vector = try #require(object["index"] as? Int), offset = try #require(object["offset"] as? Int)
                #expect(rebuilt[vector].count == offset, "slices in order")
                rebuilt[vector] += try #require(object["values"] as? [Double]).map(Float.init)
            }
            #expect(rebuilt == vectors, "limit \(limit), \(count) vectors")
            if limit >= 8192 {
                #expect(lines.count == count + 1, "a 384-value vector fits 8192 bytes whole: one chunk per vector")
            }
        }
    }

    /// Ids are capped at 128 bytes as JSON text (escapes count), in requests and in cancels;
    /// so are model names at 256: every line that echoes them stays within the chunk limit.
    @Test func idsLongerThanTheLimitAreRefused() throws {
        let long = String(repeating: "x", count: WorkerRequest.maxIDBytes + 1)
        #expect(throws: WorkerMessage.Invalid(id: nil, message: "id: expected at most 128 bytes as JSON text, found 129")) {
            try parse(#"{"id": "\#(long)", "prompt": "hi"}"#)
        }
        // 64 quotes are 64 bytes raw but 128 written; 65 are too many. 22 control characters are 132 written.
        _ = try parse(#"{"id": "\#(String(repeating: #"\""#, count: 64))", "prompt": "hi"}"#)
        #expect(throws: WorkerMessage.Invalid(id: nil, message: "id: expected at most 128 bytes as JSON text, found 130")) {
            try parse(#"{"id": "\#(String(repeating: #"\""#, count: 65))", "prompt": "hi"}"#)
        }
        #expect(throws: WorkerMessage.Invalid(id: nil, message: "id: expected at most 128 bytes as JSON text, found 132")) {
            try parse(#"{"id": "\#(String(repeating: #"\u0001"#, count: 22))", "prompt": "hi"}"#)
        }
        #expect(throws: WorkerMessage.Invalid(id: nil, message: "cancel: expected at most 128 bytes as JSON text, found 600")) {
            try parse(#"{"cancel": "\#(String(repeating: "a", count: 600))"}"#)
        }
        #expect(throws: WorkerMessage.Invalid.self) {
            try parse(#"{"id": "m", "prompt": "hi", "model": "/\#(String(repeating: "d", count: 300)).gguf"}"#)
        }
    }

    @Test func longErrorMessagesAreCutToTheLimit() throws {
        let message = "model: " + String(repeating: "é\"\u{01}", count: 400)
        for limit in [512, 777, 1000] {
            let line = WorkerResponse.error(id: String(repeating: "i", count: 128), message, limit: limit)
            #expect(line.utf8.count <= limit)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let error = try #require(object["error"] as? String)
            #expect(error.hasPrefix("model: é\"") && error.hasSuffix("…"))
        }
        #expect(WorkerResponse.error(id: nil, "short", limit: 512) == #"{"id":null,"ok":false,"error":"short"}"#)
    }

    @Test func nonStringOutputsAreChunkedAsTheirJSONText() throws {
        let vectors = JSONValue.array((0..<3).map { row in .array((0..<100).map { .float(Float($0) / 7 - Float(row)) }) })
        let lines = WorkerResponse.lines(id: "e", output: vectors, metadata: [], limit: 512)
        #expect(lines.count > 1)
        var text = ""
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            text += try #require(object["output"] as? String)
        }
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Double]])
        #expect(decoded.count == 3 && decoded[2].count == 100)
        #expect(Float(decoded[1][10]) == Float(10) / 7 - 1)
    }
}
