/// Why a ``Tensor`` could not be made, reshaped or used.
///
/// Every case names the argument at fault and the values found and expected.
public enum TensorError: Error, Equatable, CustomStringConvertible {
    /// A dimension is negative, or the element count overflows `Int`.
    case invalidShape(argument: String, shape: [Int], reason: String)
    /// The number of values does not match the product of the shape.
    case elementCountMismatch(argument: String, shape: [Int], expected: Int, found: Int)
    /// The tensor's element type is not the one the operation needs.
    case dtypeMismatch(argument: String, expected: DType, found: DType)
    /// The tensor's rank or dimensions do not fit the operation.
    case shapeMismatch(argument: String, expected: String, found: [Int])
    /// The tensor borrows memory it may not write (for example a memory-mapped weight).
    case readOnly(argument: String)
    /// The output shares memory with an input, which the operation cannot allow.
    case overlappingMemory(argument: String, with: String)
    /// A dimension exceeds what the underlying library can index (32-bit BLAS).
    case dimensionTooLarge(argument: String, dimension: Int, limit: Int)

    /// A one-line human-readable form naming the argument, e.g. "lhs: element type int8, expected float32".
    public var description: String {
        switch self {
        case let .invalidShape(argument, shape, reason):
            "\(argument): invalid shape \(shape): \(reason)"
        case let .elementCountMismatch(argument, shape, expected, found):
            "\(argument): shape \(shape) needs \(expected) elements, found \(found)"
        case let .dtypeMismatch(argument, expected, found):
            "\(argument): element type \(found), expected \(expected)"
        case let .shapeMismatch(argument, expected, found):
            "\(argument): shape \(found), expected \(expected)"
        case let .readOnly(argument):
            "\(argument): the tensor borrows read-only memory and cannot be written"
        case let .overlappingMemory(argument, other):
            "\(argument): shares memory with \(other); pass a separate output tensor"
        case let .dimensionTooLarge(argument, dimension, limit):
            "\(argument): dimension \(dimension) exceeds the limit \(limit)"
        }
    }
}
