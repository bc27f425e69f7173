import Foundation
import Testing
@testable import EmberCore

@Suite("Run-queue wait")
struct RunQueueWaitTests {
    @Test func schedstatLinesParseOrAreRefused() {
        #expect(RunQueueWait.parse("275257 31000 1\n") == 31000)
        for bad in ["", "1 2", "1 2 3 4", "a b c", "1 -2 3", "1 99999999999999999999999 3"] {
            #expect(RunQueueWait.parse(bad) == nil, "\(bad)")
        }
    }

    /// A fake /proc: each thread's wait, a thread without a readable line skipped, none at all nil; the time lost
    /// between two readings is the most one thread waited.
    @Test func threadsAreReadFromAFakeTree() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fake-proc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let tasks = root.appendingPathComponent("proc/self/task")
        for (thread, line) in [("101", "10 1500000000 3"), ("102", "10 500000000 3"), ("103", "garbage")] {
            let folder = tasks.appendingPathComponent(thread)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try line.write(to: folder.appendingPathComponent("schedstat"), atomically: true, encoding: .utf8)
        }
        #expect(RunQueueWait.threadSeconds(root: root) == [101: 1.5, 102: 0.5])
        #expect(RunQueueWait.threadSeconds(root: root.appendingPathComponent("nothing")) == nil)
        #expect(RunQueueWait.lostSeconds(from: [101: 1.0, 102: 0.5], to: [101: 1.5, 102: 0.6, 103: 0.2]) == 0.5)
    }

    /// On Linux the real reading grows while more threads spin than there are CPUs (read while they spin: a thread
    /// that has ended is no longer listed).
    @Test func spinningBeyondTheCPUsIsWaiting() async throws {
        guard let before = RunQueueWait.threadSeconds() else {
            #expect(!FileManager.default.fileExists(atPath: "/proc/self/task"), "Linux keeps schedstat")
            return
        }
        let spinners = ProcessInfo.processInfo.activeProcessorCount + 2
        let deadline = Date().addingTimeInterval(0.6)
        let threads = (0..<spinners).map { _ in
            Thread { var x = 0.0; while Date() < deadline { x += 1 }; _ = x }
        }
        threads.forEach { $0.start() }
        try await Task.sleep(for: .milliseconds(400))
        let waited = RunQueueWait.lostSeconds(from: before, to: try #require(RunQueueWait.threadSeconds()))
        #expect(waited > 0.05, "\(spinners) spinning threads for 0.4 s: the most one waited was \(waited) s")
        while Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
    }
}
