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
/// its functions are called through the fault guard, its matmul binds the
/// weights once through its `bind_weights` (or reads the GGUF bytes), and a
/// failing matmul falls back to the reference backend's binding of the same
/// weights.
final class PluginBackend: Backend, @unchecked Sendable {
    let descriptor: BackendDescriptor
    let opTable: OpTable
    let table: ember_backend
    let library: PluginLibrary
    let reference: any Backend
    /// Set by the registry when it registers the backend, so a failing matmul can disable it.
    var health: BackendHealth?

    init(descriptor: BackendDescriptor, table: ember_backend, library: PluginLibrary, reference: any Backend) {
        self.descriptor = descriptor
        self.table = table
        self.library = library
        self.reference = reference
        var ops = OpTable(context: table.context, guarded: true)
        ops.embedding = table.embedding
        ops.rmsNorm = table.rms_norm
        ops.layerNorm = table.layer_norm
        ops.rope = table.rope
        ops.attentionScores = table.attention_scores
        ops.softmax = table.softmax
        ops.attentionValues = table.attention_values
        ops.silu = table.silu
        ops.gelu = table.gelu
        ops.swiglu = table.swiglu
        ops.add = table.add
        ops.mul = table.mul
        opTable = ops
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
        let name = descriptor.name, context = table.context, type = w.type
        let weights: UnsafeRawPointer
        var binding: Binding?
        if let bind = table.bind_weights {
            binding = try w.binding("plugin:\(name)") { () throws -> Binding in
                var bound: UnsafeMutableRawPointer?
                let status = ek_guarded_bind_weights(bind, context, type.id, Int64(w.rows), Int64(w.columns), w.bytes.baseAddress,
                                                     w.bytes.count, &bound)
                guard status == 0, let bound else {
                    throw KernelError.rejected(kernel: name, argument: "bind_weights", status: Int(status) == Int(EK_GUARD_CRASHED)
                                               ? "crashed with \(signalName(ek_guard_last_signal()))" : "returned \(status)")
                }
                let release = table.release_weights.map { function in { ek_guarded_release_weights(function, context, bound) } }
                return Binding(pointer: UnsafeRawPointer(bound), release: release)
            }
            weights = binding!.pointer
        } else {
            weights = w.bytes.baseAddress!
        }
        let referencePlacement = Placement(op: .matmul, type: type, unit: reference.descriptor.unit, backend: reference.descriptor.name,
                                           plugin: false, fallbackReason: "\(name) failed")
        let fallback = try reference.bindMatmul(w, placement: referencePlacement, pool: pool)
        let preparation = descriptor.runs(.quantizeActivations, on: type) ? ActivationPreparation.plugin(backend: name, type: type, table: table) : nil
        let (n, k) = (Int64(w.rows), Int64(w.columns))
        let owner = PluginMatmulOwner(weights: w, binding: binding, fallback: fallback)
        let health = self.health
        return BoundMatmul(placement: placement, rows: w.rows, columns: w.columns, preparation: preparation,
                           splittable: descriptor.concurrent, owner: owner) { x, prepared, m, y, range in
            if health?.isDisabled != true {
                let status = ek_guarded_matmul(matmul, context, weights, type.id, n, k, x, prepared, Int64(m), y, n,
                                               Int64(range.lowerBound), Int64(range.upperBound))
                if status == 0 { return 0 }
                health?.disable(Int(status) == Int(EK_GUARD_CRASHED) ? "matmul crashed with \(signalName(ek_guard_last_signal()))"
                                                                      : "matmul returned \(status)")
            }
            return fallback.runPreparingItself(x, m: m, into: y, rows: range)
        }
    }
}

/// What a plugin's bound matmul keeps alive: the weights, the plugin's binding, the fallback's binding.
final class PluginMatmulOwner: @unchecked Sendable {
    let weights: WeightMatrix
    let binding: PluginBackend.Binding?
    let fallback: BoundMatmul
    init(weights: WeightMatrix, binding: PluginBackend.Binding?, fallback: BoundMatmul) {
        self.weights = weights
        self.binding = binding
        self.fallback = fallback
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

// MARK: - Loading and checking

/// Loads plugin libraries into a registry: checks every field of the ABI 2
/// table, then runs each declared op of each backend on test data against the
/// reference (guard values around outputs, inputs compared after the call, the
/// fault guard around every call) before the backend takes any op.
struct PluginLoader {
    let registry: BackendRegistry
    let features: CPUFeatures

    func load(at path: String) throws -> LoadedPlugin {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw PluginError.cannotOpen(path: path, reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        let library = PluginLibrary(path: path, handle: handle)
        do {
            guard let symbol = dlsym(handle, EMBER_PLUGIN_ENTRY_SYMBOL) else { throw PluginError.missingEntryPoint(path: path) }
            ek_guard_install()
            let entry = unsafeBitCast(symbol, to: ember_plugin_entry_fn.self)
            var table: UnsafePointer<ember_plugin>?
            guard ek_guarded_plugin_entry(entry, &table) == 0 else {
                throw PluginError.invalidField(path: path, field: "ember_plugin_entry()", found: "a crash (\(signalName(ek_guard_last_signal())))",
                                               expected: "a plugin table")
            }
            return try register(validate(table, path: path), library: library, path: path)
        } catch {
            dlclose(handle)
            throw error
        }
    }

    private func invalid(_ path: String, _ field: String, _ found: String, _ expected: String) -> PluginError {
        .invalidField(path: path, field: field, found: found, expected: expected)
    }

    /// Every check the ABI promises, before anything is registered: the plugin's name and each backend's table.
    func validate(_ table: UnsafePointer<ember_plugin>?, path: String) throws -> (name: String, backends: [(BackendDescriptor, ember_backend)]) {
        guard let table else { throw invalid(path, "ember_plugin_entry()", "NULL", "a plugin table") }
        // size and abi_version come first in every ABI struct: safe to read before anything else.
        let header = UnsafeRawPointer(table)
        let size = header.load(as: UInt32.self), version = header.load(fromByteOffset: 4, as: UInt32.self)
        guard version == EMBER_PLUGIN_ABI_VERSION else {
            let hint = version == 1 ? " (version 1 is the matmul-only ABI; rebuild the plugin against ember_plugin.h version 2)" : ""
            throw invalid(path, "abi_version", "\(version)\(hint)", "\(EMBER_PLUGIN_ABI_VERSION)")
        }
        guard size == MemoryLayout<ember_plugin>.size else {
            throw invalid(path, "size", "\(size)", "\(MemoryLayout<ember_plugin>.size) (sizeof ember_plugin)")
        }
        let name = try Self.validName(table.pointee.name, field: "name") { invalid(path, $0, $1, $2) }
        let count = Int(table.pointee.backend_count)
        guard (1...16).contains(count) else { throw invalid(path, "backend_count", "\(count)", "1…16") }
        guard let backends = table.pointee.backends else { throw invalid(path, "backends", "NULL", "an array of \(count) backends") }
        var result: [(BackendDescriptor, ember_backend)] = []
        for index in 0..<count {
            let field = "backends[\(index)]"
            let raw = UnsafeRawPointer(backends + index)
            let backendSize = raw.load(as: UInt32.self), backendVersion = raw.load(fromByteOffset: 4, as: UInt32.self)
            guard backendSize == MemoryLayout<ember_backend>.size else {
                throw invalid(path, "\(field).size", "\(backendSize)", "\(MemoryLayout<ember_backend>.size) (sizeof ember_backend)")
            }
            guard backendVersion == EMBER_PLUGIN_ABI_VERSION else {
                throw invalid(path, "\(field).abi_version", "\(backendVersion)", "\(EMBER_PLUGIN_ABI_VERSION)")
            }
            let backend = backends[index]
            let descriptor = try describe(backend, field: field, plugin: name, path: path)
            guard result.allSatisfy({ $0.0.name != descriptor.name }) else {
                throw invalid(path, "\(field).name", descriptor.name, "a name used once")
            }
            result.append((descriptor, backend))
        }
        return (name, result)
    }

    private func describe(_ backend: ember_backend, field: String, plugin: String, path: String) throws -> BackendDescriptor {
        let backendName = try Self.validName(backend.name, field: "\(field).name") { invalid(path, $0, $1, $2) }
        let units: [UInt32: ComputeUnit] = [EMBER_UNIT_CPU.rawValue: .cpu, EMBER_UNIT_GPU.rawValue: .gpu,
                                            EMBER_UNIT_NEURAL_ENGINE.rawValue: .neuralEngine]
        guard let unit = units[backend.unit] else {
            throw invalid(path, "\(field).unit", "\(backend.unit)", "0 (CPU), 1 (GPU) or 2 (NEURAL_ENGINE)")
        }
        guard backend.flags & ~UInt32(EMBER_BACKEND_CONCURRENT) == 0 else {
            throw invalid(path, "\(field).flags", String(backend.flags, radix: 16), "bits within EMBER_BACKEND_CONCURRENT")
        }
        guard backend.required_features & ~UInt32(EMBER_FEATURE_ALL) == 0 else {
            throw invalid(path, "\(field).required_features", String(backend.required_features, radix: 16), "bits within EMBER_FEATURE_ALL")
        }
        let count = Int(backend.support_count)
        guard (1...1024).contains(count) else { throw invalid(path, "\(field).support_count", "\(count)", "1…1024") }
        guard let supports = backend.supports else { throw invalid(path, "\(field).supports", "NULL", "an array of \(count) (op, type) pairs") }
        var declared: Set<OpSupport> = []
        for index in 0..<count {
            let entry = supports[index]
            let where_ = "\(field).supports[\(index)]"
            guard let op = Op(abiValue: entry.op) else {
                throw invalid(path, "\(where_).op", "\(entry.op)", "an ember_op (1…\(Op.allCases.count))")
            }
            guard let type = TensorType(ggufID: entry.type), type.canDequantize else {
                throw invalid(path, "\(where_).type", "\(entry.type)", "a GGUF type id Ember computes with (\(TensorType.computable))")
            }
            guard Self.function(for: op, in: backend) else {
                throw invalid(path, "\(field).\(Self.functionName(op))", "NULL", "a function for the declared \(op)")
            }
            if op == .quantizeActivations, backend.activation_bytes == nil || backend.matmul == nil {
                throw invalid(path, "\(field).activation_bytes", "NULL", "activation_bytes and matmul with quantize_activations")
            }
            declared.insert(OpSupport(op, type))
        }
        if (backend.bind_weights == nil) != (backend.release_weights == nil) {
            throw invalid(path, "\(field).release_weights", backend.release_weights == nil ? "NULL" : "a function",
                          "given exactly when bind_weights is")
        }
        return BackendDescriptor(name: backendName, unit: unit, score: Int(backend.score), source: .plugin(name: plugin, path: path),
                                 concurrent: backend.flags & UInt32(EMBER_BACKEND_CONCURRENT) != 0, supports: declared)
    }

    private static func function(for op: Op, in b: ember_backend) -> Bool {
        switch op {
        case .matmul: b.matmul != nil
        case .quantizeActivations: b.quantize_activations != nil
        case .embedding: b.embedding != nil
        case .rmsNorm: b.rms_norm != nil
        case .layerNorm: b.layer_norm != nil
        case .rope: b.rope != nil
        case .attentionScores: b.attention_scores != nil
        case .softmax: b.softmax != nil
        case .attentionValues: b.attention_values != nil
        case .silu: b.silu != nil
        case .gelu: b.gelu != nil
        case .swiglu: b.swiglu != nil
        case .add: b.add != nil
        case .mul: b.mul != nil
        }
    }

    private static func functionName(_ op: Op) -> String { op.rawValue }

    /// Registers each valid backend; one that needs CPU features this machine lacks is skipped, one that fails its
    /// self-test or Ember's check of an op is registered disabled, with the reason.
    private func register(_ plugin: (name: String, backends: [(BackendDescriptor, ember_backend)]), library: PluginLibrary,
                          path: String) throws -> LoadedPlugin {
        let cpu = Self.featureBits(of: features)
        var accepted: [String] = [], skipped: [String] = []
        for (descriptor, table) in plugin.backends {
            if table.required_features & ~cpu != 0 {
                skipped.append("\(descriptor.name): needs CPU features \(String(table.required_features, radix: 16)), this CPU has \(String(cpu, radix: 16))")
                continue
            }
            let backend = PluginBackend(descriptor: descriptor, table: table, library: library, reference: registry.reference)
            try registry.register(backend)
            let health = registry.health(of: descriptor.name)
            backend.health = health
            if let failure = check(backend) {
                health?.disable(failure)
                skipped.append("\(descriptor.name): \(failure)")
            } else {
                accepted.append(descriptor.name)
            }
        }
        let loaded = LoadedPlugin(name: plugin.name, path: path, backends: accepted, skipped: skipped)
        registry.recordPlugin(loaded)
        return loaded
    }

    /// The plugin's own self-test, then every declared op against the reference; the first failure's reason, or nil.
    func check(_ backend: PluginBackend) -> String? {
        if let selfTest = backend.table.self_test {
            let status = ek_guarded_self_test(selfTest, backend.table.context)
            if Int(status) == Int(EK_GUARD_CRASHED) { return "self_test crashed with \(signalName(ek_guard_last_signal()))" }
            if status != 0 { return "self_test returned \(status)" }
        }
        for support in backend.descriptor.supports.sorted(by: { ($0.op.abiValue, $0.type.id) < ($1.op.abiValue, $1.type.id) }) {
            let probe = OpProbe(support: support, rows: 3)
            let expected: OpProbe.Outcome
            switch probe.run(on: registry.reference) {
            case let .success(outcome): expected = outcome
            case let .failure(failure): return "Ember cannot check \(support): \(failure)"
            }
            switch probe.run(on: backend) {
            case let .failure(failure): return failure.description
            case let .success(got):
                if !probe.agrees(got.values, with: expected.values) { return "\(support) computed results that disagree with the scalar reference" }
            }
        }
        return nil
    }

    static func validName(_ pointer: UnsafePointer<CChar>?, field: String,
                          invalid: (String, String, String) -> PluginError) throws -> String {
        guard let pointer else { throw invalid(field, "NULL", "1–63 printable characters") }
        let length = strnlen(pointer, 64)
        let bytes = UnsafeRawBufferPointer(start: pointer, count: length)
        guard length >= 1, length <= 63, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            throw invalid(field, length > 63 ? "longer than 63 characters" : "\"\(String(decoding: bytes, as: UTF8.self))\"",
                          "1–63 printable characters")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func featureBits(of features: CPUFeatures) -> UInt32 {
        let pairs: [(Bool, UInt32)] = [
            (features.avx2, EMBER_FEATURE_AVX2), (features.fma, EMBER_FEATURE_FMA), (features.f16c, EMBER_FEATURE_F16C),
            (features.avx512f, EMBER_FEATURE_AVX512F), (features.avx512bw, EMBER_FEATURE_AVX512BW),
            (features.avx512vl, EMBER_FEATURE_AVX512VL), (features.avx512vnni, EMBER_FEATURE_AVX512VNNI),
            (features.avxvnni, EMBER_FEATURE_AVXVNNI), (features.neon, EMBER_FEATURE_NEON), (features.dotprod, EMBER_FEATURE_DOTPROD),
        ]
        return pairs.reduce(0) { $0 | ($1.0 ? $1.1 : 0) }
    }
}
