import ArgumentParser
import Ember
import EmberBenchmarks
import Foundation

/// `ember bench`: side-by-side benchmarks a user can read.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Ember against its references in one run.",
        subcommands: [BenchBLASCommand.self, BenchKernelsCommand.self, BenchQoSCommand.self, BenchGenerateCommand.self, BenchEmbedCommand.self,
                      BenchStructuredCommand.self])
}

/// `ember bench blas`: Ember's fp32 matmul vs a raw cblas_sgemm on the same buffers.
struct BenchBLASCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "blas",
        abstract: "Ember's fp32 matmul vs a raw cblas_sgemm call on the same buffers (GFLOP/s, medians).")

    @Flag(help: "Print one JSON object: blas_core, threads, results[{m, n, k, ember_gflops, raw_gflops, ratio}].")
    var json = false

    @Option(parsing: .unconditional, help: "Threads on both sides: Ember's workers, and OpenBLAS's for the raw call (default: every core).")
    var threads: Int?

    @Option(parsing: .unconditional, help: "Timed rounds per shape; medians are reported.")
    var rounds = 7

    @Flag(help: "Fewer, shorter rounds (for the demo).")
    var quick = false

    struct Report: Encodable {
        var blasCore: String
        var blasCoreLevel: String?
        var blasVersion: String?
        var threads: Int
        var method: String
        var warnings: [String]
        var results: [MatmulComparison.Result]

        enum CodingKeys: String, CodingKey {
            case threads, method, warnings, results
            case blasCore = "blas_core"
            case blasCoreLevel = "blas_core_level"
            case blasVersion = "blas_version"
        }
    }

    func validate() throws {
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1, got \(threads)") }
        if rounds < 1 { throw ValidationError("--rounds must be at least 1, got \(rounds)") }
    }

    func run() throws {
        let threads = threads ?? KernelThreads.default
        let context = try CommandEnvironment.runtime().context
        let library = context.blas
        let warning = library.coreWarning(forcedCore: CommandEnvironment.openBLASCoreType)
        let comparison = quick
            ? MatmulComparison(rounds: 3, minimumRoundSeconds: 0.02, threads: threads, pool: context.pool)
            : MatmulComparison(rounds: rounds, minimumRoundSeconds: 0.05, threads: threads, pool: context.pool)
        if !json {
            print("OpenBLAS \(library.version ?? "?"), core \(library.coreName) (\(library.coreLevel?.description ?? "level unknown")); \(threads) thread(s) each side: Ember's workers vs OpenBLAS's threads")
            if let warning { print("warning: \(warning)") }
            print("median of \(comparison.rounds) alternating rounds; ratio = Ember ÷ raw sgemm, per round, median")
            print(pad("m×n×k", 22) + pad("Ember route", 13) + pad("Ember GFLOP/s", 15, right: true)
                + pad("raw GFLOP/s", 13, right: true) + pad("ratio", 8, right: true) + pad("overhead/call", 15, right: true))
        }
        var results = [MatmulComparison.Result]()
        for testCase in MatmulComparison.standardCases {
            let result = try comparison.measure(testCase)
            results.append(result)
            if !json {
                let shape = "\(result.m)×\(result.n)×\(result.k)" + (result.transposeB ? " (Bᵀ)" : "")
                print(pad(shape, 22) + pad(result.emberRoute, 13) + pad(format(result.emberGflops), 15, right: true)
                    + pad(format(result.rawGflops), 13, right: true) + pad(String(format: "%.3f", result.ratio), 8, right: true)
                    + pad(overhead(result), 15, right: true))
            }
        }
        if json {
            try printJSON(Report(
                blasCore: library.coreName, blasCoreLevel: library.coreLevel?.description, blasVersion: library.version,
                threads: threads,
                method: "median of \(comparison.rounds) alternating rounds of >= \(comparison.minimumRoundSeconds) s; ratio = median per-round Ember/raw",
                warnings: warning.map { [$0] } ?? [], results: results))
        }
    }

    private func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// Per-call overhead, shown where a call is short enough for it to be
    /// told apart from noise (under ~100 µs); the JSON always carries it.
    private func overhead(_ result: MatmulComparison.Result) -> String {
        let callNanoseconds = 2 * Double(result.m) * Double(result.n) * Double(result.k) / result.rawGflops
        return callNanoseconds < 100_000 ? String(format: "%+.0f ns", result.overheadNanoseconds) : "(noise)"
    }
}

/// `ember bench kernels`: the quantized kernels against read bandwidth and fp32 BLAS.
struct BenchKernelsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kernels",
        abstract: "GEMV/GEMM of every weight type with SIMD kernels vs the measured read bandwidth and fp32 BLAS, medians.",
        discussion: "Types that need 256-element rows (the K-quants, IQ4_XS) skip the 576-wide shapes.")

    @Flag(help: "Print one JSON object: isa, threads, read_bandwidth_gbs, results[…].")
    var json = false

    @Option(parsing: .unconditional, help: "Threads for the quantized kernels and OpenBLAS (default: every core).")
    var threads: Int?

    @Option(parsing: .unconditional, help: "Timed rounds per case; medians are reported.")
    var rounds = 5

    @Flag(help: "Only the SmolLM2-sized shapes, fewer rounds, and Q4_0, Q4_1, Q8_0, Q5_0 (for the demo).")
    var quick = false

    @Option(help: "Comma-separated weight types, e.g. q4_k,q6_k (default: every type this ISA runs with SIMD code).")
    var types: String?

    /// The types to measure: the flag's, else every SIMD type (the demo's few with --quick).
    func measuredTypes(_ isa: KernelISA) throws -> [TensorType] {
        if let types {
            return try types.split(separator: ",").map { name in
                guard let type = TensorType(name: String(name)), type.canDequantize else {
                    throw ValidationError("--types: \(name) is not a weight type Ember computes with; expected some of "
                                          + KernelBenchmark.simdTypes(isa).map(\.description).joined(separator: ", "))
                }
                return type
            }
        }
        return quick ? KernelBenchmark.quickTypes(isa) : KernelBenchmark.simdTypes(isa)
    }

    struct Report: Encodable {
        var isa: String
        var threads: Int
        var blasCore: String
        var blasThreads: Int
        var readBandwidthGBs: Double
        var results: [KernelBenchmark.Result]

        enum CodingKeys: String, CodingKey {
            case isa, threads, results
            case blasCore = "blas_core"
            case blasThreads = "blas_threads"
            case readBandwidthGBs = "read_bandwidth_gbs"
        }
    }

    func validate() throws {
        if let threads, threads < 1 { throw ValidationError("--threads must be at least 1, got \(threads)") }
        if rounds < 1 { throw ValidationError("--rounds must be at least 1, got \(rounds)") }
    }

    func run() throws {
        let threads = threads ?? KernelThreads.default
        let context = try CommandEnvironment.runtime().context
        if let error = context.isaOverrideError { printError("warning: \(error); using \(context.isa)") }
        var benchmark = KernelBenchmark(isa: context.isa, pool: context.pool, threads: threads, rounds: quick ? 3 : rounds,
                                        minimumRoundSeconds: quick ? 0.02 : 0.05)
        // Cold means several times the last-level cache, which on some machines is hundreds of MiB.
        let caches = CacheSizes.read(sysfsRoot: CommandEnvironment.sysfsRoot)
        benchmark.rotationBytes = caches.coldBytes(atLeast: benchmark.rotationBytes)
        let readBytes = caches.coldBytes(atLeast: 512 << 20)
        let library = context.blas
        let buffer = try KernelBenchmark.ReadBuffer(bytes: readBytes)
        let bandwidth = benchmark.readBandwidth(buffer)
        let shapes = quick ? Array(KernelBenchmark.standardShapes.prefix(3)) : KernelBenchmark.standardShapes
        if !json {
            print("kernels \(benchmark.isa), \(threads) worker thread(s); fp32 reference: OpenBLAS core \(library.coreName) on the same workers")
            if let warning = library.coreWarning(forcedCore: CommandEnvironment.openBLASCoreType) { print("warning: \(warning)") }
            print(String(format: "read bandwidth (streaming loop over %d MiB): %.1f GB/s; GEMV rounds alternate with reads and",
                         readBytes >> 20, bandwidth))
            print("rotate over weight copies spanning ≥ \(benchmark.rotationBytes >> 20) MiB (cold caches\(caches.lastLevelBytes.map { ": last level \($0 >> 20) MiB" } ?? "")); × bandwidth is the median per-round ratio")
            print(row(["format", "kind", "m×n×k", "time", "weights GB/s", "× bandwidth", "GOPS", "fp32 GFLOP/s", "× fp32"]))
        }
        var results = [KernelBenchmark.Result]()
        for shape in shapes {
            let measured = try benchmark.measure(n: shape.n, k: shape.k, formats: try measuredTypes(benchmark.isa), buffer: buffer,
                                                 readBandwidth: bandwidth)
            results += measured
            if !json {
                for r in measured {
                    print(row([r.format, r.kind, "\(r.m)×\(r.n)×\(r.k)", formatTime(r.seconds),
                               String(format: "%.1f", r.weightGBs), String(format: "%.2f", r.bandwidthRatio),
                               String(format: "%.0f", r.gops), String(format: "%.1f", r.sgemmGflops),
                               String(format: "%.2f", r.sgemmRatio)]))
                }
            }
        }
        if json {
            try printJSON(Report(isa: benchmark.isa.rawValue, threads: threads, blasCore: library.coreName,
                                 blasThreads: threads, readBandwidthGBs: bandwidth, results: results))
        }
    }

    private func formatTime(_ seconds: Double) -> String {
        seconds < 1e-3 ? String(format: "%.1f µs", seconds * 1e6) : String(format: "%.2f ms", seconds * 1e3)
    }

    private func row(_ cells: [String]) -> String {
        let widths = [7, 5, 18, 10, 13, 12, 7, 13, 7]
        return zip(cells, widths).enumerated().map { index, pair in
            let (text, width) = pair
            let space = String(repeating: " ", count: max(0, width - text.count))
            return index < 3 ? text + space : space + text
        }.joined(separator: " ")
    }
}

/// `ember bench qos`: what QoS classes and promotion buy under load.
struct BenchQoSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "qos",
        abstract: "Interactive latency under background load, and waiting on a background job with and without promotion.")

    @Flag(help: "Print one JSON object: contention, inversion, mapping.")
    var json = false

    @Option(parsing: .unconditional, help: "Repetitions of the interactive job per case (at least 10).")
    var repetitions = 200

    func validate() throws {
        guard repetitions >= 10 else { throw ValidationError("--repetitions: found \(repetitions), expected at least 10") }
    }

    struct Report: Encodable {
        var contention: QoSBenchmark.Contention
        var inversion: QoSBenchmark.Inversion
        var mapping: QoSMapping
    }

    func run() throws {
        let benchmark = QoSBenchmark(repetitions: repetitions)
        if !benchmark.mapping.canRaise {
            printError("note: \(benchmark.mapping.reason); promotion is unavailable, the inversion case shows it")
        }
        let contention = try benchmark.contention()
        let inversion = try benchmark.inversion()
        if json {
            try printJSON(Report(contention: contention, inversion: inversion, mapping: benchmark.mapping))
            return
        }
        print("QoS mapping (\(benchmark.mapping.reason)):")
        benchmark.mapping.lines.forEach { print("  \($0)") }
        print("contention: user-interactive chain of \(contention.chainLength) int8 matmuls, \(contention.repetitions) repetitions per case, cases alternating in 4 blocks")
        for (name, p50, p99) in [("unloaded", contention.unloadedP50Ms, contention.unloadedP99Ms),
                                 ("load at background", contention.backgroundP50Ms, contention.backgroundP99Ms),
                                 ("load at same QoS", contention.sameQoSP50Ms, contention.sameQoSP99Ms)] {
            print("  " + name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(format: " p50 %7.2f ms   p99 %7.2f ms   p99 ÷ unloaded p99 %5.2f", p50, p99, p99 / contention.unloadedP99Ms))
        }
        print(String(format: "inversion: background job holds the serial queue (%.1f ms alone), default load on every core",
                     inversion.holderAloneMs))
        print(String(format: "  user-interactive wait: promoted %.1f ms, not promoted %.1f ms (load capped at %.0f ms): ratio %.3f",
                     inversion.promotedWaitMs, inversion.unpromotedWaitMs, inversion.loadCapMs,
                     inversion.promotedWaitMs / inversion.unpromotedWaitMs))
    }
}
