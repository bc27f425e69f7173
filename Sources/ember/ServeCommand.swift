import ArgumentParser
import Ember
import EmberHTTP
import EmberServer
import Foundation

/// `ember serve`: Ember as a worker process speaking JSON lines
/// (docs/PROTOCOL.md) on a Unix domain socket or on stdin/stdout, or the OpenAI HTTP API (docs/HTTP.md).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the OpenAI HTTP API (--http), or JSON lines on a Unix socket or stdin/stdout (see docs/PROTOCOL.md).")

    @Option(help: ArgumentHelp("Serve the OpenAI HTTP API at HOST:PORT (e.g. 127.0.0.1:8080; PORT alone means 127.0.0.1).",
                               valueName: "host:port"))
    var http: String?

    @Option(parsing: .unconditional, help: "Bodies longer than this many bytes get 413 (--http).")
    var maxBodyBytes = 4 << 20

    @Option(help: "Listen on a Unix domain socket at this path (many clients).")
    var socket: String?

    @Flag(help: "Serve one client on stdin/stdout; exits when stdin ends and every request has answered.")
    var stdio = false

    @Option(help: "A language model to serve, by name or path (repeat for more; the first is the default). Default: smollm2-135m-instruct.")
    var model: [String] = []

    @Option(help: "An embedding model to serve, by name or folder (repeat for more over HTTP; the first is the default). Default: all-minilm-l6-v2.")
    var embeddingModel: [String] = []

    private var languageModels: [String] { model.isEmpty ? ["smollm2-135m-instruct"] : model }
    private var embeddingModels: [String] { embeddingModel.isEmpty ? ["all-minilm-l6-v2"] : embeddingModel }

    @Flag(help: "Refuse work while the device is not on external power (clients may change it per connection).")
    var runOnlyWhileCharging = false

    @Option(parsing: .unconditional, help: "Longest request line accepted, in bytes (at least 256).")
    var maxLineBytes = 1 << 20

    /// The flag of each ``WorkerServer/Configuration`` setting the worker may refuse (it names its own fields).
    static let settingFlags = [
        "maxLineBytes": "--max-line-bytes", "chunkBytes": "--chunk-bytes", "maxConnections": "--max-connections",
        "maxRequestsPerConnection": "--max-requests-per-connection", "maxQueuedBytesPerConnection": "--max-queued-bytes",
    ]

    @Option(parsing: .unconditional, help: "Responses longer than this are sent as chunks of at most this many bytes (at least 512); error lines are cut to fit.")
    var chunkBytes = 512

    @Option(parsing: .unconditional, help: "Clients connected at once at most (a socket server); one more is told so and disconnected.")
    var maxConnections = 256

    @Option(parsing: .unconditional, help: "Requests running at once per connection at most; one more is refused.")
    var maxRequestsPerConnection = 64

    @Option(parsing: .unconditional, help: "Bytes of answers queued for one client at most (at least 65536); a client reading slower is disconnected.")
    var maxQueuedBytes = 16 << 20

    @Option(parsing: .unconditional, help: "Megabytes of KV caches and buffers the running requests may need together, with the models' weight copies (other precisions, kernel layouts) (default: a quarter of the machine's memory, or half of a lower cgroup limit); requests beyond it wait, one bigger than all of it is refused.")
    var memoryBudget: Int?

    @Option(parsing: .unconditional, help: "Megabytes of finished generations' KV caches kept so that a prompt starting as an earlier one did (the next turn of a conversation, a shared system prompt) computes only the rest (default 256, at most a quarter of the budget, which counts it); 0 keeps none.")
    var promptCache: Int?

    @Option(help: "all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine: the most the policy may use.")
    var units = "all"

    @Option(help: "native (the weights as stored), auto (the policy's choice, the default), \(Precision.names): every request's precision.")
    var precision = "auto"

    @Option(parsing: .unconditional, help: "Compute threads per request (default: the policy's choice, at most the cores).")
    var threads: Int?

    @Option(help: "A scripted power timeline (JSON steps) instead of the OS's power state — for demos and tests.")
    var powerTimeline: String?

    @Flag(help: "Load models at their first request instead of at start.")
    var noPreload = false

    func validate() throws {
        guard [socket != nil, stdio, http != nil].filter({ $0 }).count == 1 else {
            throw ValidationError("give exactly one of --http HOST:PORT, --socket PATH and --stdio")
        }
        if let http { _ = try Self.address(http) }
        if maxBodyBytes < 1024 { throw ValidationError("--max-body-bytes \(maxBodyBytes): expected at least 1024") }
        if http == nil, model.count > 1 || embeddingModel.count > 1 {
            throw ValidationError("--model and --embedding-model are given once for --socket and --stdio (requests name other models themselves); repeat them with --http")
        }
        if let memoryBudget, memoryBudget < 1 || memoryBudget > 1 << 30 {
            throw ValidationError("--memory-budget \(memoryBudget): expected megabytes from 1 to \(1 << 30)")
        }
        if let promptCache, promptCache < 0 || promptCache > 1 << 30 {
            throw ValidationError("--prompt-cache \(promptCache): expected megabytes from 0 (none) to \(1 << 30)")
        }
        guard ["native", "auto"].contains(precision) || Precision(rawValue: precision) != nil else {
            throw ValidationError("--precision \(precision): expected native, auto, \(Precision.names)")
        }
        if let threads, !(1...ProcessInfo.processInfo.activeProcessorCount).contains(threads) {
            throw ValidationError("--threads \(threads): expected 1 to \(ProcessInfo.processInfo.activeProcessorCount) (the cores)")
        }
        guard DecisionOptions.unitSets[units] != nil else {
            throw ValidationError("--units \(units): expected all, cpuOnly, cpuAndGPU or cpuAndNeuralEngine")
        }
        do { try workerLimits.validate() } catch WorkerServer.ServeError.invalidSetting(let field, let found, let expected) {
            throw FlagError.refused(Self.settingFlags[field] ?? field, found: found, expected: expected)
        }
    }

    /// The worker's limits as given (the HTTP server takes the connection and request limits too), checked by `validate()`
    /// before anything is fetched or loaded.
    private var workerLimits: WorkerServer.Configuration {
        var settings = WorkerServer.Configuration()
        settings.maxLineBytes = maxLineBytes
        settings.chunkBytes = chunkBytes
        settings.maxConnections = maxConnections
        settings.maxRequestsPerConnection = maxRequestsPerConnection
        settings.maxQueuedBytesPerConnection = maxQueuedBytes
        return settings
    }

    func run() async throws {
        // A model the manifest lists and that is not fetched yet is fetched now (first use); a misspelt one, or one
        // that cannot be fetched, is a configuration error: refuse to start rather than answer every request with it.
        var configuration = CommandEnvironment.configuration(units: DecisionOptions.unitSets[units] ?? .all, threads: threads)
        let directory = configuration.modelsDirectory
        for name in languageModels {
            do {
                try FirstUseFetch.ensure(name)
                _ = try ModelLocator.path(for: name, modelsDirectory: directory)
            } catch { throw ValidationError("--model \(name): \(error)") }
        }
        for name in embeddingModels {
            do {
                try FirstUseFetch.ensure(name)
                _ = try ModelLocator.directory(for: name, modelsDirectory: directory)
            } catch {
                throw ValidationError("--embedding-model \(name): \(error)")
            }
        }
        if let memoryBudget { configuration.memoryBudget = memoryBudget * 1_000_000 }
        if let promptCache { configuration.promptCacheBytes = promptCache * 1_000_000 }
        if let powerTimeline {
            configuration.power = .source(try ScriptedPowerTimeline(contentsOf: URL(fileURLWithPath: powerTimeline)))
        }
        let runtime = try CommandEnvironment.makeRuntime(configuration)
        for failure in runtime.pluginFailures { printError("warning: plugin refused: \(failure)") }
        printError("ember serve: working-memory budget "
            + (configuration.memoryBudget.map { "\($0 / 1_000_000) MB" } ?? "none")
            + (memoryBudget == nil ? " (default; \(MemoryLimit.current()))" : " (--memory-budget)")
            + ", prompt cache " + (runtime.promptCache.map { "\($0.capacityBytes / 1_000_000) MB" } ?? "off"))
        if let http {
            try await serveHTTP(runtime: runtime, address: try Self.address(http))
            return
        }
        var settings = workerLimits
        settings.requirements = requirements
        settings.languageModel = languageModels[0]
        settings.embeddingModel = embeddingModels[0]
        settings.preload = !noPreload
        settings.runOnlyWhileCharging = runOnlyWhileCharging
        let server = try WorkerServer(runtime: runtime, configuration: settings)
        if stdio {
            await server.serveStandardIO()
            return
        }
        try server.listen(socketPath: socket ?? "")
        // Until SIGINT or SIGTERM: then stop listening, remove the socket, cancel what runs.
        let stopped = AsyncStream<Int32> { continuation in
            for signal in [SIGINT, SIGTERM] {
                Foundation.signal(signal, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signal)
                source.setEventHandler { continuation.yield(signal) }
                source.resume()
                SignalSources.keep(source)
            }
        }
        for await signal in stopped {
            printError("ember serve: signal \(signal): stopping")
            server.stop()
            break
        }
    }
}

extension ServeCommand {
    /// What `--precision` asks of every request (nothing for auto).
    var requirements: RequestRequirements {
        RequestRequirements(tier: .standard, precision: Precision(rawValue: precision), storedWeights: precision == "native")
    }

    /// HOST:PORT, :PORT or PORT (host 127.0.0.1), the port from 0 (any free one) to 65535.
    static func address(_ text: String) throws -> (host: String, port: Int) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        let host = parts.count > 1 ? parts.dropLast().joined(separator: ":") : ""
        guard let port = Int(parts.last ?? ""), (0...65_535).contains(port), parts.count <= 2 || host.hasPrefix("[") else {
            throw ValidationError("--http \(text): expected HOST:PORT such as 127.0.0.1:8080 (or a port from 0 to 65535 alone)")
        }
        return (host.isEmpty ? "127.0.0.1" : host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }

    /// The OpenAI HTTP API until SIGINT or SIGTERM.
    func serveHTTP(runtime: Runtime, address: (host: String, port: Int)) async throws {
        var settings = OpenAIServer.Configuration()
        settings.requirements = requirements
        settings.host = address.host
        settings.port = address.port
        settings.languageModels = languageModels
        settings.embeddingModels = embeddingModels
        settings.maxBodyBytes = maxBodyBytes
        settings.maxConnections = maxConnections
        settings.maxRequestsInFlight = maxConnections
        let server = OpenAIServer(runtime: runtime, configuration: settings)
        if !noPreload { await server.preload() }
        try await server.run()
    }
}

/// Keeps signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    static func keep(_ source: DispatchSourceSignal) { sources.append(source) }
}
