import CKernels
import Foundation

/// A plugin library Ember has loaded and kept open.
public struct LoadedPlugin: Sendable {
    /// The name the plugin's table declares (1–63 printable characters).
    public var name: String
    /// The path the library was loaded from.
    public var path: String
    /// Names of the kernels it registered.
    public var kernels: [String]
    /// Kernels left out because this CPU lacks what they require.
    public var skipped: [String]
}

extension KernelRegistry {
    /// The environment variable listing plugin libraries (colon-separated paths).
    public static let pluginPathVariable = "EMBER_PLUGIN_PATH"

    /// Loads every plugin `EMBER_PLUGIN_PATH` names; refusals are recorded, not fatal.
    func loadPluginsFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let list = environment[Self.pluginPathVariable] else { return }
        for path in list.split(separator: ":").map(String.init) where !path.isEmpty {
            do {
                _ = try loadPlugin(at: path)
            } catch {
                recordFailure("\(error)")
            }
        }
    }

    /// Loads the plugin at `path`, checks every field of its table, and
    /// registers its kernels. Throws a ``PluginError`` naming the field at
    /// fault; nothing is registered then.
    @discardableResult
    public func loadPlugin(at path: String) throws -> LoadedPlugin {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw PluginError.cannotOpen(path: path, reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        do {
            guard let symbol = dlsym(handle, EMBER_PLUGIN_ENTRY_SYMBOL) else { throw PluginError.missingEntryPoint(path: path) }
            let entry = unsafeBitCast(symbol, to: ember_plugin_entry_fn.self)
            let (plugin, kernels) = try Self.validate(entry(), path: path)
            recordPlugin(plugin, kernels: kernels)
            return plugin // the library stays open: its kernels are registered
        } catch {
            dlclose(handle)
            throw error
        }
    }

    /// Every check the ABI promises, before anything is registered.
    static func validate(_ table: UnsafePointer<ember_plugin_table>?, path: String) throws -> (LoadedPlugin, [RegisteredKernel]) {
        func invalid(_ field: String, _ found: String, _ expected: String) -> PluginError {
            .invalidField(path: path, field: field, found: found, expected: expected)
        }
        guard let table else { throw invalid("ember_plugin_entry()", "NULL", "a plugin table") }
        // size and abi_version come first in every ABI struct: safe to read before anything else.
        let header = UnsafeRawPointer(table)
        let tableSize = header.load(as: UInt32.self), tableVersion = header.load(fromByteOffset: 4, as: UInt32.self)
        guard tableVersion == EMBER_PLUGIN_ABI_VERSION else {
            throw invalid("abi_version", "\(tableVersion)", "\(EMBER_PLUGIN_ABI_VERSION)")
        }
        guard tableSize == MemoryLayout<ember_plugin_table>.size else {
            throw invalid("size", "\(tableSize)", "\(MemoryLayout<ember_plugin_table>.size) (sizeof ember_plugin_table)")
        }
        let name = try validName(table.pointee.name, field: "name", invalid: invalid)
        let count = Int(table.pointee.kernel_count)
        guard (1...256).contains(count) else { throw invalid("kernel_count", "\(count)", "1…256") }
        guard let descriptors = table.pointee.kernels else { throw invalid("kernels", "NULL", "an array of \(count) descriptors") }

        var kernels: [RegisteredKernel] = [], skipped: [String] = []
        let cpu = featureBits(of: .current)
        for index in 0..<count {
            let field = "kernels[\(index)]"
            let raw = UnsafeRawPointer(descriptors + index)
            let size = raw.load(as: UInt32.self), version = raw.load(fromByteOffset: 4, as: UInt32.self)
            guard size == MemoryLayout<ember_kernel_descriptor>.size else {
                throw invalid("\(field).size", "\(size)", "\(MemoryLayout<ember_kernel_descriptor>.size) (sizeof ember_kernel_descriptor)")
            }
            guard version == EMBER_PLUGIN_ABI_VERSION else { throw invalid("\(field).abi_version", "\(version)", "\(EMBER_PLUGIN_ABI_VERSION)") }
            let descriptor = descriptors[index]
            let kernelName = try validName(descriptor.name, field: "\(field).name", invalid: invalid)
            guard let op = ComputeOperation.allCases.first(where: { $0.abiValue == descriptor.op }) else {
                throw invalid("\(field).op", "\(descriptor.op)", "EMBER_OP_MATMUL (1)")
            }
            guard let format = WeightFormat(ggufType: descriptor.weight_format) else {
                throw invalid("\(field).weight_format", "\(descriptor.weight_format)", "0 (F32), 2 (Q4_0), 3 (Q4_1) or 8 (Q8_0)")
            }
            let units: [UInt32: ComputeUnit] = [0: .cpu, 1: .gpu, 2: .neuralEngine]
            guard let unit = units[descriptor.unit] else {
                throw invalid("\(field).unit", "\(descriptor.unit)", "0 (CPU), 1 (GPU) or 2 (NEURAL_ENGINE)")
            }
            guard descriptor.required_features & ~UInt32(EMBER_FEATURE_ALL) == 0 else {
                throw invalid("\(field).required_features", String(descriptor.required_features, radix: 16), "bits within EMBER_FEATURE_ALL")
            }
            guard let function = descriptor.function else { throw invalid("\(field).function", "NULL", "a kernel function") }
            guard kernels.allSatisfy({ $0.name != kernelName }) else { throw invalid("\(field).name", kernelName, "a name used once") }
            if descriptor.required_features & ~cpu != 0 {
                skipped.append("\(kernelName): needs features \(String(descriptor.required_features, radix: 16)), CPU has \(String(cpu, radix: 16))")
                continue
            }
            kernels.append(RegisteredKernel(
                name: kernelName, op: op, formats: [format], unit: unit, score: Int(descriptor.score),
                source: .plugin(name: name, path: path),
                run: { x, w, y in try runPluginMatmul(function, name: kernelName, x, w, &y) },
                bind: { w, placement in .plugin(function, w, placement: placement) }))
        }
        return (LoadedPlugin(name: name, path: path, kernels: kernels.map(\.name), skipped: skipped), kernels)
    }

    private static func validName(_ pointer: UnsafePointer<CChar>?, field: String,
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

/// Calls a plugin's matmul on the GGUF bytes, its rows split over Ember's workers.
func runPluginMatmul(_ function: ember_matmul_kernel, name: String, _ x: Tensor, _ w: WeightMatrix, _ y: inout Tensor) throws {
    let (m, k, n) = (x.shape[0], x.shape[1], w.rows)
    try y.makeWritable(argument: "y")
    let (px, py) = (x.baseAddress.assumingMemoryBound(to: Float.self), y.baseAddress.assumingMemoryBound(to: Float.self))
    let weights = w.bytes.baseAddress!
    let failed = StatusCollector()
    RowSplit.run(rows: n, threads: KernelThreads.default, alignment: 16, workPerRow: m * k) { range in
        if function(px, weights, py, Int64(m), Int64(n), Int64(k), Int64(range.lowerBound), Int64(range.upperBound)) != 0 {
            failed.record(EK_ERR_SHAPE)
        }
    }
    if failed.first != EK_OK {
        throw KernelError.rejected(kernel: name, argument: "plugin kernel", status: "returned non-zero")
    }
}
