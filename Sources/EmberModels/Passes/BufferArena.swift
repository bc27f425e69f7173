import EmberCore

/// Aligned buffers a forward pass reuses from step to step, all freed with the arena. Buffers of a mebibyte and more
/// are pages of their own (``PageMemory``): resident only once written, and given back to the system when the arena
/// goes, where glibc may keep freed pieces of a few megabytes in its heap.
final class BufferArena {
    private var buffers: [UnsafeMutableRawPointer] = []
    private var pages: [PageMemory] = []
    /// Bytes of every buffer made.
    private(set) var byteCount = 0
    /// Buffers of at least this many bytes are mapped pages.
    static let pagesFrom = 1 << 20

    deinit { for buffer in buffers { buffer.deallocate() } }

    /// `bytes` bytes (at least 1), 64-byte aligned, uninitialized.
    func raw(_ bytes: Int) -> UnsafeMutableRawPointer { allocate(bytes).pointer }

    /// `count` floats (at least 1), 64-byte aligned, zeroed.
    func floats(_ count: Int) -> UnsafeMutablePointer<Float> {
        let (pointer, zeroed) = allocate(max(1, count) * 4)
        guard !zeroed else { return pointer.bindMemory(to: Float.self, capacity: max(1, count)) }
        return pointer.initializeMemory(as: Float.self, repeating: 0, count: max(1, count))
    }

    /// A buffer of `bytes` bytes, and whether it is zero already (fresh pages).
    private func allocate(_ bytes: Int) -> (pointer: UnsafeMutableRawPointer, zeroed: Bool) {
        byteCount += max(1, bytes)
        if bytes >= Self.pagesFrom {
            let memory = PageMemory(byteCount: bytes)
            pages.append(memory)
            return (memory.baseAddress, true)
        }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes), alignment: 64)
        buffers.append(buffer)
        return (buffer, false)
    }
}
