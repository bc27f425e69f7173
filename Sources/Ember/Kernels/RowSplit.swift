/// Splits a row range into parts and runs them on ``WorkerPool`` workers.
///
/// Parts start on multiples of `alignment` rows (16: one packed group, so no
/// two threads write the same group). Work too small to be worth a thread
/// hand-off (under `minimumWork` units per part) runs on the calling thread.
enum RowSplit {
    /// Row ranges covering 0..<rows in at most `parts` pieces of `alignment`-aligned starts.
    static func ranges(rows: Int, parts: Int, alignment: Int) -> [Range<Int>] {
        guard rows > 0 else { return [] }
        let units = (rows + alignment - 1) / alignment
        let parts = max(1, min(parts, units))
        return (0..<parts).map { part in
            let begin = min(rows, (units * part / parts) * alignment)
            let end = min(rows, (units * (part + 1) / parts) * alignment)
            return begin..<end
        }.filter { !$0.isEmpty }
    }

    /// Runs `body` once per range: on the workers of `qos` when there is more than one.
    static func run(rows: Int, threads: Int, alignment: Int, workPerRow: Int, minimumWork: Int = 1 << 17,
                    qos: QoSClass = .current, pool: WorkerPool = .shared, _ body: (Range<Int>) -> Void) {
        let useful = max(1, (rows * max(1, workPerRow)) / minimumWork)
        let pieces = ranges(rows: rows, parts: min(threads, useful), alignment: alignment)
        if pieces.count <= 1 {
            if let only = pieces.first { body(only) }
            return
        }
        pool.parallelFor(pieces.count, qos: qos) { body(pieces[$0]) }
    }
}
