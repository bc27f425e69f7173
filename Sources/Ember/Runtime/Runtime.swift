import EmberCore
import EmberModels
import Foundation

/// Ember's one entry point for host applications: owns the ``ComputeContext``
/// (backends, threads, calibrated costs), loads models by name as
/// ``TextGenerator``s and ``Embedder``s, and runs every request through the
/// ``InferenceScheduler`` so the power policy picks precision, compute units,
/// QoS and threads — or defers or refuses the request — from its tier and the
/// device's state.
///
/// ```swift
/// let runtime = try Runtime(configuration: .init(computeUnits: .all, power: .system))
/// let llm = try await runtime.loadLanguageModel(named: "smollm2-135m-instruct")
/// for try await piece in runtime.generate(llm, prompt: "Hello", tier: .critical) { print(piece, terminator: "") }
/// let minilm = try await runtime.loadEmbeddingModel(named: "all-minilm-l6-v2")
/// let vectors = try await runtime.embed(minilm, ["a cat", "a kitten"], tier: .background)
/// ```
public final class Runtime: Sendable {
    /// The configuration the runtime was made with.
    public let configuration: Configuration
    /// What every model of this runtime computes with: backends, threads, costs, energy counter.
    public let context: ComputeContext
    /// The scheduler every request goes through (its metrics are the runtime's telemetry).
    public let scheduler: InferenceScheduler
    /// Where concurrent generations of one model decode together (``Configuration/continuousBatching``).
    public let batcher = ContinuousBatcher()
    /// The KV caches of finished generations that later prompts starting the same way restore instead of computing
    /// (``Configuration/promptCacheBytes``); nil when it is 0.
    public let promptCache: PromptCache?
    /// How long each model's replies turn out to be: what a generation is predicted at (see ``ReplyLengths``).
    public let replyLengths = ReplyLengths()
    /// The power source in use.
    public let powerSource: any PowerSource
    /// Why each plugin of ``Configuration/pluginPaths`` that could not be loaded was refused (the runtime works without it).
    public let pluginFailures: [String]
    /// Where the costs in force come from: "measured now", "cached (PATH)", or "defaults".
    public let calibrationSource: String
    private let injected: InjectedPowerSource?

    /// A runtime as `configuration` says: a compute context (or `context`, to share one between runtimes), its
    /// plugins loaded (a bad one is refused with a reason in ``pluginFailures``, not fatal), calibration run or read
    /// from its cache now — never inside a request — and power read from its source. Throws when `.system` power is
    /// given an override it cannot parse, and when the context cannot compute (``ComputeContext/startupError``).
    public init(configuration: Configuration = Configuration(), context: ComputeContext? = nil) throws {
        self.configuration = configuration
        let context = context ?? ComputeContext(configuration: configuration.compute)
        if let error = context.startupError { throw error } // before calibration runs a single BLAS call
        self.context = context
        var failures: [String] = []
        for path in configuration.pluginPaths {
            do { try context.loadPlugin(at: path) } catch { failures.append("\(error)") }
        }
        pluginFailures = failures
        switch configuration.calibration {
        case .defaults:
            calibrationSource = "defaults"
        case .measure:
            context.calibrate()
            calibrationSource = "measured now"
        case let .cached(url):
            if Calibration.readAll(from: url).contains(where: { context.adopt($0) }) {
                calibrationSource = "cached (\(url.path))"
            } else {
                context.calibrate()
                try? context.cacheableCalibration.store(in: url)
                calibrationSource = "measured now, cached in \(url.path)"
            }
        }
        switch configuration.power {
        case let .system(override):
            powerSource = try SystemPower.source(override: override)
            injected = nil
        case let .injected(state):
            let source = InjectedPowerSource(state)
            powerSource = source
            injected = source
        case let .source(source):
            powerSource = source
            injected = nil
        }
        var policy = configuration.policy
        policy.threads = min(policy.threads, context.maximumThreads)
        for qos in QoSClass.allCases {
            // Pinned workers: a class runs on as many threads as its cores.
            if let cores = context.pool.cores(for: qos) { policy.threadLimits[qos] = max(1, cores.count) }
        }
        let cacheBytes = min(configuration.promptCacheBytes, (configuration.memoryBudget ?? .max) / 4)
        let promptCache = cacheBytes > 0 ? PromptCache(capacityBytes: cacheBytes) : nil
        self.promptCache = promptCache
        scheduler = InferenceScheduler(source: powerSource, configuration: policy, memoryBudget: configuration.memoryBudget,
                                       releasableMemory: promptCache.map { cache in
                                           ReleasableMemory(held: { cache.bytes }, release: { cache.release(atLeast: $0) })
                                       },
                                       costs: CostModel(units: UnitCostTable(context: context)))
    }

    /// The costs a decision made now is predicted from: this machine's calibration and the loaded models' quality
    /// (without what the scheduler has learned from requests; ``InferenceScheduler/costs`` has that).
    public var costModel: CostModel {
        CostModel(units: UnitCostTable(context: context), qualities: scheduler.qualities.all)
    }

    /// The policy's decision for `request` in power `state` (the source's current one when omitted), from
    /// ``costModel``.
    public func decide(_ request: RequestRequirements, state: PowerState? = nil) -> Decision {
        BackendPolicy.decide(request: request, state: state ?? powerSource.current(), configuration: scheduler.configuration, costs: costModel)
    }

    /// Sets the power state; only for a runtime configured with `.injected`.
    public func setPowerState(_ state: PowerState) throws {
        guard let injected else {
            throw KernelError.invalidArgument(argument: "power", found: "a runtime reading its own power source",
                                              expected: "Configuration.power = .injected(…) to set the state")
        }
        injected.set(state)
    }

    // MARK: Models

    /// Loads a GGUF text model by manifest name or path (off the cooperative pool) as the family its file names,
    /// ready for ``generate(_:prompt:maxTokens:tier:sampler:)``.
    public func loadLanguageModel(named name: String) async throws -> any TextGenerator {
        try await QoSThread.value(qos: .current) { try self.languageModel(named: name) }
    }

    /// Loads a sentence-embedding model by manifest name or folder, ready for ``embed(_:_:tier:)``.
    public func loadEmbeddingModel(named name: String) async throws -> any Embedder {
        try await QoSThread.value(qos: .current) { try self.embeddingModel(named: name) }
    }

    /// ``loadLanguageModel(named:)`` on the calling thread (for hosts that are not async).
    public func languageModel(named name: String) throws -> any TextGenerator {
        let model = try configuration.architectures.loadTextGenerator(
            path: try ModelLocator.path(for: name, modelsDirectory: configuration.modelsDirectory), context: context)
        recordQuality(of: model.path) { try QualityProbe.measure(model, threads: self.context.maximumThreads) }
        return model
    }

    /// ``loadEmbeddingModel(named:)`` on the calling thread (for hosts that are not async).
    public func embeddingModel(named name: String) throws -> any Embedder {
        let model = try configuration.architectures.loadEmbedder(
            directory: try ModelLocator.directory(for: name, modelsDirectory: configuration.modelsDirectory), context: context)
        recordQuality(of: model.path) { try QualityProbe.measure(model, threads: self.context.maximumThreads) }
        return model
    }

    /// The quality profile of the model at `path` for the policy: from the cache beside the calibration when it
    /// holds this file on this ISA, else measured now (and cached); none with `.defaults` calibration (the
    /// unmeasured default applies). A measurement that fails leaves the default, and says why in the context's log.
    private func recordQuality(of path: String, measure: () throws -> QualityProfile) {
        let cache: QualityCache?
        switch configuration.calibration {
        case .defaults: return
        case .measure: cache = nil
        case let .cached(url): cache = QualityCache(url: url.deletingLastPathComponent().appendingPathComponent("quality.json"))
        }
        let key = QualityProbe.key(path: path, isa: context.isa.rawValue)
        if let key, let cached = cache?.profile(for: key) {
            scheduler.qualities.set(cached, for: path)
            return
        }
        do {
            let profile = try measure()
            scheduler.qualities.set(profile, for: path)
            if let key { try? cache?.store(profile, for: key) }
        } catch {
            context.configuration.log("the quality of \(path) at int8 and int4 could not be measured (\(error)); "
                                      + "its requests are decided with the default losses")
        }
    }

    /// Loads a backend plugin (a shared library exporting `ember_plugin_entry`, see
    /// `CKernels/include/ember_plugin.h`) into this runtime's context: its backends are checked against the scalar
    /// reference, measured, and take ops from the next pass (models rebind their plans when the backends change). A bad
    /// library throws a ``PluginError`` naming the field and nothing is registered.
    @discardableResult
    public func loadPlugin(at path: String) throws -> LoadedPlugin {
        let plugin = try context.loadPlugin(at: path)
        let units = UnitCostTable(context: context)
        let scheduler = scheduler
        Task { await scheduler.updateUnitCosts(units) }
        return plugin
    }

    // MARK: Requests

    /// Generates from `prompt` as a request of `tier`; text pieces stream as
    /// they are decoded. Ending the iteration early cancels the request. Below
    /// the critical tier each token is a checkpoint where critical work passes.
    public func generate(_ model: any TextGenerator, prompt: String, maxTokens: Int = 256, tier: Tier = .critical,
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
    /// range or an output format whose schema Ember cannot enforce, see ``SamplerSettings/validate()``) throw before the
    /// request reaches the scheduler.
    /// `requirements` carries a request's own needs (a precision, units within the ceiling); its tier is `tier`.
    /// The text ends at the first of the `stop` strings (stop reason "stop"); a request the policy defers past
    /// `deadline` is dropped (``SchedulerError/dropped(reason:)``).
    public func generateText(_ model: any TextGenerator, prompt: String, maxTokens: Int = 256, tier: Tier = .critical,
                             sampler: SamplerSettings = SamplerSettings(), requirements: RequestRequirements? = nil,
                             stop: [String] = [], deadline: Date? = nil,
                             onPiece: @escaping @Sendable (String) -> Void = { _ in },
                             onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> Completion<Generation> {
        try await generateText(model, from: .text(prompt), maxTokens: maxTokens, tier: tier, sampler: sampler,
                               requirements: requirements, stop: stop, deadline: deadline, onPiece: onPiece, onDeferred: onDeferred)
    }

    /// ``generateText(_:prompt:maxTokens:tier:sampler:requirements:stop:deadline:onPiece:onDeferred:)`` from text or from
    /// token ids (each checked to be in the model's vocabulary). When `sampler` asks for log-probabilities, `onLogprobs`
    /// gets those of the tokens each piece completes, on the same thread just before `onPiece` gets the piece — what a
    /// stream sends with each chunk (the whole list is ``Generation/logprobs`` either way). `onStart` gets the decision
    /// the run starts under, once, on the run's task before its first piece (never for a request dropped or cancelled
    /// before it runs) — what a stream names in each chunk before the run has ended.
    public func generateText(_ model: any TextGenerator, from prompt: PromptInput, maxTokens: Int = 256, tier: Tier = .critical,
                             sampler: SamplerSettings = SamplerSettings(), requirements: RequestRequirements? = nil,
                             stop: [String] = [], deadline: Date? = nil,
                             onPiece: @escaping @Sendable (String) -> Void = { _ in },
                             onLogprobs: (@Sendable ([TokenLogprobs]) -> Void)? = nil,
                             onDeferred: (@Sendable (String) -> Void)? = nil,
                             onStart: (@Sendable (Decision) -> Void)? = nil) async throws -> Completion<Generation> {
        guard maxTokens >= 1 else { throw KernelError.invalidArgument(argument: "maxTokens", found: "\(maxTokens)", expected: "at least 1") }
        try sampler.validate()
        var needs = requirements ?? RequestRequirements(tier: tier)
        needs.tier = tier
        let request = generationRequest(model, prompt: prompt, maxTokens: maxTokens, requirements: needs, sampler: sampler,
                                        stop: stop, deadline: deadline, onLogprobs: onLogprobs, onStart: onStart)
        await synchronizePowerState()
        let result = try await scheduler.submit(request, tier: tier, onPiece: onPiece, onDeferred: onDeferred)
        guard let generation = result.output as? Generation else {
            throw KernelError.invalidArgument(argument: "result", found: "\(type(of: result.output))", expected: "Generation")
        }
        return Completion(result, output: generation)
    }

    /// Embeddings of `texts` as a request of `tier` (batched with concurrent calls); one L2-normalised vector per text.
    public func embed(_ model: any Embedder, _ texts: [String], tier: Tier = .standard) async throws -> [[Float]] {
        guard !texts.isEmpty else { return [] }
        return try await embedding(model, texts, tier: tier).output
    }

    /// Like ``embed(_:_:tier:)``, with the decision the request ran under and what it cost;
    /// `onDeferred` hears the policy's reason if the request has to wait for a better power state; one still
    /// deferred at `deadline` is dropped.
    public func embedding(_ model: any Embedder, _ texts: [String], tier: Tier = .standard, requirements: RequestRequirements? = nil,
                          deadline: Date? = nil, onDeferred: (@Sendable (String) -> Void)? = nil) async throws -> Completion<[[Float]]> {
        await synchronizePowerState()
        let request = embeddingRequest(model, texts, tier: tier, requirements: requirements, deadline: deadline)
        let result = try await scheduler.submit(request, tier: tier, onPiece: nil, onDeferred: onDeferred)
        return Completion(result, output: try Self.embeddings(in: result))
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
