import Ember
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ember as a worker process: JSON lines over a Unix domain socket (many
/// clients) or stdin/stdout (one). The protocol is in docs/PROTOCOL.md:
/// requests `{"id", "prompt", "maxTokens", "tier"?, "model"?, "kind"?, "input"?, "stream"?}`,
/// responses `{"id", "ok", "output", "durationMs", "decision", …}` (chunked
/// above ``Configuration/chunkBytes``), errors `{"id" or null, "ok": false, "error"}`,
/// and status `{"modelState", "batteryPct", "charging", "lowPower", "thermal", …}`
/// pushed on connect and on every change. A bad line gets an error and the
/// connection goes on; a client that leaves has its requests cancelled; other
/// clients never notice.
public final class WorkerServer: @unchecked Sendable {
    /// How a worker behaves.
    public struct Configuration: Sendable {
        /// Throws ``ServeError/invalidSetting(field:found:expected:)`` naming the first limit out of range:
        /// `chunkBytes` below 512, `maxLineBytes` below 256, a connection or request limit below 1, or the queue limit
        /// below 64 KiB.
        public func validate() throws {
            // 512: the last chunk carries the metadata (~330 bytes) besides an id of up to 128 bytes.
            for (field, value, least) in [("chunkBytes", chunkBytes, 512), ("maxLineBytes", maxLineBytes, 256),
                                          ("maxConnections", maxConnections, 1),
                                          ("maxRequestsPerConnection", maxRequestsPerConnection, 1),
                                          ("maxQueuedBytesPerConnection", maxQueuedBytesPerConnection, 64 << 10)] where value < least {
                throw ServeError.invalidSetting(field: field, found: "\(value)", expected: "at least \(least)")
            }
        }

        /// The model for `"kind": "generate"` requests without `model`.
        public var languageModel = "smollm2-135m-instruct"
        /// The model for `"kind": "embed"` requests without `model`.
        public var embeddingModel = "all-minilm-l6-v2"
        /// Load both default models at start instead of at the first request.
        public var preload = true
        /// What every request needs besides its tier: a precision, or the weights as stored (`ember serve
        /// --precision`); by default none, the policy chooses.
        public var requirements = RequestRequirements(tier: .standard)
        /// Refuse work (with a status message) while the device is not on external power;
        /// each connection may change it with `{"runOnlyWhileCharging": bool}`.
        public var runOnlyWhileCharging = false
        /// Longer request lines are refused (and skipped) with an error.
        public var maxLineBytes = 1 << 20
        /// Responses longer than this many bytes are sent as chunks no longer than it.
        public var chunkBytes = 512
        /// Clients connected at once at most; one more is told so and disconnected.
        public var maxConnections = 256
        /// Requests running at once per connection at most; one more is refused with an error naming the limit.
        public var maxRequestsPerConnection = 64
        /// Bytes of answers queued for one client at most: a client that reads slower than it asks is disconnected
        /// (its requests cancelled) rather than buffered without bound. Each write also gives up after 10 s.
        public var maxQueuedBytesPerConnection = 16 << 20
        /// Where diagnostics go (standard error by default; never the protocol's output).
        public var log: @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data(("ember serve: " + message + "\n").utf8))
        }

        /// The defaults: SmolLM2-135M-Instruct and all-MiniLM-L6-v2, preloaded; lines up to 1 MiB, 512-byte chunks, `runOnlyWhileCharging` off, log to standard error.
        public init() {}
    }

    /// Why the worker could not start.
    public enum ServeError: Error, CustomStringConvertible {
        /// The socket at `path` could not be set up: system call `call` failed, or the path cannot be used, for `reason`.
        case socket(path: String, call: String, reason: String)
        /// A ``WorkerServer/Configuration`` value out of range (`chunkBytes` below 512 or `maxLineBytes` below 256).
        case invalidSetting(field: String, found: String, expected: String)

        /// A one-line form, e.g. "socket /tmp/ember.sock: bind failed: …" or "chunkBytes: found 100, expected at least 512".
        public var description: String {
            switch self {
            case let .socket(path, call, reason): "socket \(path): \(call) failed: \(reason)"
            case let .invalidSetting(field, found, expected): "\(field): found \(found), expected \(expected)"
            }
        }
    }

    /// The runtime every request runs on.
    public let runtime: Runtime
    /// The settings the worker was made with.
    public let configuration: Configuration
    private let models: WorkerModels
    private let lock = NSLock()
    private var connections: [ObjectIdentifier: WorkerConnection] = [:]
    private var listener: Int32 = -1
    private var socketPath: String?
    private var nextClient = 0
    private var powerWatch: Task<Void, Never>?
    /// The models' state as last reported (overall, per model).
    private var modelSnapshot: (String, [(String, String)])
    /// Held while a status is computed and queued, so no client gets an older status after a newer one.
    private let statusLock = NSLock()

    /// A worker for `runtime`; throws ``ServeError/invalidSetting(field:found:expected:)`` when `chunkBytes` is below 512, `maxLineBytes` below 256, a connection or request limit below 1 or the queue limit below 64 KiB. It preloads the default models when `preload` is set, and serves once ``listen(socketPath:)`` or ``serveStandardIO()`` is called.
    public init(runtime: Runtime, configuration: Configuration = Configuration()) throws {
        try configuration.validate()
        self.runtime = runtime
        self.configuration = configuration
        let changed = Box()
        let names = [configuration.languageModel, configuration.embeddingModel]
        modelSnapshot = ("unloaded", names.map { ($0, "unloaded") })
        models = WorkerModels(runtime: runtime, names: names) { overall, models in
            changed.server?.modelsChanged(overall, models)
        }
        changed.server = self
        // The scheduler's view of the power state: the one the decisions use, from its one subscription to the source.
        let states = runtime.scheduler.powerStates()
        powerWatch = Task { [weak self] in
            for await _ in states { self?.statusChanged() }
        }
        if configuration.preload {
            Task { [models] in
                await models.preload(configuration.languageModel, embedding: false)
                await models.preload(configuration.embeddingModel, embedding: true)
            }
        }
    }

    deinit { powerWatch?.cancel() }

    private final class Box: @unchecked Sendable { weak var server: WorkerServer? }

    // MARK: Serving

    /// Serves one client on standard input and output until input ends and
    /// its requests have answered.
    public func serveStandardIO() async {
        ignoreBrokenPipes()
        let connection = WorkerConnection(input: 0, output: 1, isSocket: false, name: "stdio",
                                          maxQueuedBytes: configuration.maxQueuedBytesPerConnection,
                                          runOnlyWhileCharging: configuration.runOnlyWhileCharging)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            do {
                try OSThread.start(name: "ember-stdio") { [self] in
                    serve(connection)
                    done.resume()
                }
            } catch {
                configuration.log("\(error)")
                done.resume()
            }
        }
    }

    /// Listens on a Unix domain socket at `path` (a stale socket file there is
    /// replaced) and serves clients on their own threads until ``stop()``.
    public func listen(socketPath path: String) throws {
        ignoreBrokenPipes()
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            throw ServeError.socket(path: path, call: "bind", reason: "the path is \(path.utf8.count) bytes; at most \(capacity - 1) fit a Unix socket address")
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw ServeError.socket(path: path, call: "bind", reason: "a file that is not a socket is in the way")
            }
            unlink(path) // a socket left by an earlier worker
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8) + [0])
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServeError.socket(path: path, call: "socket", reason: String(cString: strerror(errno))) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, startListening(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ServeError.socket(path: path, call: "bind/listen", reason: reason)
        }
        lock.withLock { (listener, socketPath) = (fd, path) }
        do {
            try OSThread.start(name: "ember-accept") { [self] in acceptLoop(fd) }
        } catch {
            stop()
            throw ServeError.socket(path: path, call: "accept", reason: "\(error)")
        }
        configuration.log("listening on \(path)")
    }

    /// Stops listening, removes the socket file, and cancels every client's requests.
    public func stop() {
        let (fd, path, clients) = lock.withLock { () -> (Int32, String?, [WorkerConnection]) in
            defer { listener = -1; socketPath = nil }
            return (listener, socketPath, Array(connections.values))
        }
        if fd >= 0 {
            shutdown(fd, Int32(SHUT_RDWR)) // wakes the accept loop
            close(fd)
        }
        if let path { unlink(path) }
        for client in clients {
            client.cancelAll()
            if client.isSocket { shutdown(client.input, Int32(SHUT_RDWR)) }
        }
    }

    /// How many clients are connected now.
    public var clientCount: Int { lock.withLock { connections.count } }

    private func acceptLoop(_ fd: Int32) {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return // the listener was shut down
            }
            let name = lock.withLock { () -> String in
                nextClient += 1
                return "client \(nextClient)"
            }
            if clientCount >= configuration.maxConnections {
                refuse(client, name: name, because: "\(configuration.maxConnections) clients are connected, the limit",
                       telling: "the server has \(configuration.maxConnections) connections, its limit; try again later")
                continue
            }
            let connection = WorkerConnection(input: client, output: client, isSocket: true, name: name,
                                              maxQueuedBytes: configuration.maxQueuedBytesPerConnection,
                                              runOnlyWhileCharging: configuration.runOnlyWhileCharging)
            do {
                try OSThread.start(name: "ember-\(name.replacingOccurrences(of: " ", with: "-"))") { [self] in
                    serve(connection)
                    connection.afterWrites { close(client) }
                }
            } catch {
                // No thread for this client: it is told why and let go; the server and its other clients go on.
                refuse(client, name: name, because: "\(error)",
                       telling: "the server cannot start a thread for this connection (out of memory or threads); try again later")
            }
        }
    }

    /// Logs why client `name` is refused, tells it `message` as an error line with a null id, and closes it.
    private func refuse(_ client: Int32, name: String, because reason: String, telling message: String) {
        configuration.log("\(name) refused: \(reason)")
        let line = Array((WorkerResponse.error(id: nil, message) + "\n").utf8)
        _ = line.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        close(client)
    }

    /// Reads and answers one client until it is done (blocking this thread).
    private func serve(_ connection: WorkerConnection) {
        lock.withLock { connections[ObjectIdentifier(connection)] = connection }
        defer { lock.withLock { _ = connections.removeValue(forKey: ObjectIdentifier(connection)) } }
        push(to: connection) // the status first, before any answer
        let ending = connection.readLines(maxLineBytes: configuration.maxLineBytes) { line in
            switch line {
            case let .line(data): handle(data, from: connection)
            case let .tooLong(limit):
                connection.send(WorkerResponse.error(id: nil, "line longer than \(limit) bytes: skipped up to its newline", limit: configuration.chunkBytes))
            }
        }
        switch ending {
        case .endOfInput:
            connection.waitUntilIdle() // the client is done writing but still reads its answers
        case .hungUp, .failed:
            let cancelled = connection.cancelAll()
            if cancelled > 0 { configuration.log("\(connection.name) went away: \(cancelled) request(s) cancelled") }
            connection.markGone()
            connection.waitUntilIdle()
        }
        if connection.droppedAsSlow {
            configuration.log("\(connection.name) dropped: it read its answers too slowly (over \(configuration.maxQueuedBytesPerConnection) bytes unread)")
        }
        let done = DispatchSemaphore(value: 0)
        connection.afterWrites { done.signal() }
        done.wait()
    }

    // MARK: Requests

    private func handle(_ line: Data, from connection: WorkerConnection) {
        let message: WorkerMessage
        do { message = try WorkerMessage.parse(line) } catch {
            connection.send(WorkerResponse.error(id: error.id, error.message, limit: configuration.chunkBytes))
            return
        }
        switch message {
        case let .settings(on):
            connection.runOnlyWhileCharging = on
            push(to: connection)
        case let .cancel(id):
            if !connection.cancel(id) {
                connection.send(WorkerResponse.error(id: id, "cancel: no running request with this id", limit: configuration.chunkBytes))
            }
        case let .request(request):
            if connection.runOnlyWhileCharging, !currentPower.onExternalPower {
                let reason = "runOnlyWhileCharging is on and the device is not on external power"
                connection.send(statusLine(for: connection, extra: [("refused", .string(request.id)), ("reason", .string(reason))]))
                connection.send(WorkerResponse.error(id: request.id, "refused: \(reason)", limit: configuration.chunkBytes))
                return
            }
            guard connection.runningCount < configuration.maxRequestsPerConnection else {
                connection.send(WorkerResponse.error(id: request.id, "refused: \(configuration.maxRequestsPerConnection) requests are running on this connection, the limit; wait for their answers or cancel some", limit: configuration.chunkBytes))
                return
            }
            let started = connection.start(request.id) {
                Task { [self] in
                    await run(request, for: connection)
                    connection.finished(request.id)
                }
            }
            if !started {
                connection.send(WorkerResponse.error(id: request.id, "id: a request with this id is still running on this connection", limit: configuration.chunkBytes))
            }
        }
    }

    private func run(_ request: WorkerRequest, for connection: WorkerConnection) async {
        let start = DispatchTime.now().uptimeNanoseconds
        // Say so when the policy holds the request back, so the client knows why no answer comes yet.
        let deferred: @Sendable (String) -> Void = { reason in
            connection.send(JSONValue.object([("id", .string(request.id)), ("deferred", .string(reason))]).text)
        }
        do {
            var output = JSONValue.null
            var vectors: [[Float]]? = nil
            var metadata: [(String, JSONValue)]
            switch request.kind {
            case .generate:
                let model = try await models.language(named: request.model ?? configuration.languageModel)
                let stream = request.stream
                let prompt = request.chat ? try Self.chatTemplate(of: model).format([ChatMessage(role: "user", content: request.prompt)])
                                          : request.prompt
                let completion = try await runtime.generateText(model, prompt: prompt, maxTokens: request.maxTokens,
                                                                tier: request.tier, sampler: request.sampler,
                                                                requirements: configuration.requirements, stop: request.stop,
                                                                onPiece: { piece in
                    if stream {
                        connection.send(JSONValue.object([("id", .string(request.id)), ("piece", .string(piece))]).text)
                    }
                }, onDeferred: deferred)
                output = .string(completion.output.text)
                metadata = Self.metadata(completion)
                metadata.insert(contentsOf: [("tokens", .number(Double(completion.output.tokenIDs.count))),
                                             ("stopReason", .string(completion.output.stopReason))], at: 0)
                if completion.output.cachedPromptTokens > 0 {
                    metadata.insert(("cachedPromptTokens", .number(Double(completion.output.cachedPromptTokens))), at: 2)
                }
            case .embed:
                let model = try await models.embedding(named: request.model ?? configuration.embeddingModel)
                let completion = try await runtime.embedding(model, request.texts, tier: request.tier,
                                                             requirements: configuration.requirements, onDeferred: deferred)
                vectors = completion.output
                metadata = Self.metadata(completion)
                metadata.insert(("dimension", .number(Double(model.dimension))), at: 0)
            }
            let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            metadata.insert(("durationMs", .number(milliseconds.rounded())), at: 0)
            let lines = vectors.map { WorkerResponse.vectorLines(id: request.id, vectors: $0, metadata: metadata, limit: configuration.chunkBytes) }
                ?? WorkerResponse.lines(id: request.id, output: output, metadata: metadata, limit: configuration.chunkBytes)
            for line in lines { connection.send(line) }
        } catch is CancellationError {
            connection.send(WorkerResponse.error(id: request.id, "cancelled", limit: configuration.chunkBytes))
        } catch {
            connection.send(WorkerResponse.error(id: request.id, String(describing: error), limit: configuration.chunkBytes))
        }
    }

    private static func metadata<Output>(_ completion: Completion<Output>) -> [(String, JSONValue)] {
        var pairs: [(String, JSONValue)] = [("decision", JSONValue.decision(completion.decision)),
                                            ("waitMs", .number((completion.waitSeconds * 1000).rounded()))]
        if let energy = completion.energy {
            pairs.append(("energyJoules", .number((energy.joules * 1e4).rounded() / 1e4)))
            pairs.append(("energySource", .string(energy.source.rawValue)))
        }
        return pairs
    }

    // MARK: Status

    private var currentPower: PowerState { runtime.scheduler.latestPowerState }

    private func modelsChanged(_ overall: String, _ models: [(String, String)]) {
        lock.withLock { modelSnapshot = (overall, models) }
        statusChanged()
    }

    /// Something clients see changed (power, a model's state): tell each client whose view differs.
    private func statusChanged() {
        for connection in lock.withLock({ Array(connections.values) }) { push(to: connection) }
    }

    /// Sends `connection` the status if it differs from the last one it got.
    private func push(to connection: WorkerConnection) {
        statusLock.withLock {
            let line = statusLine(for: connection, extra: [])
            if connection.statusChanged(line) { connection.send(line) }
        }
    }

    private func statusLine(for connection: WorkerConnection, extra: [(String, JSONValue)]) -> String {
        let (overall, models) = lock.withLock { modelSnapshot }
        guard case let .object(pairs) = Self.status(state: currentPower, overall: overall, models: models,
                                                    onlyWhileCharging: connection.runOnlyWhileCharging) else { return "" }
        return JSONValue.object(pairs + extra).text
    }

    static func status(state: PowerState, overall: String, models: [(String, String)], onlyWhileCharging: Bool) -> JSONValue {
        .object([
            ("modelState", .string(overall)),
            ("models", .object(models.map { ($0.0, .string($0.1)) })),
            ("batteryPct", state.batteryLevel.map { .number(($0 * 100).rounded()) } ?? .null),
            ("charging", .bool(state.onExternalPower)),
            ("lowPower", .bool(state.lowPowerMode)),
            ("thermal", .string(state.thermal.rawValue)),
            ("runOnlyWhileCharging", .bool(onlyWhileCharging)),
        ])
    }

    private func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// The model's chat format, or an error saying the file has none Ember applies.
    static func chatTemplate(of model: any TextGenerator) throws -> ChatTemplate { try ChatTemplate.resolve(for: model) }
}

/// `listen(2)` with a backlog of 64 (the method of the same name hides it inside the class).
private func startListening(_ socket: Int32) -> Int32 {
    #if canImport(Glibc)
    Glibc.listen(socket, 64)
    #else
    Darwin.listen(socket, 64)
    #endif
}
