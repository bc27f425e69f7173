import Testing
@testable import EmberCore

/// The decode-step thread chooser on scripted step times: it keeps the allowed count while that is faster, takes one
/// thread when a probe of it measures faster (a core taken by another process), comes back when the core is free,
/// backs off after losing probes, and starts over when the allowed count changes.
@Suite("Step thread chooser")
struct StepThreadChooserTests {
    /// Runs `steps` steps, each taking `time(threads)` seconds; returns the threads of each.
    static func run(_ chooser: inout StepThreadChooser, allowed: Int = 2, steps: Int, time: (Int) -> Double) -> [Int] {
        (0..<steps).map { _ in
            let threads = chooser.threads(allowed: allowed)
            chooser.record(threads: threads, seconds: time(threads))
            return threads
        }
    }

    @Test func keepsTheAllowedCountWhileItIsFaster() {
        var chooser = StepThreadChooser(allowed: 2)
        let used = Self.run(&chooser, steps: 2000) { $0 == 2 ? 0.006 : 0.008 } // quiet: two threads 1.33× faster
        #expect(used.prefix(StepThreadChooser.firstProbe).allSatisfy { $0 == 2 }) // a 64-token reply never probes
        let probes = used.filter { $0 == 1 }.count
        #expect(probes > 0 && probes <= 2 * StepThreadChooser.probeSteps * (1 + 2000 / StepThreadChooser.longestWait))
        #expect(chooser.preferred == 2)
    }

    @Test func takesOneThreadWhileACoreIsBusyAndComesBack() {
        var chooser = StepThreadChooser(allowed: 2)
        _ = Self.run(&chooser, steps: 100) { $0 == 2 ? 0.006 : 0.008 }
        #expect(chooser.preferred == 2)
        // another process takes a core: two threads now 0.0105 s a step, one 0.008 (0.76×)
        let busy = Self.run(&chooser, steps: 600) { $0 == 2 ? 0.0105 : 0.008 }
        #expect(chooser.preferred == 1)
        #expect(busy.suffix(100).filter { $0 == 1 }.count >= 90)
        // the core is free again
        _ = Self.run(&chooser, steps: 600) { $0 == 2 ? 0.006 : 0.008 }
        #expect(chooser.preferred == 2)
    }

    @Test func aCloseProbeDoesNotSwitch() {
        var chooser = StepThreadChooser(allowed: 2)
        _ = Self.run(&chooser, steps: 1000) { $0 == 2 ? 0.010 : 0.009 } // one thread only 10 % faster: not enough
        #expect(chooser.preferred == 2)
    }

    @Test func oneAllowedThreadNeverProbesAndAChangeStartsOver() {
        var chooser = StepThreadChooser(allowed: 1)
        #expect(Self.run(&chooser, allowed: 1, steps: 500) { _ in 0.01 }.allSatisfy { $0 == 1 })
        chooser = StepThreadChooser(allowed: 2)
        _ = Self.run(&chooser, steps: 600) { $0 == 2 ? 0.0105 : 0.008 }
        #expect(chooser.preferred == 1)
        #expect(chooser.threads(allowed: 4) == 4) // the policy allows another count: its own measurements from scratch
        #expect(chooser.allowed == 4 && chooser.preferred == 4)
    }
}
