import CBLAS
import Foundation

/// The BLAS library behind the fp32 route (OpenBLAS), as it runs in this process.
///
/// OpenBLAS picks its kernels (its *core*) once, when it loads: from the CPU,
/// unless `OPENBLAS_CORETYPE` in the environment forces one. A forced core
/// weaker than the CPU (Haswell's AVX2 kernels on an AVX-512 CPU) costs about
/// half of fp32 speed, so ``coreWarning(cpu:forcedCore:)`` says when that
/// happens and how to fix it.
public struct BLASLibrary: Sendable, Codable, Equatable {
    /// The build configuration string (`openblas_get_config`).
    public var configuration: String
    /// The library version parsed from ``configuration`` (e.g. "0.3.21"), if it says.
    public var version: String?
    /// The kernel set in use (`openblas_get_corename`), e.g. "Haswell", "SkylakeX".
    public var coreName: String
    /// Threads OpenBLAS runs a call on.
    public var threads: Int
    /// How OpenBLAS was built to run in parallel: "sequential", "pthreads" or "openmp".
    public var parallelism: String

    /// The environment variable that forces OpenBLAS's core type (OpenBLAS reads it itself, when it loads).
    public static let coreTypeVariable = "OPENBLAS_CORETYPE"

    /// The library as loaded in this process, read now.
    public static var current: BLASLibrary {
        let configuration = String(cString: openblas_get_config())
        let parallelism = switch openblas_get_parallel() {
        case 0: "sequential"
        case 1: "pthreads"
        case 2: "openmp"
        default: "unknown"
        }
        return BLASLibrary(
            configuration: configuration,
            version: Self.version(in: configuration),
            coreName: String(cString: openblas_get_corename()),
            threads: Int(openblas_get_num_threads()),
            parallelism: parallelism)
    }

    /// Sets the number of threads OpenBLAS runs each call on.
    public static func setThreads(_ count: Int) {
        openblas_set_num_threads(Int32(clamping: max(1, count)))
    }

    /// The SIMD level of ``coreName``, or nil for a core Ember does not know.
    public var coreLevel: SIMDLevel? { Self.simdLevel(ofCore: coreName) }

    /// A warning when this core is weaker than what `cpu` can run, with the fix;
    /// nil when the core matches the CPU (or cannot be compared). `forcedCore` is
    /// the `OPENBLAS_CORETYPE` value the process started with, if any (the caller reads it).
    public func coreWarning(cpu: CPUFeatures = .current, forcedCore: String?) -> String? {
        guard let coreLevel, coreLevel < cpu.simdLevel, cpu.simdLevel != .neon else { return nil }
        let cpuLevel = cpu.simdLevel
        let recommended = Self.recommendedCore(for: cpuLevel)
        var text = "OpenBLAS runs its \(coreName) kernels (\(coreLevel)) on a CPU with \(cpuLevel): "
        if coreLevel == .avx2 && cpuLevel == .avx512 {
            text += "its fp32 matmul runs at about half speed (measured on a Zen 5 core: ~110 vs ~205 GFLOP/s), so Ember's "
            text += "fp32 route multiplies with its own AVX-512 kernels instead. "
        } else {
            text += "fp32 matmul runs well below the CPU's speed. "
        }
        if let forced = forcedCore, !forced.isEmpty {
            text += "Cause: \(Self.coreTypeVariable)=\(forced) is set in the environment. "
            text += "Fix: `unset \(Self.coreTypeVariable)` so OpenBLAS detects the CPU"
            text += recommended.map { ", or set \(Self.coreTypeVariable)=\($0)." } ?? "."
        } else {
            text += "Cause: this OpenBLAS (\(version ?? "unknown version")) does not recognise the CPU. "
            text += "Fix: install a newer OpenBLAS"
            text += recommended.map { ", or set \(Self.coreTypeVariable)=\($0)." } ?? "."
        }
        return text
    }

    /// The OpenBLAS core to force for a CPU of `level`.
    static func recommendedCore(for level: SIMDLevel) -> String? {
        switch level {
        case .avx512: "SkylakeX"
        case .avx2: "Haswell"
        case .avx: "Sandybridge"
        default: nil
        }
    }

    /// The SIMD level OpenBLAS's x86 core types use (DYNAMIC_ARCH names).
    static func simdLevel(ofCore name: String) -> SIMDLevel? {
        switch name.lowercased() {
        case "skylakex", "cooperlake", "sapphirerapids":
            .avx512
        case "haswell", "zen", "excavator", "steamroller":
            .avx2
        case "sandybridge", "bulldozer", "piledriver":
            .avx
        case "katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
             "dunnington", "nehalem", "opteron", "opteron_sse3", "barcelona", "bobcat", "nano":
            .sse
        default:
            nil
        }
    }

    /// "0.3.21" from "OpenBLAS 0.3.21 DYNAMIC_ARCH …".
    static func version(in configuration: String) -> String? {
        let words = configuration.split(separator: " ")
        guard let index = words.firstIndex(of: "OpenBLAS"), words.index(after: index) < words.endIndex else {
            return nil
        }
        let candidate = words[words.index(after: index)]
        return candidate.first?.isNumber == true ? String(candidate) : nil
    }
}
