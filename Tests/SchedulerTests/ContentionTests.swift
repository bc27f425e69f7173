import Foundation
import Testing
@testable import Ember
import EmberTestSupport

/// Run-queue wait readings of a machine whose other programs held the CPUs for all of a run but `working` seconds
/// (a test fake of ``RunQueueWait``): the first reading is the run's start, each later one says thread 1 waited
/// for the rest of the time since (thread 2 for half of it).
final class FakeRunQueueWait: @unchecked Sendable {
    private let lock = NSLock()
    private var start: DispatchTime?
    let working: Double

    init(working: Double) { self.working = working }

    func reading() -> [Int: Double] {
        lock.withLock {
            let now = DispatchTime.now()
            guard let start else {
                self.start = now
                return [1: 0, 2: 0]
            }
            let lost = max(0, Double(now.uptimeNanoseconds - start.uptimeNanoseconds) / 1e9 - working)
            return [1: lost, 2: lost / 2]
        }
    }
}

@Suite("Scheduler: learning under contention")
struct ContentionTests {
    /// A run at least three times slower than predicted teaches its route that it is slow, unless the time went to
    /// other work holding the CPUs: then it teaches what it took without them, or nothing when that was most of it.
    /// (However loaded the machine running the tests is, the fake says all but the predicted time was lost, so the
    /// correction stays near 1 either way: the check does not depend on timing.)
    @Test func timeLostToOtherWorkIsNotTheRoutes() async throws {
        func learned(losing lost: Bool) async throws -> Double {
            let costs = CostModel(units: UnitCostTable(units: [.neuralEngine: [.int8: UnitCost(gops: 100, joulesPerGop: 0.05)]]))
            let workload = Workload(kind: "generate", batchedGigaOps: 10, sequentialGigaOps: 0)
            let predicted = try #require(costs.predict(workload, unit: .neuralEngine, precision: .int8, threads: 2, maxThreads: 2)).seconds
            let wait = FakeRunQueueWait(working: predicted)
            let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                               costs: costs, runQueueWait: { lost ? wait.reading() : nil })
            let request = InferenceRequest(requirements: RequestRequirements(tier: .critical, workload: workload)) { _, _ in
                try await Task.sleep(for: .seconds(3 * predicted))
                return 0
            }
            let result = try await scheduler.submit(request, tier: .critical)
            #expect(result.decision.threads == 2 && result.decision.precision == .int8)
            return await scheduler.costs.correction(.neuralEngine, .int8, kind: "generate", threads: 2)
        }
        let slow = try await learned(losing: false)
        let contended = try await learned(losing: true)
        // The first observation moves the correction halfway to what it measured, taken at most 1.5× the correction
        // (CostModel.largestObservationFactor): to 1.25 for 3× slower, to ~1 for the predicted time.
        #expect(abs(slow - 1.25) < 0.01, "3× slower or more, nothing lost: \(slow)")
        #expect(contended > 0.9 && contended < 1.1, "all but the predicted time lost to other work: \(contended)")
    }
}
