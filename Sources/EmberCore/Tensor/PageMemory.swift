#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Memory taken straight from the kernel — an anonymous private mapping, zero on first touch, page-aligned — and
/// handed back whole when this object goes (`munmap`), or page by page while it stays (``discard()``). For a
/// generation's KV cache: allocated with `malloc` and zeroed, every admitted request's whole cache (94 MB for SmolLM2
/// at 4,096 tokens) was resident from its start, and glibc may keep freed pieces of a few megabytes in its heap
/// arenas; a burst of long generations took the process's RSS past its cgroup test's limit. Here a page is resident
/// once a token is written to it, and freeing is immediate. For a requantized weight variant's blocks
/// (``WeightMatrix``), which go back once its layout copy is made and may be written again at the same address.
public final class PageMemory: @unchecked Sendable {
    /// First byte of the mapping (page-aligned, so aligned for any SIMD load).
    public let baseAddress: UnsafeMutableRawPointer
    /// Bytes mapped: at least the count asked for, whole pages.
    public let byteCount: Int

    /// The size of a page of this machine.
    public static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Maps `byteCount` zeroed bytes (rounded up to whole pages, at least one). Failing to map is fatal, as Swift's
    /// own allocator is: the scheduler admits requests against a memory budget before their caches are made.
    public init(byteCount: Int) {
        let (address, size, error) = Self.map(byteCount)
        guard let address else { fatalError("cannot map \(TensorStorage.describe(size)) of memory: \(error)") }
        baseAddress = address
        self.byteCount = size
    }

    /// Maps `byteCount` zeroed bytes for weights; memory that cannot be had is an error, not an abort.
    public init(weightsByteCount byteCount: Int) throws {
        let (address, size, error) = Self.map(byteCount)
        guard let address else {
            throw KernelError.outOfMemory(reason: "cannot map \(TensorStorage.describe(size)) for weights (\(error)); free memory, "
                                          + "raise ulimit -v, or choose a smaller precision or model")
        }
        baseAddress = address
        self.byteCount = size
    }

    private static func map(_ byteCount: Int) -> (UnsafeMutableRawPointer?, Int, String) {
        precondition(byteCount >= 0, "byteCount must not be negative")
        let size = roundedToPages(max(byteCount, 1))
        guard let address = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              address != MAP_FAILED else { return (nil, size, String(cString: strerror(errno))) }
        return (address, size, "")
    }

    /// Gives every page back to the system now (`madvise(MADV_DONTNEED)`); the mapping stays, at the same address, and
    /// reads as zeros (Linux) or as anything (Darwin) until written again.
    public func discard() { _ = madvise(baseAddress, byteCount, MADV_DONTNEED) }

    deinit { munmap(baseAddress, byteCount) }

    /// `bytes` rounded up to a whole number of pages.
    public static func roundedToPages(_ bytes: Int) -> Int { (bytes + pageSize - 1) / pageSize * pageSize }
}
