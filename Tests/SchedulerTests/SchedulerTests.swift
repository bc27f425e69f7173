import Foundation
import Testing
@testable import Ember
import EmberTestSupport

/// Counts executions across tasks (a test helper, not a fake of anything).
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}

/// A source whose state the test sets (a fake power source).
final class FakePowerSource: PowerSource, @unchecked Sendable {
    private let lock = NSLock()
    private var state: PowerState
    private var continuation: AsyncStream<PowerState>.Continuation?
    init(_ state: PowerState) { self.state = state }
    func current() -> PowerState { lock.withLock { state } }
    func changes() -> AsyncStream<PowerState> {
        AsyncStream { continuation in lock.withLock { self.continuation = continuation } }
    }
    func set(_ newState: PowerState) {
        let target = lock.withLock { () -> AsyncStream<PowerState>.Continuation? in
            state = newState
            return continuation
        }
        target?.yield(newState)
    }
}

/// A request that reports the precision it ran at.
func precisionRequest(_ tier: Tier, signature: String? = nil, deadline: Date? = nil, runs: Counter? = nil,
                      work: Duration = .zero) -> InferenceRequest {
    InferenceRequest(requirements: RequestRequirements(tier: tier), signature: signature, deadline: deadline) { decision, _ in
        runs?.increment()
        if work > .zero { try await Task.sleep(for: work) }
        return decision.precision
    }
}

let battery50 = PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false)
let charging = PowerState(batteryLevel: 0.9, charging: .charging, externalPower: true)

@Suite("Inference scheduler")
struct SchedulerTests {
    /// charging → 50% → 15% → low-power → thermal serious → recovery, driven by a scripted timeline on a virtual clock.
    @Test func scriptedTimelineDrivesDecisions() async throws {
        let clock = FakeManualClock()
        let timeline = ScriptedPowerTimeline(steps: [
            .init(at: 0, battery: 0.9, charging: .charging),
            .init(at: 10, battery: 0.5, charging: .unplugged),
            .init(at: 20, battery: 0.15),
            .init(at: 30, lowPower: true),
            .init(at: 40, battery: 0.5, lowPower: false, thermal: .serious),
            .init(at: 50, battery: 0.6, charging: .charging, thermal: .nominal),
        ], clock: clock)
        let scheduler = InferenceScheduler(source: timeline, configuration: PolicyConfiguration(threads: 2), costs: .gradedForTests)
        func precision(_ tier: Tier) async throws -> Precision {
            try await scheduler.submit(precisionRequest(tier), tier: tier).output as! Precision
        }
        func move(to time: Double) async {
            for _ in 0..<1000 where clock.sleeping == 0 { await Task.yield() }
            clock.advance(to: time)
            let expected = timeline.state(at: time)
            #expect(await eventually { await scheduler.powerState.sameConditions(as: expected) }, "state at \(time)")
        }

        for tier in Tier.allCases { #expect(try await precision(tier) == .fp32) }
        await move(to: 10)
        for tier in Tier.allCases { #expect(try await precision(tier) == .int8) }
        await move(to: 20)
        #expect(try await precision(.critical) == .int4)
        let standard = Task { try await precision(.standard) }
        let background = Task { try await precision(.background) }
        #expect(await eventually { await scheduler.deferredCount == 2 })
        await move(to: 30)
        #expect(try await precision(.critical) == .int4)
        #expect(await scheduler.deferredCount == 2)
        await move(to: 40) // 50% again, thermal serious: standard drains at int8 on one thread (power capped); background waits
        #expect(try await standard.value == .int8)
        #expect(await scheduler.deferredCount == 1)
        await move(to: 50) // recovery on the charger: background drains at full precision
        #expect(try await background.value == .fp32)
        let metrics = await scheduler.metrics
        #expect(metrics.deferrals["battery at or below 20%"] == 2)
        #expect(metrics.drops.isEmpty)
    }

    @Test func identicalRequestsRunOnce() async throws {
        // A window no run of the suite outlasts: on a loaded 2-core machine the ten submissions once spread over
        // 116 s (the cooperative threads busy with other suites), and a 10 s window let one of them run again.
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging), coalescingWindow: 600)
        let runs = Counter()
        let results = try await withThrowingTaskGroup(of: InferenceResult.self) { group in
            for index in 0..<10 {
                group.addTask {
                    try await scheduler.submit(precisionRequest(index == 9 ? .critical : .background, signature: "minilm|hello", runs: runs,
                                                                work: .milliseconds(30)), tier: index == 9 ? .critical : .background)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 10)
        #expect(runs.count == 1)
        #expect(results.filter(\.coalesced).count == 9)
        #expect(await scheduler.metrics.coalesced == 9)
    }

    @Test func cancellingADeferredRequestEndsIt() async throws {
        let source = FakePowerSource(PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false))
        let scheduler = InferenceScheduler(source: source)
        let runs = Counter()
        let task = Task { try await scheduler.submit(precisionRequest(.background, runs: runs), tier: .background) }
        #expect(await eventually { await scheduler.deferredCount == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(await eventually { await scheduler.deferredCount == 0 })
        source.set(charging)
        try await Task.sleep(for: .milliseconds(20))
        #expect(runs.count == 0, "a cancelled request never runs")
        #expect(await scheduler.metrics.cancellations == 1)
    }

    @Test func cancellingARunningRequestEndsItsCaller() async throws {
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging))
        let task = Task { try await scheduler.submit(precisionRequest(.critical, work: .seconds(5)), tier: .critical) }
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    /// A caller that cancels hears CancellationError at once, even while the scheduler's actor is
    /// busy (here held on purpose by a deferral callback that blocks): on a loaded machine the
    /// actor's turn can be seconds away, and the caller must not wait for it nor get a late result.
    @Test func cancellationReachesTheCallerWhileTheSchedulerIsBusy() async throws {
        let source = FakePowerSource(PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false))
        let scheduler = InferenceScheduler(source: source)
        let runs = Counter()
        let running = Task {
            try await scheduler.submit(InferenceRequest(requirements: RequestRequirements(tier: .critical)) { _, _ in
                runs.increment()
                for _ in 0..<60_000 { try await Task.sleep(for: .milliseconds(2)) }
                return 0
            }, tier: .critical)
        }
        #expect(await eventually { runs.count == 1 }, "the critical request runs")
        let hold = DispatchSemaphore(value: 0), holding = Counter()
        defer { hold.signal() }
        let blocker = Task {
            try await scheduler.submit(precisionRequest(.background), tier: .background, onPiece: nil, onDeferred: { _ in
                holding.increment()
                hold.wait() // blocks the actor until the test lets go
            })
        }
        #expect(await eventually { holding.count == 1 }, "the actor is held")
        running.cancel()
        let answered = Counter()
        let watcher = Task {
            if case .failure(let error) = await running.result, error is CancellationError { answered.increment() }
        }
        // Generous: the held actor occupies one of the two cooperative threads, and in a full run a synchronous
        // model test may hold the other for seconds. The old code never answers until the actor is let go.
        #expect(await eventually(seconds: 60) { answered.count == 1 }, "the caller heard CancellationError while the actor was held")
        hold.signal()
        _ = await watcher.value
        blocker.cancel()
        _ = await blocker.result
        #expect(await eventually { await scheduler.metrics.cancellations == 2 }, "both cancellations recorded once the actor is free")
    }

    /// A request whose only caller left is being cancelled: an identical request arriving meanwhile
    /// must run afresh, not join the cancelled run and inherit its CancellationError.
    @Test func anIdenticalRequestDoesNotJoinACancelledRun() async throws {
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging), coalescingWindow: 600)
        let runs = Counter()
        let request = InferenceRequest(requirements: RequestRequirements(tier: .standard), signature: "same") { _, _ in
            runs.increment()
            if runs.count == 1 {
                while true { try await Task.sleep(for: .milliseconds(2)) } // the first run ends only by cancellation
            }
            return runs.count
        }
        let first = Task { try await scheduler.submit(request, tier: .standard) }
        #expect(await eventually { runs.count == 1 }, "the first run started")
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        // The caller is answered at once; the scheduler hears of it on its next turn. (Before that, an identical
        // request would rightly join the still-running run, which this test's body never ends.)
        #expect(await eventually { await scheduler.metrics.cancellations == 1 })
        let second = try await scheduler.submit(request, tier: .standard)
        #expect(second.output as? Int == 2)
        #expect(!second.coalesced)
    }

    @Test func deadlineAndOverflowDropWithReasons() async throws {
        let scheduler = InferenceScheduler(source: FixedPowerSource(PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false)),
                                           deferredCapacity: 2)
        let late = Task { try await scheduler.submit(precisionRequest(.standard, deadline: Date().addingTimeInterval(0.05)), tier: .standard) }
        await #expect(throws: SchedulerError.dropped(reason: "deadline passed")) { try await late.value }
        let first = Task { try await scheduler.submit(precisionRequest(.background), tier: .background) }
        #expect(await eventually { await scheduler.deferredCount == 1 })
        let second = Task { try await scheduler.submit(precisionRequest(.background), tier: .background) }
        #expect(await eventually { await scheduler.deferredCount == 2 })
        let third = Task { try await scheduler.submit(precisionRequest(.standard), tier: .standard) }
        await #expect(throws: SchedulerError.dropped(reason: "deferred queue full")) { try await first.value }
        #expect(await scheduler.deferredCount == 2)
        second.cancel()
        third.cancel()
        _ = await (second.result, third.result)
        let drops = await scheduler.metrics.drops
        #expect(drops["deadline passed"] == 1 && drops["deferred queue full"] == 1)
    }

    @Test func compatibleRequestsRunAsOneBatch() async throws {
        // Wide: in a loaded test run the five child tasks may wait for a cooperative thread between submissions.
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging), batchingWindow: 2)
        let batches = Counter()
        let results = try await withThrowingTaskGroup(of: (Int, InferenceResult).self) { group in
            for index in 0..<5 {
                group.addTask {
                    let request = InferenceRequest(
                        requirements: RequestRequirements(tier: .standard),
                        batch: .init(key: "embed", input: index) { inputs, _, _ in
                            batches.increment()
                            return inputs.map { ($0 as! Int) * 10 }
                        }) { _, _ in fatalError("batched requests run through the batch") }
                    return (index, try await scheduler.submit(request, tier: .standard))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(batches.count == 1)
        for (index, result) in results {
            #expect(result.output as? Int == index * 10)
            #expect(result.batchSize == 5)
        }
    }

    /// One caller of a running batch leaving must not cancel the batch for the others.
    @Test func cancellingOneCallerOfABatchKeepsTheOthers() async throws {
        // Both wait in the deferred queue first, so they drain into one batch in one step, whatever the timing.
        let source = FakePowerSource(PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false))
        let scheduler = InferenceScheduler(source: source, batchingWindow: 0.05)
        let started = Counter()
        let release = Counter()
        func request(_ index: Int) -> InferenceRequest {
            InferenceRequest(requirements: RequestRequirements(tier: .standard),
                             batch: .init(key: "held", input: index) { inputs, _, _ in
                                 started.increment()
                                 while release.count == 0 { try await Task.sleep(for: .milliseconds(2)) } // throws if cancelled
                                 return inputs.map { ($0 as! Int) + 100 }
                             }) { _, _ in fatalError("batched requests run through the batch") }
        }
        let leaving = Task { try await scheduler.submit(request(1), tier: .standard) }
        let staying = Task { try await scheduler.submit(request(2), tier: .standard) }
        #expect(await eventually { await scheduler.deferredCount == 2 }, "both wait for power")
        source.set(charging)
        #expect(await eventually { started.count == 1 }, "the batch started")
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        release.increment()
        let result = try await staying.value
        #expect(result.output as? Int == 102 && result.batchSize == 2)
        #expect(started.count == 1)
    }

    @Test func backgroundWorkYieldsToCriticalAtCheckpoints() async throws {
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging))
        let order = OrderLog()
        // Neither side relies on wall-clock luck: a background thread at idle
        // priority may get no CPU at all on a loaded machine. The background
        // request keeps going until the critical one has ended; the critical one
        // holds its route until a background checkpoint has yielded to it.
        let background = Task {
            try await scheduler.submit(InferenceRequest(requirements: RequestRequirements(tier: .background)) { _, context in
                for layer in 0..<4_000 {
                    await context.checkpoint()
                    order.add("b\(layer)")
                    if layer >= 3, order.all.contains("critical-end") { break }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return 0
            }, tier: .background)
        }
        try await Task.sleep(for: .milliseconds(20))
        _ = try await scheduler.submit(InferenceRequest(requirements: RequestRequirements(tier: .critical)) { _, _ in
            order.add("critical-start")
            var waited = 0
            while await scheduler.metrics.preemptions == 0, waited < 24_000 { // ~2 min: an idle-class task may wait long for a core
                try await Task.sleep(for: .milliseconds(5))
                waited += 1
            }
            order.add("critical-end")
            return 1
        }, tier: .critical)
        _ = try await background.value
        let log = order.all
        let start = log.firstIndex(of: "critical-start")!, end = log.firstIndex(of: "critical-end")!
        // A layer already past its checkpoint may finish; no new one starts while critical work runs.
        #expect(end - start - 1 <= 1, "background layers ran while the critical request ran: \(log)")
        #expect(await scheduler.metrics.preemptions >= 1)
    }

    /// Thousands of requests, random tiers, signatures, state flips and cancellations:
    /// every submission ends exactly once, and nothing is left waiting.
    @Test func stressEveryRequestEndsExactlyOnce() async throws {
        let source = FakePowerSource(charging)
        let scheduler = InferenceScheduler(source: source, coalescingWindow: 0.01, deferredCapacity: 64)
        let states = [charging, battery50, PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false),
                      PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false, lowPowerMode: true),
                      PowerState(batteryLevel: 0.5, charging: .unplugged, externalPower: false, thermal: .critical)]
        let total = 2000
        var tasks: [Task<String, Never>] = []
        var generator = SplitMix64(seed: 2024)
        for index in 0..<total {
            let tier = Tier.allCases[Int(generator.next() % 3)]
            let signature = generator.next() % 4 == 0 ? "sig-\(generator.next() % 20)" : nil
            let deadline = generator.next() % 10 == 0 ? Date().addingTimeInterval(0.02) : nil
            let request = precisionRequest(tier, signature: signature, deadline: deadline, work: .microseconds(Int(generator.next() % 300)))
            tasks.append(Task {
                do {
                    _ = try await scheduler.submit(request, tier: tier)
                    return "result"
                } catch is CancellationError {
                    return "cancelled"
                } catch let error as SchedulerError {
                    return "\(error)"
                } catch {
                    return "error: \(error)"
                }
            })
            if generator.next() % 7 == 0 { tasks[Int(generator.next() % UInt64(tasks.count))].cancel() }
            if index % 100 == 99 {
                source.set(states[Int(generator.next() % UInt64(states.count))])
                await Task.yield()
            }
        }
        source.set(charging) // recovery: everything still deferred drains
        var outcomes: [String: Int] = [:]
        for task in tasks { outcomes[await task.value, default: 0] += 1 }
        #expect(outcomes.values.reduce(0, +) == total, "every submission ended once: \(outcomes)")
        #expect(outcomes.keys.allSatisfy { $0 == "result" || $0 == "cancelled" || $0.hasPrefix("dropped") }, "\(outcomes)")
        #expect(await eventually { await scheduler.deferredCount == 0 })
    }
}

final class OrderLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []
    func add(_ entry: String) { lock.withLock { entries.append(entry) } }
    var all: [String] { lock.withLock { entries } }
}

@Suite("Scheduler: streaming, promotion, variants")
struct SchedulerExtrasTests {
    @Test func streamingDeliversPiecesAndMeasuresTheirRate() async throws {
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging))
        let request = InferenceRequest(requirements: RequestRequirements(tier: .critical)) { _, context in
            for token in ["Hello", ",", " world"] {
                context.emit(token)
                try await Task.sleep(for: .milliseconds(2))
            }
            context.report(energy: EnergyEstimate(joules: 0.5, source: .modelled))
            return 3
        }
        var pieces: [String] = []
        for try await piece in scheduler.stream(request, tier: .critical) { pieces.append(piece) }
        #expect(pieces == ["Hello", ",", " world"])
        let record = try #require(await scheduler.metrics.records.last)
        #expect((record.piecesPerSecond ?? 0) > 0)
        #expect(record.energy == EnergyEstimate(joules: 0.5, source: .modelled))
    }

    /// A batch and a run shared by coalesced callers each count their energy once in the total,
    /// while every caller's record carries the energy of the run it was part of.
    @Test func energyTotalCountsEachRunOnce() async throws {
        let source = FakePowerSource(PowerState(batteryLevel: 0.1, charging: .unplugged, externalPower: false))
        let scheduler = InferenceScheduler(source: source, coalescingWindow: 600, batchingWindow: 0.05)
        func batched(_ index: Int) -> InferenceRequest {
            InferenceRequest(requirements: RequestRequirements(tier: .standard),
                             batch: .init(key: "energy", input: index) { inputs, _, context in
                                 context.report(energy: EnergyEstimate(joules: 0.5, source: .modelled))
                                 return inputs
                             }) { _, _ in fatalError("batched requests run through the batch") }
        }
        let members = (0..<3).map { index in Task { try await scheduler.submit(batched(index), tier: .standard) } }
        #expect(await eventually { await scheduler.deferredCount == 3 }, "all three wait, then drain as one batch")
        source.set(charging)
        for member in members { #expect(try await member.value.batchSize == 3) }
        let shared = InferenceRequest(requirements: RequestRequirements(tier: .standard), signature: "same") { _, context in
            context.report(energy: EnergyEstimate(joules: 0.25, source: .modelled))
            return 0
        }
        _ = try await scheduler.submit(shared, tier: .standard)
        #expect(try await scheduler.submit(shared, tier: .standard).coalesced)
        let metrics = await scheduler.metrics
        #expect(metrics.records.compactMap(\.energy?.joules) == [0.5, 0.5, 0.5, 0.25, 0.25])
        #expect(metrics.energy == EnergyEstimate(joules: 0.75, source: .modelled))
        #expect(metrics.executions == 2)
    }

    @Test func higherTierJoinerPromotesARunningSharedRequest() async throws {
        // A wide window: on a loaded machine the idle-priority request may take long to start.
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging), coalescingWindow: 60)
        let seen = OrderLog()
        let request = InferenceRequest(requirements: RequestRequirements(tier: .background), signature: "same") { _, context in
            // Runs until it sees the promotion (or gives up after ~2 min), so a
            // loaded machine cannot end the request before the joiner arrives.
            for _ in 0..<60_000 {
                seen.add(context.qos.description)
                if context.qos != .background { break }
                try await Task.sleep(for: .milliseconds(2))
            }
            return 0
        }
        let first = Task { try await scheduler.submit(request, tier: .background) }
        #expect(await eventually { !seen.all.isEmpty }, "the shared request started")
        let joined = try await scheduler.submit(request, tier: .critical)
        _ = try await first.value
        #expect(joined.coalesced)
        #expect(seen.all.first == "background")
        #expect(seen.all.last == "userInitiated", "the running request moved up to the joiner's class")
    }

    /// A requantized variant's blocks go back to the system once its packed or interleaved copy is made (they only
    /// fed it), and are written again, the same bytes, when something reads them in place; from then on they stay.
    @Test func requantizedBlocksGoBackOnceCopiedAndComeBackTheSame() throws {
        var generator = SplitMix64(seed: 3)
        let values = try Tensor(shape: [40, 96], values: (0..<(40 * 96)).map { _ in generator.nextUnitFloat() - 0.5 })
        let weights = try WeightMatrix(values, as: .q4_0)
        let reference = try WeightMatrix(try weights.fp32(), as: .q8_0) // the blocks int8 must be
        let fresh = try WeightMatrix(values, as: .q4_0)
        let int8 = try fresh.variant(for: .int8)
        #expect(int8.holdsBlocks && fresh.heldCopyBytes == int8.byteCount)
        _ = try int8.packed()
        #expect(!int8.holdsBlocks, "given back once packed")
        #expect(fresh.heldCopyBytes == WeightCopy.packed.byteCount(type: .q8_0, rows: 40, columns: 96),
                "only the packed copy is held: \(fresh.heldCopyBytes)")
        let dequantized = try int8.fp32().scalars() // written again to convert, then given back again
        #expect(dequantized == (try reference.fp32().scalars()))
        #expect(!int8.holdsBlocks)
        #expect(Array(int8.bytes) == Array(reference.bytes), "read in place: the same blocks again")
        #expect(int8.holdsBlocks)
        let int4 = try reference.variant(for: .int4)
        #expect(int4.type == .q4_1)
        _ = int4.bytes
        _ = try int4.interleaved()
        #expect(int4.holdsBlocks, "once read in place they stay")
        // Smoothed weights (scaled columns) keep theirs: their fp32 copy would not write the same blocks again.
        let smoothed = try WeightMatrix(values, as: .q8_0, scalePerRow: true,
                                        activationColumnScales: try Tensor(shape: [96], values: [Float](repeating: 2, count: 96)))
        let smoothedInt4 = try smoothed.variant(for: .int4)
        _ = try smoothedInt4.packed()
        #expect(smoothedInt4.holdsBlocks)
    }

    @Test func oneWeightFileServesEveryPrecision() throws {
        var generator = SplitMix64(seed: 1)
        let values = try Tensor(shape: [48, 64], values: (0..<(48 * 64)).map { _ in generator.nextUnitFloat() - 0.5 })
        let weights = try WeightMatrix(values, as: .q4_1)
        let int8 = try weights.variant(for: .int8)
        #expect(int8.type == .q8_0)
        #expect(try weights.variant(for: .int8) === int8, "derived once, then cached")
        #expect(!weights.hasFP32Copy, "int8 is requantized a row at a time: no fp32 copy of the matrix is made or kept")
        let viaFP32 = try WeightMatrix(try weights.fp32(), as: .q8_0)
        #expect(Array(int8.bytes) == Array(viaFP32.bytes), "the same blocks as quantizing the whole dequantized matrix")
        #expect(try weights.variant(for: .int4) === weights)
        #expect(try weights.variant(for: .fp32).type == .f32)
        let half = try weights.variant(for: .fp16)
        let (rounded, exact) = (try half.fp32().scalars(), try weights.fp32().scalars())
        #expect(half.type == .f16)
        #expect(zip(rounded, exact).allSatisfy { abs($0 - $1) <= abs($1) / 2048 }, "each value to f16's nearest (half an ulp)")
        let brain = try WeightMatrix(try weights.fp32(), as: .bf16)
        #expect(try brain.variant(for: .fp16) === brain, "bf16 weights are fp16 as they are")
        let x = try Tensor(shape: [2, 64], values: (0..<128).map { _ in generator.nextUnitFloat() })
        let battery = BackendPolicy.decide(request: RequestRequirements(tier: .critical), state: battery50, costs: .gradedForTests)
        let result = try TestCompute.context.matmul(x, weights, units: battery.computeUnits, precision: battery.precision, qos: battery.qos)
        #expect(result.placement.type == .q8_0, "the decision's int8 picks the int8 variant")
        let charged = BackendPolicy.decide(request: RequestRequirements(tier: .critical), state: charging, costs: .gradedForTests)
        #expect(try TestCompute.context.matmul(x, weights, units: charged.computeUnits, precision: charged.precision).placement.unit == .gpu)
    }
}

@Suite("Scheduler: coalescing window")
struct CoalescingWindowTests {
    @Test func aDuplicateJustAfterCompletionGetsTheSameResult() async throws {
        // A wide window (it counts from the first submission): under a loaded test run a utility-class
        // request has waited more than 10 s for a core beside the model tests and two busy loops.
        let scheduler = InferenceScheduler(source: FixedPowerSource(charging), coalescingWindow: 300)
        let runs = Counter()
        let first = try await scheduler.submit(precisionRequest(.standard, signature: "s", runs: runs), tier: .standard)
        let second = try await scheduler.submit(precisionRequest(.standard, signature: "s", runs: runs), tier: .standard)
        #expect(runs.count == 1)
        #expect(!first.coalesced && second.coalesced)
        let late = InferenceScheduler(source: FixedPowerSource(charging), coalescingWindow: 0.01)
        _ = try await late.submit(precisionRequest(.standard, signature: "s", runs: runs), tier: .standard)
        try await Task.sleep(for: .milliseconds(30))
        _ = try await late.submit(precisionRequest(.standard, signature: "s", runs: runs), tier: .standard)
        #expect(runs.count == 3, "outside the window it runs again")
    }
}
