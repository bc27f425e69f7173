import Foundation
import Testing
@testable import EmberCore

/// Weights the kernels read as they lie — a model file's mapping, a requantized variant's own pages — are streamed
/// from a copy on huge pages where the system has them: the same bytes, counted by the memory budget before and after
/// it is made, given back with the model's other copies, and read in place where there are no huge pages.
@Suite("Streamed weight copies")
struct StreamedCopyTests {
    /// 300 × 576 fp32 (691 KB: a copy the arena carves) as a temporary file mapped read-only, as `MappedFile` maps a
    /// model — a fake model file for these tests.
    final class MappedFileFakeForTests {
        let bytes: UnsafeRawBufferPointer
        let values: [Float]
        static let (rows, columns) = (300, 576)

        init() throws {
            var generator = SystemRandomNumberGenerator()
            values = (0..<Self.rows * Self.columns).map { _ in Float.random(in: -1...1, using: &generator) }
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("ember-streamed-\(UUID().uuidString).bin").path
            defer { unlink(path) } // the mapping keeps the file's pages
            try values.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
            let descriptor = open(path, O_RDONLY)
            #expect(descriptor >= 0)
            defer { close(descriptor) }
            let count = values.count * 4
            let address = mmap(nil, count, PROT_READ, MAP_PRIVATE, descriptor, 0)
            guard let address, address != MAP_FAILED else { throw POSIXError(.ENOMEM) }
            bytes = UnsafeRawBufferPointer(start: address, count: count)
        }

        deinit { munmap(UnsafeMutableRawPointer(mutating: bytes.baseAddress), bytes.count) }

        func matrix(arena: HugePageArena) throws -> WeightMatrix {
            try WeightMatrix(type: .f32, rows: Self.rows, columns: Self.columns, borrowing: bytes, owner: self, copyArena: arena, mapped: true)
        }

        /// Whether `bytes` hold this file's values.
        func matches(_ other: UnsafeRawBufferPointer) -> Bool {
            other.count == bytes.count && values.withUnsafeBytes { memcmp($0.baseAddress!, other.baseAddress!, other.count) == 0 }
        }
    }

    @Test func mappedWeightsStreamACopyOnHugePagesCountedBeforeAndAfter() throws {
        let file = try MappedFileFakeForTests()
        let weights = try file.matrix(arena: HugePageArena(hasHugePages: true))
        #expect(weights.streamsCopy)
        #expect(!weights.holds(.none) && !weights.holds(.fp32), "the copy is not made before a kernel binds")
        #expect(weights.bytesToBind(with: .none) == weights.byteCount && weights.bytesToBind(with: .fp32) == weights.byteCount,
                "the budget counts the copy before it is made")
        #expect(weights.heldCopyBytes == 0)

        let streamed = try weights.streamedBlocks()
        #expect(streamed.bytes.baseAddress != file.bytes.baseAddress, "streamed from where the file lies")
        #expect(file.matches(streamed.bytes))
        #expect(UInt(bitPattern: streamed.bytes.baseAddress!) % UInt(2 << 20) == 0, "the first copy of a fresh arena starts its chunk")
        #expect(weights.heldCopyBytes == weights.byteCount)
        #expect(weights.holds(.none) && weights.bytesToBind(with: .none) == 0)
        // fp32 weights: the fp32 route reads the same copy, not a second one.
        #expect(try weights.fp32().baseAddress == UnsafeMutableRawPointer(mutating: streamed.bytes.baseAddress!))
        #expect(weights.heldCopyBytes == weights.byteCount && weights.bytesToBind(with: .fp32) == 0)
        // The mapping's pages were dropped from the process, not from the file: it still reads the file's values.
        #expect(file.matches(weights.bytes))

        weights.releaseDerivedCopies()
        #expect(weights.heldCopyBytes == 0 && !weights.holds(.none))
        #expect(file.matches(streamed.bytes), "a kernel bound to the copy keeps it")
        #expect(file.matches(try weights.streamedBlocks().bytes), "made again after a release")
    }

    @Test func withoutHugePagesMappedWeightsAreReadWhereTheyLie() throws {
        let file = try MappedFileFakeForTests()
        let weights = try file.matrix(arena: HugePageArena(hasHugePages: false))
        #expect(!weights.streamsCopy)
        #expect(weights.holds(.none) && weights.bytesToBind(with: .none) == 0 && weights.bytesToBind(with: .fp32) == 0)
        #expect(try weights.streamedBlocks().bytes.baseAddress == file.bytes.baseAddress)
        #expect(try weights.fp32().baseAddress == UnsafeMutableRawPointer(mutating: file.bytes.baseAddress!))
        #expect(weights.heldCopyBytes == 0)
    }

    /// A requantized variant's blocks live in pages of their own: the streamed copy takes their place (they go back),
    /// so the model holds as much as before, and the copy holds the variant's blocks.
    @Test func aRequantizedVariantStreamsACopyInsteadOfItsPages() throws {
        let file = try MappedFileFakeForTests()
        let source = try file.matrix(arena: HugePageArena(hasHugePages: true))
        let half = try source.variant(for: .fp16)
        #expect(half.type == .f16 && half.streamsCopy && half.holdsBlocks)
        #expect(half.bytesToBind(with: .none) == 0, "the copy replaces blocks already counted")
        let held = source.heldCopyBytes
        #expect(held == half.byteCount)

        let streamed = try half.streamedBlocks()
        #expect(!half.holdsBlocks, "the variant's own pages went back once the copy was made")
        #expect(source.heldCopyBytes == held)
        #expect(memcmp(streamed.bytes.baseAddress!, half.bytes.baseAddress!, half.byteCount) == 0,
                "the copy holds the blocks the variant writes again")
        #expect(source.heldCopyBytes == held + half.byteCount, "blocks read in place (bytes) are kept beside the copy")
    }
}
