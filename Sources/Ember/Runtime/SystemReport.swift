import Foundation

/// What Ember sees of the machine it runs on: the CPU and its features, the
/// kernel family it will use, the BLAS library behind the fp32 route, and
/// warnings about anything that costs speed. `ember info` prints it.
public struct SystemReport: Sendable, Codable {
    /// Ember's version.
    public static let emberVersion = "0.1.0"

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
        /// The family the kernels run.
        public var selected: String
        /// The widest family this CPU supports.
        public var best: String
        /// The `EMBER_ISA` value, if set.
        public var override: String?
        /// Why an override was refused, if it was.
        public var overrideError: String?

        enum CodingKeys: String, CodingKey {
            case selected, best, override
            case overrideError = "override_error"
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
        /// The `OPENBLAS_CORETYPE` value, if set.
        public var coreTypeOverride: String?

        enum CodingKeys: String, CodingKey {
            case library, version, core, threads, parallelism, configuration
            case coreLevel = "core_level"
            case coreTypeOverride = "core_type_override"
        }
    }

    /// Ember's version, e.g. "0.1.0".
    public var emberVersion: String
    /// The CPU and its features.
    public var cpu: CPU
    /// The kernel family chosen and why.
    public var kernels: Kernels
    /// The BLAS library behind the fp32 route.
    public var blas: BLAS
    /// How QoS classes become thread priorities in this process.
    public var qos: QoSMapping
    /// The compute units and their profiles.
    public var units: [UnitProfile]
    /// Every registered kernel, with where it came from.
    public var registeredKernels: [KernelSummary]
    /// Plugins loaded, and refusals.
    public var plugins: [String]
    /// Why each plugin from `EMBER_PLUGIN_PATH` that failed to load was refused, one message each.
    public var pluginFailures: [String]
    /// Whether energy figures are measured (RAPL) or modelled.
    public var energySource: String
    /// The power state now, and where it comes from.
    public var power: PowerState?
    /// Where ``power`` comes from: "EMBER_POWER=…", "sysfs" (noting when no battery was found), or "unreadable".
    public var powerSource: String

    /// One registered kernel, for reports.
    public struct KernelSummary: Sendable, Codable {
        /// The kernel's registered name.
        public var name: String
        /// The op it computes (a ``ComputeOperation`` raw value).
        public var op: String
        /// The weight formats it takes (``WeightFormat`` raw values).
        public var formats: [String]
        /// The compute unit it runs on (a ``ComputeUnit`` raw value: "cpu", "gpu" or "neural-engine").
        public var unit: String
        /// Its score: among the available kernels for an op on a unit, the highest wins.
        public var score: Int
        /// Where it came from: "built-in" or "plugin NAME (PATH)".
        public var source: String
    }
    /// Things that cost speed or correctness, each with its fix.
    public var warnings: [String]

    enum CodingKeys: String, CodingKey {
        case cpu, kernels, blas, warnings, qos, units, plugins
        case registeredKernels = "registered_kernels"
        case pluginFailures = "plugin_failures"
        case energySource = "energy_source"
        case power
        case powerSource = "power_source"
        case emberVersion = "ember_version"
    }

    /// The report for this process, read now.
    public static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> SystemReport {
        let features = CPUFeatures.current
        let override = environment[KernelISA.environmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        var warnings = [String]()
        var overrideError: String?
        let selected: KernelISA
        do {
            selected = try KernelISA.select(override: override, features: features)
        } catch {
            selected = KernelISA.best(for: features)
            overrideError = "\(error)"
            warnings.append("\(error); using \(selected) instead.")
        }
        let library = BLASLibrary.current
        if let warning = library.coreWarning(cpu: features, environment: environment) {
            warnings.append(warning)
        }
        var powerState: PowerState?
        var powerSource = environment[PowerOverride.environmentVariable].map { "\(PowerOverride.environmentVariable)=\($0)" } ?? "sysfs"
        do {
            powerState = try SystemPower.source(environment: environment).current()
            if powerSource == "sysfs", powerState?.batteryLevel == nil, powerState?.externalPower == true {
                powerSource += " (no battery found: external power assumed, level unknown)"
            }
        } catch {
            warnings.append("\(error); power state unknown")
            powerSource = "unreadable"
        }
        let mapping = QoSMapping.current
        if !mapping.canRaise {
            warnings.append("this process \(mapping.reason); priority promotion is unavailable. "
                + "Fix: grant CAP_SYS_NICE (setcap cap_sys_nice+ep on the binary) or raise RLIMIT_NICE to 28.")
        }
        return SystemReport(
            emberVersion: emberVersion,
            cpu: CPU(
                model: CPUFeatures.modelName, logicalCores: CPUFeatures.logicalCores,
                features: Dictionary(uniqueKeysWithValues: features.all.map { ($0.name, $0.present) }),
                simdLevel: features.simdLevel.description),
            kernels: Kernels(
                selected: selected.rawValue, best: KernelISA.best(for: features).rawValue,
                override: override, overrideError: overrideError),
            blas: BLAS(
                library: "OpenBLAS", version: library.version, core: library.coreName,
                coreLevel: library.coreLevel?.description, threads: library.threads,
                parallelism: library.parallelism, configuration: library.configuration,
                coreTypeOverride: environment[BLASLibrary.coreTypeVariable]),
            qos: mapping,
            units: UnitProfile.current,
            registeredKernels: KernelRegistry.shared.all.map {
                KernelSummary(name: $0.name, op: $0.op.rawValue, formats: $0.formats.map(\.rawValue), unit: $0.unit.rawValue,
                              score: $0.score, source: $0.source.description)
            },
            plugins: KernelRegistry.shared.plugins.map { "\($0.name) (\($0.path)): \($0.kernels.joined(separator: ", "))" },
            pluginFailures: KernelRegistry.shared.pluginFailures,
            energySource: EnergyCounter.isAvailable ? "measured (RAPL, /sys/class/powercap)" : "modelled (no RAPL counter readable)",
            power: powerState, powerSource: powerSource,
            warnings: warnings + KernelRegistry.shared.pluginFailures.map { "plugin refused: \($0)" })
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
            "BLAS       \(blas.library) \(blas.version ?? "?"), core \(blas.core) (\(blas.coreLevel ?? "level unknown"))"
                + "\(blas.coreTypeOverride.map { ", forced by OPENBLAS_CORETYPE=\($0)" } ?? ""), "
                + "\(blas.threads) thread\(blas.threads == 1 ? "" : "s") (\(blas.parallelism)); "
                + "Ember runs it on one thread per call, split over its own QoS workers",
            "           \(blas.configuration)",
        ]
        result.append("QoS        \(qos.reason)")
        result += qos.lines.map { "           \($0)" }
        for profile in units {
            let supports = profile.supports.keys.sorted { $0.rawValue < $1.rawValue }.map(\.rawValue)
            let costs = profile.costs.keys.sorted().map { precision -> String in
                let cost = profile.costs[precision]!
                return String(format: "%@ %.0f GOPS (%@) %.1f pJ/op", precision.rawValue, cost.throughputGOPS,
                              cost.throughputSource, cost.joulesPerOperation * 1e12)
            }
            result.append("unit       \(profile.unit.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)) \(profile.resource.rawValue); "
                + "\(supports.count == ComputeOperation.allCases.count ? "every op" : supports.joined(separator: ", ")); \(costs.joined(separator: ", "))")
        }
        result.append("energy     \(energySource)")
        result.append("power      \(power.map(\.description) ?? "unknown") — \(powerSource)")
        for kernel in registeredKernels {
            result.append("kernel     \(kernel.name.padding(toLength: 22, withPad: " ", startingAt: 0)) \(kernel.op) "
                + "[\(kernel.formats.joined(separator: ","))] on \(kernel.unit), score \(kernel.score), \(kernel.source)")
        }
        result += warnings.map { "warning: \($0)" }
        return result
    }
}
