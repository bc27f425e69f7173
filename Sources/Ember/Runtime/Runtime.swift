import Foundation

/// Ember's one entry point for host applications: loads models, and runs
/// every request through the ``InferenceScheduler`` so the power policy picks
/// precision, compute units, QoS and threads — or defers or refuses the
/// request — from its tier and the device's state.
///
/// ```swift
/// let runtime = try Runtime(configuration: .init(computeUnits: .all, power: .system))
/// let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
/// for try await piece in runtime.generate(llm, prompt: "Hello", tier: .critical) { print(piece, terminator: "") }
/// let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
/// let vectors = try await runtime.embed(minilm, ["a cat", "a kitten"], tier: .background)
/// ```
public final class Runtime: Sendable {
    /// How a runtime is set up.
    public struct Configuration: Sendable {
        /// Where the power state comes from.
        public enum Power: Sendable {
            /// The operating system (Linux sysfs, `ProcessInfo` on Darwin), or `EMBER_POWER` when set.
            case system
            /// A state the host sets with ``Runtime/setPowerState(_:)`` (starting from this one).
            case injected(PowerState)
            /// Any other source (a scripted timeline, say).
            case source(any PowerSource)
        }

        /// The units Ember may use at most (Core ML's `MLComputeUnits`): the policy's ceiling.
        public var computeUnits: ComputeUnits {
            get { policy.computeUnits }
            set { policy.computeUnits = newValue }
        }
        /// Where the power state comes from; default `.system`.
        public var power: Power
        /// Where ``Runtime/loadLanguageModel(named:)`` looks for models by name (`models/` unless `EMBER_MODELS_DIR`).
        public var modelsDirectory: URL
        /// The policy's thresholds and budgets.
        public var policy: PolicyConfiguration

        /// A configuration: the default policy table unless `policy` is given; `computeUnits`,
        /// when given, sets the ceiling (else the policy's own, `.all` by default).
        public init(computeUnits: ComputeUnits? = nil, power: Power = .system,
                    modelsDirectory: URL = ModelLocator.modelsDirectory, policy: PolicyConfiguration? = nil) {
            self.power = power
            self.modelsDirectory = modelsDirectory
            self.policy = policy ?? PolicyConfiguration(computeUnits: computeUnits ?? .all)
            if let computeUnits { self.policy.computeUnits = computeUnits }
        }
    }

    /// The configuration the runtime was made with.
    public let configuration: Configuration
    /// The scheduler every request goes through (its metrics are the runtime's telemetry).
    public let scheduler: InferenceScheduler
    /// The power source in use.
    public let powerSource: any PowerSource
    private let injected: InjectedPowerSource?

    /// A runtime reading power from `configuration.power`; throws when `.system` finds an `EMBER_POWER` value it cannot parse.
    public init(configuration: Configuration = Configuration()) throws {
        self.configuration = configuration
        switch configuration.power {
        case .system:
            powerSource = try SystemPower.source()
            injected = nil
        case let .injected(state):
            let source = InjectedPowerSource(state)
            powerSource = source
            injected = source
        case let .source(source):
            powerSource = source
            injected = nil
        }
        scheduler = InferenceScheduler(source: powerSource, configuration: configuration.policy)
        _ = WorkerPool.shared // OpenBLAS to one thread, its idle pool stopped, before any model loads
    }

    /// Sets the power state; only for a runtime configured with `.injected`.
    public func setPowerState(_ state: PowerState) throws {
        guard let injected else {
            throw KernelError.invalidArgument(argument: "power", found: "a runtime reading its own power source",
                                              expected: "Configuration.power = .injected(…) to set the state")
        }
        injected.set(state)
    }

    /// Loads a GGUF text model by manifest name or path (off the cooperative pool), ready for ``generate(_:prompt:maxTokens:tier:sampler:)``.
    public func loadLanguageModel(named name: String) async throws -> LlamaModel {
        let directory = configuration.modelsDirectory
        return try await QoSThread.value(qos: .current) {
            try LlamaModel(file: GGUFFile(path: try ModelLocator.path(for: name, modelsDirectory: directory)))
        }
    }

    /// Loads a sentence-transformers model by manifest name or folder, ready for ``embed(_:_:tier:)``.
    public func loadEmbeddingModel(named name: String) async throws -> BertModel {
        let directory = configuration.modelsDirectory
        return try await QoSThread.value(qos: .current) {
            try BertModel(directory: try ModelLocator.directory(for: name, modelsDirectory: directory))
        }
    }

    /// Generates from `prompt` as a request of `tier`; text pieces stream as
    /// they are decoded. Ending the iteration early cancels the request. Below
    /// the critical tier each token is a checkpoint where critical work passes.
    public func generate(_ model: LlamaModel, prompt: String, maxTokens: Int = 256, tier: Tier = .critical,
                         sampler: SamplerSettings = SamplerSettings()) -> AsyncThrowingStream<String, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    _ = try await self.generateText(model, prompt: prompt, maxTokens: maxTokens, tier: tier, sampler: sampler) {
                        continuation.yield($0)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Generates from `prompt` as a request of `tier` and returns the whole
    /// ``Generation`` with the decision it ran under; `onPiece` sees each text
    /// piece as it is decoded; `onDeferred` hears the policy's reason if the
    /// request has to wait for a better power state. Cancelling the calling
    /// task stops the generation within a token. Bad arguments (`maxTokens` below 1, sampler settings out of
    /// range, see ``SamplerSettings/validate()``) throw before the request reaches the scheduler.
    public func generateText(_ model: LlamaModel, prompt: String, maxTokens: Int = 256, tier: Tier = .critical,
                             sampler: SamplerSettings = SamplerSettings(),
                             onPiece: @escaping @Sendable (String) -> Void = { _ in },
                             onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> Completion<Generation> {
        guard maxTokens >= 1 else { throw KernelError.invalidArgument(argument: "maxTokens", found: "\(maxTokens)", expected: "at least 1") }
        try sampler.validate()
        let request = generationRequest(model, prompt: prompt, maxTokens: maxTokens, tier: tier, sampler: sampler)
        await synchronizePowerState()
        let result = try await scheduler.submit(request, tier: tier, onPiece: onPiece, onDeferred: onDeferred)
        guard let generation = result.output as? Generation else {
            throw KernelError.invalidArgument(argument: "result", found: "\(type(of: result.output))", expected: "Generation")
        }
        return Completion(result, output: generation)
    }

    private func generationRequest(_ model: LlamaModel, prompt: String, maxTokens: Int, tier: Tier,
                                   sampler: SamplerSettings) -> InferenceRequest {
        InferenceRequest(requirements: RequestRequirements(tier: tier)) { decision, context in
            await context.checkpoint()
            let cancelled = CancellationFlag()
            let result = try await withTaskCancellationHandler {
                try await QoSThread.value(qos: context.qos) {
                    // Every token: stop if the caller went away; below critical, a checkpoint
                    // where critical work on the route goes first.
                    let checkpoint: () throws -> Void = {
                        if cancelled.isSet { throw CancellationError() }
                        guard tier != .critical else { return }
                        let done = DispatchSemaphore(value: 0)
                        Task { await context.checkpoint(); done.signal() }
                        done.wait()
                    }
                    return try model.generate(prompt: prompt, maxTokens: maxTokens, sampler: sampler, units: decision.computeUnits,
                                              precision: decision.precision, threads: decision.threads, qos: context.qos,
                                              onPiece: { context.emit($0) }, betweenTokens: checkpoint)
                }
            } onCancel: {
                cancelled.set()
            }
            context.report(energy: result.energy)
            return result
        }
    }

    /// Embeddings of `texts` as a request of `tier` (batched with concurrent calls); one L2-normalised vector per text.
    public func embed(_ model: BertModel, _ texts: [String], tier: Tier = .standard) async throws -> [[Float]] {
        guard !texts.isEmpty else { return [] }
        return try await embedding(model, texts, tier: tier).output
    }

    /// Like ``embed(_:_:tier:)``, with the decision the request ran under and what it cost;
    /// `onDeferred` hears the policy's reason if the request has to wait for a better power state.
    public func embedding(_ model: BertModel, _ texts: [String], tier: Tier = .standard,
                          onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> Completion<[[Float]]> {
        await synchronizePowerState()
        let result = try await scheduler.submit(model.embeddingRequest(texts, tier: tier), tier: tier, onPiece: nil, onDeferred: onDeferred)
        return Completion(result, output: try BertModel.embeddings(in: result))
    }

    /// Hands the scheduler the injected state now, so a request submitted right after
    /// ``setPowerState(_:)`` is decided under that state (the change stream may not have arrived yet).
    /// Other sources change on their own clock and reach the scheduler through their change stream;
    /// reading them here would put OS reads (sysfs) on every request.
    private func synchronizePowerState() async {
        guard let injected else { return }
        let now = injected.current()
        if await !scheduler.powerState.sameConditions(as: now) { await scheduler.powerChanged(now) }
    }
}

/// A flag one thread sets and another polls.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
