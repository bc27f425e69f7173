import CKernels
import Foundation

/// A weight matrix W[rows × columns] as a model file holds it (GGUF blocks
/// or fp32 rows), with the variants the routes need built on first use and
/// cached: the packed copy the SIMD kernels read, and an fp32 copy for the
/// BLAS route (dequantized once).
public final class WeightMatrix: @unchecked Sendable {
    /// How the weights are stored.
    public let format: WeightFormat
    /// N: output features, one per row.
    public let rows: Int
    /// K: input features per row; a multiple of 32 for the quantized formats.
    public let columns: Int
    /// The GGUF (or fp32) bytes, owned or borrowed from `owner` (e.g. a memory-mapped file).
    let bytes: UnsafeRawBufferPointer
    private let owner: AnyObject?
    private let lock = NSLock()
    private var packedVariant: QuantizedMatrix?
    private var fp32Variant: Tensor?
    private var precisionVariants: [Precision: WeightMatrix] = [:]

    /// Copies `blocks` (rows × columns in `format`).
    public convenience init(format: WeightFormat, rows: Int, columns: Int, copying blocks: UnsafeRawBufferPointer) throws {
        let storage = Self.copy(blocks)
        try self.init(format: format, rows: rows, columns: columns,
                      borrowing: UnsafeRawBufferPointer(start: storage.baseAddress, count: blocks.count), owner: storage)
    }

    private static func copy(_ blocks: UnsafeRawBufferPointer) -> TensorStorage {
        let storage = TensorStorage(zeroedByteCount: blocks.count)
        if let base = blocks.baseAddress { storage.baseAddress.copyMemory(from: base, byteCount: blocks.count) }
        return storage
    }

    /// Uses `blocks` in place; `owner` keeps them alive.
    public init(format: WeightFormat, rows: Int, columns: Int, borrowing blocks: UnsafeRawBufferPointer, owner: AnyObject?) throws {
        guard rows >= 0, columns >= 0, format == .f32 || columns % 32 == 0 else {
            throw KernelError.invalidArgument(argument: "columns", found: "\(columns)",
                                              expected: format == .f32 ? "≥ 0" : "a multiple of 32")
        }
        let expected = format.byteCount(rows: rows, columns: columns)
        guard blocks.count == expected else {
            throw KernelError.invalidArgument(argument: "blocks", found: "\(blocks.count) bytes", expected: "\(expected) bytes")
        }
        self.format = format
        self.rows = rows
        self.columns = columns
        bytes = blocks
        self.owner = owner
    }

    /// fp32 weights [rows, columns] as a matrix in `format` (quantized here when not f32).
    ///
    /// With `refinedScales`, 4-bit blocks get least-squares scales (lower
    /// error than min/max; see `ScaleRefinement`).
    public convenience init(_ weights: Tensor, as format: WeightFormat, refinedScales: Bool = false) throws {
        guard weights.rank == 2, weights.dtype == .float32 else {
            throw TensorError.shapeMismatch(argument: "weights", expected: "fp32 [N, K]", found: weights.shape)
        }
        let (rows, columns) = (weights.shape[0], weights.shape[1])
        var data = [UInt8](repeating: 0, count: format.byteCount(rows: rows, columns: columns))
        try weights.withUnsafeBufferPointer { values in
            try data.withUnsafeMutableBytes { out in
                guard let quantized = format.quantized else {
                    out.copyMemory(from: UnsafeRawBufferPointer(values))
                    return
                }
                let rowBytes = columns / 32 * quantized.blockBytes
                for row in 0..<rows {
                    try KernelError.check(
                        ek_quantize_row(KernelISA.active.cValue, quantized.cValue, values.baseAddress! + row * columns,
                                        out.baseAddress! + row * rowBytes, Int64(columns)),
                        kernel: "ek_quantize_row", argument: { _ in "weights" })
                }
                if refinedScales {
                    ScaleRefinement.refine(quantized, values: values.baseAddress!, count: rows * columns, blocks: out.baseAddress!)
                }
            }
        }
        let storage = data.withUnsafeBytes { Self.copy($0) }
        try self.init(format: format, rows: rows, columns: columns,
                      borrowing: UnsafeRawBufferPointer(start: storage.baseAddress, count: data.count), owner: storage)
    }

    /// The packed copy for the SIMD and scalar quantized kernels (built once).
    public func packed() throws -> QuantizedMatrix {
        try lock.withLock {
            if let packedVariant { return packedVariant }
            guard let quantized = format.quantized else {
                throw KernelError.invalidArgument(argument: "format", found: "f32", expected: "a quantized format")
            }
            let made = try QuantizedMatrix(format: quantized, rows: rows, columns: columns, blocks: bytes)
            packedVariant = made
            return made
        }
    }

    /// The weights as fp32 [rows, columns] (dequantized once, then cached; f32 weights are borrowed).
    public func fp32() throws -> Tensor {
        try lock.withLock {
            if let fp32Variant { return fp32Variant }
            let made: Tensor
            if let quantized = format.quantized {
                var values = Tensor(shape: [rows, columns], dtype: .float32, // every row is written below
                                    storage: TensorStorage(uninitializedByteCount: rows * columns * 4), byteOffset: 0)
                let rowBytes = columns / 32 * quantized.blockBytes
                try values.withUnsafeMutableBufferPointer { out in
                    for row in 0..<rows {
                        try KernelError.check(
                            ek_dequantize_row(KernelISA.active.cValue, quantized.cValue, bytes.baseAddress! + row * rowBytes,
                                              out.baseAddress! + row * columns, Int64(columns)),
                            kernel: "ek_dequantize_row", argument: { _ in "blocks" })
                    }
                }
                made = values
            } else {
                made = try Tensor(borrowing: bytes.baseAddress!, shape: [rows, columns], owner: owner)
            }
            fp32Variant = made
            return made
        }
    }

    /// The same weights at `precision`, derived on first use and cached: itself
    /// when already there; fp32 by dequantizing; int8 as Q8_0 and int4 as
    /// Q4_1, requantized from the fp32 values. One model file thus serves
    /// every precision the policy picks.
    public func variant(for precision: Precision) throws -> WeightMatrix {
        if format.precision == precision { return self }
        if let cached = lock.withLock({ precisionVariants[precision] }) { return cached }
        let target: WeightFormat = switch precision {
        case .fp32: .f32
        case .int8: .q8_0
        case .int4: .q4_1
        }
        let values = try fp32()
        let made = target == .f32 // share the cached fp32 copy rather than copy it again
            ? try WeightMatrix(format: .f32, rows: rows, columns: columns,
                               borrowing: UnsafeRawBufferPointer(start: values.baseAddress, count: values.byteCount),
                               owner: values.storage)
            : try WeightMatrix(values, as: target)
        return lock.withLock {
            if let raced = precisionVariants[precision] { return raced }
            precisionVariants[precision] = made
            return made
        }
    }

    /// Whether the fp32 copy exists yet (for tests of the caching).
    public var hasFP32Copy: Bool { lock.withLock { fp32Variant != nil } }
}
