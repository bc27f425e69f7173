import _CEmberKernels

/// Why a kernel could not run or an ISA could not be chosen.
public enum KernelError: Error, Equatable, CustomStringConvertible {
    /// `EMBER_ISA` names no kernel family.
    case unknownISA(value: String, expected: [String])
    /// `EMBER_ISA` names a family this CPU or build cannot run.
    case unsupportedISA(KernelISA, features: [String])
    /// A C kernel refused its arguments.
    case rejected(kernel: String, argument: String, status: String)
    /// An argument a kernel wrapper cannot take.
    case invalidArgument(argument: String, found: String, expected: String)
    /// Memory (or address space, or threads) the work needs cannot be had; the reason says how much and what to do.
    case outOfMemory(reason: String)

    /// One line naming the ISA, kernel or argument at fault and what was expected.
    public var description: String {
        switch self {
        case let .unknownISA(value, expected):
            "\(KernelISA.environmentVariable)=\(value): unknown kernel ISA, expected one of \(expected.joined(separator: ", "))"
        case let .unsupportedISA(isa, features):
            "\(KernelISA.environmentVariable)=\(isa): this CPU cannot run it (features: \(features.isEmpty ? "none" : features.joined(separator: " ")))"
        case let .rejected(kernel, argument, status):
            "\(kernel): \(argument): \(status)"
        case let .invalidArgument(argument, found, expected):
            "\(argument): \(found), expected \(expected)"
        case let .outOfMemory(reason):
            "out of memory: \(reason)"
        }
    }
}
