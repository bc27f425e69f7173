extension Tensor {
    /// Address of the first element.
    package var baseAddress: UnsafeMutableRawPointer { storage.baseAddress + byteOffset }

    /// Calls `body` with the fp32 elements; throws unless the tensor is fp32.
    public func withUnsafeBufferPointer<Result>(
        _ body: (UnsafeBufferPointer<Float>) throws -> Result
    ) throws -> Result {
        guard dtype == .float32 else {
            throw TensorError.dtypeMismatch(argument: "tensor", expected: .float32, found: dtype)
        }
        let elements = UnsafeBufferPointer(start: baseAddress.assumingMemoryBound(to: Float.self), count: count)
        return try body(elements)
    }

    /// Calls `body` with writable fp32 elements. Owned storage shared with
    /// another tensor is copied first, so the other tensor does not change.
    public mutating func withUnsafeMutableBufferPointer<Result>(
        _ body: (UnsafeMutableBufferPointer<Float>) throws -> Result
    ) throws -> Result {
        guard dtype == .float32 else {
            throw TensorError.dtypeMismatch(argument: "tensor", expected: .float32, found: dtype)
        }
        try makeWritable(argument: "tensor")
        let elements = UnsafeMutableBufferPointer(
            start: baseAddress.assumingMemoryBound(to: Float.self), count: count)
        return try body(elements)
    }

    /// Ensures writes through ``baseAddress`` touch no other tensor's elements:
    /// refuses read-only borrowed memory, copies shared owned memory.
    package mutating func makeWritable(argument: String) throws {
        guard storage.isMutable else { throw TensorError.readOnly(argument: argument) }
        if storage.isOwned && !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy()
        }
    }

    /// The fp32 elements, copied into an array in row-major order.
    public func scalars() throws -> [Float] {
        try withUnsafeBufferPointer { Array($0) }
    }

    /// Whether this tensor's bytes and `other`'s share any address.
    package func overlaps(_ other: Tensor) -> Bool {
        let start = UInt(bitPattern: baseAddress), end = start + UInt(byteCount)
        let otherStart = UInt(bitPattern: other.baseAddress), otherEnd = otherStart + UInt(other.byteCount)
        return start < otherEnd && otherStart < end && byteCount > 0 && other.byteCount > 0
    }
}
