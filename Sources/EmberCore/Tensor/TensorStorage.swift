import Foundation

/// The memory behind one or more ``Tensor`` values.
///
/// Storage is either *owned* — allocated by Ember, 64-byte aligned, zeroed
/// (or written in full by Ember's own code before any read), freed with the last reference — or *borrowed*: memory that belongs to
/// someone else (a memory-mapped model file, a host application's buffer),
/// kept alive through `owner` for as long as any tensor refers to it.
public final class TensorStorage: @unchecked Sendable {
    /// Alignment of owned allocations: one cache line, and one AVX-512 register.
    public static let alignment = 64

    /// First byte of the memory.
    public let baseAddress: UnsafeMutableRawPointer
    /// Size of the memory in bytes.
    public let byteCount: Int
    /// Whether Ember allocated this memory (and frees it).
    public let isOwned: Bool
    /// Whether tensors over this memory may be written.
    public let isMutable: Bool
    /// Keeps borrowed memory alive (for example the mapping of a model file).
    private let owner: AnyObject?

    /// Allocates `byteCount` zeroed bytes.
    public init(zeroedByteCount byteCount: Int) {
        precondition(byteCount >= 0, "byteCount must not be negative")
        var memory: UnsafeMutableRawPointer?
        guard posix_memalign(&memory, Self.alignment, max(byteCount, 1)) == 0, let memory else {
            fatalError("cannot allocate \(Self.describe(byteCount))") // as Swift's own allocator would; callers bound their sizes
        }
        baseAddress = memory
        baseAddress.initializeMemory(as: UInt8.self, repeating: 0, count: max(byteCount, 1))
        self.byteCount = byteCount
        isOwned = true
        isMutable = true
        owner = nil
    }

    /// Allocates `byteCount` bytes for a caller that writes every one of them
    /// before reading (packed or dequantized weights). Large allocations are
    /// advised onto transparent huge pages on Linux, so tens of megabytes of
    /// weights cost tens of page faults rather than thousands. Memory that
    /// cannot be had (the machine's, or `ulimit -v`) is an error, not an abort.
    init(uninitializedByteCount byteCount: Int) throws {
        precondition(byteCount >= 0, "byteCount must not be negative")
        let huge = HugePageArena.hugePage
        let alignment = byteCount >= Self.hugeAlignedFrom ? huge : Self.alignment
        var memory: UnsafeMutableRawPointer?
        guard posix_memalign(&memory, alignment, max(byteCount, 1)) == 0, let memory else {
            throw KernelError.outOfMemory(reason: "cannot allocate \(Self.describe(byteCount)) for weights; free memory, raise "
                                          + "ulimit -v, or choose a smaller precision or model")
        }
        #if os(Linux)
        if alignment == huge { _ = madvise(memory, byteCount, MADV_HUGEPAGE) }
        #endif
        baseAddress = memory
        self.byteCount = byteCount
        isOwned = true
        isMutable = true
        owner = nil
    }

    /// Uninitialized bytes for a weight copy its caller writes in full: from `arena` when it takes that size
    /// (``HugePageArena/takes(_:)``), else allocated as ``init(uninitializedByteCount:)`` does.
    static func forWeights(byteCount: Int, arena: HugePageArena?) throws -> TensorStorage {
        if let arena, HugePageArena.takes(byteCount) { return try arena.storage(byteCount: byteCount) }
        return try TensorStorage(uninitializedByteCount: byteCount)
    }

    /// A weight copy of `bytes`, from `arena` as ``forWeights(byteCount:arena:)`` says.
    static func forWeights(copying bytes: UnsafeRawBufferPointer, arena: HugePageArena?) throws -> TensorStorage {
        let storage = try forWeights(byteCount: bytes.count, arena: arena)
        if let base = bytes.baseAddress { storage.baseAddress.copyMemory(from: base, byteCount: bytes.count) }
        return storage
    }

    /// Allocations from this size up are aligned to huge pages and advised onto them (two huge pages).
    static let hugeAlignedFrom = 2 * HugePageArena.hugePage

    /// "30.1 MB", for messages.
    static func describe(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }

    /// Wraps memory that belongs to someone else; `owner` is retained to keep it alive.
    public init(borrowing baseAddress: UnsafeMutableRawPointer, byteCount: Int, mutable: Bool, owner: AnyObject?) {
        self.baseAddress = baseAddress
        self.byteCount = byteCount
        isOwned = false
        isMutable = mutable
        self.owner = owner
    }

    /// A new owned storage holding a copy of these bytes.
    func copy() -> TensorStorage {
        let copy = TensorStorage(zeroedByteCount: byteCount)
        copy.baseAddress.copyMemory(from: baseAddress, byteCount: byteCount)
        return copy
    }

    deinit {
        if isOwned { free(baseAddress) } // from posix_memalign
    }
}
