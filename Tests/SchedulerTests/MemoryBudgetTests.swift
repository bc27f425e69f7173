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
    @Test func runsStayWithinTheBudgetAndAllComplete() async throws {
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 350_000_000)
        let occupancy = Occupancy()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<40 {
                group.addTask {
                    try await scheduler.submit(Self.request(index % 3 == 0 ? .critical : .standard, bytes: 100_000_000, occupancy: occupancy),
                                               tier: index % 3 == 0 ? .critical : .standard).output as! Int
                }
            }
            var completed = 0
            for try await _ in group { completed += 1 }
            #expect(completed == 40)
        }
        #expect(occupancy.highest <= 300_000_000, "peak \(occupancy.highest)")
        #expect(await scheduler.memoryInUse == 0)
        #expect(await scheduler.metrics.memoryWaits >= 30)
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
        let long = Task { try await scheduler.submit(Self.request(.standard, bytes: 150_000_000, occupancy: occupancy, work: .seconds(3)),
                                                     tier: .standard) }
        #expect(await eventually { await scheduler.memoryInUse == 150_000_000 })
        let waiting = Task { try await scheduler.submit(Self.request(.standard, bytes: 150_000_000, occupancy: occupancy), tier: .standard) }
        #expect(await eventually { await scheduler.waitingForMemoryCount == 1 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        _ = try await long.value
        #expect(await scheduler.memoryInUse == 0)
        #expect(await scheduler.waitingForMemoryCount == 0)
        #expect(occupancy.highest == 150_000_000)
    }
}
