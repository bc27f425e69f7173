import Testing
@testable import EmberCore

@Suite("Tensor")
struct TensorTests {
    @Test func zerosHasShapeStridesAndCount() throws {
        let t = try Tensor(zeros: [2, 3, 4])
        #expect(t.shape == [2, 3, 4])
        #expect(t.rank == 3)
        #expect(t.count == 24)
        #expect(t.byteCount == 96)
        #expect(t.strides == [12, 4, 1])
        #expect(t.isOwned)
        #expect(try t.scalars() == [Float](repeating: 0, count: 24))
    }

    @Test func ownedStorageIsAligned() throws {
        let t = try Tensor(zeros: [3, 5])
        #expect(UInt(bitPattern: t.baseAddress) % UInt(TensorStorage.alignment) == 0)
    }

    @Test func valuesAreRowMajor() throws {
        let t = try Tensor(shape: [2, 3], values: [1, 2, 3, 4, 5, 6])
        try t.withUnsafeBufferPointer { elements in
            #expect(elements[1 * 3 + 2] == 6)
        }
    }

    @Test func negativeDimensionThrowsNamingTheArgument() {
        #expect(throws: TensorError.invalidShape(argument: "shape", shape: [2, -1], reason: "dimension -1 is negative")) {
            try Tensor(zeros: [2, -1])
        }
    }

    @Test func overflowingShapeThrows() {
        #expect(throws: TensorError.self) { try Tensor(zeros: [Int.max, 2]) }
        #expect(throws: TensorError.self) { try Tensor(zeros: [Int.max / 2, 1]) } // byte count overflows
    }

    @Test func valueCountMismatchThrows() {
        #expect(throws: TensorError.elementCountMismatch(argument: "values", shape: [2, 2], expected: 4, found: 3)) {
            try Tensor(shape: [2, 2], values: [1, 2, 3])
        }
    }

    @Test func reshapeKeepsCountAndSharesStorage() throws {
        let t = try Tensor(shape: [2, 3], values: [1, 2, 3, 4, 5, 6])
        let r = try t.reshaped([3, 2])
        #expect(r.shape == [3, 2])
        #expect(r.storage === t.storage)
        #expect(throws: TensorError.elementCountMismatch(argument: "newShape", shape: [4, 2], expected: 6, found: 8)) {
            try t.reshaped([4, 2])
        }
    }

    @Test func writesCopyOwnedStorageSharedByValue() throws {
        let original = try Tensor(shape: [2], values: [1, 2])
        var copy = original
        try copy.withUnsafeMutableBufferPointer { $0[0] = 42 }
        #expect(try original.scalars() == [1, 2])
        #expect(try copy.scalars() == [42, 2])
    }

    @Test func borrowedReadOnlyMemoryRefusesWrites() throws {
        let values: [Float] = [1, 2, 3, 4]
        try values.withUnsafeBytes { bytes in
            var view = try Tensor(borrowing: bytes.baseAddress!, shape: [2, 2])
            #expect(!view.isOwned)
            #expect(try view.scalars() == values)
            #expect(throws: TensorError.readOnly(argument: "tensor")) {
                try view.withUnsafeMutableBufferPointer { $0[0] = 0 }
            }
        }
    }

    @Test func borrowedMutableMemoryIsWrittenThrough() throws {
        var values: [Float] = [1, 2, 3]
        try values.withUnsafeMutableBytes { bytes in
            var view = try Tensor(borrowing: bytes.baseAddress!, shape: [3], mutable: true)
            try view.withUnsafeMutableBufferPointer { $0[2] = 9 }
        }
        #expect(values == [1, 2, 9])
    }

    @Test func nonFloatTensorRefusesFloatAccess() throws {
        let t = try Tensor(zeros: [4], dtype: .int8)
        #expect(t.byteCount == 4)
        #expect(throws: TensorError.dtypeMismatch(argument: "tensor", expected: .float32, found: .int8)) {
            try t.scalars()
        }
    }
}
