import _CEmberThreads

/// Returning freed memory to the system. glibc keeps freed heap memory for reuse, so after a burst of long
/// generations (each KV cache tens of megabytes, in pieces below its mmap threshold) the process's RSS stays at
/// the burst's peak for good. ``release()`` hands the free pages back (`malloc_trim`); the scheduler calls it when
/// a run that held memory ends.
public enum FreedMemory {
    /// Gives free heap pages back to the system (glibc's `malloc_trim(0)`); nothing elsewhere.
    public static func release() {
        _ = et_release_free_memory()
    }
}
