import Foundation
import Testing
@testable import EmberCore
import Ember
import EmberTestSupport

@Suite("CPU features, kernel ISA choice and BLAS core")
struct CPUAndBLASTests {
    /// Linux lists CPU flags in /proc/cpuinfo; detection must agree with it.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/cpuinfo")))
    func detectionAgreesWithProcCpuinfo() throws {
        let text = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        guard let flagsLine = text.split(separator: "\n").first(where: { $0.hasPrefix("flags") || $0.hasPrefix("Features") }) else {
            Issue.record("no flags line in /proc/cpuinfo")
            return
        }
        let flags = Set(flagsLine.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == ":" }).map(String.init))
        let features = CPUFeatures.current
        #if arch(x86_64)
        let expectations: [(String, Bool)] = [
            ("avx2", features.avx2), ("fma", features.fma), ("f16c", features.f16c),
            ("avx512f", features.avx512f), ("avx512bw", features.avx512bw), ("avx512vl", features.avx512vl),
            ("avx512_vnni", features.avx512vnni), ("avx_vnni", features.avxvnni),
        ]
        #elseif arch(arm64)
        let expectations: [(String, Bool)] = [("asimd", features.neon), ("asimddp", features.dotprod)]
        #else
        let expectations: [(String, Bool)] = []
        #endif
        for (flag, detected) in expectations {
            #expect(flags.contains(flag) == detected, "\(flag): /proc/cpuinfo says \(flags.contains(flag)), detection says \(detected)")
        }
    }

    @Test func bestISAFollowsFeatures() {
        var features = CPUFeatures()
        #expect(KernelISA.best(for: features) == .scalar)
        #if arch(x86_64)
        features.avx2 = true; features.fma = true; features.f16c = true
        #expect(KernelISA.best(for: features) == .avx2)
        features.avx512f = true; features.avx512bw = true; features.avx512vl = true
        #expect(KernelISA.best(for: features) == .avx512NoVNNI, "AVX-512 without VNNI (Skylake-SP/X) has its own path")
        #expect(!KernelISA.avx512.isSupported(by: features))
        features.avx512vnni = true
        #expect(KernelISA.best(for: features) == .avx512)
        #expect(KernelISA.avx512NoVNNI.isSupported(by: features))
        #expect(!KernelISA.neon.isSupported(by: features))
        #endif
    }

    @Test func overrideForcesASupportedISA() throws {
        #expect(try KernelISA.select(override: "scalar") == .scalar)
        #expect(try KernelISA.select(override: nil) == KernelISA.best())
        #expect(try KernelISA.select(override: "auto") == KernelISA.best())
        #if arch(x86_64)
        var avx2Only = CPUFeatures()
        avx2Only.avx2 = true; avx2Only.fma = true; avx2Only.f16c = true
        #expect(try KernelISA.select(override: "avx2", features: avx2Only) == .avx2)
        #expect(throws: KernelError.unsupportedISA(.avx512, features: ["avx2", "fma", "f16c"])) {
            try KernelISA.select(override: "avx512", features: avx2Only)
        }
        #expect(throws: KernelError.unsupportedISA(.avx512NoVNNI, features: ["avx2", "fma", "f16c"])) {
            try KernelISA.select(override: "avx512-novnni", features: avx2Only)
        }
        #endif
    }

    @Test func unknownOverrideIsATypedError() {
        #expect(throws: KernelError.unknownISA(value: "sse9", expected: ["scalar", "avx2", "avx512", "neon", "avx2-novnni", "avx512-noamx", "avx512-novnni", "auto"])) {
            try KernelISA.select(override: "sse9")
        }
    }

    @Test func blasCoreLevels() {
        #expect(BLASLibrary.simdLevel(ofCore: "Haswell") == .avx2)
        #expect(BLASLibrary.simdLevel(ofCore: "SkylakeX") == .avx512)
        #expect(BLASLibrary.simdLevel(ofCore: "Cooperlake") == .avx512)
        #expect(BLASLibrary.simdLevel(ofCore: "Sandybridge") == .avx)
        #expect(BLASLibrary.simdLevel(ofCore: "MysteryCore") == nil)
        #expect(BLASLibrary.version(in: "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH Haswell") == "0.3.21")
        #expect(BLASLibrary.version(in: "something else") == nil)
    }

    static func avx512Machine() -> CPUFeatures {
        var features = CPUFeatures()
        features.avx2 = true; features.fma = true; features.f16c = true
        features.avx512f = true; features.avx512bw = true; features.avx512vl = true; features.avx512vnni = true
        return features
    }

    static func library(core: String) -> BLASLibrary {
        BLASLibrary(configuration: "OpenBLAS 0.3.21 DYNAMIC_ARCH \(core)", version: "0.3.21", coreName: core, threads: 2, parallelism: "pthreads")
    }

    @Test func weakerForcedCoreWarnsWithTheFix() throws {
        let warning = try #require(Self.library(core: "Haswell").coreWarning(
            cpu: Self.avx512Machine(), forcedCore: "Haswell"))
        #expect(warning.contains("OPENBLAS_CORETYPE=Haswell"))
        #expect(warning.contains("unset OPENBLAS_CORETYPE"))
        #expect(warning.contains("half speed"))
    }

    /// The fp32 route's own kernel takes 2…128 rows of input, every product from 2 rows up when OpenBLAS runs
    /// narrower kernels than the ISA (Haswell's on AVX-512), any rows of up to 2,048 columns on AVX2 when OpenBLAS's
    /// kernels are AVX2 too, and nothing on the scalar ISA — nor on an ISA this CPU lacks (AVX-512 on a Zen 3), whose
    /// kernel it could not run.
    @Test func fp32RouteUsesItsOwnKernelWhereItIsFaster() {
        let few = BoundMatmul.fewRows, panelled = BoundMatmul.panelledColumns
        /// What to expect of `isa`: `choice` where this CPU runs it, nil where it does not.
        func onThisCPU(_ isa: KernelISA, _ choice: BoundMatmul.FewRows) -> BoundMatmul.FewRows? {
            isa.isSupported() ? choice : nil
        }
        #expect(BLASBackend(isa: .avx512, blasLevel: .avx2).fewRows == onThisCPU(.avx512, .init(isa: .avx512, limit: .max, anyRowsUpToColumns: .max)))
        #expect(BLASBackend(isa: .avx512, blasLevel: .avx512).fewRows == onThisCPU(.avx512, .init(isa: .avx512, limit: few, anyRowsUpToColumns: 0)))
        #expect(BLASBackend(isa: .avx2, blasLevel: .avx2).fewRows == onThisCPU(.avx2, .init(isa: .avx2, limit: few, anyRowsUpToColumns: panelled)))
        #expect(BLASBackend(isa: .avx2NoVNNI, blasLevel: .avx2).fewRows
                == onThisCPU(.avx2NoVNNI, .init(isa: .avx2NoVNNI, limit: few, anyRowsUpToColumns: panelled)))
        #expect(BLASBackend(isa: .avx2, blasLevel: .avx512).fewRows == onThisCPU(.avx2, .init(isa: .avx2, limit: few, anyRowsUpToColumns: 0)))
        #expect(BLASBackend(isa: .avx2, blasLevel: .avx).fewRows == onThisCPU(.avx2, .init(isa: .avx2, limit: .max, anyRowsUpToColumns: .max)))
        #expect(BLASBackend(isa: .avx512, blasLevel: nil).fewRows == onThisCPU(.avx512, .init(isa: .avx512, limit: few, anyRowsUpToColumns: 0)))
        #expect(BLASBackend(isa: .scalar, blasLevel: .avx2).fewRows == nil)
    }

    @Test func weakerDetectedCoreBlamesTheLibrary() throws {
        let warning = try #require(Self.library(core: "Haswell").coreWarning(cpu: Self.avx512Machine(), forcedCore: nil))
        #expect(warning.contains("does not recognise the CPU"))
        #expect(warning.contains("OPENBLAS_CORETYPE=SkylakeX"))
    }

    @Test func matchingCoreDoesNotWarn() {
        #expect(Self.library(core: "Cooperlake").coreWarning(cpu: Self.avx512Machine(), forcedCore: nil) == nil)
        #expect(Self.library(core: "Haswell").coreWarning(cpu: CPUFeatures(), forcedCore: nil) == nil)
    }

    /// The library really loaded here reports a known core and at least one thread.
    @Test func loadedLibraryDescribesItself() {
        let library = BLASLibrary.current
        #expect(!library.coreName.isEmpty)
        #expect(library.threads >= 1)
        #expect(library.configuration.hasPrefix("OpenBLAS"))
        #if arch(x86_64)
        #expect(library.coreLevel != nil, "Ember does not know OpenBLAS core \(library.coreName)")
        #endif
    }

    /// The report states the warning exactly when the process was started with a weaker forced core.
    @Test func systemReportCarriesTheCoreWarning() throws {
        let runtime = try Runtime.forTests()
        let forced = ProcessInfo.processInfo.environment["OPENBLAS_CORETYPE"]
        let report = SystemReport.current(runtime: runtime, openBLASCoreType: forced)
        let expected = BLASLibrary.current.coreWarning(forcedCore: forced) != nil
        #expect(report.warnings.contains { $0.contains("OpenBLAS runs its") } == expected)
        #expect(report.kernels.selected == runtime.context.isa.rawValue)
    }
}
