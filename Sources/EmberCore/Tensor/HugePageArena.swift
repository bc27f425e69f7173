import Foundation

/// Where one model's weight copies (packed, interleaved, dequantized) are carved out of chunks of 2 MiB-aligned
/// memory advised onto transparent huge pages, instead of one allocation each.
///
/// A small model's matrices are small — SmolLM2's are 0.1–3.5 MB, below the 4 MB from which
/// ``TensorStorage`` aligns a copy to huge pages on its own — so each had pages of 4 KB, and a decode step, which
/// streams every weight once, crossed a page (a TLB miss, a page walk) every 4 KB. From chunks of huge pages it
/// crosses one every 2 MB. SmolLM2 int4 decode on a 2-core Zen 4 (a noisy host), alternating rounds of 5 runs: with
/// each copy rounded up to huge pages (the prototype) medians 219 → 233 tok/s, ahead in 12 of 12; with this arena
/// two sets of 8 rounds, 247 → 260 (ahead in 6) and 272 → 270 (ahead in 5) — about +5 %, most in the busier hours.
/// Copies smaller than ``smallest`` or of ``TensorStorage``'s own huge size keep its allocation.
///
/// A chunk lives as long as any copy in it: copies dropped together (``WeightMatrix/releaseDerivedCopies()``
/// drops a model's) give their chunks back; a copy dropped alone keeps its bytes until its neighbours go. The arena
/// holds no chunk itself, so an arena with no copies left holds no memory.
public final class HugePageArena: @unchecked Sendable {
    /// Bytes of a chunk (a copy larger than that gets a chunk of its own size, in whole huge pages).
    public static let chunkBytes = 32 << 20
    /// Copies from this size up come from chunks; smaller ones are not worth the slack.
    public static let smallest = 64 << 10
    /// A transparent huge page on x86-64 and most arm64 Linux kernels.
    static let hugePage = 2 << 20
    /// Where each copy starts within its chunk: a cache line, the alignment of every owned storage.
    static let alignment = TensorStorage.alignment

    private let lock = NSLock()
    /// The chunk copies are being carved from; weak, so that a chunk whose copies are all gone is freed.
    private weak var current: HugePageChunk?
    /// Whether memory advised onto huge pages gets them here, so that weights streamed from a copy in this arena
    /// cross fewer pages than where they lie (``WeightMatrix/streamsCopy``).
    public let hasHugePages: Bool

    /// An arena with no chunk yet: the first copy makes one. `hasHugePages`: whether the system gives huge pages to
    /// memory advised onto them (by default what ``systemHasTransparentHugePages`` says).
    public init(hasHugePages: Bool = HugePageArena.systemHasTransparentHugePages) {
        self.hasHugePages = hasHugePages
    }

    /// Whether this system gives transparent huge pages to memory advised onto them: Linux with
    /// `/sys/kernel/mm/transparent_hugepage/enabled` at `always` or `madvise` (read once; not `never`, not another OS).
    public static let systemHasTransparentHugePages: Bool = {
        #if os(Linux)
        guard let mode = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8) else { return false }
        return mode.contains("[always]") || mode.contains("[madvise]")
        #else
        return false
        #endif
    }()

    /// Whether the chunk copies are carved from is still alive (some copy in it is).
    var hasLiveChunk: Bool { lock.withLock { current != nil } }

    /// Whether a copy of `byteCount` bytes comes from a chunk (see ``smallest``; ``TensorStorage`` aligns larger
    /// ones itself).
    public static func takes(_ byteCount: Int) -> Bool {
        byteCount >= smallest && byteCount < TensorStorage.hugeAlignedFrom
    }

    /// `byteCount` uninitialized bytes for a copy its caller writes in full before reading, 64-byte aligned: from the
    /// current chunk while it has room, else from a new one. Memory that cannot be had is an error, not an abort.
    public func storage(byteCount: Int) throws -> TensorStorage {
        precondition(byteCount >= 0, "byteCount must not be negative")
        let size = (max(byteCount, 1) + Self.alignment - 1) / Self.alignment * Self.alignment
        let (chunk, offset) = try lock.withLock { () throws -> (HugePageChunk, Int) in
            if let current, current.capacity - current.used >= size {
                defer { current.used += size }
                return (current, current.used)
            }
            let made = try HugePageChunk(capacity: max(Self.chunkBytes, (size + Self.hugePage - 1) / Self.hugePage * Self.hugePage))
            made.used = size
            current = made
            return (made, 0)
        }
        return TensorStorage(borrowing: chunk.base + offset, byteCount: byteCount, mutable: true, owner: chunk)
    }
}

/// One chunk: an allocation of `TensorStorage`'s own huge-page kind (it aligns anything of
/// `TensorStorage.hugeAlignedFrom` bytes or more to 2 MiB and advises it onto huge pages), freed when the last copy
/// in it goes.
final class HugePageChunk {
    let storage: TensorStorage
    /// Bytes handed out from the start (guarded by the arena's lock).
    var used = 0

    init(capacity: Int) throws {
        precondition(capacity >= TensorStorage.hugeAlignedFrom, "a chunk of \(capacity) bytes would not be on huge pages")
        storage = try TensorStorage(uninitializedByteCount: capacity)
    }

    var base: UnsafeMutableRawPointer { storage.baseAddress }
    var capacity: Int { storage.byteCount }
}
