import Foundation
import Testing
@testable import EmberCore

@Suite("Work ranges (dealt out with stealing)")
struct WorkRangesTests {
    /// One thread alone takes its own share front to back, then the others' from their ends: every unit once.
    @Test func oneThreadTakesEveryUnitOnce() throws {
        let ranges = try #require(WorkRanges(sites: 2, threads: 3))
        for units in [0, 1, 2, 5, 36, 3072] {
            ranges.reset(site: 1, units: units)
            var seen = [Int](repeating: 0, count: units)
            var pieces: [Range<Int>] = []
            while let piece = ranges.claim(site: 1, thread: 0) {
                pieces.append(piece)
                for unit in piece { seen[unit] += 1 }
            }
            #expect(seen.allSatisfy { $0 == 1 }, "\(units) units: \(pieces)")
            // Its own third first, front to back and contiguous.
            let own = 0..<(units / 3)
            var next = own.lowerBound
            for piece in pieces where piece.lowerBound < own.upperBound {
                #expect(piece.lowerBound == next)
                next = piece.upperBound
            }
            #expect(next == own.upperBound)
        }
        // Another site is untouched by the first's claims.
        ranges.reset(site: 0, units: 4)
        #expect(ranges.claim(site: 0, thread: 2) == 2..<4)
    }

    /// Threads claiming at once, one of them slowed: the units are still each claimed once, and the fast thread
    /// takes more than its even share.
    @Test func concurrentClaimsCoverTheUnitsOnceAndTheFastThreadSteals() throws {
        let threads = 2, units = 400
        let ranges = try #require(WorkRanges(sites: 1, threads: threads))
        let pool = WorkerPool(threadsPerClass: threads)
        for _ in 0..<20 {
            ranges.reset(site: 0, units: units)
            let counts = UnsafeMutablePointer<Int>.allocate(capacity: units)
            counts.initialize(repeating: 0, count: units)
            let taken = UnsafeMutablePointer<Int>.allocate(capacity: threads)
            taken.initialize(repeating: 0, count: threads)
            defer { counts.deallocate(); taken.deallocate() }
            let started = ManagedCounter()
            pool.region(threads: threads, qos: .utility) { thread in
                started.add(1)
                thread.barrier() // both claim from the start
                while let piece = ranges.claim(site: 0, thread: thread.index) {
                    for unit in piece { counts[unit] += 1 } // each unit written by one thread only, if claims are exclusive
                    taken[thread.index] += piece.count
                    usleep(UInt32((thread.index == 1 ? 100 : 10) * piece.count))
                }
            }
            try #require(started.value == threads)
            #expect((0..<units).allSatisfy { counts[$0] == 1 })
            #expect(taken[0] + taken[1] == units)
            #expect(taken[0] > units / 2 && taken[1] > 0, "the fast thread took \(taken[0]) of \(units), the slow one \(taken[1])")
        }
    }

    @Test func refusesNonsense() {
        #expect(WorkRanges(sites: 0, threads: 2) == nil)
        #expect(WorkRanges(sites: 3, threads: 0) == nil)
        let ranges = WorkRanges(sites: 1, threads: 2)!
        ranges.reset(site: 0, units: 3)
        #expect(ranges.claim(site: 5, thread: 0) == nil) // no such site
        #expect(ranges.claim(site: 0, thread: 2) == nil) // no such thread
    }
}
