import EmberCore
import EmberModels
import Foundation

/// One way to run a request and what it is predicted to cost.
public struct Candidate: Sendable, Equatable {
    /// The unit its matrix products run on.
    public var unit: ComputeUnit
    /// The precision its weights run at.
    public var precision: Precision
    /// Threads it runs on.
    public var threads: Int
    /// Predicted seconds, joules and quality loss.
    public var prediction: Prediction
    /// Why it was chosen (filled in for the chosen one).
    public var explanation = ""

    /// "int4 on neural-engine, 2 threads".
    public var name: String { "\(precision) on \(unit), \(threads) thread\(threads == 1 ? "" : "s")" }
}

/// The policy's optimisation: every candidate a request could run as, filtered by the budget, chosen by the tier's
/// objective. Separate from ``BackendPolicy`` so tests and `ember policy --candidates` can see every candidate.
public struct CandidateSearch: Sendable {
    /// Every candidate with a calibrated cost: allowed units × precisions × thread counts (all threads, halved down to 1).
    public let candidates: [Candidate]
    let maxThreads: Int

    /// The candidates for `workload` over `units` and `precisions` with up to `maxThreads` threads, predicted by `costs`.
    public init(workload: Workload, costs: CostModel, units: ComputeUnits, precisions: [Precision], maxThreads: Int) {
        self.maxThreads = max(1, maxThreads)
        var threadCounts: [Int] = []
        var count = self.maxThreads
        while count >= 1 {
            threadCounts.append(count)
            count = count == 1 ? 0 : max(1, count / 2)
        }
        var found: [Candidate] = []
        for unit in units.searchOrder {
            for precision in precisions {
                for threads in threadCounts {
                    guard let prediction = costs.predict(workload, unit: unit, precision: precision, threads: threads,
                                                         maxThreads: self.maxThreads) else { continue }
                    found.append(Candidate(unit: unit, precision: precision, threads: threads, prediction: prediction))
                }
            }
        }
        candidates = found
    }

    /// The candidate `rule`'s objective picks within `budget` (its quality loss when `qualityBound`, its energy cap)
    /// and `powerCap` (a fraction of the most power any candidate draws); nil when there is no candidate at all.
    /// Routes ("unit/precision") in `bound` are preferred: another must be predicted `switchingMargin` times better by
    /// the objective to be chosen (nothing bound: no preference).
    public func choose(rule: PolicyTable.TierRule, budget: PolicyTable.Budget, powerCap: (fraction: Double, why: String)?,
                       qualityBound: Bool, bound: Set<String> = [], switchingMargin: Double = 1) -> Candidate? {
        guard !candidates.isEmpty else { return nil }
        var constraints: [String] = []
        var pool = candidates
        if qualityBound {
            let within = pool.filter { $0.prediction.qualityLoss <= budget.maxQualityLoss + 1e-12 }
            // Nothing within the budget: the least loss there is.
            let least = pool.map(\.prediction.qualityLoss).min()!
            pool = within.isEmpty ? pool.filter { $0.prediction.qualityLoss <= least + 1e-12 } : within
        }
        if let cap = powerCap {
            let ceiling = cap.fraction * candidates.map(\.prediction.watts).max()!
            let within = pool.filter { $0.prediction.watts <= ceiling * 1.0001 }
            let lowest = pool.map(\.prediction.watts).min()!
            pool = within.isEmpty ? pool.filter { $0.prediction.watts <= lowest * 1.1 } : within
            constraints.append(within.isEmpty
                ? String(format: "nothing under %.1f W (%@): the least power, %.1f W", ceiling, cap.why, lowest)
                : String(format: "power ≤ %.1f W (%@)", ceiling, cap.why))
        }
        if let factor = budget.energyFactor {
            let least = pool.map(\.prediction.joules).min()!
            pool = pool.filter { $0.prediction.joules <= least * factor * 1.0001 }
            constraints.append(factor <= 1 ? "the least energy (\(budget.name) budget)"
                               : String(format: "energy ≤ %.2f× the least (%@ budget)", factor, budget.name))
        }
        var objective: String
        var chosen: Candidate
        // The objective compares predictions with a route not bound yet handicapped by the switching margin.
        let handicap = { (candidate: Candidate) -> Candidate in
            guard !bound.isEmpty, !bound.contains("\(candidate.unit.rawValue)/\(candidate.precision.rawValue)") else { return candidate }
            var handicapped = candidate
            handicapped.prediction.seconds *= switchingMargin
            handicapped.prediction.joules *= switchingMargin
            return handicapped
        }
        let pick = { (pool: [Candidate], better: (Candidate, Candidate) -> Bool) -> Candidate in
            pool.indices.min { better(handicap(pool[$0]), handicap(pool[$1])) }.map { pool[$0] }!
        }
        switch rule.objective {
        case .fastest:
            chosen = pick(pool, Self.faster)
            objective = "fastest"
        case .leastEnergy:
            let inTime = rule.latencyTarget.map { target in pool.filter { $0.prediction.seconds <= target } } ?? pool
            if inTime.isEmpty {
                chosen = pick(pool, Self.faster)
                objective = String(format: "fastest (nothing within the %.3g s target)", rule.latencyTarget ?? 0)
            } else {
                chosen = pick(inTime, Self.thriftier)
                objective = rule.latencyTarget.map { String(format: "least energy within %.3g s", $0) } ?? "least energy"
            }
        }
        if !bound.isEmpty, !bound.contains("\(chosen.unit.rawValue)/\(chosen.precision.rawValue)") {
            constraints.append(String(format: "worth binding a new route (over %.0f%% better)", (switchingMargin - 1) * 100))
        }
        chosen.explanation = explain(chosen, objective: objective, constraints: constraints, budget: budget, qualityBound: qualityBound)
        return chosen
    }

    /// Less time; equal times: less energy, then less loss.
    static func faster(_ a: Candidate, _ b: Candidate) -> Bool {
        let (x, y) = (a.prediction, b.prediction)
        if abs(x.seconds - y.seconds) > 1e-9 * max(x.seconds, y.seconds) { return x.seconds < y.seconds }
        if abs(x.joules - y.joules) > 1e-9 * max(x.joules, y.joules) { return x.joules < y.joules }
        return x.qualityLoss < y.qualityLoss
    }

    /// Less energy; equal energy: less time, then less loss.
    static func thriftier(_ a: Candidate, _ b: Candidate) -> Bool {
        let (x, y) = (a.prediction, b.prediction)
        if abs(x.joules - y.joules) > 1e-6 * max(x.joules, y.joules) { return x.joules < y.joules }
        if abs(x.seconds - y.seconds) > 1e-9 * max(x.seconds, y.seconds) { return x.seconds < y.seconds }
        return x.qualityLoss < y.qualityLoss
    }

    /// "fastest: int4 on neural-engine, 2 threads — 8.4× faster than fp32 on gpu, 12 % of its energy; +0.26 %
    /// perplexity, budget 1 %".
    private func explain(_ chosen: Candidate, objective: String, constraints: [String], budget: PolicyTable.Budget,
                         qualityBound: Bool) -> String {
        var text = "\(objective): \(chosen.name)"
        // Against the best full-precision way to run it, when the choice is not that.
        if let fp32 = candidates.filter({ $0.precision == .fp32 && $0.threads == maxThreads }).min(by: Self.faster),
           fp32 != chosen {
            let speed = fp32.prediction.seconds / max(chosen.prediction.seconds, 1e-12)
            let energy = chosen.prediction.joules / max(fp32.prediction.joules, 1e-12)
            text += String(format: " — %.1f× %@ than fp32 on %@, %.0f%% of its energy", speed >= 1 ? speed : 1 / speed,
                           speed >= 1 ? "faster" : "slower", fp32.unit.rawValue, energy * 100)
        }
        if qualityBound {
            text += String(format: "; quality loss %.2f%%, budget %g%%", chosen.prediction.qualityLoss * 100, budget.maxQualityLoss * 100)
        } else {
            text += "; \(chosen.precision) asked for"
        }
        if !constraints.isEmpty { text += "; " + constraints.joined(separator: "; ") }
        return text
    }
}
