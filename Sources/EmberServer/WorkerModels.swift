import Ember
import Foundation

/// The models a server serves (the worker protocol's and the HTTP API's), loaded on first use (or at start) and
/// kept; every change of state is reported so clients can be told.
public actor WorkerModels {
    /// Where a model is.
    public enum State: Equatable, Sendable {
        /// Not asked for yet (or its load failed and may be tried again).
        case unloaded
        /// Being read and prepared.
        case loading
        /// Loaded and serving.
        case ready
        /// Its load failed, for this reason.
        case failed(String)

        /// "unloaded", "loading" or "ready", as clients see it.
        public var name: String {
            switch self {
            case .unloaded, .failed: "unloaded"
            case .loading: "loading"
            case .ready: "ready"
            }
        }
    }

    private enum Loaded {
        case language(any TextGenerator)
        case embedding(any Embedder)
    }

    private let runtime: Runtime
    /// The worker's default models: always listed in the status.
    private let defaults: [String]
    private let onChange: @Sendable (_ overall: String, _ models: [(String, String)]) -> Void
    private var loads: [String: Task<Loaded, Error>] = [:]
    private(set) var states: [String: State] = [:]
    /// The names in the order they were first asked for.
    private(set) var names: [String] = []

    /// Models of `runtime` by manifest name or path; `names` are always listed; `onChange` hears the overall state and
    /// each model's after every change.
    public init(runtime: Runtime, names: [String], onChange: @escaping @Sendable (String, [(String, String)]) -> Void) {
        self.runtime = runtime
        self.onChange = onChange
        self.names = names
        defaults = names
        for name in names { states[name] = .unloaded }
    }

    /// The language model `name`, loaded now if it is not yet; throws ``WorkerModelError`` for an embedding model.
    public func language(named name: String) async throws -> any TextGenerator {
        guard case let .language(model) = try await load(name, embedding: false) else {
            throw WorkerModelError(message: "model: \"\(name)\" is an embedding model; kind \"generate\" needs a language model")
        }
        return model
    }

    /// The embedding model `name`, loaded now if it is not yet; throws ``WorkerModelError`` for a language model.
    public func embedding(named name: String) async throws -> any Embedder {
        guard case let .embedding(model) = try await load(name, embedding: true) else {
            throw WorkerModelError(message: "model: \"\(name)\" is a language model; kind \"embed\" needs an embedding model")
        }
        return model
    }

    /// Starts loading `name` without waiting for it.
    public func preload(_ name: String, embedding: Bool) {
        Task { _ = try? await load(name, embedding: embedding) }
    }

    private func load(_ name: String, embedding: Bool) async throws -> Loaded {
        if let task = loads[name] { return try await task.value }
        let runtime = runtime
        // A name that is neither in the manifest nor a file is refused before it shows as "loading".
        let directory = runtime.configuration.modelsDirectory
        _ = embedding ? try ModelLocator.directory(for: name, modelsDirectory: directory)
                      : try ModelLocator.path(for: name, modelsDirectory: directory)
        let task = Task<Loaded, Error> {
            embedding ? .embedding(try await runtime.loadEmbeddingModel(named: name))
                      : .language(try await runtime.loadLanguageModel(named: name))
        }
        loads[name] = task
        if !names.contains(name) { names.append(name) }
        set(name, .loading)
        do {
            let model = try await task.value
            set(name, .ready)
            return model
        } catch {
            loads[name] = nil // a later request may try again (the file may have been fetched since)
            if defaults.contains(name) {
                set(name, .failed(String(describing: error)))
            } else { // a name that failed is not listed in the status
                names.removeAll { $0 == name }
                states[name] = nil
                onChange(overall, summary)
            }
            throw error
        }
    }

    private func set(_ name: String, _ state: State) {
        states[name] = state
        onChange(overall, summary)
    }

    /// `ready` when a model is ready and none is loading, `loading` while one
    /// loads, `unloaded` when none is loaded.
    public var overall: String {
        let values = states.values.map(\.name)
        if values.contains("loading") { return "loading" }
        return values.contains("ready") ? "ready" : "unloaded"
    }

    /// Each model's name and state name, in the order they were first asked for.
    public var summary: [(String, String)] { names.map { ($0, states[$0]?.name ?? "unloaded") } }
}

/// A model asked for under the wrong kind of request.
public struct WorkerModelError: Error, CustomStringConvertible {
    /// What was asked and what the model is.
    public let message: String
    /// The message.
    public var description: String { message }
}
