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

/// A model's weight copies for the scheduler (a test fake): what it holds, and a run that binds them.
final class FakeWeightCopies: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = 0
    var held: Int { lock.withLock { bytes } }
    func bind(_ size: Int) { lock.withLock { bytes = max(bytes, size) } }
    /// A route that copies `size` bytes of weights (less what is held).
    func account(binding size: Int) -> WeightCopyAccount {
        WeightCopyAccount(owner: "fake-model", held: { self.held }, adding: { _ in max(0, size - self.held) })
    }
}

/// Memory kept for later (a prompt cache, say) for the scheduler (a test fake): entries of `entry` bytes, dropped
/// oldest first when asked for room.
final class FakeKeptMemory: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: Int
    private let entry: Int
    private var askedFor: [Int] = []
    init(entries: Int, entry: Int) { (self.entries, self.entry) = (entries, entry) }
    var held: Int { lock.withLock { entries * entry } }
    /// The bytes each release asked for, in order.
    var asked: [Int] { lock.withLock { askedFor } }
    var memory: ReleasableMemory {
        ReleasableMemory(held: { self.held }, release: { bytes in
            self.lock.withLock {
                self.askedFor.append(bytes)
                var freed = 0
                while freed < bytes, self.entries > 0 { self.entries -= 1; freed += self.entry }
                return freed
            }
        })
    }
}

@Suite("Scheduler memory budget")
struct MemoryBudgetTests {
    /// Memory kept for later counts against the budget and gives way: a run that fits only without part of it has
    /// that part released (no more) and starts without waiting; one that fits beside it releases nothing; one bigger
    /// than the whole budget is refused as before.
    @Test(.timeLimit(.minutes(1))) // without the release, the second run would wait for memory forever
    func memoryKeptForLaterGivesWayToARun() async throws {
        let kept = FakeKeptMemory(entries: 3, entry: 200_000_000)
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 1_000_000_000, releasableMemory: kept.memory)
        let occupancy = Occupancy()
        _ = try await scheduler.submit(Self.request(.standard, bytes: 300_000_000, occupancy: occupancy), tier: .standard)
        #expect(kept.asked.isEmpty && kept.held == 600_000_000)
        _ = try await scheduler.submit(Self.request(.standard, bytes: 550_000_000, occupancy: occupancy), tier: .standard)
        #expect(kept.asked == [150_000_000], "\(kept.asked)")
        #expect(kept.held == 400_000_000)
        #expect(await scheduler.metrics.memoryWaits == 0)
        await #expect(throws: SchedulerError.self) {
            try await scheduler.submit(Self.request(.standard, bytes: 1_100_000_000, occupancy: occupancy), tier: .standard)
        }
        #expect(kept.held == 400_000_000, "a refused run releases nothing")
    }

    /// A run that would wait even with all the kept memory released leaves it be (emptying it would save no wait);
    /// once the run in its way ends, it takes only what it needs.
    @Test(.timeLimit(.minutes(1)))
    func memoryKeptForLaterStaysWhenARunWouldWaitAnyway() async throws {
        let kept = FakeKeptMemory(entries: 3, entry: 200_000_000)
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 1_000_000_000, releasableMemory: kept.memory)
        let gate = Occupancy() // used as a flag: highest > 0 once the first run may end
        let first = Task {
            try await scheduler.submit(InferenceRequest(requirements: RequestRequirements(tier: .standard), memoryBytes: 350_000_000) { _, _ in
                while gate.highest == 0 { try await Task.sleep(for: .milliseconds(1)) }
                return 1
            }, tier: .standard)
        }
        #expect(await eventually { await scheduler.memoryInUse == 350_000_000 })
        let second = Task { try await scheduler.submit(Self.request(.standard, bytes: 700_000_000, occupancy: Occupancy()), tier: .standard) }
        #expect(await eventually { await scheduler.waitingForMemoryCount == 1 })
        #expect(kept.asked.isEmpty && kept.held == 600_000_000, "\(kept.asked)")
        gate.enter(1)
        _ = try await first.value
        _ = try await second.value
        #expect(kept.asked == [300_000_000], "\(kept.asked)")
        #expect(kept.held == 200_000_000)
        #expect(await scheduler.metrics.memoryWaits == 1)
    }

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

    /// A run that binds its model's weights at a new route counts the copies from its start (predicted) and after
    /// (measured): a second run waits for room beside them, one that could never fit beside them is refused with the
    /// figures, and once the binding run ends the second runs beside the copies.
    @Test func weightCopiesCountAgainstTheBudget() async throws {
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 1_000_000_000)
        let copies = FakeWeightCopies()
        let (binds, bind) = AsyncStream<Void>.makeStream()
        let (ends, end) = AsyncStream<Void>.makeStream()
        var binding = InferenceRequest(requirements: RequestRequirements(tier: .standard), memoryBytes: 300_000_000) { _, _ in
            for await _ in binds { break }
            copies.bind(600_000_000)
            for await _ in ends { break }
            return 1
        }
        binding.weightCopies = copies.account(binding: 600_000_000)
        let first = Task { try await scheduler.submit(binding, tier: .standard) }
        #expect(await eventually { await scheduler.memoryInUse == 300_000_000 })
        #expect(await scheduler.weightCopyBytes == 600_000_000, "the prediction counts before the copies exist")
        var next = Self.request(.standard, bytes: 300_000_000, occupancy: Occupancy())
        next.weightCopies = copies.account(binding: 600_000_000)
        let second = Task { try await scheduler.submit(next, tier: .standard) }
        #expect(await eventually { await scheduler.waitingForMemoryCount == 1 }, "300 + 300 MB beside 600 MB of copies: over 1000")
        bind.yield()
        #expect(await eventually { copies.held == 600_000_000 })
        #expect(await scheduler.weightCopyBytes == 600_000_000, "measured now, not counted twice")
        var big = Self.request(.standard, bytes: 500_000_000, occupancy: Occupancy())
        big.weightCopies = copies.account(binding: 600_000_000)
        await #expect(throws: SchedulerError.dropped(reason: "needs 500 MB of memory, with 600 MB held by weight copies already, more than the budget of 1000 MB (a larger budget, a shorter request or a precision with smaller copies fits)")) {
            try await scheduler.submit(big, tier: .standard)
        }
        end.yield()
        end.finish()
        bind.finish()
        _ = try await first.value
        #expect(try await second.value.output as? Int == 300_000_000)
        #expect(await scheduler.memoryInUse == 0)
        #expect(await scheduler.waitingForMemoryCount == 0)
        #expect(await scheduler.weightCopyBytes == 600_000_000, "the copies stay with the model")
    }

    /// A model bound at int4 whose faster int8 route would copy more than the budget has room for beside the running
    /// requests stays at int4 (and says why); with room, int8 is bound.
    @Test func aRouteWhoseCopiesDoNotFitIsNotBound() async throws {
        var costs = CostModel(units: UnitCostTable(units: [
            .neuralEngine: [.int4: UnitCost(gops: 100, joulesPerGop: 0.05), .int8: UnitCost(gops: 1000, joulesPerGop: 0.05)],
        ]))
        costs.defaultQuality = QualityProfile(metric: "perplexity", loss: [.int8: 0.001, .int4: 0.001], reference: 10, source: "test")
        let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                           memoryBudget: 1_000_000_000, costs: costs)
        let workload = Workload.generation(parameters: 135_000_000, promptTokens: 32, newTokens: 64, model: "m")
        let account = WeightCopyAccount(owner: "m", held: { 100_000_000 }, adding: { $0.precision == .int8 ? 600_000_000 : 0 })
        func request(_ precision: Precision?, bytes: Int, until gate: AsyncStream<Void>? = nil) -> InferenceRequest {
            var request = InferenceRequest(requirements: RequestRequirements(tier: .critical, precision: precision, workload: workload),
                                           memoryBytes: bytes) { decision, _ in
                if let gate { for await _ in gate { break } }
                return decision
            }
            request.weightCopies = account
            return request
        }
        let (gate, open) = AsyncStream<Void>.makeStream()
        let holder = Task { try await scheduler.submit(request(.int4, bytes: 300_000_000, until: gate), tier: .critical) }
        #expect(await eventually { await scheduler.memoryInUse == 300_000_000 })
        let steered = try await scheduler.submit(request(nil, bytes: 200_000_000), tier: .critical).decision
        #expect(steered.precision == .int4 && steered.explanation.contains("stays on a bound route"), "\(steered.explanation)")
        open.finish()
        _ = try await holder.value
        let roomy = try await scheduler.submit(request(nil, bytes: 200_000_000), tier: .critical).decision
        #expect(roomy.precision == .int8, "200 + 600 MB beside 100 MB held fit in 1000: \(roomy.explanation)")
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
