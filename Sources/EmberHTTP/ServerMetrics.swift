import Ember
import Foundation
import Prometheus

/// What `GET /metrics` reports, in Prometheus's text format (swift-prometheus): requests by endpoint and status,
/// tokens generated, the last generation's tokens per second, requests waiting and running, decisions by precision
/// and unit, joules by source (measured or modelled), the memory the scheduler's budget counts, and what the prompt
/// cache held and saved.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let tokens: Counter
    private let promptTokens: Counter
    private let joulesMeasured: Counter
    private let joulesModelled: Counter
    private let tokensPerSecond: Gauge
    private let inFlight: Gauge
    private let queueDepth: Gauge
    private let memoryInUse: Gauge
    private let weightCopies: Gauge
    private let memoryBudget: Gauge
    private let promptCacheBytes: Gauge
    private let schedulerCounters: [String: Counter]
    private let seen = SeenCounts()

    init() {
        tokens = Self.counter(registry, "ember_generated_tokens_total", "Tokens generated (completion tokens).")
        promptTokens = Self.counter(registry, "ember_prompt_tokens_total", "Prompt tokens read.")
        let joules = "Energy the runs reported, in joules, by source."
        joulesMeasured = Self.counter(registry, "ember_energy_joules_total", joules, labels: [("source", "measured")])
        joulesModelled = Self.counter(registry, "ember_energy_joules_total", joules, labels: [("source", "modelled")])
        tokensPerSecond = registry.makeGauge(descriptor: Self.name("ember_tokens_per_second", "Decode speed of the last finished generation."))
        inFlight = registry.makeGauge(descriptor: Self.name("ember_requests_in_flight", "Requests received and not yet answered."))
        queueDepth = registry.makeGauge(descriptor: Self.name("ember_scheduler_queue_depth",
                                                              "Requests the scheduler holds: deferred or waiting for memory."))
        memoryInUse = registry.makeGauge(descriptor: Self.name("ember_memory_in_use_bytes",
                                                               "Bytes the running requests need at most (KV caches and buffers)."))
        weightCopies = registry.makeGauge(descriptor: Self.name("ember_weight_copy_bytes",
                                                                "Bytes of weight copies the models hold (other precisions, kernel layouts) or are binding."))
        memoryBudget = registry.makeGauge(descriptor: Self.name("ember_memory_budget_bytes",
                                                                "The working-memory budget both of the above count against (0: none)."))
        promptCacheBytes = registry.makeGauge(descriptor: Self.name("ember_prompt_cache_bytes",
                                                                    "Bytes of finished generations' KV caches kept for later prompts (the budget counts them)."))
        var counters: [String: Counter] = [:]
        for (name, help) in [("cancellations", "Requests whose caller went away before they ended."),
                             ("deferrals", "Times the power policy deferred a request."),
                             ("drops", "Requests dropped (by the policy, a deadline or a full queue)."),
                             ("memory_waits", "Runs that waited for memory under the budget before starting.")] {
            counters[name] = Self.counter(registry, "ember_scheduler_\(name)_total", help)
        }
        counters["decode_steps"] = Self.counter(registry, "ember_decode_steps_total", "Batched decode steps run.")
        counters["decode_sequence_steps"] = Self.counter(registry, "ember_decode_sequence_steps_total",
                                                         "Tokens decoded by batched steps (divided by the steps: the mean batch).")
        counters["prompt_cache_hits"] = Self.counter(registry, "ember_prompt_cache_hits_total",
                                                     "Prompts that started from a prefix the prompt cache held.")
        counters["prompt_cache_tokens"] = Self.counter(registry, "ember_prompt_cache_tokens_total",
                                                       "Prompt tokens restored from the prompt cache instead of computed.")
        schedulerCounters = counters
    }

    /// A metric's whole name (its unit already in it, as `_total`) and help text, as swift-prometheus 2.4 describes one.
    private static func name(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// The counter `name` with `labels` (the same one each time it is asked for).
    private static func counter(_ registry: PrometheusCollectorRegistry, _ name: String, _ help: String,
                                labels: [(String, String)] = []) -> Counter {
        registry.makeCounter(descriptor: Self.name(name, help), labels: labels)
    }

    /// One answered request.
    func answered(endpoint: String, status: Int) {
        Self.counter(registry, "ember_http_requests_total", "HTTP requests answered, by endpoint and status.",
                     labels: [("endpoint", endpoint), ("status", String(status))]).increment()
    }

    func started() { inFlight.increment(by: 1) }
    func ended() { inFlight.decrement(by: 1) }

    /// A finished run: its decision, tokens and energy.
    func ran<Output>(_ completion: Completion<Output>, promptTokens prompt: Int, generatedTokens generated: Int) {
        Self.counter(registry, "ember_decisions_total", "Requests run, by the policy's precision and compute units.",
                     labels: [("precision", completion.decision.precisionName), ("units", completion.decision.computeUnits.description)]).increment()
        promptTokens.increment(by: Int64(prompt))
        if generated > 0 { tokens.increment(by: Int64(generated)) }
        if let rate = completion.piecesPerSecond { tokensPerSecond.set(to: rate) }
        if let energy = completion.energy, energy.joules.isFinite, energy.joules > 0 {
            (energy.source.rawValue == "measured" ? joulesMeasured : joulesModelled).increment(by: energy.joules)
        }
    }

    /// The scheduler's memory as `GET /metrics` reports it: bytes the running requests need, bytes of weight copies,
    /// the budget (nil: none), and the prompt cache's bytes.
    struct Memory {
        var inUse: Int
        var weightCopies: Int
        var budget: Int?
        var promptCache = 0
    }

    /// The text of `GET /metrics`, with the scheduler's queue depth, memory and counters, the batcher's steps and the
    /// prompt cache's counts read now.
    func text(queueDepth depth: Int, memory: Memory, scheduler: SchedulerMetrics, batcher: ContinuousBatcher,
              promptCache: PromptCache.Statistics?) -> String {
        queueDepth.set(to: Double(depth))
        memoryInUse.set(to: Double(memory.inUse))
        weightCopies.set(to: Double(memory.weightCopies))
        memoryBudget.set(to: Double(memory.budget ?? 0))
        promptCacheBytes.set(to: Double(memory.promptCache))
        let steps = batcher.steps
        let now = ["cancellations": scheduler.cancellations, "deferrals": scheduler.deferrals.values.reduce(0, +),
                   "drops": scheduler.drops.values.reduce(0, +), "memory_waits": scheduler.memoryWaits,
                   "decode_steps": steps.count, "decode_sequence_steps": steps.sequences,
                   "prompt_cache_hits": promptCache?.hits ?? 0, "prompt_cache_tokens": promptCache?.reusedTokens ?? 0]
        for (name, delta) in seen.advance(to: now) where delta > 0 { schedulerCounters[name]?.increment(by: Int64(delta)) }
        return registry.emitToString()
    }
}

/// The scheduler's counts as last reported, so its totals reach the counters as increments.
final class SeenCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var last: [String: Int] = [:]

    /// How much each count grew since the last call.
    func advance(to now: [String: Int]) -> [String: Int] {
        lock.withLock {
            var deltas: [String: Int] = [:]
            for (name, value) in now {
                deltas[name] = max(0, value - (last[name] ?? 0))
                last[name] = max(value, last[name] ?? 0)
            }
            return deltas
        }
    }
}
