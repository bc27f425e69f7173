import Foundation

/// What one op on one tensor type costs on one backend: the cost model the
/// energy estimates and the policy read. Measured by calibration; a
/// documented default until then.
public struct OpCost: Sendable, Codable, Equatable {
    /// Work per second: operations (2 per multiply-add) for matmul, elements for the other ops.
    public var throughput: Double
    /// Time from handing the op to its route to its first instruction, in microseconds.
    public var dispatchMicroseconds: Double
    /// Joules per unit of work: the busy cores' power ÷ ``throughput``.
    public var joulesPerUnit: Double
    /// "measured" when calibrated on this machine, else "default".
    public var source: String

    /// A cost of `throughput` units per second on `cores` busy cores.
    public init(throughput: Double, dispatchMicroseconds: Double, cores: Int, source: String) {
        self.throughput = throughput
        self.dispatchMicroseconds = dispatchMicroseconds
        joulesPerUnit = Calibration.wattsPerBusyCore * Double(max(1, cores)) / max(throughput, 1)
        self.source = source
    }

    /// Modelled seconds and joules for `work` units.
    public func estimate(work: Double) -> (seconds: Double, joules: Double) {
        (dispatchMicroseconds * 1e-6 + work / max(throughput, 1), work * joulesPerUnit)
    }

    enum CodingKeys: String, CodingKey {
        case throughput, source
        case dispatchMicroseconds = "dispatch_us"
        case joulesPerUnit = "joules_per_unit"
    }
}

/// The measured costs of every backend's ops on this machine (what
/// `calibration.json` holds): keyed by backend name, then "op/type". Made by
/// ``ComputeContext/calibrate()`` — when a host asks, or when a `Runtime`
/// starts — never inside a request.
public struct Calibration: Sendable, Codable, Equatable {
    /// Power drawn per busy core, in watts: the energy model's one coefficient. Estimated for a Zen 5
    /// server core under AVX-512 load — AMD EPYC 9005: 500 W TDP over 128 cores ≈ 3.9 W per core plus
    /// ~2 W of uncore and memory traffic per busy core — so 6 W per core. A RAPL counter, where the OS
    /// exposes one, replaces the model with a measurement.
    public static let wattsPerBusyCore = 6.0

    /// What the measurements hold for: CPU, kernel ISA, BLAS core, cores and backends. A cached calibration is
    /// used only when its key is the machine's.
    public var key: String
    /// When it was measured, in seconds since 1970 (nil for defaults).
    public var measuredAt: Double?
    /// Backend name → "op/type" → cost.
    public var costs: [String: [String: OpCost]]
    /// The memory's streaming read bandwidth on all the pool's threads, GB/s: what decoding a token (every weight
    /// read once, from memory rather than cache) is bound by. Nil when not measured.
    public var readGBs: Double?

    /// The read bandwidth assumed until calibration measures one, GB/s, on `cores` cores: 30 per two, as this
    /// project's Zen 3 kind measured 30.8 (`ember bench kernels`, 2 threads, 2026-11-27).
    public static func defaultReadGBs(cores: Int) -> Double { 30 * Double(max(1, cores)) / 2 }

    /// A calibration with `key`, `costs` and `readGBs`.
    public init(key: String, measuredAt: Double? = nil, costs: [String: [String: OpCost]], readGBs: Double? = nil) {
        self.key = key
        self.measuredAt = measuredAt
        self.costs = costs
        self.readGBs = readGBs
    }

    /// The cost of `support` on the backend called `backend`, if known.
    public func cost(backend: String, _ support: OpSupport) -> OpCost? { costs[backend]?[support.description] }

    /// Reads a calibration written by ``write(to:)``; nil when the file is missing or is not one.
    public static func read(from url: URL) -> Calibration? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(Calibration.self, from: data)
    }

    /// Writes the calibration as JSON (objects keyed by backend and op, snake_case keys), creating the folder.
    public func write(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(self).write(to: url, options: .atomic)
    }

    /// Every calibration a cache file holds, newest first: several keys side by side (another kernel family through
    /// `EMBER_ISA`, another core count), so measuring one does not evict another. A file of a single calibration (the
    /// earlier format) reads as one; a missing or foreign file as none.
    public static func readAll(from url: URL) -> [Calibration] {
        guard let data = try? Data(contentsOf: url) else { return [] }
        if let file = try? JSONDecoder().decode(CacheFile.self, from: data) { return file.calibrations }
        return (try? JSONDecoder().decode(Calibration.self, from: data)).map { [$0] } ?? []
    }

    /// Puts this calibration first in the cache file at `url`, replacing one of the same key and keeping at most
    /// `keep` in all (the oldest go first).
    public func store(in url: URL, keep: Int = 8) throws {
        let others = Self.readAll(from: url).filter { $0.key != key }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(CacheFile(calibrations: Array(([self] + others).prefix(max(1, keep))))).write(to: url, options: .atomic)
    }

    /// The cache file's shape: `{"calibrations": [...]}`.
    private struct CacheFile: Codable {
        var calibrations: [Calibration]
    }

    enum CodingKeys: String, CodingKey {
        case key, costs
        case measuredAt = "measured_at"
        case readGBs = "read_gbs"
    }
}

/// What one compute unit (route) is, seen through its backends: its execution
/// resource, the backends on it, the ops they run, and the matmul cost at each
/// precision of its best backend. Derived from the ``BackendRegistry`` and
/// the ``Calibration`` — one source of truth, not a second table.
public struct UnitProfile: Sendable, Codable {
    /// How jobs reach the unit's threads.
    public enum ExecutionResource: String, Sendable, Codable {
        /// Submit a batch of ops, then await completion (command-buffer style), all cores.
        case submissionQueue = "submission_queue"
        /// One shared serial queue: one job at a time, all cores.
        case serialQueue = "serial_queue"
        /// The caller's own QoS workers.
        case callerWorkers = "caller_workers"
    }

    /// The unit described.
    public var unit: ComputeUnit
    /// The execution resource its jobs run on.
    public var resource: ExecutionResource
    /// The available backends on this route, best first.
    public var backends: [String]
    /// Every op some backend on this route runs.
    public var ops: [String]
    /// Matmul cost per precision ("fp32", "fp16", "int8", "int4"), from the best backend on the route for the
    /// precision's type (F32, F16, Q8_0, Q4_1).
    public var costs: [String: OpCost]
    /// Bytes each weight takes as that backend holds it, per precision: the type's own (1.0625 for Q8_0, 2 for F16)
    /// unless the backend converts the weights once (the GPU route's BLAS dequantizes int8 and int4 weights: 4).
    /// Decoding reads them all per token.
    public var weightBytes: [String: Double] = [:]

    enum CodingKeys: String, CodingKey {
        case unit, resource, backends, ops, costs
        case weightBytes = "weight_bytes"
    }

    /// The execution resource of `unit`'s route.
    public static func resource(of unit: ComputeUnit) -> ExecutionResource {
        switch unit {
        case .neuralEngine: .serialQueue
        case .gpu: .submissionQueue
        case .cpu: .callerWorkers
        }
    }

    /// The matmul cost at `precision`, if the route runs it.
    public func cost(at precision: Precision) -> OpCost? { costs[precision.rawValue] }
}
