/// Aligned buffers a forward pass reuses from step to step, all freed with the arena.
final class BufferArena {
    private var buffers: [UnsafeMutableRawPointer] = []

    deinit { for buffer in buffers { buffer.deallocate() } }

    /// `bytes` bytes (at least 1), 64-byte aligned, uninitialized.
    func raw(_ bytes: Int) -> UnsafeMutableRawPointer {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes), alignment: 64)
        buffers.append(buffer)
        return buffer
    }

    /// `count` floats (at least 1), 64-byte aligned, zeroed.
    func floats(_ count: Int) -> UnsafeMutablePointer<Float> {
        raw(max(1, count) * 4).initializeMemory(as: Float.self, repeating: 0, count: max(1, count))
    }
}
