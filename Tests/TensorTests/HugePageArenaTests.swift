import Foundation
import Testing
@testable import EmberCore

/// A model's weight copies carved from chunks of huge pages: disjoint, aligned, written and read back whole, and the
/// chunk given back once its copies are gone.
@Suite("Huge page arena")
struct HugePageArenaTests {
    @Test func copiesAreDisjointAlignedAndHoldWhatIsWritten() throws {
        let arena = HugePageArena()
        let sizes = [HugePageArena.smallest, 553 * 1024 + 7, 3 * 1024 * 1024 + 1, HugePageArena.smallest + 13]
        let copies = try sizes.map { try arena.storage(byteCount: $0) }
        for (index, copy) in copies.enumerated() {
            #expect(copy.byteCount == sizes[index])
            #expect(UInt(bitPattern: copy.baseAddress) % UInt(TensorStorage.alignment) == 0)
            copy.baseAddress.initializeMemory(as: UInt8.self, repeating: UInt8(index + 1), count: copy.byteCount)
        }
        // Written one after another, each still holds its own byte everywhere: no copy overlaps another.
        for (index, copy) in copies.enumerated() {
            let bytes = UnsafeRawBufferPointer(start: copy.baseAddress, count: copy.byteCount)
            #expect(bytes.allSatisfy { $0 == UInt8(index + 1) }, "copy \(index) of \(copy.byteCount) bytes was overwritten")
        }
        // Copies that fit share a chunk: the second starts right after the first (rounded to a cache line).
        #expect(copies[1].baseAddress == copies[0].baseAddress + HugePageArena.smallest)
    }

    @Test func aChunkStartsOnAHugePageAndGoesWithItsLastCopy() throws {
        let arena = HugePageArena()
        var first: TensorStorage? = try arena.storage(byteCount: HugePageArena.smallest)
        #expect(UInt(bitPattern: first!.baseAddress) % UInt(2 << 20) == 0, "a new chunk's first copy starts on a huge page")
        #expect(arena.hasLiveChunk)
        first = nil
        #expect(!arena.hasLiveChunk, "the chunk outlived its only copy")
        // The arena makes a new chunk for the next copy rather than holding the old one.
        let next = try arena.storage(byteCount: HugePageArena.smallest)
        #expect(UInt(bitPattern: next.baseAddress) % UInt(2 << 20) == 0)
    }

    @Test func aCopyLargerThanAChunkGetsAChunkOfItsOwn() throws {
        let arena = HugePageArena()
        let small = try arena.storage(byteCount: HugePageArena.smallest)
        let large = try arena.storage(byteCount: HugePageArena.chunkBytes + 1)
        #expect(large.byteCount == HugePageArena.chunkBytes + 1)
        #expect(UInt(bitPattern: large.baseAddress) % UInt(2 << 20) == 0)
        #expect(large.baseAddress != small.baseAddress + HugePageArena.smallest)
    }

    @Test func onlyMidSizedCopiesComeFromChunks() {
        #expect(!HugePageArena.takes(HugePageArena.smallest - 1))
        #expect(HugePageArena.takes(HugePageArena.smallest))
        #expect(HugePageArena.takes(TensorStorage.hugeAlignedFrom - 1))
        #expect(!HugePageArena.takes(TensorStorage.hugeAlignedFrom), "TensorStorage aligns copies this large to huge pages itself")
    }

    /// A GGUF-shaped matrix with an arena packs into it, and computes as one without.
    @Test func packedWeightsFromTheArenaComputeAsWithout() throws {
        let (rows, columns) = (2048, 576) // 2048 × 576 Q8_0: 1.25 MB, taken by the arena
        var generator = SystemRandomNumberGenerator()
        let values = (0..<rows * columns).map { _ in Float.random(in: -1...1, using: &generator) }
        let plain = try WeightMatrix(try Tensor(shape: [rows, columns], values: values), as: .q8_0)
        let blocks = plain.bytes
        let arena = HugePageArena()
        let carved = try WeightMatrix(type: .q8_0, rows: rows, columns: columns, borrowing: blocks, owner: plain, copyArena: arena)
        let (a, b) = (try plain.packed(), try carved.packed())
        #expect(a.packed.byteCount == b.packed.byteCount)
        #expect(memcmp(a.packed.baseAddress, b.packed.baseAddress, a.packed.byteCount) == 0)
        #expect(UInt(bitPattern: b.packed.baseAddress) % UInt(2 << 20) == 0, "the first copy of a fresh arena starts its chunk")
    }
}
