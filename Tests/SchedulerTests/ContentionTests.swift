import Foundation
import Testing
@testable import Ember
import EmberTestSupport

/// Run-queue wait readings a test sets (a fake of ``RunQueueWait``).
final class FakeRunQueueWait: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds: [Int: Double]?
    var reading: [Int: Double]? { lock.withLock { seconds } }
    func set(_ value: [Int: Double]?) { lock.withLock { seconds = value } }
}

@Suite("Scheduler: learning under contention")
struct ContentionTests {
    /// A run three times slower than predicted teaches its route that it is slow, unless the time went to other
    /// work holding the CPUs: then it teaches nothing much.
    @Test func timeLostToOtherWorkIsNotTheRoutes() async throws {
        func learned(losing lost: Bool) async throws -> Double {
            let costs = CostModel(units: UnitCostTable(units: [.neuralEngine: [.int8: UnitCost(gops: 100, joulesPerGop: 0.05)]]))
            let workload = Workload(kind: "generate", batchedGigaOps: 10, sequentialGigaOps: 0)
            let predicted = try #require(costs.predict(workload, unit: .neuralEngine, precision: .int8, threads: 2, maxThreads: 2)).seconds
            let wait = FakeRunQueueWait()
            wait.set(lost ? [1: 0, 2: 0] : nil)
            let scheduler = InferenceScheduler(source: FakePowerSource(charging), configuration: PolicyConfiguration(threads: 2),
                                               costs: costs, runQueueWait: { wait.reading })
            let request = InferenceRequest(requirements: RequestRequirements(tier: .critical, workload: workload)) { _, _ in
                try await Task.sleep(for: .seconds(3 * predicted))
                // Both threads waited two predicted runs' worth (one a little less): the run lost 2 × predicted.
                if lost { wait.set([1: 2 * predicted, 2: 1.5 * predicted]) }
                return 0
            }
            let result = try await scheduler.submit(request, tier: .critical)
            #expect(result.decision.threads == 2 && result.decision.precision == .int8)
            return await scheduler.costs.correction(.neuralEngine, .int8, kind: "generate", threads: 2)
        }
        let slow = try await learned(losing: false)
        let contended = try await learned(losing: true)
        // The first observation moves the correction halfway: to ~2 for 3× slower, ~1 for 3× less the 2× lost.
        #expect(slow > 1.8, "3× slower, nothing lost: \(slow)")
        #expect(contended < 1.4, "3× slower, 2× lost to other work: \(contended)")
    }
}
