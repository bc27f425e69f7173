import Foundation

/// Whether the process's address-space limit (`ulimit -v`, `RLIMIT_AS`)
/// leaves room for OpenBLAS. OpenBLAS reserves a 128 MiB buffer for each
/// thread inside `sgemm` and for each of its own threads, and when that
/// allocation fails it retries forever — a hang inside `cblas_sgemm`, or in
/// joining its threads. So the room is checked once, before any BLAS call,
/// by reserving it for a moment; a shortfall is an error that says what to do.
public enum AddressSpace {
    /// What OpenBLAS reserves per thread that runs it (its `BUFFER_SIZE` plus a guard), in bytes.
    public static let blasBufferBytes = 130 << 20

    /// Address space kept beyond OpenBLAS's buffers: thread stacks and a small model's working memory.
    public static let headroomBytes = 384 << 20

    /// The `RLIMIT_AS` soft limit in bytes, nil when there is none.
    public static var limit: Int? {
        var value = rlimit()
        guard getrlimit(Int32(RLIMIT_AS.rawValue), &value) == 0, value.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: value.rlim_cur)
    }

    /// Address space the process has mapped now (`/proc/self/statm`), 0 where unknown.
    static var mappedBytes: Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = text.split(separator: " ").first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Nil when `threads` threads can run OpenBLAS at once (or there is no limit); else why not, with the limit and
    /// what to do. Reserves the buffers' address space for a moment (no memory is touched).
    public static func blasShortfall(threads: Int) -> String? {
        guard let limit else { return nil }
        // The callers' buffers and OpenBLAS's own thread's, and room for the threads Ember and Swift's runtime start
        // (8 MiB stacks; libdispatch waits forever for a thread it cannot create) and a small model's working memory.
        let need = (max(1, threads) + 1) * blasBufferBytes + headroomBytes
        let probe = mmap(nil, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if let probe, probe != MAP_FAILED {
            munmap(probe, need)
            return nil
        }
        let suggested = (mappedBytes + need) >> 20
        return "the address-space limit (ulimit -v) of \(limit >> 20) MiB leaves less than the \(need >> 20) MiB Ember needs "
            + "before any model (OpenBLAS reserves 128 MiB for each of \(threads) thread(s) and its own); raise the limit to at least \(suggested) MiB "
            + "(ulimit -v \(suggested << 10)) plus the model's size, or use fewer threads"
    }
}
