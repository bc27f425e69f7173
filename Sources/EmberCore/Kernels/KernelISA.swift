import _CEmberKernels

/// The family of hand-written kernels Ember runs: the scalar reference
/// (the oracle every SIMD kernel is tested against) or one SIMD variant.
///
/// Chosen per ``ComputeContext`` from ``CPUFeatures``; a host (the CLI from
/// `EMBER_ISA=scalar|avx2|avx512|neon|avx2-novnni|avx512-noamx|avx512-novnni`) may
/// force a path so tests and benchmarks can exercise each one. `avx2` uses AVX-VNNI
/// where the CPU has it; `avx2-novnni` runs the AVX2 code that older CPUs get, even
/// here. `avx512` uses AMX tiles for int8 products where the CPU has them;
/// `avx512-noamx` runs the AVX-512 VNNI code that AMD's cores get, even here;
/// `avx512-novnni` is the AVX-512 path of CPUs without VNNI (Skylake-SP/X), chosen
/// there and forced anywhere else.
public enum KernelISA: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The portable C reference, AVX2+FMA+F16C (with AVX-VNNI where present), AVX-512 F/BW/VL+VNNI, or arm64 NEON with dot product.
    case scalar, avx2, avx512, neon
    /// The AVX2 kernels without AVX-VNNI even where the CPU has it ("avx2-novnni"), to test that code.
    case avx2NoVNNI = "avx2-novnni"
    /// The AVX-512 kernels without AMX even where the CPU has it ("avx512-noamx"), to test that code.
    case avx512NoAMX = "avx512-noamx"
    /// AVX-512 F/BW/VL without VNNI ("avx512-novnni"): int8 products by VPMADDUBSW + VPMADDWD. The best path of a CPU
    /// with AVX-512 but no VNNI; a fallback where VNNI is.
    case avx512NoVNNI = "avx512-novnni"

    /// The environment variable the CLI reads to force a path.
    public static let environmentVariable = "EMBER_ISA"

    init(_ c: ek_isa) {
        switch c {
        case EK_ISA_AVX2: self = .avx2
        case EK_ISA_AVX512: self = .avx512
        case EK_ISA_NEON: self = .neon
        case EK_ISA_AVX2_PLAIN: self = .avx2NoVNNI
        case EK_ISA_AVX512_PLAIN: self = .avx512NoAMX
        case EK_ISA_AVX512_NOVNNI: self = .avx512NoVNNI
        default: self = .scalar
        }
    }

    package var cValue: ek_isa {
        switch self {
        case .scalar: EK_ISA_SCALAR
        case .avx2: EK_ISA_AVX2
        case .avx512: EK_ISA_AVX512
        case .neon: EK_ISA_NEON
        case .avx2NoVNNI: EK_ISA_AVX2_PLAIN
        case .avx512NoAMX: EK_ISA_AVX512_PLAIN
        case .avx512NoVNNI: EK_ISA_AVX512_NOVNNI
        }
    }

    /// Whether this path multiplies int8 without VNNI (AVX2 on a CPU without AVX-VNNI, or `avx2-novnni`): Q8_0
    /// weights whose values fit in seven bits are faster there (`EK_PACKED_Q8_SEVEN_BITS`).
    public func multipliesInt8WithoutVNNI(features: CPUFeatures = .current) -> Bool {
        self == .avx2NoVNNI || (self == .avx2 && !features.avxvnni)
    }

    /// Whether this path runs the AVX-512 kernels (`avx512`, `avx512-noamx` or `avx512-novnni`).
    public var isAVX512: Bool { self == .avx512 || self == .avx512NoAMX || self == .avx512NoVNNI }

    /// Whether this path multiplies int8 on AMX tiles: `avx512` where the CPU has AMX-INT8 and the operating system
    /// grants this process the tile state (asked here the first time, as the kernels would ask it).
    public func multipliesInt8OnTiles(features: CPUFeatures = .current) -> Bool {
        self == .avx512 && features.amxInt8 && ek_amx_tiles_granted()
    }

    /// The name `EMBER_ISA` uses, e.g. "avx2-novnni".
    public var description: String { rawValue }

    /// Whether `features` (and this build) can run this family.
    public func isSupported(by features: CPUFeatures = .current) -> Bool {
        var c = features.cValue
        return ek_isa_supported(cValue, &c)
    }

    /// The widest family `features` support.
    public static func best(for features: CPUFeatures = .current) -> KernelISA {
        var c = features.cValue
        return KernelISA(ek_isa_best(&c))
    }

    /// The family to run: `override` (the CLI passes `EMBER_ISA`) when set, else the best.
    /// Throws ``KernelError/unknownISA(value:expected:)`` or
    /// ``KernelError/unsupportedISA(_:features:)`` for a bad override.
    public static func select(override: String?, features: CPUFeatures = .current) throws -> KernelISA {
        var c = features.cValue
        var chosen = EK_ISA_SCALAR
        let status = (override ?? "").withCString { ek_isa_select($0, &c, &chosen) }
        switch status {
        case EK_OK:
            return KernelISA(chosen)
        case EK_ERR_UNKNOWN_ISA:
            throw KernelError.unknownISA(value: override ?? "", expected: allCases.map(\.rawValue) + ["auto"])
        default:
            throw KernelError.unsupportedISA(KernelISA(rawValue: override ?? "") ?? .scalar, features: features.names)
        }
    }
}
