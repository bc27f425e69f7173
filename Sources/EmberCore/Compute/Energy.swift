import Foundation

/// Energy a piece of work took, labelled with where the figure comes from.
public struct EnergyEstimate: Sendable, Codable, Equatable {
    /// Where an energy figure comes from.
    public enum Source: String, Sendable, Codable {
        /// Read from an OS energy counter (Linux RAPL, `/sys/class/powercap`).
        case measured
        /// From the calibrated cost model (``OpCost/joulesPerUnit`` of the backends that ran the work).
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

    /// The sum of two estimates; measured only if both were.
    public static func + (lhs: EnergyEstimate, rhs: EnergyEstimate) -> EnergyEstimate {
        EnergyEstimate(joules: lhs.joules + rhs.joules, source: lhs.source == .measured && rhs.source == .measured ? .measured : .modelled)
    }
}

/// The machine's package energy counter, where Linux exposes one (RAPL under
/// `/sys/class/powercap`; absent in most virtual machines). Owned by a
/// ``ComputeContext``, which looks for it once, when it starts.
public struct EnergyCounter: Sendable {
    /// Where Linux exposes the package counter.
    public static let defaultPath = "/sys/class/powercap/intel-rapl:0/energy_uj"

    /// The counter file read, nil when there is none.
    public let path: String?

    /// The counter at `path` when that file is readable now, else none.
    public init(path: String = EnergyCounter.defaultPath) {
        self.path = FileManager.default.isReadableFile(atPath: path) ? path : nil
    }

    /// Microjoules so far, or nil when there is no readable counter.
    public func microjoules() -> UInt64? {
        guard let path, let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether the counter can be read now.
    public var isAvailable: Bool { microjoules() != nil }
}

/// The energy of one piece of work: started before it, finished after it.
/// Measured from the package counter when the machine has one, else the
/// joules the cost model gives for the work.
public struct EnergyMeter: Sendable {
    private let counter: EnergyCounter
    private let before: UInt64?

    /// Starts the meter: reads `counter` now, if there is one.
    public init(counter: EnergyCounter) {
        self.counter = counter
        before = counter.microjoules()
    }

    /// The energy since the start: the counter's difference when it was readable at both ends and did not
    /// wrap, else `modelledJoules` (what the calibrated costs of the work's ops add up to).
    public func finish(modelledJoules: Double) -> EnergyEstimate {
        if let before, let after = counter.microjoules(), after >= before {
            return EnergyEstimate(joules: Double(after - before) / 1e6, source: .measured)
        }
        return EnergyEstimate(joules: modelledJoules, source: .modelled)
    }
}
