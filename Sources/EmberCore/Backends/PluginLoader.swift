import _CEmberKernels
import Foundation

/// Loads plugin libraries into a registry. Every table is read through the
/// fault guard and every field checked (ABI 2) before anything is
/// registered; then each declared op of each backend runs on test data
/// against the reference — guard values around every output, inputs compared
/// after the call, the fault guard around every call — before the backend is
/// registered. A backend that fails is registered disabled, with the reason,
/// so placement never sees it as usable.
struct PluginLoader {
    let registry: BackendRegistry
    let features: CPUFeatures

    func load(at path: String) throws -> LoadedPlugin {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw PluginError.cannotOpen(path: path, reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        let library = PluginLibrary(path: path, handle: handle)
        let plugin: (name: String, backends: [(BackendDescriptor, ember_backend)])
        do {
            guard let symbol = dlsym(handle, EMBER_PLUGIN_ENTRY_SYMBOL) else { throw PluginError.missingEntryPoint(path: path) }
            ek_guard_install()
            let entry = unsafeBitCast(symbol, to: ember_plugin_entry_fn.self)
            var table: UnsafePointer<ember_plugin>?
            guard ek_guarded_plugin_entry(entry, &table) == 0 else {
                throw PluginError.invalidField(path: path, field: "ember_plugin_entry()", found: "a crash (\(signalName(ek_guard_last_signal())))",
                                               expected: "a plugin table")
            }
            plugin = try validate(table, path: path)
            for (descriptor, _) in plugin.backends where registry.backend(named: descriptor.name) != nil {
                throw invalid(path, "backend \(descriptor.name)", "a name another backend has", "a name unique in the process")
            }
        } catch {
            dlclose(handle) // nothing was registered: the library can go
            throw error
        }
        // From here on backends may be registered: the library stays open.
        return try register(plugin, library: library, path: path)
    }

    /// `sizeof(ember_backend)` in ABI 2's first header, which ended at `mul`.
    static let firstBackendSize = MemoryLayout<ember_backend>.offset(of: \ember_backend.attention)!
    /// `sizeof(ember_backend)` in ABI 2's second header, which ended at `geglu`.
    static let secondBackendSize = MemoryLayout<ember_backend>.offset(of: \ember_backend.sequence_attention)!

    private func invalid(_ path: String, _ field: String, _ found: String, _ expected: String) -> PluginError {
        .invalidField(path: path, field: field, found: found, expected: expected)
    }

    /// A copy of the `T` at `pointer` (memory the plugin handed over), read through the fault guard.
    private func read<T>(_ pointer: UnsafeRawPointer, as: T.Type, count: Int = 1, path: String, field: String) throws -> [T] {
        var copy = [UInt8](repeating: 0, count: MemoryLayout<T>.stride * count)
        let status = copy.withUnsafeMutableBytes { ek_guarded_read($0.baseAddress!, pointer, $0.count) }
        guard status == 0 else {
            throw invalid(path, field, "memory Ember cannot read (\(signalName(ek_guard_last_signal())))", "\(count) readable \(T.self)")
        }
        return copy.withUnsafeBytes { raw in (0..<count).map { raw.load(fromByteOffset: $0 * MemoryLayout<T>.stride, as: T.self) } }
    }

    /// Every check the ABI promises, before anything is registered: the plugin's name and each backend's table.
    func validate(_ pointer: UnsafePointer<ember_plugin>?, path: String) throws -> (name: String, backends: [(BackendDescriptor, ember_backend)]) {
        guard let pointer else { throw invalid(path, "ember_plugin_entry()", "NULL", "a plugin table") }
        // size and abi_version come first in every ABI struct: read them before anything else.
        let header = try read(UnsafeRawPointer(pointer), as: UInt32.self, count: 2, path: path, field: "ember_plugin_entry()")
        let (size, version) = (header[0], header[1])
        guard version == EMBER_PLUGIN_ABI_VERSION else {
            let hint = version == 1 ? " (version 1 is the matmul-only ABI; rebuild the plugin against ember_plugin.h version 2)" : ""
            throw invalid(path, "abi_version", "\(version)\(hint)", "\(EMBER_PLUGIN_ABI_VERSION)")
        }
        guard size == MemoryLayout<ember_plugin>.size else {
            throw invalid(path, "size", "\(size)", "\(MemoryLayout<ember_plugin>.size) (sizeof ember_plugin)")
        }
        let table = try read(UnsafeRawPointer(pointer), as: ember_plugin.self, path: path, field: "ember_plugin_entry()")[0]
        let name = try readName(table.name, field: "name", path: path)
        let count = Int(table.backend_count)
        guard (1...16).contains(count) else { throw invalid(path, "backend_count", "\(count)", "1…16") }
        guard let backendsPointer = table.backends else { throw invalid(path, "backends", "NULL", "an array of \(count) backends") }
        var result: [(BackendDescriptor, ember_backend)] = []
        // The array's stride is the size the plugin was compiled with: this header's, ABI 2's first (before
        // `attention` and `geglu` were appended) or its second (before `sequence_attention`), read with the later
        // fields NULL.
        let sizes = [MemoryLayout<ember_backend>.size, Self.firstBackendSize, Self.secondBackendSize]
        let firstHeader = try read(UnsafeRawPointer(backendsPointer), as: UInt32.self, count: 2, path: path, field: "backends[0]")
        let stride = Int(firstHeader[0])
        for index in 0..<count {
            let field = "backends[\(index)]"
            let raw = UnsafeRawPointer(backendsPointer).advanced(by: sizes.contains(stride) ? index * stride : 0)
            let backendHeader = try read(raw, as: UInt32.self, count: 2, path: path, field: field)
            guard sizes.contains(Int(backendHeader[0])), Int(backendHeader[0]) == stride else {
                throw invalid(path, "\(field).size", "\(backendHeader[0])",
                              "\(MemoryLayout<ember_backend>.size) (sizeof ember_backend), \(Self.secondBackendSize) or \(Self.firstBackendSize) (ABI 2's earlier sizes), the same for every backend")
            }
            guard backendHeader[1] == EMBER_PLUGIN_ABI_VERSION else {
                throw invalid(path, "\(field).abi_version", "\(backendHeader[1])", "\(EMBER_PLUGIN_ABI_VERSION)")
            }
            var copy = [UInt8](repeating: 0, count: MemoryLayout<ember_backend>.size)
            let status = copy.withUnsafeMutableBytes { ek_guarded_read($0.baseAddress!, raw, stride) }
            guard status == 0 else {
                throw invalid(path, field, "memory Ember cannot read (\(signalName(ek_guard_last_signal())))", "\(stride) readable bytes")
            }
            let backend = copy.withUnsafeBytes { $0.load(as: ember_backend.self) }
            let descriptor = try describe(backend, field: field, plugin: name, path: path)
            guard result.allSatisfy({ $0.0.name != descriptor.name }) else {
                throw invalid(path, "\(field).name", descriptor.name, "a name used once")
            }
            result.append((descriptor, backend))
        }
        return (name, result)
    }

    private func describe(_ backend: ember_backend, field: String, plugin: String, path: String) throws -> BackendDescriptor {
        let backendName = try readName(backend.name, field: "\(field).name", path: path)
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
        guard let supportsPointer = backend.supports else {
            throw invalid(path, "\(field).supports", "NULL", "an array of \(count) (op, type) pairs")
        }
        let supports = try read(UnsafeRawPointer(supportsPointer), as: ember_op_support.self, count: count, path: path,
                                field: "\(field).supports")
        var declared: Set<OpSupport> = []
        for (index, entry) in supports.enumerated() {
            let place = "\(field).supports[\(index)]"
            guard let op = Op(abiValue: entry.op) else {
                throw invalid(path, "\(place).op", "\(entry.op)", "an ember_op (1…\(Op.allCases.count))")
            }
            guard let type = TensorType(ggufID: entry.type), type.canDequantize else {
                throw invalid(path, "\(place).type", "\(entry.type)", "a GGUF type id Ember computes with (\(TensorType.computable))")
            }
            guard Self.function(for: op, in: backend) else {
                throw invalid(path, "\(field).\(op.rawValue)", "NULL", "a function for the declared \(op)")
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
        case .geglu: b.geglu != nil
        case .attention: b.attention != nil
        case .sequenceAttention: b.sequence_attention != nil
        case .add: b.add != nil
        case .mul: b.mul != nil
        }
    }

    /// Checks each valid backend before registering it: one that needs CPU features this machine lacks is skipped, one
    /// that fails its self-test or Ember's check of an op is registered disabled with the reason.
    private func register(_ plugin: (name: String, backends: [(BackendDescriptor, ember_backend)]), library: PluginLibrary,
                          path: String) throws -> LoadedPlugin {
        let cpu = Self.featureBits(of: features)
        var accepted: [String] = [], skipped: [String] = []
        for (descriptor, table) in plugin.backends {
            if table.required_features & ~cpu != 0 {
                skipped.append("\(descriptor.name): needs CPU features \(String(table.required_features, radix: 16)), this CPU has \(String(cpu, radix: 16))")
                continue
            }
            let health = registry.makeHealth(for: descriptor.name)
            let backend = PluginBackend(descriptor: descriptor, table: table, library: library, reference: registry.reference, health: health)
            if let failure = check(backend) {
                health.disable(failure)
                skipped.append("\(descriptor.name): \(failure)")
            } else {
                accepted.append(descriptor.name)
            }
            try registry.register(backend, health: health, serializer: backend.serializer)
        }
        let loaded = LoadedPlugin(name: plugin.name, path: path, backends: accepted, skipped: skipped)
        registry.recordPlugin(loaded)
        return loaded
    }

    /// The plugin's own self-test, then every declared op against the reference; the first failure's reason, or nil.
    func check(_ backend: PluginBackend) -> String? {
        if let selfTest = backend.table.self_test {
            let status = backend.serialized { ek_guarded_self_test(selfTest, backend.table.context) }
            if Int(status) == Int(EK_GUARD_CRASHED) { return "self_test crashed with \(signalName(ek_guard_last_signal()))" }
            if status != 0 { return "self_test returned \(status)" }
        }
        for support in backend.descriptor.supports.sorted(by: { ($0.op.abiValue, $0.type.id) < ($1.op.abiValue, $1.type.id) }) {
            switch support.op {
            case .quantizeActivations:
                if let failure = PluginMatmulProbe(backend: backend, type: support.type).checkActivationSizes() { return failure }
            case .matmul:
                if let failure = PluginMatmulProbe(backend: backend, type: support.type).check(against: registry.reference) { return failure }
            default:
                let modes: [UInt32] = support.op == .rope ? [0, 2] : [0]
                for mode in modes {
                    let probe = OpProbe(support: support, rows: 3, ropeMode: mode)
                    let expected: OpProbe.Outcome
                    switch probe.run(on: registry.reference) {
                    case let .success(outcome): expected = outcome
                    case let .failure(failure): return "Ember cannot check \(support): \(failure)"
                    }
                    switch backend.serialized({ probe.run(on: backend) }) {
                    case let .failure(failure): return failure.description
                    case let .success(got):
                        if !probe.agrees(got.values, with: expected.values) {
                            return "\(support)\(support.op == .rope ? " (mode \(mode))" : "") computed results that disagree with the scalar reference"
                        }
                    }
                }
            }
        }
        return nil
    }

    private func readName(_ pointer: UnsafePointer<CChar>?, field: String, path: String) throws -> String {
        guard let pointer else { throw invalid(path, field, "NULL", "1–63 printable characters") }
        var buffer = [CChar](repeating: 0, count: 65)
        let length = Int(ek_guarded_read_string(&buffer, pointer, buffer.count))
        guard length != -2 else { throw invalid(path, field, "memory Ember cannot read", "1–63 printable characters") }
        guard length != -1 else { throw invalid(path, field, "longer than 63 characters", "1–63 printable characters") }
        let bytes = buffer.prefix(length).map { UInt8(bitPattern: $0) }
        guard length >= 1, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            throw invalid(path, field, "\"\(String(decoding: bytes, as: UTF8.self))\"", "1–63 printable characters")
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

/// A plugin's matmul (with its `bind_weights` and activation quantization, when it has them) called directly on test
/// weights — not through the bound matmul, whose fallback would hide a failure — with guard values around the
/// output and the prepared activations, on two row ranges so a kernel that writes outside its range is caught.
struct PluginMatmulProbe {
    let backend: PluginBackend
    let type: TensorType
    static let (m, n, k) = (3, 40, 96)
    private static let guardCount = 16
    private static let guardByte: UInt8 = 0xa5

    /// The activation sizes: linear in rows (each row the same bytes), positive and at most 64 bytes per value.
    func checkActivationSizes() -> String? {
        guard let size = backend.table.activation_bytes else { return "declares quantize_activations without activation_bytes" }
        for columns in [32, 96, 256] {
            let one = backend.serialized { ek_guarded_activation_bytes(size, backend.table.context, type.id, 1, Int64(columns)) }
            guard one > 0, one <= 64 * columns else {
                return "activation_bytes(1 row of \(columns)) is \(one), expected 1 to \(64 * columns) bytes"
            }
            for rows in [2, 3, 5, 8] {
                let bytes = backend.serialized { ek_guarded_activation_bytes(size, backend.table.context, type.id, Int64(rows), Int64(columns)) }
                guard bytes == rows * one else {
                    return "activation_bytes(\(rows) rows of \(columns)) is \(bytes), expected \(rows * one) (rows one after another)"
                }
            }
        }
        return nil
    }

    /// The first thing wrong with the plugin's matmul on `type`, or nil when it agrees with `reference`.
    func check(against reference: any Backend) -> String? {
        guard let matmul = backend.table.matmul else { return "declares matmul without a function" }
        let (m, n, k) = (Self.m, Self.n, Self.k)
        var generator = SplitMix64(seed: 77 + UInt64(type.id))
        let x = (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 }
        let values = (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 }
        guard let weights = try? OpProbe.matrix(values, rows: n, as: type) else { return "Ember cannot make \(type) weights to check matmul with" }
        let binding: PluginBackend.Binding?
        do { binding = try backend.bindWeights(weights) } catch { return "bind_weights \(n)×\(k) \(type): \(error)" }
        let weightPointer = binding?.pointer ?? UnsafeRawPointer(weights.bytes.baseAddress!)
        let context = backend.table.context
        // The prepared activations, if the backend makes its own, between guard bytes.
        var prepared: [UInt8] = []
        if backend.descriptor.runs(.quantizeActivations, on: type), let quantize = backend.table.quantize_activations,
           let size = backend.table.activation_bytes {
            let bytes = backend.serialized { ek_guarded_activation_bytes(size, context, type.id, Int64(m), Int64(k)) }
            guard bytes > 0 else { return "activation_bytes(\(m), \(k)) is \(bytes)" }
            prepared = [UInt8](repeating: Self.guardByte, count: bytes + 2 * Self.guardCount)
            let status = prepared.withUnsafeMutableBytes { out in
                backend.serialized {
                    ek_guarded_quantize_activations(quantize, context, type.id, x, Int64(m), Int64(k), out.baseAddress! + Self.guardCount, bytes)
                }
            }
            if let failure = Self.failure(status, "quantize_activations") { return failure }
            guard Self.intact(prepared, payload: bytes) else { return "quantize_activations wrote outside its \(bytes)-byte output" }
        }
        // The product over two row ranges, between guard values.
        let guardValue = Float(bitPattern: 0x7fc0_beef)
        var y = [Float](repeating: guardValue, count: m * n + 2 * Self.guardCount)
        let split = 16
        for range in [0..<split, split..<n] {
            let status = prepared.withUnsafeBytes { preparedBytes in
                y.withUnsafeMutableBufferPointer { out in
                    backend.serialized {
                        ek_guarded_matmul(matmul, context, weightPointer, type.id, Int64(n), Int64(k), x,
                                          prepared.isEmpty ? nil : preparedBytes.baseAddress! + Self.guardCount, Int64(m),
                                          out.baseAddress! + Self.guardCount, Int64(n), Int64(range.lowerBound), Int64(range.upperBound))
                    }
                }
            }
            if let failure = Self.failure(status, "matmul/\(type)") { return failure }
            for row in 0..<m {
                for column in 0..<n where !range.contains(column) && column >= range.upperBound {
                    if y[Self.guardCount + row * n + column].bitPattern != guardValue.bitPattern {
                        return "matmul/\(type) wrote weight row \(column) while asked for rows \(range)"
                    }
                }
            }
        }
        let head = y.prefix(Self.guardCount), tail = y.suffix(Self.guardCount)
        guard (head + tail).allSatisfy({ $0.bitPattern == guardValue.bitPattern }) else { return "matmul/\(type) wrote outside its output" }
        // Against the reference on the same weights.
        let placement = Placement(op: .matmul, type: type, unit: reference.descriptor.unit, backend: reference.descriptor.name, plugin: false,
                                  fallbackReason: nil)
        guard let expected = try? {
            let bound = try reference.bindMatmul(weights, placement: placement, pool: nil)
            var out = try Tensor(zeros: [m, n])
            try bound.multiply(try Tensor(shape: [m, k], values: x), into: &out)
            return try out.scalars()
        }() else { return "Ember cannot check matmul/\(type)" }
        let got = Array(y[Self.guardCount..<(Self.guardCount + m * n)])
        let probe = OpProbe(support: OpSupport(.matmul, type), rows: m)
        return probe.agrees(got, with: expected) ? nil : "matmul/\(type) computed results that disagree with the scalar reference"
    }

    private static func failure(_ status: Int32, _ what: String) -> String? {
        if Int(status) == Int(EK_GUARD_CRASHED) { return "\(what) crashed with \(signalName(ek_guard_last_signal()))" }
        return status == 0 ? nil : "\(what) returned \(status)"
    }

    private static func intact(_ buffer: [UInt8], payload: Int) -> Bool {
        buffer.prefix(guardCount).allSatisfy { $0 == guardByte } && buffer.suffix(guardCount).allSatisfy { $0 == guardByte }
            && buffer.count == payload + 2 * guardCount
    }
}
