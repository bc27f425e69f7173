/// The element type of a ``Tensor``.
///
/// Element-wise types only: the quantized block formats (Q8_0, Q4_0, Q4_1)
/// are not element types — they live in quantized weight storage, which packs
/// 32 elements per block with a shared scale.
public enum DType: String, Sendable, CaseIterable, CustomStringConvertible {
    /// 32-bit IEEE 754 float (4 bytes).
    case float32
    /// 16-bit IEEE 754 half-precision float (2 bytes).
    case float16
    /// 16-bit brain float: fp32's exponent range with 8 bits of significand (2 bytes).
    case bfloat16
    /// Signed 8-bit integer (1 byte).
    case int8
    /// Signed 32-bit integer (4 bytes).
    case int32

    /// Bytes one element occupies.
    public var byteSize: Int {
        switch self {
        case .float32, .int32: 4
        case .float16, .bfloat16: 2
        case .int8: 1
        }
    }

    /// The case name, e.g. "float16".
    public var description: String { rawValue }
}
