import Foundation
import Testing
import _CEmberThreads
@testable import EmberCore
import Ember

/// Starts a thread at `qos` (Ember's mapping applied), runs `body`, and returns a semaphore signalled when it ends.
@discardableResult
func startThread(qos: QoSClass, _ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let finished = DispatchSemaphore(value: 0)
    let thread = Thread {
        QoSMapping.current.applyToCurrentThread(qos)
        body()
        finished.signal()
    }
    thread.start()
    return finished
}

final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

final class Box<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
    /// Reads and writes under one lock (`value += 1` would be two steps).
    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}

@Suite("Priority-inversion avoidance", .serialized, .enabled(if: QoSMapping.current.canRaise))
struct PromotionTests {
    @Test func lockHolderIsPromotedWhileAHigherWaiterWaitsAndRestoredAfter() throws {
        let lock = PromotingLock()
        let holderID = Box<Int32>(0)
        let observed = Box<[ThreadPriority?]>([])
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holderDone = startThread(qos: .background) {
            lock.lock()
            holderID.value = currentThreadID
            holding.signal()
            release.wait()
            lock.unlock()
            observed.value.append(ThreadPriority.of(thread: currentThreadID)) // after unlock
        }
        holding.wait()
        let before = ThreadPriority.of(thread: holderID.value)
        #expect(before == QoSMapping.current.priority(for: .background))

        let waiterDone = startThread(qos: .userInteractive) { lock.withLock {} }
        // Wait (bounded) for the waiter to block and promote the holder.
        let deadline = Date().addingTimeInterval(60) // generous: an idle-class thread on a loaded machine
        while lock.promotions == 0 && Date() < deadline { usleep(1000) }
        #expect(lock.promotions == 1)
        let during = ThreadPriority.of(thread: holderID.value)
        #expect(during == QoSMapping.current.priority(for: .userInteractive))
        if let stat = procStat(tid: holderID.value) { #expect(stat.nice == during?.nice) }

        release.signal()
        #expect(holderDone.wait(timeout: .now() + 60) == .success)
        #expect(waiterDone.wait(timeout: .now() + 60) == .success)
        #expect(observed.value.first == before, "restored to its own priority on unlock")
    }

    @Test func lowerWaiterDoesNotPromote() {
        let lock = PromotingLock()
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holderDone = startThread(qos: .userInitiated) {
            lock.lock(); holding.signal(); release.wait(); lock.unlock()
        }
        holding.wait()
        let waiterDone = startThread(qos: .utility) { lock.withLock {} }
        usleep(20_000)
        #expect(lock.promotions == 0)
        release.signal()
        #expect(holderDone.wait(timeout: .now() + 60) == .success)
        #expect(waiterDone.wait(timeout: .now() + 60) == .success)
    }

    @Test func serialQueuePromotesTheRunningJobUntilTheHigherJobStarts() throws {
        let queue = PromotingSerialQueue(label: "test-queue")
        defer { queue.stop() }
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let seen = Box<[ThreadPriority?]>([])
        queue.async(qos: .background) {
            started.signal()
            release.wait()
            seen.value.append(ThreadPriority.of(thread: currentThreadID)) // while the higher job waits
        }
        started.wait()
        let highDone = startThread(qos: .userInteractive) {
            queue.sync(qos: .userInteractive) { seen.value.append(ThreadPriority.of(thread: currentThreadID)) }
        }
        let deadline = Date().addingTimeInterval(60) // generous: an idle-class thread on a loaded machine
        while queue.promotions == 0 && Date() < deadline { usleep(1000) }
        #expect(queue.promotions == 1)
        release.signal()
        #expect(highDone.wait(timeout: .now() + 60) == .success)
        queue.sync(qos: .background) { seen.value.append(ThreadPriority.of(thread: currentThreadID)) }
        let mapping = QoSMapping.current
        #expect(seen.value == [mapping.priority(for: .userInteractive), mapping.priority(for: .userInteractive),
                               mapping.priority(for: .background)])
    }

    /// After stop() the thread drains and ends; later jobs still run (on the caller) instead of waiting forever.
    @Test func jobsAfterStopStillRun() {
        let queue = PromotingSerialQueue(label: "stopped-queue")
        let ran = DispatchSemaphore(value: 0)
        queue.async(qos: .utility) { ran.signal() }
        queue.stop()
        #expect(ran.wait(timeout: .now() + 60) == .success, "a job enqueued before stop() runs")
        usleep(20_000) // let the thread end (either way the jobs below must run)
        let answered = DispatchSemaphore(value: 0)
        let answer = Box(0)
        DispatchQueue.global().async { // bounded: a regression would wait forever here, not in the test
            answer.value = queue.sync(qos: .utility) { 42 }
            answered.signal()
        }
        #expect(answered.wait(timeout: .now() + 60) == .success && answer.value == 42, "sync after stop() returns")
        queue.async(qos: .utility) { ran.signal() }
        #expect(ran.wait(timeout: .now() + 60) == .success)
    }

    /// Random lock and queue traffic from threads of every class; must finish (bounded) with exact counts.
    @Test func randomizedStressDoesNotDeadlock() {
        let locks = [PromotingLock(), PromotingLock()]
        let queue = PromotingSerialQueue(label: "stress-queue")
        defer { queue.stop() }
        let counter = Box(0), queued = Box(0)
        var finished = [DispatchSemaphore]()
        for worker in 0..<6 {
            let qos = QoSClass.concrete[worker % 5]
            finished.append(startThread(qos: qos) {
                var generator = SplitMix64(seed: UInt64(worker))
                for _ in 0..<300 {
                    switch generator.next() % 3 {
                    case 0: // always in the same order: lock 0 before lock 1
                        locks[0].withLock { locks[1].withLock { counter.update { $0 += 1 } } }
                    case 1:
                        locks[Int(generator.next() % 2)].withLock { counter.update { $0 += 1 } }
                    default:
                        queue.sync(qos: qos) { queued.update { $0 += 1 } }
                    }
                }
            })
        }
        for done in finished { #expect(done.wait(timeout: .now() + 120) == .success, "a thread did not finish: deadlock?") }
        #expect(counter.value + queued.value == 6 * 300)
    }
}
