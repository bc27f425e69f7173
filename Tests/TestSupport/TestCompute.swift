import Ember
import Foundation

/// The compute context the tests share (tests may hold a global; the library may not), with the kernel ISA
/// `EMBER_ISA` forces when set — so `EMBER_ISA=avx2 swift test` runs the AVX2 path on any machine.
public enum TestCompute {
    /// One context for every test that needs one but does not test contexts themselves.
    public static let context = ComputeContext(configuration: .init(isaOverride: ProcessInfo.processInfo.environment["EMBER_ISA"]))

    /// The kernel family the tests' context runs.
    public static var isa: KernelISA { context.isa }

    /// The models fetched by `make models`, at the repository root.
    public static let models = ExternalProcess.repositoryRoot.appendingPathComponent("models")

    /// A text generator from the GGUF file at `path`, in the tests' context.
    public static func textGenerator(path: String) throws -> any TextGenerator {
        try ArchitectureRegistry.standard.loadTextGenerator(path: path, context: context)
    }

    /// A fetched model by manifest name, in the tests' context.
    public static func textGenerator(named name: String) throws -> any TextGenerator {
        try textGenerator(path: try ModelLocator.path(for: name, modelsDirectory: models))
    }

    /// A fetched embedding model by manifest name, in the tests' context.
    public static func embedder(named name: String) throws -> any Embedder {
        try ArchitectureRegistry.standard.loadEmbedder(directory: try ModelLocator.directory(for: name, modelsDirectory: models), context: context)
    }
}

extension TextGenerator {
    /// `forward` with the options spelled out (test sugar).
    public func forward(_ tokens: [Int], session: any GenerationSession, units: ComputeUnits = .cpuAndNeuralEngine,
                        precision: Precision? = nil, allLogits: Bool = false, threads: Int = KernelThreads.default) throws -> Tensor {
        try forward(tokens, session: session, options: ExecutionOptions(units: units, precision: precision, threads: threads), allLogits: allLogits)
    }
}

extension TextGenerator {
    /// `generate` with the options spelled out (test sugar).
    public func generate(prompt: String, maxTokens: Int, sampler: SamplerSettings = SamplerSettings(),
                         units: ComputeUnits = .cpuAndNeuralEngine, precision: Precision? = nil,
                         onPiece: (String) -> Void = { _ in }, betweenTokens: () throws -> Void = {}) throws -> Generation {
        try generate(prompt: prompt, maxTokens: maxTokens, sampler: sampler, options: ExecutionOptions(units: units, precision: precision),
                     onPiece: onPiece, betweenTokens: betweenTokens)
    }

    /// `generateGreedy` with the options spelled out (test sugar).
    public func generateGreedy(prompt: [Int], maxTokens: Int, units: ComputeUnits = .cpuAndNeuralEngine,
                               precision: Precision? = nil) throws -> [Int] {
        try generateGreedy(prompt: prompt, maxTokens: maxTokens, options: ExecutionOptions(units: units, precision: precision))
    }
}

extension ChatSession {
    /// A session running at `precision` on the neural-engine route (test sugar).
    public convenience init(model: any TextGenerator, template: ChatTemplate, system: String? = nil, contextLength: Int = 4096,
                            sampler: SamplerSettings = SamplerSettings(), precision: Precision?) {
        self.init(model: model, template: template, system: system, contextLength: contextLength, sampler: sampler,
                  options: ExecutionOptions(units: .cpuAndNeuralEngine, precision: precision))
    }
}

extension Embedder {
    /// `embed` with the options spelled out (test sugar).
    public func embed(_ texts: [String], units: ComputeUnits = .cpuAndGPU, precision: Precision? = nil,
                      threads: Int = KernelThreads.default) throws -> EmbeddingBatch {
        try embed(texts, options: ExecutionOptions(units: units, precision: precision, threads: threads))
    }
}

extension Runtime.Configuration.CalibrationMode {
    /// The calibration and the models' quality kept in one folder per test process: the first runtime that asks
    /// measures them (as `.measure` does), the others read them as the CLI reads its cache (1–3 s a runtime each
    /// otherwise, the quality probe run again at every model load). The folder goes when the process exits.
    public static let sharedForTests = Self.cached(ProcessTemporaryFolder.named("ember-tests-cache")
        .appendingPathComponent("calibration.json"))
}

extension Runtime {
    /// A runtime for tests: power from `source` (a fake, fixed or scripted), default costs (no calibration run),
    /// the tests' compute context, models from the repository's `models/`.
    public static func forTests(power: Configuration.Power = .injected(.mains)) throws -> Runtime {
        try Runtime(configuration: Configuration(power: power, modelsDirectory: TestCompute.models, calibration: .defaults),
                    context: TestCompute.context)
    }
}

extension CostModel {
    /// The reference machine's costs with a quality that grades the budgets apart — fp16 +0.6 %, int8 +1 %, int4
    /// +3 % — so the policy picks fp32 on mains (budget 0.5 %), int8 on battery (2 %) and int4 on low battery (5 %):
    /// tests of the scheduler's mechanics see which budget was in force in the precision.
    public static var gradedForTests: CostModel {
        var costs = CostModel.reference
        costs.defaultQuality = QualityProfile(metric: "perplexity", loss: [.fp16: 0.006, .int8: 0.01, .int4: 0.03], reference: 10,
                                              source: "test")
        return costs
    }
}
