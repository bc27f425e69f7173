import _CEmberThreads

/// One thread's view of a ``WorkerPool/region(threads:qos:barrierSpinNanoseconds:_:)``: which of
/// the region's threads it is, its share of split work, and the barrier
/// that keeps the threads in step between stages.
public struct RegionThread {
    /// 0 ..< count; thread 0 is the one that does unsplit work.
    public let index: Int
    /// Number of threads in the region, 1 … the pool's `threadsPerClass`.
    public let count: Int
    let barrierHandle: OpaquePointer?
    let spinNanoseconds: Int64

    /// Returns once every thread of the region has called it.
    public func barrier() {
        guard let barrierHandle else { return } // a region of one thread
        et_barrier_wait(barrierHandle, spinNanoseconds)
    }

    /// This thread's part of 0..<total, parts starting on multiples of `alignment`.
    public func share(of total: Int, alignment: Int = 1) -> Range<Int> {
        let units = (total + alignment - 1) / alignment
        let begin = min(total, units * index / count * alignment)
        let end = min(total, units * (index + 1) / count * alignment)
        return begin..<end
    }
}

extension WorkerPool {
    /// How long a region's thread spins at a barrier before it parks, unless the region says otherwise.
    public static let defaultBarrierSpinNanoseconds: Int64 = 200_000

    /// Runs `body` on `threads` threads at once (the workers of `qos`, and the
    /// caller when it runs at that class), each with its ``RegionThread``, and
    /// returns when all have finished. Unlike ``parallelFor(_:qos:_:)`` every
    /// part runs on its own thread at the same time, so the body may use
    /// ``RegionThread/barrier()``: a decode step is one region with a few
    /// barriers per layer instead of hundreds of separate jobs. `body` must not
    /// start another job on this pool. At most ``threadsPerClass`` threads.
    public func region(threads: Int, qos: QoSClass, barrierSpinNanoseconds: Int64 = WorkerPool.defaultBarrierSpinNanoseconds,
                       _ body: (RegionThread) -> Void) {
        // Inside a pool part (nested work runs inline) only one thread can take part.
        // Every thread of a region must run at once (barriers): never more than the workers that started.
        var count = et_pool_nesting() > 0 ? 1 : max(1, min(threads, threadsPerClass, workerCount(for: qos)))
        let barrier = count > 1 ? et_barrier_create(Int32(count)) : nil
        if barrier == nil { count = 1 } // out of memory for the barrier: one thread, no barrier needed
        defer { if let barrier { et_barrier_destroy(barrier) } }
        parallelFor(count, qos: qos) { index in
            body(RegionThread(index: index, count: count, barrierHandle: barrier, spinNanoseconds: barrierSpinNanoseconds))
        }
    }
}
