import Ember
import EmberServer
import Foundation
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOPosix

/// Ember behind the OpenAI HTTP API on Hummingbird 2: `GET /v1/models`, `POST /v1/chat/completions`,
/// `POST /v1/completions` (both streamed as Server-Sent Events with `stream: true`), `POST /v1/embeddings`,
/// `GET /health` and `GET /metrics` (Prometheus text).
///
/// Ember's own semantics ride along the OpenAI way: the tier comes from an `X-Ember-Tier` header (critical,
/// standard or background; standard by default); every answer carries an `ember` object with the policy's
/// decision, wait and run times and energy, and a `system_fingerprint` naming the precision and unit it ran on; a
/// request the policy defers waits up to `X-Ember-Max-Wait` seconds, then gets 503 with `Retry-After`. Errors come
/// in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`) with the right status. Models load on first
/// use and stay loaded.
public final class OpenAIServer: Sendable {
    /// How the server behaves.
    public struct Configuration: Sendable {
        /// The address to listen on; default 127.0.0.1.
        public var host = "127.0.0.1"
        /// The TCP port; default 8080 (0: any free port, logged at start).
        public var port = 8080
        /// Language models served, by manifest name or path (the first is the one `GET /v1/models` lists first).
        public var languageModels = ["smollm2-135m-instruct"]
        /// Embedding models served, by manifest name or folder.
        public var embeddingModels = ["all-minilm-l6-v2"]
        /// Request bodies longer than this many bytes get 413.
        public var maxBodyBytes = 4 << 20
        /// Connections open at once at most; more wait in the listen backlog until one closes.
        public var maxConnections = 256
        /// Requests being answered at once at most; one more gets 503 with `Retry-After: 1`.
        public var maxRequestsInFlight = 256
        /// What every request needs besides its tier: a precision, or the weights as stored (`ember serve
        /// --precision`); by default none, the policy chooses.
        public var requirements = RequestRequirements(tier: .standard)
        /// Seconds a deferred request waits for a better power state when `X-Ember-Max-Wait` is absent.
        public var defaultMaxWaitSeconds = 30.0
        /// Where diagnostics go (standard error by default).
        public var log: @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data(("ember serve: " + message + "\n").utf8))
        }

        /// The defaults: 127.0.0.1:8080, SmolLM2-135M-Instruct and all-MiniLM-L6-v2, 4 MiB bodies, 256 connections
        /// and requests, 30 s of deferral at most.
        public init() {}
    }

    /// The runtime every request runs on.
    public let runtime: Runtime
    /// The settings the server was made with.
    public let configuration: Configuration
    let models: WorkerModels
    let metrics = ServerMetrics()
    let inFlight = InFlightCounter()

    /// A server for `runtime`; nothing listens until ``run(onListening:)``.
    public init(runtime: Runtime, configuration: Configuration = Configuration()) {
        self.runtime = runtime
        self.configuration = configuration
        models = WorkerModels(runtime: runtime, names: configuration.languageModels + configuration.embeddingModels) { _, _ in }
    }

    /// Starts loading every served model now instead of at its first request.
    public func preload() async {
        for name in configuration.languageModels { await models.preload(name, embedding: false) }
        for name in configuration.embeddingModels { await models.preload(name, embedding: true) }
    }

    /// Serves until SIGINT or SIGTERM (then finishes the requests being answered); `onListening` hears the bound
    /// port once the socket listens.
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        let router = Router()
        router.get("/health") { _, _ in try await self.health() }
        router.get("/metrics") { _, _ in await self.metricsResponse() }
        router.get("/v1/models") { _, _ in self.modelList() }
        router.get("/v1/models/**") { _, context in self.model(named: context.parameters.getCatchAll().joined(separator: "/")) }
        router.post("/v1/chat/completions") { request, _ in await self.answer(request, endpoint: "chat") }
        router.post("/v1/completions") { request, _ in await self.answer(request, endpoint: "completions") }
        router.post("/v1/embeddings") { request, _ in await self.answer(request, endpoint: "embeddings") }
        // The server's own event loops, at the highest QoS class: they only parse and write, and a stream's first
        // chunk must not wait behind the compute threads of the generation it reports (their class is lower).
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let mapping = runtime.context.configuration.qosMapping
        for loop in loops.makeIterator() {
            try await loop.submit { _ = mapping.applyToCurrentThread(.userInteractive) }.get()
        }
        let application = Application(
            router: router,
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: "ember",
                availableConnectionsDelegate: ConnectionLimit(maximum: configuration.maxConnections)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                self.configuration.log("listening on http://\(self.configuration.host):\(port) (OpenAI API under /v1)")
                onListening(port)
            },
            eventLoopGroupProvider: .shared(loops))
        do {
            try await application.runService()
        } catch {
            try? await loops.shutdownGracefully()
            throw error
        }
        try await loops.shutdownGracefully()
    }

    // MARK: Small endpoints

    private func health() async throws -> Response {
        let summary = await models.summary
        let body = JSONValue.object([("status", .string("ok")),
                                     ("models", .object(summary.map { ($0.0, .string($0.1)) })),
                                     ("power", .string(runtime.scheduler.latestPowerState.description))])
        return Self.json(body, status: .ok)
    }

    private func metricsResponse() async -> Response {
        let scheduler = runtime.scheduler
        let depth = await scheduler.deferredCount + scheduler.waitingForMemoryCount
        let counts = await scheduler.metrics
        let memory = ServerMetrics.Memory(inUse: await scheduler.memoryInUse, weightCopies: await scheduler.weightCopyBytes,
                                          budget: await scheduler.memoryBudget, promptCache: runtime.promptCache?.bytes ?? 0)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        let text = metrics.text(queueDepth: depth, memory: memory, scheduler: counts, batcher: runtime.batcher,
                                promptCache: runtime.promptCache?.statistics)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    private func modelList() -> Response {
        let data = (configuration.languageModels + configuration.embeddingModels).map(modelObject)
        return Self.json(.object([("object", .string("list")), ("data", .array(data))]), status: .ok)
    }

    /// `GET /v1/models/{model}` (the client's `models.retrieve`): the served model's object, or a 404 naming the served
    /// ones. A model served by its path matches with or without the path's leading "/".
    private func model(named name: String) -> Response {
        let served = configuration.languageModels + configuration.embeddingModels
        guard let match = served.first(where: { $0 == name || $0 == "/" + name }) else {
            let error = HTTPAPIError(status: 404, code: "model_not_found", param: "model",
                                     message: "model \"\(name)\" is not served here; served: \(served.joined(separator: ", ")) (GET /v1/models lists them)")
            return respond(error, endpoint: "models")
        }
        return Self.json(modelObject(match), status: .ok)
    }

    private func modelObject(_ name: String) -> JSONValue {
        .object([("id", .string(name)), ("object", .string("model")), ("created", .number(Double(Int(Date().timeIntervalSince1970)))),
                 ("owned_by", .string("ember"))])
    }

    // MARK: Requests

    /// Answers one API request: limits, body, then the endpoint; every failure in OpenAI's error shape.
    private func answer(_ request: Request, endpoint: String) async -> Response {
        guard inFlight.enter(limit: configuration.maxRequestsInFlight) else {
            let error = HTTPAPIError(status: 503, type: "server_busy", code: "too_many_requests",
                                     message: "\(configuration.maxRequestsInFlight) requests are being answered, the server's limit; retry shortly",
                                     retryAfter: 1)
            return respond(error, endpoint: endpoint)
        }
        metrics.started()
        defer {
            inFlight.leave()
            metrics.ended()
        }
        var request = request
        do {
            let body: ByteBuffer
            do { body = try await request.collectBody(upTo: configuration.maxBodyBytes) } catch let error where Self.isTooLarge(error) {
                throw HTTPAPIError(status: 413, code: "request_too_large",
                                   message: "the request body is over \(configuration.maxBodyBytes) bytes, the server's limit; send less (split the input)")
            }
            let fields = try RequestFields(body: Data(buffer: body))
            let headers = try RequestHeaders(request.headers, defaultMaxWait: configuration.defaultMaxWaitSeconds)
            let response: Response
            switch endpoint {
            case "embeddings": response = try await embeddings(fields, headers: headers, request: request)
            default: response = try await generation(fields, chat: endpoint == "chat", headers: headers, request: request)
            }
            metrics.answered(endpoint: endpoint, status: Int(response.status.code))
            return response
        } catch {
            return respond(error, endpoint: endpoint)
        }
    }

    /// Whether collecting a body failed for its size (Hummingbird's 413, or NIO's byte limit).
    private static func isTooLarge(_ error: Error) -> Bool {
        if let error = error as? HTTPError, error.status == .contentTooLarge { return true }
        return error is NIOTooManyBytesError
    }

    /// The error response for `error`, counted in the metrics.
    private func respond(_ error: Error, endpoint: String) -> Response {
        let apiError = Self.apiError(error)
        if apiError.status >= 500 { configuration.log("\(endpoint): \(apiError.status) \(apiError.message)") }
        metrics.answered(endpoint: endpoint, status: apiError.status)
        var headers = HTTPFields()
        if let retry = apiError.retryAfter { headers[.retryAfter] = String(retry) }
        return Self.json(apiError.body, status: HTTPResponse.Status(code: apiError.status), headers: headers)
    }

    /// Ember's errors as HTTP ones: the API's own as they are, a dropped request 503, anything else from the model
    /// or the runtime 400 when it names a bad argument, else 500.
    static func apiError(_ error: Error) -> HTTPAPIError {
        switch error {
        case let error as HTTPAPIError: return error
        case let error as SchedulerError:
            return HTTPAPIError(status: 503, type: "server_busy", code: "dropped",
                                message: "\(error): the power policy did not let this request run; retry later or send a higher X-Ember-Tier",
                                retryAfter: 30)
        case let error as WorkerModelError: return HTTPAPIError(status: 400, code: "wrong_model_kind", param: "model", message: error.message)
        case let error as KernelError:
            if case .invalidArgument = error { return HTTPAPIError(status: 400, code: "invalid_value", message: "\(error)") }
            return HTTPAPIError(status: 500, type: "server_error", message: "\(error)")
        case is CancellationError:
            return HTTPAPIError(status: 499, type: "cancelled", message: "the client went away; the request was cancelled")
        default:
            return HTTPAPIError(status: 500, type: "server_error", message: String(describing: error))
        }
    }

    /// The served model a request names; 404 for one not served here.
    func servedName(_ fields: RequestFields, embedding: Bool) throws -> String {
        let served = embedding ? configuration.embeddingModels : configuration.languageModels
        guard let name = try fields.string("model") else { return served.first ?? "" }
        if served.contains(name) { return name }
        let other = embedding ? configuration.languageModels : configuration.embeddingModels
        if other.contains(name) {
            throw HTTPAPIError(status: 400, code: "wrong_model_kind", param: "model",
                               message: "model \"\(name)\" is \(embedding ? "a language model" : "an embedding model"); "
                                   + (embedding ? "/v1/embeddings needs one of \(served)" : "this endpoint needs one of \(served)"))
        }
        throw HTTPAPIError(status: 404, code: "model_not_found", param: "model",
                           message: "model \"\(name)\" is not served here; served: \((configuration.languageModels + configuration.embeddingModels).joined(separator: ", ")) (GET /v1/models lists them)")
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status, headers: HTTPFields = HTTPFields()) -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: value.text)))
    }

    // MARK: Embeddings

    private func embeddings(_ fields: RequestFields, headers: RequestHeaders, request: Request) async throws -> Response {
        let name = try servedName(fields, embedding: true)
        guard let texts = try fields.strings("input", most: 2048), !texts.isEmpty else {
            throw HTTPAPIError.invalid("input", found: fields.value("input").map(RequestFields.shown) ?? "nothing",
                                       expected: "a string or a non-empty array of up to 2048 strings")
        }
        let format = try fields.string("encoding_format") ?? "float"
        guard format == "float" || format == "base64" else {
            throw HTTPAPIError.invalid("encoding_format", found: "\"\(format)\"", expected: "\"float\" or \"base64\"")
        }
        let model = try await models.embedding(named: name)
        // OpenAI's shortened vectors need a model trained for them (Matryoshka); Ember's are not: refused, as vLLM does.
        if let dimensions = try fields.integer("dimensions", in: 1...65_536), Int(dimensions) != model.dimension {
            throw HTTPAPIError.invalid("dimensions", found: "\(dimensions)",
                                       expected: "\(model.dimension), the size of \(name)'s vectors (it was not trained to be shortened; "
                                           + "omit dimensions, or keep the first values and renormalise them yourself)")
        }
        let deferral = DeferralNote()
        let completion = try await Self.translatingDrop(deferral, headers) {
            try await request.body.consumeWithCancellationOnInboundClose { _ in
                try await self.runtime.embedding(model, texts, tier: headers.tier, requirements: self.configuration.requirements,
                                                 deadline: headers.deadline,
                                                 onDeferred: { deferral.reason = $0 })
            }
        }
        let promptTokens = texts.reduce(0) { $0 + model.tokenize($1).count }
        metrics.ran(completion, promptTokens: promptTokens, generatedTokens: 0)
        return Self.json(OpenAIResponses.embeddings(completion, model: name, promptTokens: promptTokens, base64: format == "base64",
                                                    tier: headers.tier), status: .ok)
    }

    /// Runs `operation`; a request dropped after being deferred past its deadline becomes a 503 that says why
    /// (the policy's reason) and when to retry.
    static func translatingDrop<Value>(_ deferral: DeferralNote, _ headers: RequestHeaders,
                                       _ operation: () async throws -> Value) async throws -> Value {
        do {
            return try await operation()
        } catch let error as SchedulerError {
            guard case let .dropped(reason) = error else { throw error }
            if reason == "deadline passed" {
                let why = deferral.reason.map { "deferred by the power policy (\($0))" } ?? "waited for memory or other requests"
                throw HTTPAPIError(status: 503, type: "server_busy", code: "deferred",
                                   message: "\(why) for longer than X-Ember-Max-Wait (\(headers.maxWaitText) s); retry later, allow a longer wait or send a higher X-Ember-Tier",
                                   retryAfter: max(1, Int(headers.maxWait.rounded(.up))))
            }
            throw HTTPAPIError(status: 503, type: "server_busy", code: "dropped",
                               message: "dropped by the power policy: \(reason); retry later or send a higher X-Ember-Tier", retryAfter: 30)
        }
    }
}

/// The Ember headers of a request: `X-Ember-Tier` and `X-Ember-Max-Wait`.
struct RequestHeaders: Sendable {
    var tier: Tier
    var maxWait: Double

    init(_ fields: HTTPFields, defaultMaxWait: Double) throws {
        try self.init(pairs: fields.map { ($0.name.canonicalName, $0.value) }, defaultMaxWait: defaultMaxWait)
    }

    /// From (name, value) pairs; names compare without regard to case.
    init(pairs: [(String, String)], defaultMaxWait: Double) throws {
        func header(_ name: String) -> String? { pairs.first { $0.0.lowercased() == name }?.1 }
        let tierText = header("x-ember-tier")
        if let tierText {
            guard let tier = Tier(rawValue: tierText.lowercased()) else {
                throw HTTPAPIError.invalid("X-Ember-Tier", found: "\"\(tierText)\"", expected: "critical, standard or background")
            }
            self.tier = tier
        } else {
            tier = .standard
        }
        if let waitText = header("x-ember-max-wait") {
            guard let wait = Double(waitText), wait.isFinite, (0...86_400).contains(wait) else {
                throw HTTPAPIError.invalid("X-Ember-Max-Wait", found: "\"\(waitText.prefix(40))\"", expected: "seconds from 0 to 86400")
            }
            maxWait = wait
        } else {
            maxWait = defaultMaxWait
        }
    }

    var deadline: Date { Date().addingTimeInterval(maxWait) }
    var maxWaitText: String { maxWait == maxWait.rounded() ? String(Int(maxWait)) : String(maxWait) }
}

/// The policy's last reason for deferring a request, kept to explain a 503.
final class DeferralNote: @unchecked Sendable {
    private let lock = NSLock()
    private var value: String?
    var reason: String? {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}

/// Requests being answered, against a limit.
final class InFlightCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func enter(limit: Int) -> Bool {
        lock.withLock {
            guard count < limit else { return false }
            count += 1
            return true
        }
    }
    func leave() { lock.withLock { count -= 1 } }
    /// Requests counted now.
    var current: Int { lock.withLock { count } }
}

/// Stops accepting connections while `maximum` are open (they wait in the listen backlog).
struct ConnectionLimit: AvailableConnectionsDelegate {
    let maximum: Int
    private let open = InFlightCounter()
    init(maximum: Int) { self.maximum = maximum }
    mutating func connectionOpened() { _ = open.enter(limit: .max) }
    mutating func connectionClosed() { open.leave() }
    func isAcceptingNewConnections() -> Bool { open.current < maximum }
}
