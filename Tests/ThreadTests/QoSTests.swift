import Foundation
import Testing
import _CEmberThreads
@testable import EmberCore
import Ember

/// Reads a thread's nice value and scheduling policy the way `ps` does:
/// from `/proc/self/task/<tid>/stat` (fields 19 and 41), independent of Ember's own calls.
func procStat(tid: Int32) -> (nice: Int, policy: Int)? {
    guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return nil }
    // Fields after the command name (which may hold spaces) start at field 3.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 38, let nice = Int(fields[16]), let policy = Int(fields[38]) else { return nil }
    return (nice, policy)
}

@Suite("QoS classes and their OS mapping")
struct QoSTests {
    @Test func rawValuesAreApples() {
        #expect(QoSClass.userInteractive.rawValue == 0x21)
        #expect(QoSClass.userInitiated.rawValue == 0x19)
        #expect(QoSClass.default.rawValue == 0x15)
        #expect(QoSClass.utility.rawValue == 0x11)
        #expect(QoSClass.background.rawValue == 0x09)
        #expect(QoSClass.unspecified.rawValue == 0x00)
        #expect(QoSClass.concrete == QoSClass.concrete.sorted(by: >))
        #expect(QoSClass.unspecified < .background && QoSClass.utility < .default)
    }

    @Test func taskPriorityRoundTrips() {
        #expect(QoSClass(TaskPriority.high) == .userInitiated)
        #expect(QoSClass(TaskPriority.medium) == .default)
        #expect(QoSClass(TaskPriority.low) == .utility)
        #expect(QoSClass(TaskPriority.background) == .background)
        #expect(QoSClass(TaskPriority(rawValue: 0x21)) == .userInteractive)
        #expect(QoSClass(TaskPriority(rawValue: 0x13)) == .utility) // between utility and default rounds down
        for qos in QoSClass.concrete { #expect(QoSClass(qos.taskPriority) == qos) }
        #expect(QoSClass.unspecified.taskPriority == .medium)
    }

    @Test func mappingsKeepTheOrder() {
        for mapping in [QoSMapping.privileged, QoSMapping.unprivileged] {
            let weights = QoSClass.concrete.map { qos -> Int in
                let p = mapping.priority(for: qos)!
                return p.policy == .idle ? 100 : p.nice // SCHED_IDLE is below every nice value
            }
            #expect(weights == weights.sorted(), "\(mapping.reason)")
        }
        #expect(QoSMapping.unprivileged.priorities.values.allSatisfy { $0.nice >= 0 })
        #expect(QoSMapping.privileged.priority(for: .userInteractive)!.nice == -8)
        #expect(QoSMapping.privileged.priority(for: .unspecified) == QoSMapping.privileged.priority(for: .default))
    }

    /// Root here (and in CI) may raise priorities: the privileged table is the one in force.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/task")))
    func workerThreadsCarryTheirClassesPriority() throws {
        let pool = WorkerPool(threadsPerClass: 2)
        let mapping = pool.mapping
        for qos in QoSClass.concrete {
            let ids = pool.threadIDs(for: qos)
            #expect(ids.count == 2)
            let expected = try #require(mapping.priority(for: qos))
            for tid in ids {
                let stat = try #require(procStat(tid: tid), "no /proc stat for \(tid)")
                #expect(stat.policy == Int(expected.policy.kernelValue), "\(qos) policy")
                if expected.policy != .idle { #expect(stat.nice == expected.nice, "\(qos) nice") }
                #expect(ThreadPriority.of(thread: tid)?.policy == expected.policy)
            }
        }
    }

    @Test func parallelForRunsEveryPartOnceOnTheClasssWorkers() {
        let pool = WorkerPool(threadsPerClass: 2)
        let workers = Set(pool.threadIDs(for: .utility))
        for count in [1, 2, 3, 17, 100] {
            let hits = UnsafeMutablePointer<Int32>.allocate(capacity: count)
            let threads = UnsafeMutablePointer<Int32>.allocate(capacity: count)
            hits.initialize(repeating: 0, count: count)
            pool.parallelFor(count, qos: .utility) { index in
                hits[index] += 1
                threads[index] = currentThreadID
            }
            #expect((0..<count).allSatisfy { hits[$0] == 1 }, "count \(count)")
            // This caller is not a utility thread, so it only waits: every part ran on a utility worker.
            #expect((0..<count).allSatisfy { workers.contains(threads[$0]) }, "count \(count)")
            hits.deallocate()
            threads.deallocate()
        }
    }

    @Test func manySmallJobsFromSeveralCallersComplete() async {
        let pool = WorkerPool(threadsPerClass: 2)
        await withTaskGroup(of: Int.self) { group in
            for caller in 0..<4 {
                group.addTask {
                    var total = 0
                    let qos: QoSClass = caller.isMultiple(of: 2) ? .userInitiated : .background
                    for _ in 0..<300 {
                        let box = UnsafeMutablePointer<Int>.allocate(capacity: 3)
                        box.initialize(repeating: 0, count: 3)
                        pool.parallelFor(3, qos: qos) { box[$0] = $0 + 1 }
                        total += box[0] + box[1] + box[2]
                        box.deallocate()
                    }
                    return total
                }
            }
            for await total in group { #expect(total == 300 * 6) }
        }
    }
}

@Suite("QoS without the right to raise priorities")
struct UnprivilegedQoSTests {
    /// The unprivileged table applied to real workers, read back from /proc.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/task")))
    func unprivilegedTableOnWorkers() throws {
        let pool = WorkerPool(threadsPerClass: 1, mapping: .unprivileged)
        for qos in QoSClass.concrete {
            let expected = try #require(QoSMapping.unprivileged.priority(for: qos))
            let stat = try #require(procStat(tid: pool.threadIDs(for: qos)[0]))
            #expect(stat.policy == Int(expected.policy.kernelValue), "\(qos)")
            if expected.policy != .idle { #expect(stat.nice == expected.nice, "\(qos)") }
        }
    }

    /// `ember info` in a child without CAP_SYS_NICE detects it and reports the fallback table.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getuid() == 0))
    func probeDetectsMissingCapability() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let ember = root.appendingPathComponent(".build/release/ember")
        try #require(FileManager.default.isExecutableFile(atPath: ember.path), "build ember first (make test does)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--inh-caps=-sys_nice", "--bounding-set=-sys_nice", ember.path, "info", "--json"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let report = try JSONDecoder().decode(SystemReport.self, from: data)
        #expect(report.qos == .unprivileged)
        #expect(report.warnings.contains { $0.contains("CAP_SYS_NICE") })
    }
}
