import _CEmberKernels

/// A weight matrix W[rows × columns] in a GGUF block format, owned by Ember
/// in the packed layout the SIMD kernels read.
///
/// The packing (rows interleaved sixteen at a time, the scales of a block
/// side by side, Q8_0 offset by +128) happens once, here; the GGUF bytes it is
/// made from — typically memory-mapped from a model file — are not kept.
/// Packed and GGUF sizes are equal, so the kernels read exactly as many
/// weight bytes as the file holds.
public final class QuantizedMatrix: @unchecked Sendable {
    /// The block format (a type with C block kernels: q8_0, q4_0, q4_1).
    public let type: TensorType
    /// Output features (N).
    public let rows: Int
    /// Input features (K), a multiple of 32.
    public let columns: Int
    /// The packed blocks (`ek_packed_size` bytes, 64-byte aligned).
    let packed: TensorStorage
    /// What the values are known to satisfy (`EK_PACKED_*`): Q8_0 whose values all lie in [−64, 63] runs a faster
    /// kernel on AVX2 without VNNI; Q8_0 with one scale per row sums over all of K against row-scaled activations.
    let flags: UInt32

    /// Bytes of the matrix in GGUF blocks: what one pass over the weights reads.
    public var byteCount: Int { type.byteCount(rows: rows, columns: columns) ?? 0 }

    /// Packs `blocks`: `rows` rows of `columns / 32` GGUF blocks each, row after row, into memory from `arena`
    /// (a model's) when given.
    public init(type: TensorType, rows: Int, columns: Int, blocks: UnsafeRawBufferPointer, arena: HugePageArena? = nil) throws {
        packed = try Self.pack(type: type, rows: rows, columns: columns, blocks: blocks, arena: arena)
        flags = Self.flags(type: type, rows: rows, columns: columns, blocks: blocks)
        self.type = type
        self.rows = rows
        self.columns = columns
    }

    /// Quantizes fp32 weights [rows, columns] to `format` (the oracle's rounding, bit for bit).
    public convenience init(quantizing weights: Tensor, to type: TensorType, isa: KernelISA = .best()) throws {
        guard weights.dtype == .float32 else {
            throw TensorError.dtypeMismatch(argument: "weights", expected: .float32, found: weights.dtype)
        }
        guard weights.rank == 2 else { throw TensorError.shapeMismatch(argument: "weights", expected: "[N, K]", found: weights.shape) }
        let (rows, columns) = (weights.shape[0], weights.shape[1])
        try Self.validate(rows: rows, columns: columns)
        guard type.packedFormat != nil else {
            throw KernelError.invalidArgument(argument: "type", found: "\(type)", expected: "q8_0, q4_0 or q4_1")
        }
        var blocks = [UInt8](repeating: 0, count: type.byteCount(rows: rows, columns: columns) ?? 0)
        let rowBytes = (columns / 32) * type.blockBytes
        try weights.withUnsafeBufferPointer { values in
            try blocks.withUnsafeMutableBytes { out in
                for row in 0..<rows {
                    try type.quantizeRow(values.baseAddress! + row * columns, columns: columns, into: out.baseAddress! + row * rowBytes,
                                         isa: isa)
                }
            }
        }
        try self.init(type: type, rows: rows, columns: columns, blockBytes: blocks)
    }

    private convenience init(type: TensorType, rows: Int, columns: Int, blockBytes: [UInt8]) throws {
        let (storage, flags) = try blockBytes.withUnsafeBytes {
            (try Self.pack(type: type, rows: rows, columns: columns, blocks: $0), Self.flags(type: type, rows: rows, columns: columns, blocks: $0))
        }
        self.init(type: type, rows: rows, columns: columns, packed: storage, flags: flags)
    }

    fileprivate init(type: TensorType, rows: Int, columns: Int, packed: TensorStorage, flags: UInt32) {
        self.type = type
        self.rows = rows
        self.columns = columns
        self.packed = packed
        self.flags = flags
    }

    /// `EK_PACKED_Q8_SEVEN_BITS` for Q8_0 blocks whose values all lie in [−64, 63], `EK_PACKED_Q8_ROW_SCALES` for
    /// Q8_0 rows whose blocks share one scale (one pass over them at load).
    private static func flags(type: TensorType, rows: Int, columns: Int, blocks: UnsafeRawBufferPointer) -> UInt32 {
        guard type == .q8_0, let base = blocks.baseAddress, blocks.count > 0 else { return 0 }
        let count = blocks.count / MemoryLayout<ek_block_q8_0>.stride
        let q8 = base.assumingMemoryBound(to: ek_block_q8_0.self)
        let seven = ek_q8_0_within_seven_bits(q8, Int64(count)) ? EK_PACKED_Q8_SEVEN_BITS : 0
        let rowScales = ek_q8_0_rows_share_scales(q8, Int64(rows), Int64(columns / 32)) ? EK_PACKED_Q8_ROW_SCALES : 0
        return seven | rowScales
    }

    private static func pack(type: TensorType, rows: Int, columns: Int, blocks: UnsafeRawBufferPointer,
                             arena: HugePageArena? = nil) throws -> TensorStorage {
        try validate(rows: rows, columns: columns)
        guard let format = type.packedFormat else {
            throw KernelError.invalidArgument(argument: "type", found: "\(type)", expected: "q8_0, q4_0 or q4_1")
        }
        let expected = type.byteCount(rows: rows, columns: columns) ?? -1
        guard blocks.count == expected else {
            throw KernelError.invalidArgument(
                argument: "blocks", found: "\(blocks.count) bytes",
                expected: "\(expected) bytes (\(rows) rows × \(columns / 32) blocks × \(type.blockBytes))")
        }
        let size = ek_packed_size(format, Int64(rows), Int64(columns))
        guard size > 0 || rows == 0 || columns == 0 else {
            throw KernelError.invalidArgument(argument: "rows", found: "\(rows)", expected: "a matrix whose packed size fits in memory")
        }
        let storage = try TensorStorage.forWeights(byteCount: size, arena: arena) // the packing writes every byte
        if size > 0, let base = blocks.baseAddress {
            try KernelError.check(
                ek_pack_weights(format, base, Int64(rows), Int64(columns), storage.baseAddress, size),
                kernel: "ek_pack_weights", argument: { _ in "blocks" })
        }
        return storage
    }

    static func validate(rows: Int, columns: Int) throws {
        guard rows >= 0 else { throw KernelError.invalidArgument(argument: "rows", found: "\(rows)", expected: "≥ 0") }
        guard columns >= 0, columns % 32 == 0 else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(columns)", expected: "a multiple of 32")
        }
        guard rows <= Int(Int32.max), columns <= Int(Int32.max) else {
            throw KernelError.invalidArgument(argument: "rows", found: "\(rows)×\(columns)", expected: "dimensions below 2³¹")
        }
    }

    var cMatrix: ek_packed_matrix {
        ek_packed_matrix(format: type.packedFormat ?? EK_FORMAT_Q8_0, n: Int64(rows), k: Int64(columns), data: packed.baseAddress,
                         flags: flags)
    }
}

extension QuantizedMatrix {
    /// An independent copy of the packed weights (benchmarks rotate copies so no call finds its weights in cache).
    package func copy() -> QuantizedMatrix {
        QuantizedMatrix(type: type, rows: rows, columns: columns, packed: packed.copy(), flags: flags)
    }
}
