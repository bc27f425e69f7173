import Foundation

/// Where a kernel came from.
public enum KernelSource: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Shipped with Ember.
    case builtIn
    /// From the plugin library that declares itself `name`, loaded from `path`.
    case plugin(name: String, path: String)

    /// "built-in", or "plugin NAME (PATH)".
    public var description: String {
        switch self {
        case .builtIn: "built-in"
        case let .plugin(name, path): "plugin \(name) (\(path))"
        }
    }
}

/// One registered kernel: what it computes, on which unit, how good it is.
public struct RegisteredKernel: Sendable {
    /// The name placements show, e.g. "openblas-sgemm".
    public var name: String
    /// The operation it computes.
    public var op: ComputeOperation
    /// Weight formats it takes.
    public var formats: [WeightFormat]
    /// The compute unit whose route it runs on.
    public var unit: ComputeUnit
    /// The kernel family it needs (built-in SIMD kernels), if any.
    public var requiredISA: KernelISA?
    /// Rank among available kernels for the same op, format and unit: the highest wins.
    public var score: Int
    /// Built in, or the plugin it came from.
    public var source: KernelSource
    /// What the kernel does to weights not in its native format ("dequantized to fp32 once, cached").
    public var conversion: String?
    /// Y = X·Wᵀ into `y` ([M, N]).
    let run: @Sendable (_ x: Tensor, _ w: WeightMatrix, _ y: inout Tensor) throws -> Void
    /// The same product bound to one weight matrix for callers that split rows
    /// themselves; nil for kernels that only run whole ops.
    let bind: (@Sendable (_ w: WeightMatrix, _ placement: Placement) throws -> BoundMatmul)?

    /// A kernel for `op` on weights in `formats`, on `unit`: `run` computes a whole op, and the optional `bind`
    /// binds it to one weight matrix for callers that split rows (see ``BoundMatmul``).
    public init(name: String, op: ComputeOperation, formats: [WeightFormat], unit: ComputeUnit, requiredISA: KernelISA? = nil,
                score: Int, source: KernelSource = .builtIn, conversion: String? = nil,
                run: @escaping @Sendable (_ x: Tensor, _ w: WeightMatrix, _ y: inout Tensor) throws -> Void,
                bind: (@Sendable (_ w: WeightMatrix, _ placement: Placement) throws -> BoundMatmul)? = nil) {
        self.name = name
        self.op = op
        self.formats = formats
        self.unit = unit
        self.requiredISA = requiredISA
        self.score = score
        self.source = source
        self.conversion = conversion
        self.run = run
        self.bind = bind
    }

    /// Whether this machine can run it.
    public var isAvailable: Bool { requiredISA.map { $0.isSupported() } ?? true }
}

/// Where one op runs and why: an entry of a ``ComputePlan``.
public struct Placement: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The operation placed.
    public var op: ComputeOperation
    /// The format of the weights it runs on.
    public var format: WeightFormat
    /// The unit it runs on; `.cpu` when no kernel takes it.
    public var unit: ComputeUnit
    /// The kernel, or nil for ops the model code runs itself on the CPU route.
    public var kernel: String?
    /// The kernel's ``KernelSource`` description ("built-in" or "plugin NAME (PATH)"); nil when there is no kernel.
    public var source: String?
    /// Why it runs there: which preferred units had no kernel, and any conversion of the weights.
    public var reason: String

    /// One line, e.g. "matmul q4_0 → neural-engine [ember-simd-avx2]: REASON".
    public var description: String {
        "\(op) \(format) → \(unit)\(kernel.map { " [\($0)]" } ?? ""): \(reason)"
    }
}

/// Every kernel Ember can run, built-in and from plugins, keyed by
/// (op, weight format, unit) with a score. Lookup takes the allowed units in
/// preference order (neural engine, GPU, CPU), picks the best available
/// kernel on the first unit that has one, and falls back op by op — finally
/// to the CPU route, which runs everything.
public final class KernelRegistry: @unchecked Sendable {
    /// The registry every model uses: the built-in kernels, plus plugins from `EMBER_PLUGIN_PATH`.
    public static let shared: KernelRegistry = {
        let registry = KernelRegistry()
        registry.registerBuiltIns()
        registry.loadPluginsFromEnvironment()
        return registry
    }()

    private let lock = NSLock()
    private var kernels: [RegisteredKernel] = []
    private var loadedPlugins: [LoadedPlugin] = []
    private var failures: [String] = []

    /// An empty registry: no built-in kernels and no plugins (``shared`` has both).
    public init() {}

    /// Adds a kernel (built-ins register through here too).
    public func register(_ kernel: RegisteredKernel) {
        lock.withLock { kernels.append(kernel) }
    }

    /// Every registered kernel, best first within each (op, unit).
    public var all: [RegisteredKernel] {
        lock.withLock { kernels.sorted { ($0.op.rawValue, $0.unit.rawValue, -$0.score) < ($1.op.rawValue, $1.unit.rawValue, -$1.score) } }
    }

    /// Plugins loaded, and why the refused ones were refused.
    public var plugins: [LoadedPlugin] { lock.withLock { loadedPlugins } }
    /// Why each refused plugin from `EMBER_PLUGIN_PATH` was refused, one message per plugin.
    public var pluginFailures: [String] { lock.withLock { failures } }

    func recordPlugin(_ plugin: LoadedPlugin, kernels added: [RegisteredKernel]) {
        lock.withLock {
            loadedPlugins.append(plugin)
            kernels.append(contentsOf: added)
        }
    }

    func recordFailure(_ text: String) { lock.withLock { failures.append(text) } }

    /// The kernel and placement for `op` on weights of `format` under `units`.
    public func select(_ op: ComputeOperation, format: WeightFormat, units: ComputeUnits) -> (RegisteredKernel?, Placement) {
        let candidates = lock.withLock { kernels.filter { $0.op == op && $0.formats.contains(format) && $0.isAvailable } }
        var passed: [String] = []
        for unit in units.searchOrder {
            if let best = candidates.filter({ $0.unit == unit }).max(by: { $0.score < $1.score }) {
                var reason = passed.isEmpty ? "\(unit) is the preferred allowed unit" : passed.joined(separator: "; ") + "; fell back to \(unit)"
                if !units.contains(unit) { reason += " (the CPU route is always the last resort)" }
                if let conversion = best.conversion, format != .f32 { reason += "; \(conversion)" }
                return (best, Placement(op: op, format: format, unit: unit, kernel: best.name,
                                        source: best.source.description, reason: reason))
            }
            passed.append("\(unit) has no \(op) kernel for \(format)")
        }
        let reason = (passed.isEmpty ? "" : passed.joined(separator: "; ") + "; ") + "runs in the model's portable code on the CPU route"
        return (nil, Placement(op: op, format: format, unit: .cpu, kernel: nil, source: nil, reason: reason))
    }

    /// The best kernel for a matmul on `w` under `units`, bound to `w` for a
    /// caller that splits the rows itself (see ``BoundMatmul``).
    public func bindMatmul(_ w: WeightMatrix, units: ComputeUnits) throws -> BoundMatmul {
        let (kernel, placement) = select(.matmul, format: w.format, units: units)
        guard let kernel else {
            throw KernelError.invalidArgument(argument: "w", found: "\(w.format)", expected: "a format some matmul kernel takes")
        }
        if let bind = kernel.bind { return try bind(w, placement) }
        return BoundMatmul.whole(kernel, w, placement: placement)
    }

    /// Where each op of `ops` would run under `units`, like Core ML's `MLComputePlan`.
    public func plan(_ ops: [(ComputeOperation, WeightFormat)], units: ComputeUnits) -> ComputePlan {
        ComputePlan(units: units, placements: ops.map { select($0.0, format: $0.1, units: units).1 })
    }
}

/// Per op, the unit it runs on and why.
public struct ComputePlan: Sendable, Codable, CustomStringConvertible {
    /// The units the plan was made for.
    public var units: ComputeUnits
    /// One placement per op, in the order the ops were given.
    public var placements: [Placement]

    /// "compute plan for UNITS:" followed by one indented line per placement.
    public var description: String {
        (["compute plan for \(units):"] + placements.map { "  \($0)" }).joined(separator: "\n")
    }
}
