import _CEmberKernels
import Foundation

/// The CPU this process runs on and the SIMD features the kernels can use.
///
/// Detected at run time (and checked against what the operating system
/// enables), so one binary runs the widest kernels each machine supports.
public struct CPUFeatures: Sendable, Equatable {
    /// x86-64 AVX2.
    public var avx2 = false
    /// x86-64 FMA3 fused multiply-add.
    public var fma = false
    /// x86-64 F16C (fp16 ↔ fp32 conversion).
    public var f16c = false
    /// x86-64 AVX-512 Foundation.
    public var avx512f = false
    /// x86-64 AVX-512 byte and word instructions.
    public var avx512bw = false
    /// x86-64 AVX-512 vector-length extensions (the 128- and 256-bit forms).
    public var avx512vl = false
    /// x86-64 AVX-512 VNNI (int8 dot products).
    public var avx512vnni = false
    /// x86-64 AVX-VNNI: the VNNI int8 dot products on 256-bit AVX registers.
    public var avxvnni = false
    /// x86-64 AMX-TILE and AMX-INT8 (Intel Xeon from Sapphire Rapids on), enabled by the operating system: int8
    /// products on tiles, which the `avx512` kernels use for batches of 16 rows and more once Linux grants this process
    /// the tile state (``KernelISA/multipliesInt8OnTiles(features:)``).
    public var amxInt8 = false
    /// An AMD x86 core (the CPUID vendor): the decode GEMVs take the forms measured fastest there (one fp32 weight
    /// row, one interleaved group at a time). Not a feature, so not in ``all``.
    public var amd = false
    /// arm64 Advanced SIMD (NEON).
    public var neon = false
    /// arm64 dot-product instructions (SDOT/UDOT).
    public var dotprod = false

    /// The features of this machine's CPU.
    public static let current = CPUFeatures(ek_cpu_features_detect())

    /// A set with every feature false; ``current`` holds this machine's.
    public init() {}

    init(_ c: ek_cpu_features) {
        avx2 = c.avx2; fma = c.fma; f16c = c.f16c
        avx512f = c.avx512f; avx512bw = c.avx512bw; avx512vl = c.avx512vl
        avx512vnni = c.avx512vnni; avxvnni = c.avxvnni; amxInt8 = c.amx_int8; amd = c.amd
        neon = c.neon; dotprod = c.dotprod
    }

    var cValue: ek_cpu_features {
        ek_cpu_features(
            avx2: avx2, fma: fma, f16c: f16c, avx512f: avx512f, avx512bw: avx512bw,
            avx512vl: avx512vl, avx512vnni: avx512vnni, avxvnni: avxvnni, amx_int8: amxInt8, amd: amd, neon: neon,
            dotprod: dotprod)
    }

    /// Every feature by the name Linux's `/proc/cpuinfo` style would give it, in a stable order.
    public var all: [(name: String, present: Bool)] {
        #if arch(arm64)
        return [("neon", neon), ("dotprod", dotprod)]
        #else
        return [
            ("avx2", avx2), ("fma", fma), ("f16c", f16c), ("avx512f", avx512f), ("avx512bw", avx512bw),
            ("avx512vl", avx512vl), ("avx512vnni", avx512vnni), ("avxvnni", avxvnni), ("amx_int8", amxInt8),
        ]
        #endif
    }

    /// Names of the features present.
    public var names: [String] { all.filter(\.present).map(\.name) }

    /// The widest SIMD level of the CPU, in the terms BLAS cores are compared in.
    public var simdLevel: SIMDLevel {
        if avx512f && avx512bw && avx512vl { return .avx512 }
        if avx2 && fma { return .avx2 }
        if neon { return .neon }
        return .baseline
    }

    /// The CPU's marketing name: the CPUID brand string on x86, else the
    /// operating system's description, else "unknown CPU".
    public static let modelName: String = {
        var buffer = [CChar](repeating: 0, count: 64)
        if ek_cpu_brand(&buffer, buffer.count) {
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) {
            for line in text.split(separator: "\n") where line.hasPrefix("model name") || line.hasPrefix("Model") {
                if let colon = line.firstIndex(of: ":") {
                    return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return "unknown CPU"
    }()

    /// Logical cores available to this process.
    public static var logicalCores: Int { ProcessInfo.processInfo.activeProcessorCount }
}

/// Coarse SIMD levels, widest last, for comparing a BLAS core with the CPU.
public enum SIMDLevel: Int, Sendable, Comparable, CustomStringConvertible {
    /// x86-64 levels, narrowest first: baseline (nothing wider detected), SSE, AVX, AVX2 with FMA, AVX-512 F/BW/VL.
    case baseline = 0, sse = 1, avx = 2, avx2 = 3, avx512 = 4
    /// arm64 NEON; orders after every x86 level.
    case neon = 10

    /// Orders by raw value: baseline < SSE < AVX < AVX2 < AVX-512 < NEON.
    public static func < (lhs: SIMDLevel, rhs: SIMDLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The level's usual name: "baseline", "SSE", "AVX", "AVX2", "AVX-512" or "NEON".
    public var description: String {
        switch self {
        case .baseline: "baseline"
        case .sse: "SSE"
        case .avx: "AVX"
        case .avx2: "AVX2"
        case .avx512: "AVX-512"
        case .neon: "NEON"
        }
    }
}
