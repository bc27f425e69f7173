import Foundation

/// What one compute unit is: the ops and precisions it runs, the resource it
/// runs on, and its cost model. Data, not code paths: the registry and the
/// policy read these; nothing else knows which kernel runs.
public struct UnitProfile: Sendable, Codable {
    /// How jobs reach the unit's threads.
    public enum ExecutionResource: String, Sendable, Codable {
        /// Submit a batch of ops, then await completion (command-buffer style), all cores.
        case submissionQueue = "submission queue"
        /// One shared serial queue: one job at a time, all cores.
        case serialQueue = "serial queue"
        /// The caller's own QoS workers.
        case callerWorkers = "caller's workers"
    }

    /// One precision's costs on this unit.
    public struct Cost: Sendable, Codable {
        /// Sustained multiply-adds ×2 per second, in billions (GOPS), on all cores.
        public var throughputGOPS: Double
        /// Time from submission to the first instruction, in microseconds.
        public var dispatchMicroseconds: Double
        /// Joules per operation (2 per multiply-add): active power ÷ throughput.
        public var joulesPerOperation: Double
        /// "measured" when calibrated on this machine, else "default".
        public var throughputSource: String

        enum CodingKeys: String, CodingKey {
            case throughputGOPS = "throughput_gops", dispatchMicroseconds = "dispatch_us"
            case joulesPerOperation = "joules_per_op", throughputSource = "throughput_source"
        }
    }

    /// The unit described.
    public var unit: ComputeUnit
    /// The execution resource the unit's jobs run on.
    public var resource: ExecutionResource
    /// Ops this unit runs, and the weight precisions it runs them at.
    public var supports: [ComputeOperation: [Precision]]
    /// Costs per precision.
    public var costs: [Precision: Cost]

    /// Power drawn while the unit keeps every core busy, in watts: the energy
    /// model's one coefficient. Estimated for a Zen 5 server core under
    /// AVX-512 load — AMD EPYC 9005: 500 W TDP over 128 cores ≈ 3.9 W per core
    /// plus ~2 W of uncore and memory traffic per busy core — so 6 W per core.
    /// Replace with a measurement (RAPL) where the OS exposes one.
    public static let wattsPerBusyCore = 6.0

    /// Documented default throughputs (this project's machine kind, 2 cores,
    /// medians of `ember bench kernels` / `bench blas`), used until calibration.
    public static func defaults(cores: Int = ProcessInfo.processInfo.activeProcessorCount) -> [UnitProfile] {
        let perCore = Double(cores) / 2
        func cost(_ gops: Double, dispatch: Double) -> Cost {
            Cost(throughputGOPS: gops * perCore, dispatchMicroseconds: dispatch,
                 joulesPerOperation: wattsPerBusyCore * Double(cores) / (gops * perCore * 1e9), throughputSource: "default")
        }
        let matmulOnly: [ComputeOperation: [Precision]] = [.matmul: []]
        return [
            UnitProfile(unit: .neuralEngine, resource: .serialQueue,
                        supports: matmulOnly.mapValues { _ in [.int8, .int4] },
                        costs: [.int8: cost(700, dispatch: 20), .int4: cost(800, dispatch: 20)]),
            UnitProfile(unit: .gpu, resource: .submissionQueue,
                        supports: matmulOnly.mapValues { _ in [.fp32] },
                        costs: [.fp32: cost(190, dispatch: 20)]),
            UnitProfile(unit: .cpu, resource: .callerWorkers,
                        supports: Dictionary(uniqueKeysWithValues: ComputeOperation.allCases.map { ($0, Precision.allCases) }),
                        costs: [.fp32: cost(16, dispatch: 2), .int8: cost(10, dispatch: 2), .int4: cost(6, dispatch: 2)]),
        ]
    }

    /// Whether this unit runs `op` at `precision`.
    public func runs(_ op: ComputeOperation, at precision: Precision) -> Bool {
        supports[op]?.contains(precision) ?? false
    }

    /// Modelled seconds and joules for `operations` (2 per multiply-add) at `precision`.
    public func estimate(operations: Double, precision: Precision) -> (seconds: Double, joules: Double)? {
        guard let cost = costs[precision] else { return nil }
        return (cost.dispatchMicroseconds * 1e-6 + operations / (cost.throughputGOPS * 1e9), operations * cost.joulesPerOperation)
    }
}

/// Energy a piece of work took, labelled with where the figure comes from.
public struct EnergyEstimate: Sendable, Codable, Equatable {
    /// Where an energy figure comes from.
    public enum Source: String, Sendable, Codable {
        /// Read from an OS energy counter (Linux RAPL, `/sys/class/powercap`).
        case measured
        /// From the unit's cost model (`UnitProfile.wattsPerBusyCore`).
        case modelled
    }

    /// Energy in joules.
    public var joules: Double
    /// Whether ``joules`` was measured or modelled.
    public var source: Source

    /// An energy figure of `joules`, measured or modelled (a host's own request reports one through `RunContext.report`).
    public init(joules: Double, source: Source) {
        self.joules = joules
        self.source = source
    }
}

/// The machine's package energy counter, where Linux exposes one (RAPL under
/// `/sys/class/powercap`; absent in most virtual machines).
public enum EnergyCounter {
    static let path = "/sys/class/powercap/intel-rapl:0/energy_uj"

    /// Whether the counter file is readable (looked up once: every forward pass asks).
    static let isPresent = FileManager.default.isReadableFile(atPath: path)

    /// Microjoules so far, or nil when there is no readable counter.
    public static func microjoules() -> UInt64? {
        guard isPresent, let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether the counter can be read now.
    public static var isAvailable: Bool { microjoules() != nil }
}

/// The energy of one piece of work: started before it, finished after it.
/// Measured from the package counter when the machine has one, else
/// modelled from the unit's profile for the work's operations.
public struct EnergyMeter: Sendable {
    private let before = EnergyCounter.microjoules()

    /// Starts the meter: reads the energy counter now, if there is one.
    public init() {}

    /// The energy since ``init()``: the counter's difference when it was readable at both ends and did not wrap, else
    /// modelled from `profiles[unit]` for `operations` (2 per multiply-add) at `precision`, 0 J when no cost is known.
    public func finish(unit: ComputeUnit, operations: Double, precision: Precision,
                       profiles: [ComputeUnit: UnitProfile] = ComputeEngine.shared.profiles) -> EnergyEstimate {
        if let before, let after = EnergyCounter.microjoules(), after >= before {
            return EnergyEstimate(joules: Double(after - before) / 1e6, source: .measured)
        }
        let joules = profiles[unit]?.estimate(operations: operations, precision: precision)?.joules ?? 0
        return EnergyEstimate(joules: joules, source: .modelled)
    }
}

extension EnergyEstimate {
    /// The sum of two estimates; measured only if both were.
    public static func + (lhs: EnergyEstimate, rhs: EnergyEstimate) -> EnergyEstimate {
        EnergyEstimate(joules: lhs.joules + rhs.joules, source: lhs.source == .measured && rhs.source == .measured ? .measured : .modelled)
    }
}
