/// Chooses how many threads a run of like steps (a session's decode steps) takes, from the steps' measured times:
/// the count it is allowed (the policy's), or one thread when one measured faster.
///
/// On a device where another process holds a core, a step split over every core waits at each barrier for the
/// thread that shares its core: SmolLM2 int4 decode with a busy loop pinned to one of two cores ran 94-102 tok/s on
/// two threads and 124 on one (a Zen 3, see the closing notes). Nothing in the OS says so ahead of time, so the
/// chooser measures: it runs the allowed count, now and then tries the other for ``probeSteps`` steps, and takes
/// it when its median step is at most ``switchRatio`` of the recent median of the count in use. A probe that loses
/// doubles the wait for the next (``firstProbe`` steps up to ``longestWait``); a switch starts over. Every count
/// computes the same values (each output column is one thread's work), so a switch changes only the speed.
package struct StepThreadChooser: Sendable {
    /// Steps before the first probe: a short reply (or a 64-token benchmark) never pays one.
    package static let firstProbe = 64
    /// The longest wait between probes, in steps: a core taken (or freed) mid-generation is noticed within it.
    package static let longestWait = 256
    /// Steps a probe runs.
    package static let probeSteps = 2
    /// The most a probe's median may take, as a share of the count in use's recent median, to be switched to: in
    /// the case measured above one thread took 0.76-0.82 of two's time, on a quiet machine 1.3-1.4×.
    package static let switchRatio = 0.85
    /// Recent steps of the count in use that a probe is compared with.
    static let recentSteps = 8

    /// The count allowed (the policy's); the chooser picks it or 1.
    package private(set) var allowed: Int
    /// The count in use between probes.
    package private(set) var preferred: Int
    private var wait = StepThreadChooser.firstProbe
    private var untilProbe = StepThreadChooser.firstProbe
    private var recent: [Double] = []
    private var probe: [Double] = []

    package init(allowed: Int) {
        self.allowed = max(1, allowed)
        preferred = self.allowed
    }

    /// The threads the next step runs on, for a step allowed `allowed` threads (a change of it starts over).
    package mutating func threads(allowed: Int) -> Int {
        if max(1, allowed) != self.allowed { self = StepThreadChooser(allowed: allowed) }
        guard self.allowed > 1 else { return 1 }
        return untilProbe <= 0 ? other : preferred
    }

    /// Records that a step on `threads` threads took `seconds`.
    package mutating func record(threads: Int, seconds: Double) {
        guard allowed > 1, seconds.isFinite, seconds >= 0 else { return }
        if untilProbe > 0 || threads != other {
            guard threads == preferred else { return }
            recent.append(seconds)
            if recent.count > Self.recentSteps { recent.removeFirst() }
            untilProbe -= 1
            return
        }
        probe.append(seconds)
        guard probe.count >= Self.probeSteps else { return }
        if !recent.isEmpty && Self.median(probe) <= Self.switchRatio * Self.median(recent) {
            preferred = other
            recent = probe
            wait = Self.firstProbe
        } else {
            wait = min(2 * wait, Self.longestWait)
        }
        probe = []
        untilProbe = wait
    }

    /// The count a probe tries: the one not in use.
    private var other: Int { preferred == 1 ? allowed : 1 }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}
