import Dispatch

/// Splits a row range across threads and runs one part per thread.
///
/// Parts are aligned to `alignment` rows (16: one packed group, so no two
/// threads write the same group) and the split only happens when each part
/// gets at least `minimumWork` units, since waking a thread costs
/// microseconds. Runs on Dispatch's workers for now; the QoS-aware
/// `WorkerPool` takes this over.
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

    /// Runs `body` once per range, in parallel when there is more than one.
    static func run(rows: Int, threads: Int, alignment: Int, workPerRow: Int, minimumWork: Int = 1 << 18,
                    _ body: (Range<Int>) -> Void) {
        let useful = max(1, (rows * max(1, workPerRow)) / minimumWork)
        let pieces = ranges(rows: rows, parts: min(threads, useful), alignment: alignment)
        if pieces.count <= 1 {
            if let only = pieces.first { body(only) }
            return
        }
        withoutActuallyEscaping(body) { body in
            let box = UncheckedBox(body)
            DispatchQueue.concurrentPerform(iterations: pieces.count) { box.value(pieces[$0]) }
        }
    }

    /// Carries the body across threads: every piece writes a disjoint row range.
    private struct UncheckedBox<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }
}
