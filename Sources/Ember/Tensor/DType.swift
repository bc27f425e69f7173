/// The element type of a ``Tensor``.
///
/// Element-wise types only: the quantized block formats (Q8_0, Q4_0, Q4_1)
/// are not element types — they live in quantized weight storage, which packs
/// 32 elements per block with a shared scale.
public enum DType: String, Sendable, CaseIterable, CustomStringConvertible {
    case float32
    case float16
    case bfloat16
    case int8
    case int32

    /// Bytes one element occupies.
    public var byteSize: Int {
        switch self {
        case .float32, .int32: 4
        case .float16, .bfloat16: 2
        case .int8: 1
        }
    }

    public var description: String { rawValue }
}
