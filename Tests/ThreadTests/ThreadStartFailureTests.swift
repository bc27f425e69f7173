import Foundation
import Testing
@testable import EmberCore

/// A thread the system cannot create (here: a stack no machine can map) is an error or a fallback, never a wait
/// for a thread that will not come — Foundation's `Thread.start()` gives no sign, and Ember used to wait forever.
@Suite("Thread start failures")
struct ThreadStartFailureTests {
    static let impossibleStack = 1 << 50

    @Test func osThreadSaysWhyItCouldNotStart() throws {
        let error = #expect(throws: OSThread.StartError.self) {
            try OSThread.start(name: "too-big", stackBytes: Self.impossibleStack) { Issue.record("the body ran") }
        }
        #expect(error?.name == "too-big" && error?.code != 0)
        #expect("\(error!)".contains("cannot start thread too-big") && "\(error!)".contains("ulimit"))
        let ran = DispatchSemaphore(value: 0)
        try OSThread.start(name: "fine") { ran.signal() }
        #expect(ran.wait(timeout: .now() + 30) == .success)
    }

    /// Without workers every part runs on the caller: all of them, once, and a region runs as one thread.
    @Test func aPoolWithoutWorkersRunsOnTheCaller() {
        let pool = WorkerPool(threadsPerClass: 2, workerStackBytes: Self.impossibleStack)
        #expect(pool.workerCount(for: .userInitiated) == 0)
        #expect(pool.threadStartFailure?.contains("cannot start thread ember-userInitiated-0") == true)
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: 64)
        defer { counts.deallocate() }
        counts.initialize(repeating: 0)
        pool.parallelFor(64, qos: .userInitiated) { counts[$0] += 1 }
        #expect(counts.allSatisfy { $0 == 1 })
        var threads = 0
        pool.region(threads: 2, qos: .userInitiated) { thread in
            threads = thread.count
            thread.barrier()
        }
        #expect(threads == 1)
    }

    @Test func aQueueWithoutItsThreadRunsJobsOnTheirCallers() {
        let queue = PromotingSerialQueue(label: "ember-test-queue", stackBytes: Self.impossibleStack)
        #expect(queue.startFailure?.contains("cannot start thread ember-test-queue") == true)
        #expect(queue.sync(qos: .utility) { 41 + 1 } == 42)
        let done = DispatchSemaphore(value: 0)
        queue.async(qos: .background) { done.signal() }
        #expect(done.wait(timeout: .now() + 30) == .success)
        queue.stop()
    }
}
