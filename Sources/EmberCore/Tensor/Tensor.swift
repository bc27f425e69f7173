/// An n-dimensional array of one element type, stored contiguously in
/// row-major order (the last dimension varies fastest).
///
/// A tensor is a value: copying one shares its ``TensorStorage``, and writing
/// through ``withUnsafeMutableBufferPointer(_:)`` copies owned storage first
/// when another tensor still refers to it. A tensor over *borrowed* mutable
/// memory is a view: writes go to that memory. A tensor over borrowed
/// read-only memory (a memory-mapped weight) refuses writes with
/// ``TensorError/readOnly(argument:)``.
public struct Tensor: Sendable {
    /// Size of each dimension, outermost first.
    public let shape: [Int]
    /// The element type.
    public let dtype: DType
    /// The memory the elements live in (possibly shared with other tensors).
    public internal(set) var storage: TensorStorage
    /// Where this tensor's first element sits inside ``storage``.
    public let byteOffset: Int

    /// Number of dimensions.
    public var rank: Int { shape.count }
    /// Number of elements (1 for a scalar of rank 0).
    public var count: Int { shape.reduce(1, *) }
    /// Bytes the elements occupy.
    public var byteCount: Int { count * dtype.byteSize }
    /// Row-major strides, in elements.
    public var strides: [Int] {
        var strides = [Int](repeating: 1, count: shape.count)
        var stride = 1
        for axis in shape.indices.reversed() {
            strides[axis] = stride
            stride *= shape[axis]
        }
        return strides
    }
    /// Whether the elements live in memory that Ember allocated.
    public var isOwned: Bool { storage.isOwned }

    /// A zero-filled tensor in newly allocated, owned memory.
    public init(zeros shape: [Int], dtype: DType = .float32) throws {
        let count = try Tensor.elementCount(of: shape, argument: "shape")
        let (bytes, overflow) = count.multipliedReportingOverflow(by: dtype.byteSize)
        guard !overflow else {
            throw TensorError.invalidShape(argument: "shape", shape: shape, reason: "byte count overflows Int")
        }
        self.init(shape: shape, dtype: dtype, storage: TensorStorage(zeroedByteCount: bytes), byteOffset: 0)
    }

    /// An fp32 tensor holding a copy of `values`, which must number the product of `shape`.
    public init(shape: [Int], values: [Float]) throws {
        let count = try Tensor.elementCount(of: shape, argument: "shape")
        guard count == values.count else {
            throw TensorError.elementCountMismatch(argument: "values", shape: shape, expected: count, found: values.count)
        }
        try self.init(zeros: shape, dtype: .float32)
        values.withUnsafeBytes { source in
            if let base = source.baseAddress { storage.baseAddress.copyMemory(from: base, byteCount: source.count) }
        }
    }

    /// A tensor over memory Ember does not own. `owner` is retained for the
    /// tensor's lifetime (pass the object whose lifetime bounds the memory, for
    /// example a memory-mapped file); with `mutable: false` writes are refused.
    public init(
        borrowing pointer: UnsafeRawPointer, shape: [Int], dtype: DType = .float32,
        mutable: Bool = false, owner: AnyObject? = nil
    ) throws {
        let count = try Tensor.elementCount(of: shape, argument: "shape")
        let (bytes, overflow) = count.multipliedReportingOverflow(by: dtype.byteSize)
        guard !overflow else {
            throw TensorError.invalidShape(argument: "shape", shape: shape, reason: "byte count overflows Int")
        }
        let storage = TensorStorage(
            borrowing: UnsafeMutableRawPointer(mutating: pointer), byteCount: bytes, mutable: mutable, owner: owner)
        self.init(shape: shape, dtype: dtype, storage: storage, byteOffset: 0)
    }

    package init(shape: [Int], dtype: DType, storage: TensorStorage, byteOffset: Int) {
        self.shape = shape
        self.dtype = dtype
        self.storage = storage
        self.byteOffset = byteOffset
    }

    /// The same elements under another shape with the same element count; shares storage.
    public func reshaped(_ newShape: [Int]) throws -> Tensor {
        let newCount = try Tensor.elementCount(of: newShape, argument: "newShape")
        guard newCount == count else {
            throw TensorError.elementCountMismatch(argument: "newShape", shape: newShape, expected: count, found: newCount)
        }
        return Tensor(shape: newShape, dtype: dtype, storage: storage, byteOffset: byteOffset)
    }

    /// The product of `shape`, after checking every dimension is non-negative
    /// and the product does not overflow.
    static func elementCount(of shape: [Int], argument: String) throws -> Int {
        var count = 1
        for dimension in shape {
            guard dimension >= 0 else {
                throw TensorError.invalidShape(argument: argument, shape: shape, reason: "dimension \(dimension) is negative")
            }
            let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
            guard !overflow else {
                throw TensorError.invalidShape(argument: argument, shape: shape, reason: "element count overflows Int")
            }
            count = product
        }
        return count
    }
}
