import Foundation
import Testing
@testable import Ember
import EmberTestSupport

/// Tracks how many runs hold memory at once (a test helper).
final class Occupancy: @unchecked Sendable {
    private let lock = NSLock()
    private var now = 0, peak = 0
    func enter(_ bytes: Int) { lock.withLock { now += bytes; peak = max(peak, now) } }
    func leave(_ bytes: Int) { lock.withLock { now -= bytes } }
    var highest: Int { lock.withLock { peak } }
}

@Suite("Scheduler memory budget")
struct MemoryBudgetTests {
    static func request(_ tier: Tier, bytes: Int, occupancy: Occupancy, work: Duration = .milliseconds(30)) -> InferenceRequest {
        InferenceRequest(requirements: RequestRequirements(tier: tier), memoryBytes: bytes) { _, _ in
            occupancy.enter(bytes)
            defer { occupancy.leave(bytes) }
            try await Task.sleep(for: work)
            return bytes
        }
    }

    /// 40 requests of 100 MB under a 350 MB budget: all complete, at most three run at once, the others waited.
    /// The runs hold their memory until all 40 are in (3 running, 37 waiting), so the check does not depend on how
    /// fast a loaded machine submits them.
    @Test func runsStayWithinTheBudgetAndAllComplete() async throws {
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 350_000_000)
        let occupancy = Occupancy()
        let released = Occupancy() // used as a flag: highest > 0 once released
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<40 {
                let tier: Tier = index % 3 == 0 ? .critical : .standard
                group.addTask {
                    let request = InferenceRequest(requirements: RequestRequirements(tier: tier), memoryBytes: 100_000_000) { _, _ in
                        occupancy.enter(100_000_000)
                        defer { occupancy.leave(100_000_000) }
                        while released.highest == 0 { try await Task.sleep(for: .milliseconds(1)) }
                        return 1
                    }
                    return try await scheduler.submit(request, tier: tier).output as! Int
                }
            }
            #expect(await eventually {
                let (inUse, waiting) = (await scheduler.memoryInUse, await scheduler.waitingForMemoryCount)
                return inUse == 300_000_000 && waiting == 37
            })
            released.enter(1)
            var completed = 0
            for try await _ in group { completed += 1 }
            #expect(completed == 40)
        }
        #expect(occupancy.highest <= 300_000_000, "peak \(occupancy.highest)")
        #expect(await scheduler.memoryInUse == 0)
        #expect(await scheduler.metrics.memoryWaits == 37)
        #expect(await scheduler.waitingForMemoryCount == 0)
    }

    /// A request bigger than the whole budget is refused with both numbers; a cancelled waiting one leaves no trace.
    @Test func tooBigIsRefusedAndCancelledWaitersLeave() async throws {
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 200_000_000)
        let occupancy = Occupancy()
        await #expect(throws: SchedulerError.dropped(reason: "needs 500 MB of memory, more than the budget of 200 MB")) {
            try await scheduler.submit(Self.request(.critical, bytes: 500_000_000, occupancy: occupancy), tier: .critical)
        }
        // The first run holds its memory until the test lets it go (not for a fixed time: a loaded machine may
        // start the second request seconds later).
        let (gate, open) = AsyncStream<Void>.makeStream()
        let holder = InferenceRequest(requirements: RequestRequirements(tier: .standard), memoryBytes: 150_000_000) { _, _ in
            occupancy.enter(150_000_000)
            defer { occupancy.leave(150_000_000) }
            for await _ in gate { break }
            return 150_000_000
        }
        let long = Task { try await scheduler.submit(holder, tier: .standard) }
        #expect(await eventually { await scheduler.memoryInUse == 150_000_000 })
        let waiting = Task { try await scheduler.submit(Self.request(.standard, bytes: 150_000_000, occupancy: occupancy), tier: .standard) }
        #expect(await eventually { await scheduler.waitingForMemoryCount == 1 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        open.yield()
        open.finish()
        _ = try await long.value
        #expect(await scheduler.memoryInUse == 0)
        #expect(await scheduler.waitingForMemoryCount == 0)
        #expect(occupancy.highest == 150_000_000)
    }
}
