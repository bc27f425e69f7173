import CKernels

/// A GGUF block format for quantized weights: 32 elements per block with an
/// fp16 scale (and, for Q4_1, an fp16 minimum).
///
/// | format | block | value |
/// |---|---|---|
/// | `q8_0` | 34 bytes: d, 32 × int8 | d·q |
/// | `q4_0` | 18 bytes: d, 16 bytes of nibbles | (q − 8)·d |
/// | `q4_1` | 20 bytes: d, m, 16 bytes of nibbles | q·d + m |
public enum QuantizedFormat: String, Sendable, CaseIterable, CustomStringConvertible {
    /// GGUF's Q8_0 (34-byte blocks), Q4_0 (18 bytes) and Q4_1 (20 bytes).
    case q8_0, q4_0, q4_1

    /// Elements per block.
    public static let blockSize = 32

    /// Bytes of one block.
    public var blockBytes: Int { ek_format_block_bytes(cValue) }

    /// Bits per weight of the format's precision class: 8 (int8) or 4 (int4).
    public var bits: Int { self == .q8_0 ? 8 : 4 }

    /// The raw value, e.g. "q4_0".
    public var description: String { rawValue }

    var cValue: ek_format {
        switch self {
        case .q8_0: EK_FORMAT_Q8_0
        case .q4_0: EK_FORMAT_Q4_0
        case .q4_1: EK_FORMAT_Q4_1
        }
    }

    /// Bytes of a rows × columns matrix in this format (columns a multiple of 32).
    public func byteCount(rows: Int, columns: Int) -> Int { rows * (columns / Self.blockSize) * blockBytes }
}
