import Foundation

/// Something that runs ops: Ember's own CPU SIMD, BLAS and scalar paths, or a
/// plugin loaded through the versioned C ABI (`CKernels/include/ember_plugin.h`).
///
/// A backend says which ops it runs on which tensor types and on which
/// compute-unit route (``descriptor``), gives the C functions that run its
/// element-wise and attention ops (``opTable``, the ABI's signatures), binds a
/// weight matrix for its matmul once, at load (``bindMatmul(_:placement:pool:)``:
/// packing, converting, or handing the bytes to a plugin's `bind_weights`), and
/// is measured by calibration (``ComputeContext/calibrate()``). The
/// ``BackendRegistry`` places each op of a forward pass on one backend, with
/// fallback to the next.
public protocol Backend: AnyObject, Sendable {
    /// Its name, route, score, origin and what it runs.
    var descriptor: BackendDescriptor { get }
    /// Its op functions (nil for ops it does not run), with the context they take.
    var opTable: OpTable { get }
    /// `weights` bound for this backend's matmul (repacked or converted once), placed as `placement` says.
    /// `pool` lends threads to the one-time work (it may be nil: the caller's thread does it).
    func bindMatmul(_ weights: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul
    /// The copy of weights of `type` that ``bindMatmul(_:placement:pool:)`` makes and keeps.
    func matmulCopy(for type: TensorType) -> WeightCopy
}

extension Backend {
    /// None known: a plugin's `bind_weights` keeps what it keeps, outside what Ember can count.
    public func matmulCopy(for type: TensorType) -> WeightCopy { .none }
}

/// Where a backend comes from.
public enum BackendSource: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Shipped with Ember.
    case builtIn
    /// From the plugin library that calls itself `name`, loaded from `path`.
    case plugin(name: String, path: String)

    /// "built-in", or "plugin NAME (PATH)".
    public var description: String {
        switch self {
        case .builtIn: "built-in"
        case let .plugin(name, path): "plugin \(name) (\(path))"
        }
    }

    /// Whether it came from a plugin.
    public var isPlugin: Bool { if case .plugin = self { true } else { false } }
}

/// What a backend is and runs: the data the registry places ops by.
public struct BackendDescriptor: Sendable {
    /// A name unique in the registry, e.g. "simd-avx2", "openblas", "scalar-reference".
    public var name: String
    /// The compute-unit route it belongs to (its ops run on that route's execution resource).
    public var unit: ComputeUnit
    /// Rank among the backends of one route for the same op and type: the highest wins.
    public var score: Int
    /// Built in, or the plugin it came from.
    public var source: BackendSource
    /// Whether its ops may run on several threads at once over disjoint outputs; if not, Ember serialises its calls.
    public var concurrent: Bool
    /// Every (op, type) it runs.
    public var supports: Set<OpSupport>
    /// What it does to weights of ``convertedTypes`` before its kernels read them ("dequantized to fp32 once, cached").
    public var conversion: String?
    /// The weight types its matmul converts at bind time instead of reading as stored.
    public var convertedTypes: Set<TensorType>
    /// The kernel family it needs (the built-in SIMD backends), if any; it is available only where the CPU has it.
    public var requiredISA: KernelISA?

    /// A descriptor; see each property.
    public init(name: String, unit: ComputeUnit, score: Int, source: BackendSource = .builtIn, concurrent: Bool = true,
                supports: Set<OpSupport>, conversion: String? = nil, convertedTypes: Set<TensorType> = [],
                requiredISA: KernelISA? = nil) {
        self.name = name
        self.unit = unit
        self.score = score
        self.source = source
        self.concurrent = concurrent
        self.supports = supports
        self.conversion = conversion
        self.convertedTypes = convertedTypes
        self.requiredISA = requiredISA
    }

    /// Whether it runs `op` on `type`.
    public func runs(_ op: Op, on type: TensorType) -> Bool { supports.contains(OpSupport(op, type)) }

    /// Its ops, each with the types it runs them on, in ``Op`` order.
    public var opsByKind: [(op: Op, types: [TensorType])] {
        Op.allCases.compactMap { op in
            let types = supports.filter { $0.op == op }.map(\.type).sorted { $0.id < $1.id }
            return types.isEmpty ? nil : (op, types)
        }
    }
}

/// Why a plugin was refused or a backend disabled. Each case names the
/// library and the field or op at fault with what was found and expected; a
/// refused plugin registers nothing and the rest of Ember keeps working.
public enum PluginError: Error, Equatable, CustomStringConvertible {
    /// The shared library could not be loaded.
    case cannotOpen(path: String, reason: String)
    /// It does not export `ember_plugin_entry`.
    case missingEntryPoint(path: String)
    /// A field holds something other than what the ABI allows.
    case invalidField(path: String, field: String, found: String, expected: String)
    /// Its self-test or Ember's check of one of its ops failed: the backend is disabled.
    case failedCheck(path: String, backend: String, reason: String)

    /// One line naming the library path and what is wrong, e.g. "PATH: exports no ember_plugin_entry".
    public var description: String {
        switch self {
        case let .cannotOpen(path, reason):
            "\(path): cannot load plugin: \(reason)"
        case let .missingEntryPoint(path):
            "\(path): exports no ember_plugin_entry"
        case let .invalidField(path, field, found, expected):
            "\(path): \(field) is \(found), expected \(expected)"
        case let .failedCheck(path, backend, reason):
            "\(path): backend \(backend) disabled: \(reason)"
        }
    }
}
