import _CEmberKernels

/// A buffer of distinct pseudo-random bytes read end to end to measure the memory's streaming read bandwidth: what a
/// GEMV over weights larger than the caches can at best reach, and so what decoding a token costs.
///
/// The bytes are random, not zero: the host may back untouched or identical pages with one shared page, and then
/// "reading 128 MiB" reads a few cached pages. The buffer must be several times the last-level cache, or reading it
/// again and again finds part of it there and overstates the bandwidth.
public final class StreamingReadBuffer: @unchecked Sendable {
    let storage: TensorStorage
    /// Size of the buffer in bytes.
    public var byteCount: Int { storage.byteCount }

    /// Allocates `bytes` bytes and fills them with seeded pseudo-random words; throws
    /// ``KernelError/outOfMemory(reason:)`` when the memory cannot be had (`ulimit -v`).
    public init(bytes: Int) throws {
        storage = try TensorStorage(uninitializedByteCount: max(4096, bytes / 4096 * 4096))
        let count = storage.byteCount / 8
        let words = storage.baseAddress.bindMemory(to: UInt64.self, capacity: count)
        var generator = SplitMix64(seed: 0xba5e)
        for index in 0..<count { words[index] = generator.next() }
    }

    /// One streaming read of the whole buffer with `isa`'s read loop, its pages split over `threads` threads of
    /// `pool`: gigabytes per second.
    public func readGBs(isa: KernelISA, threads: Int, pool: WorkerPool?) -> Double {
        let base = UnsafeRawPointer(storage.baseAddress), bytes = byteCount
        let isaValue = isa.cValue
        let sink = StatusCollector()
        let seconds = Measurement.seconds {
            RowSplit.run(rows: bytes / 4096, threads: threads, alignment: 1, workPerRow: 1 << 20, pool: pool) { pages in
                let checksum = ek_read_stream(isaValue, base + pages.lowerBound * 4096, pages.count * 4096)
                if checksum == 1 { sink.record(EK_ERR_RANGE) } // keeps the reads from being optimised away
            }
        }
        return Double(bytes) / max(seconds, 1e-9) / 1e9
    }
}
