import Foundation

/// Where one op runs and why: what `ember plan` prints for each op, like an
/// entry of Core ML's `MLComputePlan`.
public struct Placement: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The operation placed.
    public var op: Op
    /// The type it runs on: the weights' for matmul and embedding, the KV cache's for attention, else F32.
    public var type: TensorType
    /// The route it runs on.
    public var unit: ComputeUnit
    /// The backend that runs it.
    public var backend: String
    /// Whether that backend came from a plugin.
    public var plugin: Bool
    /// Why it is not on the most preferred unit allowed (each unit passed over and why), and any conversion of
    /// the weights it needs; nil when it runs there as the weights are.
    public var fallbackReason: String?

    /// One line, e.g. "matmul q4_0 → neural-engine [simd-avx2]" and the fallback reason, if any.
    public var description: String {
        "\(op) \(type) → \(unit) [\(backend)]" + (fallbackReason.map { ": \($0)" } ?? "")
    }

    enum CodingKeys: String, CodingKey {
        case op, type, unit, backend, plugin
        case fallbackReason = "fallback_reason"
    }
}

/// A plugin library the registry loaded, and what became of its backends.
public struct LoadedPlugin: Sendable, Codable {
    /// The name its table declares (1–63 printable characters).
    public var name: String
    /// The path it was loaded from.
    public var path: String
    /// Its backends that passed their checks and take ops.
    public var backends: [String]
    /// Its backends left out, each with the reason (a CPU feature it needs, a failed check).
    public var skipped: [String]
}

/// Every backend a ``ComputeContext`` can place ops on — the built-in ones
/// and those from plugins — and the placement itself: for an op on a type
/// under the units a request may use, the allowed units are taken in
/// preference order (neural engine, GPU, CPU), and on the first that has a
/// backend running the op, the highest-scored one wins. The CPU route is
/// always the last resort, and its scalar reference runs every op Ember
/// knows, so every op of every model is placed.
public final class BackendRegistry: @unchecked Sendable {
    private struct Entry {
        let backend: any Backend
        let health: BackendHealth
        let serializer: NSLock?
    }

    /// The backend every op falls back to: portable C for every op (the oracle the others are checked against).
    public let reference: any Backend
    private let lock = NSLock()
    private var entries: [Entry] = []
    private var loaded: [LoadedPlugin] = []
    private var failures: [String] = []
    private var eventLog: [String] = []
    private var generationValue = 0
    /// Hears each event as it happens (besides ``events``).
    public var log: @Sendable (String) -> Void {
        get { lock.withLock { listener } }
        set { lock.withLock { listener = newValue } }
    }
    private var listener: @Sendable (String) -> Void = { _ in }

    /// A registry holding `reference` (which must run every op on the CPU route) and nothing else yet.
    public init(reference: any Backend) {
        self.reference = reference
        entries = [Entry(backend: reference, health: BackendHealth(), serializer: nil)]
    }

    /// A health for the backend called `name` that reports its disabling here (``events``, ``log``) and makes
    /// later plans place around it (``generation``).
    public func makeHealth(for name: String) -> BackendHealth {
        BackendHealth { [weak self] reason in self?.noteEvent("backend \(name) disabled: \(reason); its ops fall back") }
    }

    /// Adds `backend` with `health` (a new one when nil; a plugin's is made before its checks), serialising its
    /// calls with `serializer` when it cannot run them concurrently; a name already taken is refused.
    public func register(_ backend: any Backend, health: BackendHealth? = nil, serializer: NSLock? = nil) throws {
        let name = backend.descriptor.name
        let health = health ?? makeHealth(for: name)
        try lock.withLock {
            guard !entries.contains(where: { $0.backend.descriptor.name == name }) else {
                throw KernelError.invalidArgument(argument: "backend name", found: name, expected: "a name no other backend has")
            }
            entries.append(Entry(backend: backend, health: health,
                                 serializer: backend.descriptor.concurrent ? nil : serializer ?? NSLock()))
            generationValue += 1
        }
    }

    /// Counts changes to what placement can choose (a backend registered or disabled): a model rebinds its cached
    /// plans when it changes, so later passes place around a disabled backend.
    public var generation: Int { lock.withLock { generationValue } }

    func noteEvent(_ line: String) {
        let hear = lock.withLock { () -> @Sendable (String) -> Void in
            eventLog.append(line)
            generationValue += 1
            return listener
        }
        hear(line)
    }

    func recordPlugin(_ plugin: LoadedPlugin) { lock.withLock { loaded.append(plugin) } }
    func recordFailure(_ text: String) { lock.withLock { failures.append(text) } }

    /// Every backend registered, in registration order (built-ins first), available or not.
    public var all: [any Backend] { lock.withLock { entries.map(\.backend) } }

    /// The backends that can take ops here: this CPU runs them and none was disabled.
    public var available: [any Backend] {
        lock.withLock { entries.filter { Self.isUsable($0) }.map(\.backend) }
    }

    private static func isUsable(_ entry: Entry) -> Bool {
        !entry.health.isDisabled && (entry.backend.descriptor.requiredISA.map { $0.isSupported() } ?? true)
    }

    /// The backend called `name`, if registered.
    public func backend(named name: String) -> (any Backend)? { lock.withLock { entries.first { $0.backend.descriptor.name == name }?.backend } }

    /// The health of the backend called `name` (its disabled reason, if any).
    public func health(of name: String) -> BackendHealth? { lock.withLock { entries.first { $0.backend.descriptor.name == name }?.health } }

    /// Plugins loaded, with the fate of each of their backends.
    public var plugins: [LoadedPlugin] { lock.withLock { loaded } }
    /// Why each plugin that was refused outright was refused, one message per plugin.
    public var pluginFailures: [String] { lock.withLock { failures } }
    /// What happened to backends while running (one line per backend disabled), oldest first.
    public var events: [String] { lock.withLock { eventLog } }

    /// The backend and placement for `op` on `type` under `units`; nil when no backend runs it at all (a type Ember
    /// cannot compute with).
    public func place(_ op: Op, type: TensorType, units: ComputeUnits) -> (any Backend, Placement)? {
        let candidates = lock.withLock { entries.filter { Self.isUsable($0) && $0.backend.descriptor.runs(op, on: type) }.map(\.backend) }
        var passed: [String] = []
        for unit in units.searchOrder {
            guard let best = candidates.filter({ $0.descriptor.unit == unit }).max(by: { $0.descriptor.score < $1.descriptor.score }) else {
                passed.append("\(unit) has no \(op) for \(type)")
                continue
            }
            var reasons = passed
            if !passed.isEmpty { reasons.append("fell back to \(unit)" + (units.contains(unit) ? "" : " (the CPU route is always the last resort)")) }
            if op == .matmul, let conversion = best.descriptor.conversion, best.descriptor.convertedTypes.contains(type) {
                reasons.append(conversion)
            }
            let descriptor = best.descriptor
            return (best, Placement(op: op, type: type, unit: unit, backend: descriptor.name, plugin: descriptor.source.isPlugin,
                                    fallbackReason: reasons.isEmpty ? nil : reasons.joined(separator: "; ")))
        }
        return nil
    }

    /// `op` on `type` under `units` bound for a forward pass: the placed backend's function, with the reference's as
    /// the fallback. Throws when no backend runs it.
    public func bind(_ op: Op, type: TensorType, units: ComputeUnits) throws -> BoundOp {
        guard let (backend, placement) = place(op, type: type, units: units) else {
            throw KernelError.invalidArgument(argument: "\(op)", found: "\(type)", expected: "a type some backend runs \(op) on")
        }
        let entry = lock.withLock { entries.first { $0.backend === backend } }
        return BoundOp(placement: placement, primary: backend.opTable, fallback: reference.opTable,
                       health: backend.descriptor.source.isPlugin ? entry?.health : nil, serializer: entry?.serializer,
                       owners: [backend, reference])
    }

    /// The matmul on `w` under `units`, bound to `w` for a caller that splits the rows itself (see ``BoundMatmul``).
    public func bindMatmul(_ w: WeightMatrix, units: ComputeUnits, pool: WorkerPool?) throws -> BoundMatmul {
        guard let (backend, placement) = place(.matmul, type: w.type, units: units) else {
            throw KernelError.invalidArgument(argument: "weights", found: "\(w.type)", expected: "a type some backend multiplies (\(TensorType.computable))")
        }
        do {
            return try backend.bindMatmul(w, placement: placement, pool: pool)
        } catch where backend.descriptor.source.isPlugin {
            // A plugin that cannot bind these weights is disabled; the next backend takes them.
            health(of: backend.descriptor.name)?.disable("bind_weights \(w.rows)×\(w.columns) \(w.type): \(error)")
            return try bindMatmul(w, units: units, pool: pool)
        }
    }

    /// The copy the backend placed for the matmul of `type` under `units` keeps (nil: no backend multiplies it).
    public func matmulCopy(type: TensorType, units: ComputeUnits) -> WeightCopy? {
        place(.matmul, type: type, units: units).map { $0.0.matmulCopy(for: type) }
    }

    /// Where each of `ops` would run under `units`, in order (ops no backend runs are left out).
    public func plan(_ ops: [OpSupport], units: ComputeUnits) -> [Placement] {
        ops.compactMap { place($0.op, type: $0.type, units: units)?.1 }
    }
}
