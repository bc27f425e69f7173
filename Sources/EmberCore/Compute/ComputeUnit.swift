/// Where work may run, named as on Apple hardware so a host app is written
/// once: on Linux each is a distinct kernel family and execution resource
/// (see `docs/ARCHITECTURE.md`, "The three compute-unit routes on Linux").
public enum ComputeUnit: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// Portable kernels for every op (fp32 C loops, the scalar references), on the caller's workers.
    case cpu
    /// fp32 matmul-class ops through BLAS, on its own submission queue, all cores.
    case gpu
    /// int8/int4 matmul-class ops through the SIMD kernels, on one shared serial queue, all cores.
    case neuralEngine = "neural-engine"

    /// Preference order when several are allowed: the most efficient first.
    public static let preference: [ComputeUnit] = [.neuralEngine, .gpu, .cpu]

    /// The raw value: "cpu", "gpu" or "neural-engine".
    public var description: String { rawValue }
}

/// A set of compute units a request may use, with Core ML's presets
/// (`MLComputeUnits`). The CPU route is always the last resort.
public struct ComputeUnits: OptionSet, Sendable, Hashable, Codable, CustomStringConvertible {
    /// One bit per unit: cpu 1, gpu 2, neuralEngine 4.
    public let rawValue: UInt8
    /// The set whose bits are `rawValue`.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The CPU route.
    public static let cpu = ComputeUnits(rawValue: 1 << 0)
    /// The GPU route (fp32 through BLAS).
    public static let gpu = ComputeUnits(rawValue: 1 << 1)
    /// The neural-engine route (int8/int4 SIMD kernels).
    public static let neuralEngine = ComputeUnits(rawValue: 1 << 2)

    /// The CPU route only, as `MLComputeUnits.cpuOnly`.
    public static let cpuOnly: ComputeUnits = [.cpu]
    /// The CPU and GPU routes, as `MLComputeUnits.cpuAndGPU`.
    public static let cpuAndGPU: ComputeUnits = [.cpu, .gpu]
    /// The CPU and neural-engine routes, as `MLComputeUnits.cpuAndNeuralEngine`.
    public static let cpuAndNeuralEngine: ComputeUnits = [.cpu, .neuralEngine]
    /// Every route, as `MLComputeUnits.all`.
    public static let all: ComputeUnits = [.cpu, .gpu, .neuralEngine]

    /// The set holding only `unit`.
    public init(_ unit: ComputeUnit) {
        switch unit {
        case .cpu: self = .cpu
        case .gpu: self = .gpu
        case .neuralEngine: self = .neuralEngine
        }
    }

    /// Whether `unit` is in the set.
    public func contains(_ unit: ComputeUnit) -> Bool { contains(ComputeUnits(unit)) }

    /// The allowed units in preference order, then the CPU route even if not listed.
    public var searchOrder: [ComputeUnit] {
        var order = ComputeUnit.preference.filter { contains($0) }
        if !order.contains(.cpu) { order.append(.cpu) }
        return order
    }

    /// The preset's name ("cpuOnly", "cpuAndGPU", "cpuAndNeuralEngine", "all"), else the units in preference order joined by "+", e.g. "neural-engine+gpu".
    public var description: String {
        switch self {
        case .cpuOnly: "cpuOnly"
        case .cpuAndGPU: "cpuAndGPU"
        case .cpuAndNeuralEngine: "cpuAndNeuralEngine"
        case .all: "all"
        default: ComputeUnit.preference.filter { contains($0) }.map(\.rawValue).joined(separator: "+")
        }
    }
}
