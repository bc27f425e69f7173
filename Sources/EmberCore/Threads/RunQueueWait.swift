import Foundation

/// How long this process's threads have waited, runnable, for a CPU that other work held: the second field of
/// Linux's `/proc/self/task/TID/schedstat` (nanoseconds on a run queue, not running), per thread.
///
/// A run that ends slower than predicted on a machine another program keeps busy has not shown its route to be
/// slow; what it lost this way is the difference between two readings around it (the scheduler takes it off the
/// time it learns from). Idle and blocked threads are not runnable and add nothing.
public enum RunQueueWait {
    /// Seconds of run-queue wait of each thread of this process so far, by thread id, read under `root` (the real
    /// `/` unless a test gives another); nil where the kernel does not keep it (not Linux, `CONFIG_SCHED_INFO` off,
    /// no `/proc`).
    public static func threadSeconds(root: URL = URL(fileURLWithPath: "/")) -> [Int: Double]? {
        let tasks = root.appendingPathComponent("proc/self/task")
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: tasks.path) else { return nil }
        var seconds: [Int: Double] = [:]
        for thread in threads {
            // A thread that ended between the listing and the read is simply not counted.
            guard let id = Int(thread),
                  let text = try? String(contentsOf: tasks.appendingPathComponent("\(thread)/schedstat"), encoding: .utf8),
                  let waited = parse(text) else { continue }
            seconds[id] = Double(waited) / 1e9
        }
        return seconds.isEmpty ? nil : seconds
    }

    /// The wall-clock time work between readings `before` and `after` lost to waiting: the most any one thread
    /// waited (threads that meet at barriers all wait for the one held back, and threads held back together lose
    /// the time once). A thread absent from `before` started in between and counts from zero; one that ended in
    /// between is no longer listed and not counted (the worker threads that run requests live as long as the pool).
    public static func lostSeconds(from before: [Int: Double], to after: [Int: Double]) -> Double {
        after.reduce(0) { lost, entry in max(lost, entry.value - (before[entry.key] ?? 0)) }
    }

    /// The run-queue nanoseconds of one `schedstat` line ("on-CPU waited timeslices"); nil unless it has three
    /// unsigned numbers.
    static func parse(_ text: String) -> UInt64? {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 3, fields.allSatisfy({ UInt64($0) != nil }) else { return nil }
        return UInt64(fields[1])
    }
}
