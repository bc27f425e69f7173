import _CEmberKernels
import Foundation

/// An open plugin library; it stays open while any of its backends exists.
final class PluginLibrary: @unchecked Sendable {
    let path: String
    private let handle: UnsafeMutableRawPointer

    init(path: String, handle: UnsafeMutableRawPointer) {
        self.path = path
        self.handle = handle
    }
}

/// A backend from a plugin's `ember_backend` table (`ember_plugin.h`, ABI 2):
/// its functions are called through the fault guard (and one at a time when
/// it does not declare `EMBER_BACKEND_CONCURRENT`), its matmul binds the
/// weights once through its `bind_weights` (or reads the GGUF bytes), and a
/// failing call disables it and is redone by the reference backend.
final class PluginBackend: Backend, @unchecked Sendable {
    let descriptor: BackendDescriptor
    let opTable: OpTable
    let table: ember_backend
    let library: PluginLibrary
    let reference: any Backend
    /// Whether the backend may still be used; made before its checks, so every call sees the same object.
    let health: BackendHealth
    /// Serialises every call (ops, matmul, bind_weights) of a backend that is not concurrent.
    let serializer: NSLock?

    init(descriptor: BackendDescriptor, table: ember_backend, library: PluginLibrary, reference: any Backend, health: BackendHealth) {
        self.descriptor = descriptor
        self.table = table
        self.library = library
        self.reference = reference
        self.health = health
        serializer = descriptor.concurrent ? nil : NSLock()
        var ops = OpTable(context: table.context, guarded: true)
        ops.embedding = table.embedding
        ops.rmsNorm = table.rms_norm
        ops.layerNorm = table.layer_norm
        ops.rope = table.rope
        ops.attentionScores = table.attention_scores
        ops.softmax = table.softmax
        ops.attentionValues = table.attention_values
        ops.attention = table.attention
        ops.silu = table.silu
        ops.gelu = table.gelu
        ops.swiglu = table.swiglu
        ops.geglu = table.geglu
        ops.sequenceAttention = table.sequence_attention
        ops.add = table.add
        ops.mul = table.mul
        opTable = ops
    }

    /// Runs `body` alone when the backend is not concurrent.
    @inline(__always)
    func serialized<R>(_ body: () throws -> R) rethrows -> R {
        if let serializer { return try serializer.withLock(body) }
        return try body()
    }

    /// What `bind_weights` made for one weight matrix, released with it.
    final class Binding: @unchecked Sendable {
        let pointer: UnsafeRawPointer
        private let release: (() -> Void)?
        init(pointer: UnsafeRawPointer, release: (() -> Void)?) {
            self.pointer = pointer
            self.release = release
        }
        deinit { release?() }
    }

    func bindMatmul(_ w: WeightMatrix, placement: Placement, pool: WorkerPool?) throws -> BoundMatmul {
        guard let matmul = table.matmul else {
            throw KernelError.invalidArgument(argument: "\(descriptor.name).matmul", found: "NULL", expected: "a function")
        }
        let binding = try bindWeights(w)
        let weights = binding?.pointer ?? UnsafeRawPointer(w.bytes.baseAddress!)
        let (context, type, n, k, health) = (table.context, w.type, Int64(w.rows), Int64(w.columns), health)
        let fallback = LazyFallback(reference: reference, weights: w)
        let preparation = descriptor.runs(.quantizeActivations, on: type)
            ? ActivationPreparation.plugin(backend: descriptor.name, type: type, table: table, health: health, serializer: serializer) : nil
        let owner = PluginMatmulOwner(weights: w, binding: binding, fallback: fallback, backend: self)
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: preparation,
                           splittable: descriptor.concurrent, owner: owner) { [serializer] x, prepared, m, y, range in
            if !health.isDisabled {
                let call = {
                    ek_guarded_matmul(matmul, context, weights, type.id, n, k, x, prepared, Int64(m), y, n,
                                      Int64(range.lowerBound), Int64(range.upperBound))
                }
                let status = serializer.map { $0.withLock(call) } ?? call()
                if status == 0 { return 0 }
                health.disable(Int(status) == Int(EK_GUARD_CRASHED) ? "matmul crashed with \(signalName(ek_guard_last_signal()))"
                                                                      : "matmul returned \(status)")
            }
            guard let reference = fallback.bound() else { return -1 }
            return reference.runPreparingItself(x, m: m, into: y, rows: range)
        }
    }

    /// The plugin's binding of `w` (made once, cached on `w`), or nil when the backend binds nothing.
    func bindWeights(_ w: WeightMatrix) throws -> Binding? {
        guard let bind = table.bind_weights else { return nil }
        let (name, context, type, health) = (descriptor.name, table.context, w.type, health)
        return try w.binding("plugin:\(name)") { () throws -> Binding in
            var bound: UnsafeMutableRawPointer?
            let status = serialized {
                ek_guarded_bind_weights(bind, context, type.id, Int64(w.rows), Int64(w.columns), w.bytes.baseAddress, w.bytes.count, &bound)
            }
            guard status == 0, let bound else {
                let what = Int(status) == Int(EK_GUARD_CRASHED) ? "crashed with \(signalName(ek_guard_last_signal()))"
                    : status == 0 ? "gave NULL" : "returned \(status)"
                throw KernelError.rejected(kernel: name, argument: "bind_weights", status: what)
            }
            let serializer = serializer
            let release = table.release_weights.map { function in
                {
                    let status = serializer.map { $0.withLock { ek_guarded_release_weights(function, context, bound) } }
                        ?? ek_guarded_release_weights(function, context, bound)
                    if status != 0 { health.disable("release_weights crashed with \(signalName(ek_guard_last_signal()))") }
                }
            }
            return Binding(pointer: UnsafeRawPointer(bound), release: release)
        }
    }
}

/// The reference backend's binding of a plugin matmul's weights, made the first time the plugin fails (not at load:
/// it would double the weights' memory for a path that is rarely taken).
final class LazyFallback: @unchecked Sendable {
    private let reference: any Backend
    private let weights: WeightMatrix
    private let lock = NSLock()
    private var made: BoundMatmul?
    private var failed = false

    init(reference: any Backend, weights: WeightMatrix) {
        self.reference = reference
        self.weights = weights
    }

    func bound() -> BoundMatmul? {
        lock.withLock {
            if made == nil && !failed {
                let placement = Placement(op: .matmul, type: weights.type, unit: reference.descriptor.unit,
                                          backend: reference.descriptor.name, plugin: false, fallbackReason: "the plugin failed")
                made = try? reference.bindMatmul(weights, placement: placement, pool: nil)
                failed = made == nil
            }
            return made
        }
    }
}

/// What a plugin's bound matmul keeps alive: the weights, the plugin's binding, the fallback, the backend (its library).
final class PluginMatmulOwner: @unchecked Sendable {
    let weights: WeightMatrix
    let binding: PluginBackend.Binding?
    let fallback: LazyFallback
    let backend: PluginBackend
    init(weights: WeightMatrix, binding: PluginBackend.Binding?, fallback: LazyFallback, backend: PluginBackend) {
        self.weights = weights
        self.binding = binding
        self.fallback = fallback
        self.backend = backend
    }
}

extension BoundMatmul {
    /// Rows `range` from fp32 `x` alone, preparing the activations this kernel reads itself (the fallback path of a
    /// plugin's matmul, whose preparation is the plugin's own).
    func runPreparingItself(_ x: UnsafePointer<Float>, m: Int, into y: UnsafeMutablePointer<Float>, rows range: Range<Int>) -> Int32 {
        guard let preparation else { return run(x, prepared: nil, m: m, into: y, rows: range) }
        let bytes = preparation.byteCount(rows: m, columns: columns)
        guard bytes > 0 else { return -1 }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        defer { buffer.deallocate() }
        let status = preparation.prepare(x, rows: m, columns: columns, into: buffer, capacity: bytes)
        guard status == 0 else { return status }
        return run(x, prepared: UnsafeRawPointer(buffer), m: m, into: y, rows: range)
    }
}
