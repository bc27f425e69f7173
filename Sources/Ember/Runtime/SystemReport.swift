import EmberCore
import EmberModels
import Foundation

/// What a runtime sees of the machine it runs on: the CPU and its features,
/// the kernel family chosen, the BLAS library, each compute unit and each
/// backend with what it runs and costs, plugins, the power state, and
/// warnings about anything that costs speed. `ember info` prints it; its
/// JSON uses objects for every dictionary and snake_case keys throughout.
public struct SystemReport: Sendable, Codable {
    /// Ember's version.
    public static let emberVersion = "0.2.0"

    /// The CPU.
    public struct CPU: Sendable, Codable {
        /// The CPU's name: the CPUID brand string on x86, else the operating system's description, else "unknown CPU".
        public var model: String
        /// Logical cores available to this process.
        public var logicalCores: Int
        /// Every feature Ember looks for, present or not.
        public var features: [String: Bool]
        /// The widest SIMD level present ("AVX-512", "AVX2", "NEON", …).
        public var simdLevel: String

        enum CodingKeys: String, CodingKey {
            case model, features
            case logicalCores = "logical_cores"
            case simdLevel = "simd_level"
        }
    }

    /// The kernel family chosen and why.
    public struct Kernels: Sendable, Codable {
        /// The family the built-in backends run.
        public var selected: String
        /// The widest family this CPU supports.
        public var best: String
        /// The forced family asked for (`EMBER_ISA` in the CLI), if any.
        public var override: String?
        /// Why that was refused, if it was.
        public var overrideError: String?
        /// The weight types the selected family multiplies with SIMD code of its own.
        public var simdTypes: [String] = []
        /// The weight types it multiplies with the scalar reference (correct, slower: "scalar-vectorized" by the compiler).
        public var scalarTypes: [String] = []
        /// The weight types it re-lays at load, eight rows interleaved (`ek_interleaved.h`), rather than reading GGUF rows.
        public var interleavedTypes: [String] = []
        /// The weight types whose products of 16 activation rows and more run on AMX tiles (`x86_amx.c`): Q8_0 under
        /// `avx512` on a CPU with AMX-INT8; empty elsewhere.
        public var tileTypes: [String] = []

        enum CodingKeys: String, CodingKey {
            case selected, best, override
            case overrideError = "override_error"
            case simdTypes = "simd_types"
            case scalarTypes = "scalar_types"
            case interleavedTypes = "interleaved_types"
            case tileTypes = "tile_types"
        }
    }

    /// The BLAS library.
    public struct BLAS: Sendable, Codable {
        /// The library's name: "OpenBLAS".
        public var library: String
        /// The library version from its build configuration (e.g. "0.3.21"), nil when it does not say.
        public var version: String?
        /// The kernel set OpenBLAS runs (`openblas_get_corename`), e.g. "Haswell", "SkylakeX".
        public var core: String
        /// SIMD level of the core, when Ember knows the core.
        public var coreLevel: String?
        /// Threads OpenBLAS runs a call on (`openblas_get_num_threads`).
        public var threads: Int
        /// How OpenBLAS was built to run in parallel: "sequential", "pthreads" or "openmp".
        public var parallelism: String
        /// OpenBLAS's build configuration string (`openblas_get_config`).
        public var configuration: String
        /// The `OPENBLAS_CORETYPE` value the process started with, if any.
        public var coreTypeOverride: String?

        enum CodingKeys: String, CodingKey {
            case library, version, core, threads, parallelism, configuration
            case coreLevel = "core_level"
            case coreTypeOverride = "core_type_override"
        }
    }

    /// One backend: where it runs, what it runs and what that costs.
    public struct BackendSummary: Sendable, Codable {
        /// The backend's name.
        public var name: String
        /// Its route: "cpu", "gpu" or "neural-engine".
        public var unit: String
        /// Whether it came from a plugin.
        public var plugin: Bool
        /// "built-in" or "plugin NAME (PATH)".
        public var source: String
        /// Its score among the backends of its route.
        public var score: Int
        /// Whether its ops run on several threads at once.
        public var concurrent: Bool
        /// Op → the types it runs that op on.
        public var ops: [String: [String]]
        /// Op → type → cost.
        public var costs: [String: [String: OpCost]]
        /// Why it was disabled, if it was (a crash, an error, results that disagree with the reference).
        public var disabled: String?
    }

    /// Where the costs in force come from.
    public struct CalibrationSummary: Sendable, Codable {
        /// "measured now", "cached (PATH)", "defaults", …
        public var source: String
        /// When they were measured, in seconds since 1970 (nil for defaults).
        public var measuredAt: Double?
        /// The memory's streaming read bandwidth on every worker, GB/s: what bounds decoding (nil: not known).
        public var readGBs: Double?

        enum CodingKeys: String, CodingKey {
            case source
            case measuredAt = "measured_at"
            case readGBs = "read_gbs"
        }
    }

    /// Ember's version, e.g. "0.2.0".
    public var emberVersion: String
    /// The CPU and its features.
    public var cpu: CPU
    /// The kernel family chosen and why.
    public var kernels: Kernels
    /// The BLAS library behind the GPU route.
    public var blas: BLAS
    /// How QoS classes become thread priorities in this process.
    public var qos: QoSMapping
    /// Each compute unit (route), in preference order: resource, backends, ops, matmul cost per precision.
    public var units: [UnitProfile]
    /// Every backend, built-in and from plugins.
    public var backends: [BackendSummary]
    /// Plugins loaded, with the fate of each of their backends.
    public var plugins: [LoadedPlugin]
    /// Why each plugin that could not be loaded was refused.
    public var pluginFailures: [String]
    /// Where the costs come from.
    public var calibration: CalibrationSummary
    /// Whether energy figures are measured (RAPL) or modelled.
    public var energySource: String
    /// The power state now.
    public var power: PowerState?
    /// Where ``power`` comes from: "EMBER_POWER=…", "sysfs" (noting when no battery was found), "injected", or "unreadable".
    public var powerSource: String
    /// The memory the process may use and the working-memory budget in force.
    public var memory: Memory
    /// The performance and efficiency cores the workers are pinned to (nil: not read, nothing pinned).
    public var cores: CoreTopology?
    /// Things that cost speed or correctness, each with its fix.
    public var warnings: [String]

    /// The memory the process may use (the machine's, or its cgroup's limit) and the runtime's budget.
    public struct Memory: Sendable, Codable {
        /// Bytes of physical memory in the machine.
        public var physicalBytes: Int
        /// The process's cgroup memory limit in bytes; nil without one.
        public var cgroupLimitBytes: Int?
        /// The runtime's working-memory budget in bytes (``Runtime/Configuration/memoryBudget``); nil: no limit.
        public var budgetBytes: Int?

        enum CodingKeys: String, CodingKey {
            case physicalBytes = "physical_bytes"
            case cgroupLimitBytes = "cgroup_limit_bytes"
            case budgetBytes = "budget_bytes"
        }
    }

    enum CodingKeys: String, CodingKey {
        case cpu, kernels, blas, warnings, qos, units, backends, plugins, calibration, power, memory, cores
        case pluginFailures = "plugin_failures"
        case energySource = "energy_source"
        case powerSource = "power_source"
        case emberVersion = "ember_version"
    }

    /// The report for `runtime`, read now; `openBLASCoreType` is the `OPENBLAS_CORETYPE` value the process started
    /// with (the caller reads its environment).
    public static func current(runtime: Runtime, openBLASCoreType: String? = nil) -> SystemReport {
        let context = runtime.context
        let memoryLimit = MemoryLimit.current()
        let features = context.features
        var warnings = [String]()
        if let error = context.isaOverrideError { warnings.append("\(error); using \(context.isa) instead.") }
        let bestISA = KernelISA.best(for: features)
        if context.isa != bestISA {
            warnings.append("kernels: running the \(context.isa) path, a fallback slower than this CPU's best (\(bestISA)); "
                + "cause: the kernel family was chosen as \"\(context.configuration.isaOverride ?? context.isa.rawValue)\" "
                + "(\(KernelISA.environmentVariable) or the runtime's configuration). Fix: unset \(KernelISA.environmentVariable) unless you "
                + "are testing that path.")
        } else if bestISA == .scalar {
            warnings.append("kernels: no SIMD path for this CPU (Ember's kernels need AVX2 + FMA on x86 or NEON on arm64): "
                + "every matmul runs the scalar reference, 10–50× slower.")
        }
        if let failure = context.pool.threadStartFailure { warnings.append("\(failure); running on the threads that started.") }
        let library = context.blas
        if let warning = library.coreWarning(cpu: features, forcedCore: openBLASCoreType) { warnings.append(warning) }
        var powerState: PowerState?
        var powerSource: String
        switch runtime.configuration.power {
        case let .system(override?) where !override.isEmpty: powerSource = "\(PowerOverride.environmentVariable)=\(override)"
        case .system: powerSource = "sysfs"
        case .injected: powerSource = "injected by the host"
        case .source: powerSource = "a host-supplied source"
        }
        powerState = runtime.powerSource.current()
        if powerSource == "sysfs", powerState?.batteryLevel == nil, powerState?.externalPower == true {
            powerSource += " (no battery found: external power assumed, level unknown)"
        }
        let mapping = context.configuration.qosMapping
        if !mapping.canRaise {
            warnings.append("this process \(mapping.reason); priority promotion is unavailable. "
                + "Fix: grant CAP_SYS_NICE (setcap cap_sys_nice+ep on the binary) or raise RLIMIT_NICE to 28.")
        }
        let registry = context.backends
        let calibration = context.calibration
        let backends = registry.all.map { backend -> BackendSummary in
            let descriptor = backend.descriptor
            var ops: [String: [String]] = [:]
            var costs: [String: [String: OpCost]] = [:]
            for (op, types) in descriptor.opsByKind {
                ops[op.rawValue] = types.map(\.description)
                for type in types { costs[op.rawValue, default: [:]][type.description] = context.cost(OpSupport(op, type), on: descriptor.name) }
            }
            var disabled = registry.health(of: descriptor.name)?.reason
            if disabled == nil, let isa = descriptor.requiredISA, !isa.isSupported(by: features) { disabled = "this CPU cannot run \(isa)" }
            return BackendSummary(name: descriptor.name, unit: descriptor.unit.rawValue, plugin: descriptor.source.isPlugin,
                                  source: descriptor.source.description, score: descriptor.score, concurrent: descriptor.concurrent,
                                  ops: ops, costs: costs, disabled: disabled)
        }
        warnings += (runtime.pluginFailures + registry.pluginFailures.filter { !runtime.pluginFailures.contains($0) }).map { "plugin refused: \($0)" }
        warnings += registry.plugins.flatMap { plugin in plugin.skipped.map { "plugin \(plugin.name): backend \($0)" } }
        return SystemReport(
            emberVersion: emberVersion,
            cpu: CPU(
                model: CPUFeatures.modelName, logicalCores: CPUFeatures.logicalCores,
                features: Dictionary(uniqueKeysWithValues: features.all.map { ($0.name, $0.present) }),
                simdLevel: features.simdLevel.description),
            kernels: Kernels(
                selected: context.isa.rawValue, best: KernelISA.best(for: features).rawValue,
                override: context.configuration.isaOverride, overrideError: context.isaOverrideError.map { "\($0)" },
                simdTypes: TensorType.table.filter { $0.canDequantize && $0.hasSIMDKernel(context.isa) }.map(\.description),
                scalarTypes: TensorType.table.filter { $0.canDequantize && !$0.hasSIMDKernel(context.isa) }.map(\.description),
                interleavedTypes: TensorType.table.filter { $0.hasInterleavedKernel(context.isa) }.map(\.description),
                tileTypes: context.isa.multipliesInt8OnTiles(features: features) ? [TensorType.q8_0.description] : []),
            blas: BLAS(
                library: "OpenBLAS", version: library.version, core: library.coreName,
                coreLevel: library.coreLevel?.description, threads: library.threads,
                parallelism: library.parallelism, configuration: library.configuration,
                coreTypeOverride: openBLASCoreType),
            qos: mapping,
            units: context.unitProfiles,
            backends: backends,
            plugins: registry.plugins,
            pluginFailures: registry.pluginFailures,
            calibration: CalibrationSummary(source: runtime.calibrationSource, measuredAt: calibration.measuredAt,
                                            readGBs: calibration.readGBs),
            energySource: context.energyCounter.isAvailable ? "measured (RAPL, /sys/class/powercap)" : "modelled (no RAPL counter readable)",
            power: powerState, powerSource: powerSource,
            memory: Memory(physicalBytes: memoryLimit.physicalBytes, cgroupLimitBytes: memoryLimit.cgroupBytes,
                           budgetBytes: runtime.configuration.memoryBudget),
            cores: context.coreTopology,
            warnings: warnings)
    }

    /// The report as aligned, human-readable lines.
    public var lines: [String] {
        let present = cpu.features.filter(\.value).keys.sorted()
        let absent = cpu.features.filter { !$0.value }.keys.sorted()
        var kernelsLine = "\(kernels.selected)"
        if let override = kernels.override {
            kernelsLine += " (\(KernelISA.environmentVariable)=\(override); best for this CPU: \(kernels.best))"
        } else {
            kernelsLine += " (best for this CPU; \(KernelISA.environmentVariable) not set)"
        }
        var result = [
            "Ember \(emberVersion)",
            "CPU        \(cpu.model), \(cpu.logicalCores) logical cores, widest SIMD \(cpu.simdLevel)",
            "features   \(present.joined(separator: " "))" + (absent.isEmpty ? "" : "   (absent: \(absent.joined(separator: " ")))"),
            "kernels    \(kernelsLine)",
            "           SIMD matmul: \(kernels.simdTypes.joined(separator: " "))"
                + (kernels.scalarTypes.isEmpty ? "" : "; scalar reference: \(kernels.scalarTypes.joined(separator: " "))")
                + (kernels.interleavedTypes.isEmpty ? "" : "; interleaved at load: \(kernels.interleavedTypes.joined(separator: " "))")
                + (kernels.tileTypes.isEmpty ? "" : "; AMX tiles from 16 rows: \(kernels.tileTypes.joined(separator: " "))"),
            "BLAS       \(blas.library) \(blas.version ?? "?"), core \(blas.core) (\(blas.coreLevel ?? "level unknown"))"
                + "\(blas.coreTypeOverride.map { ", forced by OPENBLAS_CORETYPE=\($0)" } ?? ""), "
                + "\(blas.threads) thread\(blas.threads == 1 ? "" : "s") (\(blas.parallelism)); "
                + "Ember runs it on one thread per call, split over its own QoS workers",
            "           \(blas.configuration)",
        ]
        if let cores {
            let pinned = cores.isHeterogeneous
                ? "; user-initiated work on cpus \(cores.cores(for: .userInitiated)), utility and background on \(cores.cores(for: .background))"
                : "; nothing pinned"
            result.append("cores      \(cores)\(pinned)")
        }
        result.append("QoS        \(qos.reason)")
        result += qos.lines.map { "           \($0)" }
        for profile in units {
            let costs = Precision.allCases.compactMap { precision -> String? in
                guard let cost = profile.cost(at: precision) else { return nil }
                return String(format: "%@ %.0f GOPS (%@) %.1f pJ/op", precision.rawValue, cost.throughput / 1e9, cost.source,
                              cost.joulesPerUnit * 1e12)
            }
            result.append("unit       \(profile.unit.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)) \(profile.resource.rawValue); "
                + "backends \(profile.backends.joined(separator: ", ")); matmul \(costs.isEmpty ? "none" : costs.joined(separator: ", "))")
        }
        for backend in backends {
            let ops = backend.ops.keys.sorted().map { op in "\(op)[\(backend.ops[op]!.joined(separator: ","))]" }
            result.append("backend    \(backend.name.padding(toLength: 18, withPad: " ", startingAt: 0)) \(backend.unit), score \(backend.score), "
                + "\(backend.source)\(backend.disabled.map { " — DISABLED: \($0)" } ?? ""): \(ops.joined(separator: " "))")
        }
        result.append("costs      \(calibration.source)"
            + (calibration.readGBs.map { String(format: "; memory reads %.1f GB/s (bounds decoding)", $0) } ?? ""))
        result.append("energy     \(energySource)")
        result.append("power      \(power.map(\.description) ?? "unknown") — \(powerSource)")
        let limit = MemoryLimit(physicalBytes: memory.physicalBytes, cgroupBytes: memory.cgroupLimitBytes)
        result.append("memory     \(limit); working-memory budget "
            + (memory.budgetBytes.map { "\($0 / 1_000_000) MB" } ?? "none"))
        result += warnings.map { "warning: \($0)" }
        return result
    }
}
