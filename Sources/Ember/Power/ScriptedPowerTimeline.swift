import EmberCore
import EmberModels
import Foundation

/// A clock a timeline runs on: the real one, or a virtual one in tests.
public protocol PowerClock: Sendable {
    /// Seconds since some fixed start.
    func now() -> Double
    /// Returns once `now() >= time` (or the task is cancelled).
    func sleep(until time: Double) async
}

/// The monotonic wall clock.
public struct SystemPowerClock: PowerClock {
    private let start = DispatchTime.now().uptimeNanoseconds
    /// A clock whose zero is now.
    public init() {}
    /// Seconds since this clock was made (monotonic).
    public func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
    /// Returns once ``now()`` reaches `time` seconds, at once if it already has, or early if the task is cancelled.
    public func sleep(until time: Double) async {
        let wait = time - now()
        if wait > 0 { try? await Task.sleep(for: .seconds(wait)) }
    }
}

/// A power state that changes on a script: tests, demos, and app developers
/// who want to see their app under a draining battery on a desktop.
///
/// JSON: `{"steps": [{"at": 0, "battery": 1.0, "charging": "charging"},
/// {"at": 30, "battery": 0.5, "charging": "unplugged"}, {"at": 60,
/// "lowPower": true}, {"at": 90, "thermal": "serious"}]}` — each step changes
/// only the fields it names, at `at` seconds after the timeline starts.
public final class ScriptedPowerTimeline: PowerSource, @unchecked Sendable {
    /// One change of the script: at `at` seconds, each field that is not nil takes its value; nil fields keep theirs.
    public struct Step: Sendable, Codable, Equatable {
        /// Seconds after the timeline starts, ≥ 0.
        public var at: Double
        /// Battery level 0…1, nil to leave it.
        public var battery: Double?
        /// Charging state, nil to leave it; setting it also sets external power (on unless `.unplugged`).
        public var charging: PowerState.Charging?
        /// Whether external power is connected, nil to leave it; applied after `charging`.
        public var external: Bool?
        /// Low-power mode on or off, nil to leave it.
        public var lowPower: Bool?
        /// Thermal state, nil to leave it.
        public var thermal: PowerState.Thermal?

        /// A step at `at` seconds that changes only the fields given.
        public init(at: Double, battery: Double? = nil, charging: PowerState.Charging? = nil, external: Bool? = nil,
                    lowPower: Bool? = nil, thermal: PowerState.Thermal? = nil) {
            (self.at, self.battery, self.charging, self.external, self.lowPower, self.thermal) =
                (at, battery, charging, external, lowPower, thermal)
        }
    }

    /// Why a timeline file was refused.
    public enum TimelineError: Error, Equatable, CustomStringConvertible {
        /// The file at `file` was refused: unreadable or not a timeline (`field` is "(document)"), or a step's `field` is out of range; `reason` says why.
        case invalid(file: String, field: String, reason: String)
        /// A one-line form, "FILE: FIELD: REASON".
        public var description: String {
            switch self {
            case let .invalid(file, field, reason): "\(file): \(field): \(reason)"
            }
        }
    }

    /// The steps, sorted by time.
    public let steps: [Step]
    private let clock: PowerClock
    private let start: Double

    /// A timeline of `steps` (not checked) starting now on `clock`; before the first step the state is ``PowerState/mains``.
    public init(steps: [Step], clock: PowerClock = SystemPowerClock()) {
        self.steps = steps.sorted { $0.at < $1.at }
        self.clock = clock
        start = clock.now()
    }

    /// Reads a timeline file; every step is checked (times ≥ 0, battery 0…1).
    public convenience init(contentsOf url: URL, clock: PowerClock = SystemPowerClock()) throws {
        struct File: Codable { var steps: [Step] }
        let file: File
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            let exists = FileManager.default.fileExists(atPath: url.path)
            throw TimelineError.invalid(file: url.path, field: "(file)", reason: exists ? "not readable" : "no such file")
        }
        do {
            file = try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
        } catch {
            throw TimelineError.invalid(file: url.path, field: "(document)", reason: "\(error)")
        }
        for (index, step) in file.steps.enumerated() {
            guard step.at >= 0, step.at.isFinite else {
                throw TimelineError.invalid(file: url.path, field: "steps[\(index)].at", reason: "\(step.at) is not a time ≥ 0")
            }
            if let battery = step.battery, !(0...1).contains(battery) {
                throw TimelineError.invalid(file: url.path, field: "steps[\(index)].battery", reason: "\(battery) is not within 0…1")
            }
        }
        self.init(steps: file.steps, clock: clock)
    }

    /// The state `seconds` after the start.
    public func state(at seconds: Double) -> PowerState {
        var state = PowerState.mains
        for step in steps where step.at <= seconds {
            if let battery = step.battery { state.batteryLevel = battery }
            if let charging = step.charging {
                state.charging = charging
                state.externalPower = charging != .unplugged
            }
            if let external = step.external { state.externalPower = external }
            if let lowPower = step.lowPower { state.lowPowerMode = lowPower }
            if let thermal = step.thermal { state.thermal = thermal }
        }
        return state
    }

    /// The state at the clock's seconds since the timeline was made.
    public func current() -> PowerState { state(at: clock.now() - start) }

    /// Yields the state at each step still ahead when its conditions differ from the last one yielded; finishes after the last step.
    public func changes() -> AsyncStream<PowerState> {
        let (clock, start) = (clock, start)
        // The state and the steps ahead are fixed when the stream is made, not when its task first
        // runs: a task that starts (or wakes) late must still yield every step that has since passed.
        let elapsed = clock.now() - start // read once: a step between two reads would be in neither
        let initial = state(at: elapsed)
        let ahead = steps.filter { $0.at > elapsed }
        return AsyncStream { continuation in
            let task = Task { [self] in
                var last = initial
                for step in ahead {
                    await clock.sleep(until: start + step.at)
                    if Task.isCancelled { break }
                    let next = state(at: step.at)
                    if !next.sameConditions(as: last) {
                        continuation.yield(next)
                        last = next
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// The power source for this process.
public enum SystemPower {
    /// The fixed state `override` describes (`EMBER_POWER`'s syntax, which the CLI passes) when given, else the
    /// OS's (sysfs on Linux, `ProcessInfo` on Darwin).
    public static func source(override: String? = nil) throws -> any PowerSource {
        if let text = override, !text.isEmpty {
            return FixedPowerSource(try PowerOverride.parse(text))
        }
        #if canImport(Darwin)
        return DarwinPowerSource()
        #elseif os(Linux)
        return LinuxPowerSource()
        #else
        return FixedPowerSource(.mains)
        #endif
    }
}
