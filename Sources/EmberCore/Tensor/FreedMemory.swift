import _CEmberThreads

/// Returning freed memory to the system. glibc keeps freed heap memory for reuse, so after a burst of requests
/// the process's RSS would stay at the burst's peak for good. ``release()`` hands the free pages back
/// (`malloc_trim`); the scheduler calls it when a run that held memory ends. (KV caches do not need it: they are
/// mapped pages of their own, ``PageMemory``, unmapped when their session goes.)
public enum FreedMemory {
    /// Gives free heap pages back to the system (glibc's `malloc_trim(0)`); nothing elsewhere.
    public static func release() {
        _ = et_release_free_memory()
    }
}
