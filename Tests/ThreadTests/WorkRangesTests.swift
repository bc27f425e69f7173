import Foundation
import Testing
@testable import EmberCore

@Suite("Work ranges (dealt out with stealing)")
struct WorkRangesTests {
    /// One thread alone takes its own share front to back, then the others' from their ends: every unit once.
    @Test func oneThreadTakesEveryUnitOnce() throws {
        let ranges = try #require(WorkRanges(sites: 2, threads: 3))
        for units in [0, 1, 2, 5, 36, 3072] {
            ranges.reset(site: 1, units: units, sharing: 3)
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
        ranges.reset(site: 0, units: 4, sharing: 3)
        #expect(ranges.claim(site: 0, thread: 2) == 2..<4)
    }

    /// Dealt among fewer threads than the ranges were made for: those share every unit, the rest have none.
    @Test func fewerThreadsShareEveryUnit() throws {
        let ranges = try #require(WorkRanges(sites: 1, threads: 4))
        ranges.reset(site: 0, units: 10, sharing: 2)
        #expect(ranges.claim(site: 0, thread: 1) == 5..<9) // its own 5..<10, three quarters of it first
        var seen = [Int](repeating: 0, count: 10)
        for unit in 5..<9 { seen[unit] += 1 }
        while let piece = ranges.claim(site: 0, thread: 0) { for unit in piece { seen[unit] += 1 } }
        #expect(seen.allSatisfy { $0 == 1 })
    }

    /// Two threads claiming at once, the second held after its first piece until the first has run out: the first
    /// takes its own share and what is left of the other's, from its end — every unit exactly once.
    @Test func aThreadThatRunsOutTakesTheRestOfAnothersShare() throws {
        let threads = 2, units = 400
        let ranges = try #require(WorkRanges(sites: 1, threads: threads))
        let pool = WorkerPool(threadsPerClass: threads)
        for _ in 0..<10 {
            ranges.reset(site: 0, units: units, sharing: threads)
            let counts = UnsafeMutablePointer<Int>.allocate(capacity: units)
            counts.initialize(repeating: 0, count: units)
            let taken = UnsafeMutablePointer<Int>.allocate(capacity: threads)
            taken.initialize(repeating: 0, count: threads)
            defer { counts.deallocate(); taken.deallocate() }
            let (firstPieceTaken, firstRanOut) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let started = ManagedCounter()
            pool.region(threads: threads, qos: .utility) { thread in
                started.add(1)
                func claimAll(atMost limit: Int) {
                    var pieces = 0
                    while pieces < limit, let piece = ranges.claim(site: 0, thread: thread.index) {
                        for unit in piece { counts[unit] += 1 } // each unit written by one thread only if claims are exclusive
                        taken[thread.index] += piece.count
                        pieces += 1
                    }
                }
                if thread.index == 1 {
                    claimAll(atMost: 1)
                    firstPieceTaken.signal()
                    _ = firstRanOut.wait(timeout: .now() + 30)
                    claimAll(atMost: .max)
                } else {
                    _ = firstPieceTaken.wait(timeout: .now() + 30) // (a region of one thread: no second thread to wait for)
                    claimAll(atMost: .max)
                    firstRanOut.signal()
                }
            }
            try #require(started.value == threads)
            #expect((0..<units).allSatisfy { counts[$0] == 1 })
            #expect(taken[0] + taken[1] == units)
            #expect(taken[1] > 0 && taken[1] < units / 2, "the held thread took \(taken[1]) of \(units)")
        }
    }

    @Test func refusesNonsense() {
        #expect(WorkRanges(sites: 0, threads: 2) == nil)
        #expect(WorkRanges(sites: 3, threads: 0) == nil)
        let ranges = WorkRanges(sites: 1, threads: 2)!
        ranges.reset(site: 0, units: 3, sharing: 2)
        #expect(ranges.claim(site: 5, thread: 0) == nil) // no such site
        #expect(ranges.claim(site: 0, thread: 2) == nil) // no such thread
        #expect(ranges.claim(site: -1, thread: 0) == nil)
        ranges.reset(site: 7, units: 3, sharing: 2) // ignored
    }
}
