import ArgumentParser
import Ember
import Foundation

/// `ember generate`: text from SmolLM2 (or another Llama-family GGUF), streamed.
struct GenerateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Generate text from a GGUF model; the text streams to stdout as it is generated.")

    @Option(name: .shortAndLong, help: "A model name from models/manifest.json, or a GGUF path.")
    var model = "smollm2-135m-instruct"

    @Option(name: .short, help: "Tokens to generate at most.")
    var n = 64

    @Option(help: "0 is greedy.") var temperature: Float = 0
    @Option(name: .customLong("top-k")) var topK = 40
    @Option(name: .customLong("top-p")) var topP: Float = 0.95
    @Option(help: "Sampling seed.") var seed: UInt64 = 0

    @Option(help: "auto (the policy decides from the power state), fp32, int8 or int4.")
    var precision = "auto"

    @Option(help: "all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine.")
    var units = "all"

    @Flag(help: "Print one JSON object on one line instead of streaming.")
    var json = false

    @Argument(help: "The prompt (special tokens such as <|im_start|> are parsed).")
    var prompt: String

    struct Report: Encodable {
        var prompt_token_ids: [Int]
        var token_ids: [Int]
        var text: String
        var stop_reason: String
        var decision: [String: String]
        var timings: [String: Double]
    }

    func run() throws {
        let unitSets: [String: ComputeUnits] = ["all": .all, "cpuOnly": .cpuOnly, "cpuAndGPU": .cpuAndGPU, "cpuAndNeuralEngine": .cpuAndNeuralEngine]
        guard let ceiling = unitSets[units] else { throw ValidationError("--units \(units): expected all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine") }
        let forced: Precision?
        if precision == "auto" { forced = nil } else if let value = Precision(rawValue: precision) { forced = value } else {
            throw ValidationError("--precision \(precision): expected auto, fp32, int8 or int4")
        }
        let path: String
        if FileManager.default.fileExists(atPath: model) {
            path = model
        } else {
            let directory = URL(fileURLWithPath: "models", isDirectory: true)
            let manifest = try ModelManifest(contentsOf: directory.appendingPathComponent("manifest.json"))
            let entry = try manifest.model(named: model)
            path = ModelFetcher(manifest: manifest, modelsDirectory: directory).location(of: entry.files[0], in: entry).path
        }
        let loadStart = DispatchTime.now().uptimeNanoseconds
        let llama = try LlamaModel(file: GGUFFile(path: path))
        let loadMs = Double(DispatchTime.now().uptimeNanoseconds - loadStart) / 1e6
        // The policy decides for a critical request in the current power state; flags override it.
        let state = (try? SystemPower.source().current()) ?? .mains
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, precision: forced, computeUnits: ceiling),
                                            state: state, configuration: PolicyConfiguration(computeUnits: ceiling))
        // The file's own precision (int4 here) needs no derived copy.
        let nativePrecision: Precision? = decision.precision == .int4 ? nil : decision.precision
        let settings = SamplerSettings(temperature: temperature, topK: topK, topP: topP, seed: seed)
        let result = try llama.generate(prompt: prompt, maxTokens: n, sampler: settings, units: decision.computeUnits,
                                        precision: nativePrecision, onPiece: { piece in
            if !json {
                FileHandle.standardOutput.write(Data(piece.utf8))
            }
        })
        if json {
            let report = Report(
                prompt_token_ids: result.promptTokenIDs, token_ids: result.tokenIDs, text: result.text, stop_reason: result.stopReason,
                decision: ["precision": decision.precision.rawValue, "units": decision.computeUnits.description,
                           "qos": decision.qos.description, "threads": String(decision.threads)],
                timings: ["load_ms": loadMs,
                          "prefill_tokens_per_s": Double(result.promptTokenIDs.count) / max(result.prefillSeconds, 1e-9),
                          "decode_tokens_per_s": Double(max(0, result.tokenIDs.count - 1)) / max(result.decodeSeconds, 1e-9)])
            try printJSON(report, singleLine: true)
        } else {
            print()
            printError(String(format: "[%d prompt tokens at %.0f tok/s, %d generated at %.1f tok/s; %@ on %@]",
                              result.promptTokenIDs.count, Double(result.promptTokenIDs.count) / result.prefillSeconds,
                              result.tokenIDs.count, Double(max(0, result.tokenIDs.count - 1)) / max(result.decodeSeconds, 1e-9),
                              decision.precision.rawValue, decision.computeUnits.description))
        }
    }
}
