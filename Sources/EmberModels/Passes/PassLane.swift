import EmberCore

/// One thread's part in a forward pass: the rows it makes, the output columns of each matmul it computes, and whether
/// it meets the region's other threads at barriers.
///
/// A lane either *shares* every stage — each stage's rows split among the threads, each matmul's output columns
/// split, barriers between stages — or *owns* some rows: it runs just those rows (whole sentences of an encoder
/// batch) through every stage alone, every column of every matmul, no barrier. Owned rows suit a batch of many
/// sentences: no thread reads what another just wrote (on a 2-core Zen 3, MiniLM int8 at batch 32 ran 1.44× its one-thread rate with
/// shared stages, while two one-thread processes ran 2.0× together).
struct PassLane {
    let thread: RegionThread
    /// The rows this thread runs alone; nil when the stages are shared.
    let ownedRows: Range<Int>?

    /// A lane that shares every stage with the region's other threads.
    init(sharing thread: RegionThread) {
        self.thread = thread
        ownedRows = nil
    }

    /// A lane that runs `rows` alone.
    init(owning rows: Range<Int>, on thread: RegionThread) {
        self.thread = thread
        ownedRows = rows
    }

    /// The thread's index in its region (private buffers are per index).
    var index: Int { thread.index }

    /// Whether this lane runs its own rows alone.
    var ownsRows: Bool { ownedRows != nil }

    /// The rows of a `total`-row stage this lane makes: its own, or its share.
    func rows(of total: Int) -> Range<Int> {
        ownedRows ?? thread.share(of: total)
    }

    /// The output columns of a matmul of `total` outputs this lane computes: all of them, or its share (parts
    /// starting on multiples of `alignment`).
    func columns(of total: Int, alignment: Int) -> Range<Int> {
        ownedRows == nil ? thread.share(of: total, alignment: alignment) : 0..<total
    }

    /// Whether this lane computes matmuls that cannot be split (a plugin that runs one call at a time): the first
    /// thread of a shared pass, every lane that owns rows (the plugin's own lock orders their calls).
    var runsUnsplitWork: Bool { ownedRows != nil || thread.index == 0 }

    /// Waits for the region's other threads — a lane that owns its rows never needs to.
    func barrier() {
        if ownedRows == nil { thread.barrier() }
    }
}
