/// Splits a row range into parts and runs them on ``WorkerPool`` workers (on the calling thread when there is no pool).
///
/// Parts start on multiples of `alignment` rows (16: one packed group, so no
/// two threads write the same group). Work too small to be worth a thread
/// hand-off (under `minimumWork` units per part) runs on the calling thread.
package enum RowSplit {
    /// Row ranges covering 0..<rows in at most `parts` pieces of `alignment`-aligned starts.
    package static func ranges(rows: Int, parts: Int, alignment: Int) -> [Range<Int>] {
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
    package static func run(rows: Int, threads: Int, alignment: Int, workPerRow: Int, minimumWork: Int = 1 << 17,
                            qos: QoSClass = .current, pool: WorkerPool?, _ body: (Range<Int>) -> Void) {
        let useful = max(1, (rows * max(1, workPerRow)) / minimumWork)
        let pieces = ranges(rows: rows, parts: min(pool == nil ? 1 : threads, useful), alignment: alignment)
        guard let pool, pieces.count > 1 else {
            for piece in pieces { body(piece) }
            return
        }
        pool.parallelFor(pieces.count, qos: qos) { body(pieces[$0]) }
    }
}
