import _CEmberKernels

/// A tensor's element or block type, numbered as GGUF's tensor types: the one
/// table (``TensorType/table``) every layer reads — the GGUF reader for sizes,
/// the weights for dequantizing and packing, the backends for what they run.
///
/// Adding a format is one row here (its id, name, block size and bytes, the
/// precision class, and how Ember's kernels hold it), plus its kernels in
/// `CKernels/` and their oracle tests; see `docs/ARCHITECTURE.md`.
///
/// | type | block | bytes | value |
/// |---|---|---|---|
/// | `f32` | 1 | 4 | the float |
/// | `f16` / `bf16` | 1 | 2 | the half / bfloat16 |
/// | `q8_0` | 32 | 34: d, 32 × int8 | d·q |
/// | `q4_0` | 32 | 18: d, 16 bytes of nibbles | (q − 8)·d |
/// | `q4_1` | 32 | 20: d, m, 16 bytes of nibbles | q·d + m |
/// | `q5_0`, `q5_1` | 32 | 22, 24: as Q4 with a fifth bit per value | (q − 16)·d, q·d + m |
/// | `iq4_nl` | 32 | 18: d, 16 bytes of nibbles | d·T[q], T a fixed 16-value table |
/// | `q2_k` … `q6_k` | 256 | 84, 110, 144, 176, 210 | per sub-block scale (and minimum) × q |
/// | `iq4_xs` | 256 | 136 | per 32: d·(s − 32)·T[q] |
///
/// The exact layouts are in `CKernels/include/ek_rows.h`; the scalar dequantizers in
/// `CKernels/dequant_ref.c` are the oracle, checked against the `gguf` package's.
public struct TensorType: Sendable, Hashable, CustomStringConvertible {
    /// How Ember's own kernels hold values of a type.
    package enum Storage: Sendable, Hashable {
        /// Plain fp32 values.
        case float32
        /// IEEE binary16 values (converted to fp32 where a kernel needs fp32).
        case float16
        /// bfloat16 values (the top half of an fp32).
        case bfloat16
        /// GGUF blocks the C kernels quantize, dequantize, pack and multiply (`ek_format`).
        case blocks(ek_format)
        /// Known for its size only: files holding it can be read, not computed with yet.
        case sizeOnly
    }

    /// GGUF's tensor type id (0 F32, 1 F16, 2 Q4_0, …; `ember_type` in the plugin ABI).
    public let id: UInt32
    /// GGUF's name, e.g. "Q4_0".
    public let name: String
    /// Elements per block: 1 for plain types, 32 or 256 for block-quantized ones.
    public let blockSize: Int
    /// Bytes per block.
    public let blockBytes: Int
    /// The precision class the policy speaks of (fp32 for F32, fp16 for F16 and BF16); nil for types Ember does not
    /// compute with.
    public let precision: Precision?
    /// How Ember's kernels hold it.
    package let storage: Storage

    package init(id: UInt32, name: String, blockSize: Int, blockBytes: Int, precision: Precision?, storage: Storage) {
        self.id = id
        self.name = name
        self.blockSize = blockSize
        self.blockBytes = blockBytes
        self.precision = precision
        self.storage = storage
    }

    /// Types are equal when their ids are.
    public static func == (lhs: TensorType, rhs: TensorType) -> Bool { lhs.id == rhs.id }
    /// Hashes the id.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The lower-case name reports and the CLI use, e.g. "q4_0", "f32".
    public var description: String { name.lowercased() }

    // MARK: The table

    /// fp32 (GGUF type 0).
    public static let f32 = TensorType(id: 0, name: "F32", blockSize: 1, blockBytes: 4, precision: .fp32, storage: .float32)
    /// IEEE half precision (GGUF type 1).
    public static let f16 = TensorType(id: 1, name: "F16", blockSize: 1, blockBytes: 2, precision: .fp16, storage: .float16)
    /// Q4_0: 32 four-bit values and one fp16 scale (GGUF type 2).
    public static let q4_0 = TensorType(id: 2, name: "Q4_0", blockSize: 32, blockBytes: 18, precision: .int4, storage: .blocks(EK_FORMAT_Q4_0))
    /// Q4_1: 32 four-bit values, an fp16 scale and minimum (GGUF type 3).
    public static let q4_1 = TensorType(id: 3, name: "Q4_1", blockSize: 32, blockBytes: 20, precision: .int4, storage: .blocks(EK_FORMAT_Q4_1))
    /// Q8_0: 32 eight-bit values and one fp16 scale (GGUF type 8).
    public static let q8_0 = TensorType(id: 8, name: "Q8_0", blockSize: 32, blockBytes: 34, precision: .int8, storage: .blocks(EK_FORMAT_Q8_0))
    /// bfloat16 (GGUF type 30).
    public static let bf16 = TensorType(id: 30, name: "BF16", blockSize: 1, blockBytes: 2, precision: .fp16, storage: .bfloat16)

    /// Q5_0: 32 five-bit values and one fp16 scale (GGUF type 6).
    public static let q5_0 = blocks(6, "Q5_0", 32, 22, .int4, EK_FORMAT_Q5_0)
    /// Q5_1: 32 five-bit values, an fp16 scale and minimum (GGUF type 7).
    public static let q5_1 = blocks(7, "Q5_1", 32, 24, .int4, EK_FORMAT_Q5_1)
    /// Q2_K: 256 two-bit values in sixteen sub-blocks with 4-bit scales and minimums (GGUF type 10).
    public static let q2_K = blocks(10, "Q2_K", 256, 84, .int4, EK_FORMAT_Q2_K)
    /// Q3_K: 256 three-bit values in sixteen sub-blocks with 6-bit scales (GGUF type 11).
    public static let q3_K = blocks(11, "Q3_K", 256, 110, .int4, EK_FORMAT_Q3_K)
    /// Q4_K: 256 four-bit values in eight sub-blocks with 6-bit scales and minimums (GGUF type 12).
    public static let q4_K = blocks(12, "Q4_K", 256, 144, .int4, EK_FORMAT_Q4_K)
    /// Q5_K: Q4_K with a fifth bit per value (GGUF type 13).
    public static let q5_K = blocks(13, "Q5_K", 256, 176, .int4, EK_FORMAT_Q5_K)
    /// Q6_K: 256 six-bit values in sixteen sub-blocks with 8-bit scales (GGUF type 14).
    public static let q6_K = blocks(14, "Q6_K", 256, 210, .int8, EK_FORMAT_Q6_K)
    /// IQ4_NL: 32 four-bit indices into a non-linear table, one fp16 scale (GGUF type 20).
    public static let iq4_NL = blocks(20, "IQ4_NL", 32, 18, .int4, EK_FORMAT_IQ4_NL)
    /// IQ4_XS: 256 IQ4_NL-table values in eight sub-blocks with 6-bit scales (GGUF type 23).
    public static let iq4_XS = blocks(23, "IQ4_XS", 256, 136, .int4, EK_FORMAT_IQ4_XS)

    /// Every GGUF type Ember knows, by id: those it computes with, and those it can only size (so files
    /// holding them are read and refused with a clear message rather than misread).
    public static let table: [TensorType] = [
        f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, sized(9, "Q8_1", 32, 36),
        q2_K, q3_K, q4_K, q5_K, q6_K, sized(15, "Q8_K", 256, 292), sized(16, "IQ2_XXS", 256, 66), sized(17, "IQ2_XS", 256, 74),
        sized(18, "IQ3_XXS", 256, 98), sized(19, "IQ1_S", 256, 50), iq4_NL, sized(21, "IQ3_S", 256, 110),
        sized(22, "IQ2_S", 256, 82), iq4_XS, sized(24, "I8", 1, 1), sized(25, "I16", 1, 2),
        sized(26, "I32", 1, 4), sized(27, "I64", 1, 8), sized(28, "F64", 1, 8), sized(29, "IQ1_M", 256, 56), bf16,
    ]

    private static func sized(_ id: UInt32, _ name: String, _ blockSize: Int, _ blockBytes: Int) -> TensorType {
        TensorType(id: id, name: name, blockSize: blockSize, blockBytes: blockBytes, precision: nil, storage: .sizeOnly)
    }

    private static func blocks(_ id: UInt32, _ name: String, _ blockSize: Int, _ blockBytes: Int, _ precision: Precision,
                               _ format: ek_format) -> TensorType {
        TensorType(id: id, name: name, blockSize: blockSize, blockBytes: blockBytes, precision: precision, storage: .blocks(format))
    }

    /// The type with GGUF id `id`, nil for an id Ember does not know.
    public init?(ggufID id: UInt32) {
        guard let found = Self.table.first(where: { $0.id == id }) else { return nil }
        self = found
    }

    /// The type called `name` ("q4_0" or "Q4_0"), nil for an unknown name.
    public init?(name: String) {
        guard let found = Self.table.first(where: { $0.name.lowercased() == name.lowercased() }) else { return nil }
        self = found
    }

    // MARK: What Ember does with it

    /// Whether values are stored in blocks of more than one element.
    public var isBlockQuantized: Bool { blockSize > 1 }

    /// Whether Ember can turn rows of this type into fp32 (the scalar reference every backend is checked against).
    public var canDequantize: Bool { storage != .sizeOnly }

    /// Whether Ember can make weights of this type from fp32 values (F32, F16, BF16, Q8_0, Q4_0 and Q4_1: the
    /// types other precisions are derived in).
    public var canQuantize: Bool {
        switch storage {
        case .float32, .float16, .bfloat16: true
        case let .blocks(format): ek_format_packable(format)
        case .sizeOnly: false
        }
    }

    /// The C kernels' block format, for every block-quantized type Ember computes with.
    package var blockFormat: ek_format? {
        if case let .blocks(format) = storage { return format }
        return nil
    }

    /// The block format when it has the packed layout and kernels (Q8_0, Q4_0, Q4_1); the other block
    /// formats run the row kernels on their GGUF blocks as they lie.
    package var packedFormat: ek_format? {
        guard let format = blockFormat, ek_format_packable(format) else { return nil }
        return format
    }

    /// Whether this machine's `isa` multiplies this type with SIMD code of its own (false: the scalar
    /// reference runs, or the weights are converted to fp32 first). `ember info` lists it.
    public func hasSIMDKernel(_ isa: KernelISA) -> Bool {
        guard isa != .scalar else { return false }
        switch storage {
        case .float32, .float16, .bfloat16: return true
        case let .blocks(format):
            return ek_format_packable(format) || ek_row_kernel_is_simd(isa.cValue, format)
        case .sizeOnly: return false
        }
    }

    /// Whether `isa`'s SIMD backend re-lays this type at load, eight rows interleaved (`ek_interleaved.h`).
    public func hasInterleavedKernel(_ isa: KernelISA) -> Bool {
        blockFormat.map { ek_interleaved_available(isa.cValue, $0) } ?? false
    }

    /// Bytes of a rows × columns matrix; nil when `columns` is not a whole number of blocks or the size overflows.
    public func byteCount(rows: Int, columns: Int) -> Int? {
        guard rows >= 0, columns >= 0, columns % blockSize == 0 else { return nil }
        let (perRow, overflowRow) = (columns / blockSize).multipliedReportingOverflow(by: blockBytes)
        let (total, overflow) = perRow.multipliedReportingOverflow(by: rows)
        return overflowRow || overflow ? nil : total
    }

    /// Dequantizes one row of `columns` values from its bytes at `row` into `out`, with `isa`'s kernels
    /// (bit for bit the scalar reference's result, which every backend is checked against).
    public func dequantizeRow(_ row: UnsafeRawPointer, columns: Int, into out: UnsafeMutablePointer<Float>,
                              isa: KernelISA = .best()) throws {
        switch storage {
        case .float32:
            out.update(from: row.assumingMemoryBound(to: Float.self), count: columns)
        case .float16:
            ek_fp16_to_fp32_row(row.assumingMemoryBound(to: UInt16.self), out, Int64(columns))
        case .bfloat16:
            let halves = row.assumingMemoryBound(to: UInt16.self)
            for index in 0..<columns { out[index] = Float(bitPattern: UInt32(halves[index]) << 16) }
        case let .blocks(format):
            try KernelError.check(ek_dequantize_row(isa.cValue, format, row, out, Int64(columns)),
                                  kernel: "ek_dequantize_row", argument: { _ in "\(self) row" })
        case .sizeOnly:
            throw KernelError.invalidArgument(argument: "type", found: name, expected: "a type Ember computes with (\(Self.computable))")
        }
    }

    /// A finite value F16 cannot hold (it would round to infinity): thrown by ``quantizeRow(_:columns:into:isa:)``.
    public struct BeyondHalfRange: Error, CustomStringConvertible {
        /// The value's column in the row, and the value.
        public let index: Int, value: Float
        /// One line naming the value and what F16 holds.
        public var description: String {
            "value \(index): \(value), expected a value within f16's range (±65504); run at fp32 or keep the weights as bf16"
        }
    }

    /// Quantizes one row of `columns` fp32 values into `out` (this type's bytes), with `isa`'s kernels
    /// (bit for bit the scalar reference's result). F16 and BF16 round to nearest even; a finite value beyond F16's
    /// range (±65504) is refused (``BeyondHalfRange``) rather than made infinite.
    public func quantizeRow(_ values: UnsafePointer<Float>, columns: Int, into out: UnsafeMutableRawPointer, isa: KernelISA = .best()) throws {
        switch storage {
        case .float32:
            out.copyMemory(from: values, byteCount: columns * 4)
        case .float16:
            let halves = out.assumingMemoryBound(to: UInt16.self)
            ek_fp32_to_fp16_row(values, halves, Int64(columns))
            for index in 0..<columns where halves[index] & 0x7FFF == 0x7C00 && values[index].isFinite {
                throw BeyondHalfRange(index: index, value: values[index])
            }
        case .bfloat16:
            let halves = out.assumingMemoryBound(to: UInt16.self)
            for index in 0..<columns { halves[index] = Self.bfloat16(values[index]) }
        case let .blocks(format) where ek_format_packable(format):
            try KernelError.check(ek_quantize_row(isa.cValue, format, values, out, Int64(columns)),
                                  kernel: "ek_quantize_row", argument: { _ in "\(self) row" })
        case .sizeOnly, .blocks:
            throw KernelError.invalidArgument(argument: "type", found: name, expected: "\(Self.quantizable) to quantize into")
        }
    }

    /// `value` as bfloat16, rounded to nearest even (NaN stays a quiet NaN).
    static func bfloat16(_ value: Float) -> UInt16 {
        let bits = value.bitPattern
        if value.isNaN { return UInt16(bits >> 16) | 0x0040 }
        let rounded = bits &+ 0x7FFF &+ ((bits >> 16) & 1)
        return UInt16(rounded >> 16)
    }

    /// The names of the types Ember computes with, for messages.
    public static var computable: String { table.filter(\.canDequantize).map(\.description).joined(separator: ", ") }

    /// The names of the types Ember makes from fp32 values (``canQuantize``), for messages.
    public static var quantizable: String { table.filter(\.canQuantize).map(\.description).joined(separator: ", ") }

    /// The type weights of `precision` are made in when a model's file holds another: int8 as Q8_0, int4 as
    /// Q4_1, fp16 as F16, fp32 as F32.
    public static func derived(for precision: Precision) -> TensorType {
        switch precision {
        case .fp32: .f32
        case .fp16: .f16
        case .int8: .q8_0
        case .int4: .q4_1
        }
    }
}

extension TensorType: Codable {
    /// Decodes the lower-case name ("q4_0").
    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let type = TensorType(name: name) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown tensor type \(name)"))
        }
        self = type
    }

    /// Encodes the lower-case name ("q4_0").
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// The numeric precision a request runs at.
public enum Precision: String, Sendable, CaseIterable, Codable, Comparable, CustomStringConvertible {
    /// Up to 5 bits (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K–Q5_K, IQ4_NL, IQ4_XS), 6–8 bits (Q6_K, Q8_0), 16-bit float
    /// (F16, BF16: half the bytes of fp32, widened to fp32 in registers, fp32 arithmetic) or fp32 (F32) weights,
    /// narrowest first.
    case int4, int8, fp16, fp32

    /// Orders by width: int4 < int8 < fp16 < fp32.
    public static func < (lhs: Precision, rhs: Precision) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }

    /// The raw value: "int4", "int8", "fp16" or "fp32".
    public var description: String { rawValue }

    /// Every precision's name, widest first, for messages: "fp32, fp16, int8 or int4".
    public static var names: String {
        let names = allCases.reversed().map(\.rawValue)
        return names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}
