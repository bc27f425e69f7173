import Foundation
import Testing
@testable import EmberCore
import Ember

@Suite("Parallel regions")
struct RegionTests {
    /// Every thread writes the phase, meets the barrier, then checks that every
    /// other thread wrote it too: a barrier that let one through early fails.
    @Test func barrierKeepsThreadsInStep() {
        let pool = WorkerPool(threadsPerClass: 3)
        let threads = 3, phases = 2_000
        let slots = UnsafeMutablePointer<Int>.allocate(capacity: threads)
        slots.initialize(repeating: -1, count: threads)
        defer { slots.deallocate() }
        let failures = ManagedCounter()
        let seen = ManagedCounter()
        pool.region(threads: threads, qos: .utility) { thread in
            seen.add(1)
            for phase in 0..<phases {
                slots[thread.index] = phase
                thread.barrier()
                for other in 0..<thread.count where slots[other] != phase { failures.add(1) }
                thread.barrier()
            }
        }
        #expect(seen.value == threads)
        #expect(failures.value == 0)
    }

    @Test func sharesCoverTheRangeOnceOnAlignedStarts() {
        for count in 1...4 {
            for total in [0, 1, 15, 16, 17, 100, 576, 49_152] {
                for alignment in [1, 16, 32] {
                    let parts = (0..<count).map {
                        RegionThread(index: $0, count: count, barrierHandle: OpaquePointer(bitPattern: 1)!, spinNanoseconds: 0)
                            .share(of: total, alignment: alignment)
                    }
                    #expect(parts.reduce(0) { $0 + $1.count } == total)
                    for (a, b) in zip(parts, parts.dropFirst()) { #expect(a.upperBound == b.lowerBound) }
                    for part in parts where !part.isEmpty { #expect(part.lowerBound % alignment == 0) }
                }
            }
        }
    }

    @Test func nestedParallelWorkRunsInline() {
        let pool = WorkerPool(threadsPerClass: 2)
        let total = ManagedCounter()
        pool.region(threads: 2, qos: .utility) { _ in
            pool.parallelFor(5, qos: .utility) { _ in total.add(1) } // would deadlock if it queued behind the region
        }
        #expect(total.value == 10)
    }

    /// A region started from inside a pool part (a host embedding in parallel) runs on that one thread.
    @Test func regionInsidePoolPartRunsOnOneThread() {
        let pool = WorkerPool(threadsPerClass: 2)
        let threadsSeen = ManagedCounter()
        pool.parallelFor(3, qos: .utility) { _ in
            pool.region(threads: 2, qos: .utility) { thread in
                thread.barrier() // would wait forever for a second thread that never starts
                threadsSeen.add(thread.count)
            }
        }
        #expect(threadsSeen.value == 3)
    }
}

final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add(_ amount: Int) { lock.withLock { count += amount } }
    var value: Int { lock.withLock { count } }
}
