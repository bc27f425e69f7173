import Foundation
import Testing
@testable import Ember
import EmberTestSupport

final class WarningLog: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

@Suite("Power state sources")
struct PowerSourceTests {
    @Test func dischargingBatteryWithMainsOffline() throws {
        let sysfs = try FakeFileTree(name: "sysfs")
        try sysfs.write("sys/class/power_supply/BAT0/type", "Battery\n")
        try sysfs.write("sys/class/power_supply/BAT0/status", "Discharging\n")
        try sysfs.write("sys/class/power_supply/BAT0/capacity", "42\n")
        try sysfs.write("sys/class/power_supply/AC/type", "Mains\n")
        try sysfs.write("sys/class/power_supply/AC/online", "0\n")
        let state = LinuxPowerSource(root: sysfs.root).current()
        #expect(state.batteryLevel == 0.42)
        #expect(state.charging == .unplugged)
        #expect(state.externalPower == false)
        #expect(state.thermal == .nominal && !state.lowPowerMode)
    }

    @Test func chargingAndFull() throws {
        let sysfs = try FakeFileTree(name: "sysfs")
        try sysfs.write("sys/class/power_supply/BAT1/type", "Battery")
        try sysfs.write("sys/class/power_supply/BAT1/status", "Charging")
        try sysfs.write("sys/class/power_supply/BAT1/capacity", "80")
        #expect(LinuxPowerSource(root: sysfs.root).current().charging == .charging)
        #expect(LinuxPowerSource(root: sysfs.root).current().onExternalPower)
        try sysfs.write("sys/class/power_supply/BAT1/status", "Full")
        #expect(LinuxPowerSource(root: sysfs.root).current().charging == .full)
    }

    @Test func noBatteryMeansExternalPowerUnknownLevelNominal() throws {
        let sysfs = try FakeFileTree(name: "sysfs")
        let state = LinuxPowerSource(root: sysfs.root).current()
        #expect(state.externalPower == true)
        #expect(state.batteryLevel == nil)
        #expect(state.thermal == .nominal)
    }

    /// This machine really has empty power_supply and thermal folders.
    @Test(.enabled(if: (try? FileManager.default.contentsOfDirectory(atPath: "/sys/class/power_supply"))?.isEmpty == true))
    func thisMachineIsOnMains() {
        let state = LinuxPowerSource().current()
        #expect(state.externalPower == true && state.batteryLevel == nil)
    }

    @Test func garbageBecomesUnknownWithOneWarning() throws {
        let sysfs = try FakeFileTree(name: "sysfs")
        try sysfs.write("sys/class/power_supply/BAT0/type", "Battery")
        try sysfs.write("sys/class/power_supply/BAT0/status", "Exploding")
        try sysfs.write("sys/class/power_supply/BAT0/capacity", "lots")
        try sysfs.write("sys/class/thermal/thermal_zone0/temp", "hot")
        let log = WarningLog()
        let source = LinuxPowerSource(root: sysfs.root, warn: { log.add($0) })
        let first = source.current()
        _ = source.current()
        #expect(first.batteryLevel == nil)
        #expect(first.charging == .unknown)
        #expect(first.thermal == .nominal)
        #expect(log.all.count == 3, "one warning per bad field, not per poll: \(log.all)")
    }

    @Test func thermalTripPointsAndLowPowerProfile() throws {
        let sysfs = try FakeFileTree(name: "sysfs")
        let zone = "sys/class/thermal/thermal_zone0/"
        try sysfs.write(zone + "temp", "91000")
        try sysfs.write(zone + "trip_point_0_type", "passive")
        try sysfs.write(zone + "trip_point_0_temp", "80000")
        try sysfs.write(zone + "trip_point_1_type", "hot")
        try sysfs.write(zone + "trip_point_1_temp", "90000")
        try sysfs.write(zone + "trip_point_2_type", "critical")
        try sysfs.write(zone + "trip_point_2_temp", "105000")
        try sysfs.write("sys/firmware/acpi/platform_profile", "low-power\n")
        let state = LinuxPowerSource(root: sysfs.root).current()
        #expect(state.thermal == .serious)
        #expect(state.lowPowerMode)
        try sysfs.write(zone + "temp", "106000")
        try sysfs.write("sys/firmware/acpi/platform_profile", "balanced\n")
        try sysfs.write("var/lib/power-profiles-daemon/state.ini", "[State]\nProfile=power-saver\n")
        let hotter = LinuxPowerSource(root: sysfs.root).current()
        #expect(hotter.thermal == .critical)
        #expect(hotter.lowPowerMode)
    }

    @Test func environmentOverrideParsesAndRefusesGarbage() throws {
        let state = try PowerOverride.parse("battery=15%,lowpower=1,thermal=serious")
        #expect(state.batteryLevel == 0.15 && state.charging == .unplugged && state.externalPower == false)
        #expect(state.lowPowerMode && state.thermal == .serious)
        #expect(try PowerOverride.parse("charging=charging,battery=0.5").onExternalPower)
        #expect(throws: PowerOverride.ParseError(key: "battery", value: "2", expected: "a level 0…1 or a percentage")) {
            try PowerOverride.parse("battery=2")
        }
        #expect(throws: PowerOverride.ParseError.self) { try PowerOverride.parse("thermal=melting") }
        #expect(throws: PowerOverride.ParseError.self) { try PowerOverride.parse("volume=11") }
        let source = try SystemPower.source(override: "battery=0.3")
        #expect(source.current().batteryLevel == 0.3)
    }
}

@Suite("Scripted power timeline")
struct ScriptedTimelineTests {
    static let steps: [ScriptedPowerTimeline.Step] = [
        .init(at: 0, battery: 1.0, charging: .charging),
        .init(at: 10, battery: 0.5, charging: .unplugged),
        .init(at: 20, battery: 0.15),
        .init(at: 30, lowPower: true),
        .init(at: 40, thermal: .serious),
        .init(at: 50, battery: 0.6, charging: .charging, lowPower: false, thermal: .nominal),
    ]

    @Test func stateFollowsTheScriptOnAVirtualClock() async {
        let clock = FakeManualClock()
        let timeline = ScriptedPowerTimeline(steps: Self.steps, clock: clock)
        #expect(timeline.current().charging == .charging)
        clock.advance(to: 25)
        #expect(timeline.current().batteryLevel == 0.15)
        #expect(timeline.current().externalPower == false)
        #expect(timeline.state(at: 45).thermal == .serious && timeline.state(at: 45).lowPowerMode)
        #expect(timeline.state(at: 55).onExternalPower && !timeline.state(at: 55).lowPowerMode)
    }

    @Test func changesArriveAsTheClockAdvances() async {
        let clock = FakeManualClock()
        let timeline = ScriptedPowerTimeline(steps: Self.steps, clock: clock)
        let changes = timeline.changes() // made before time moves: every later step is ahead of it
        let collected = Task {
            var states: [PowerState] = []
            for await state in changes { states.append(state) }
            return states
        }
        for time in stride(from: 5.0, through: 60, by: 5) {
            // Let the stream's task reach its next sleep before time moves on.
            for _ in 0..<1000 where clock.sleeping == 0 { await Task.yield() }
            clock.advance(to: time)
        }
        let states = await collected.value
        #expect(states.map(\.batteryLevel) == [0.5, 0.15, 0.15, 0.15, 0.6])
        #expect(states.map(\.lowPowerMode) == [false, false, true, true, false])
        #expect(states.map(\.thermal) == [.nominal, .nominal, .nominal, .serious, .nominal])
    }

    /// The stream's task may first run after time has moved past several steps (a loaded machine):
    /// it still yields each of them, in order.
    @Test func aLateStreamStillYieldsEveryStepSinceItWasMade() async {
        let clock = FakeManualClock()
        let timeline = ScriptedPowerTimeline(steps: Self.steps, clock: clock)
        let changes = timeline.changes()
        clock.advance(to: 60) // at once, before the stream's task has had a chance to look at the clock
        var states: [PowerState] = []
        for await state in changes { states.append(state) }
        #expect(states.map(\.batteryLevel) == [0.5, 0.15, 0.15, 0.15, 0.6])
        #expect(states.map(\.thermal) == [.nominal, .nominal, .nominal, .serious, .nominal])
    }

    @Test func aMissingTimelineFileIsNamed() {
        #expect(throws: ScriptedPowerTimeline.TimelineError.invalid(file: "/nonexistent/t.json", field: "(file)", reason: "no such file")) {
            try ScriptedPowerTimeline(contentsOf: URL(fileURLWithPath: "/nonexistent/t.json"))
        }
    }

    @Test func timelineFileIsValidated() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ember-timeline-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(#"{"steps": [{"at": 0, "battery": 1.5}]}"#.utf8).write(to: url)
        #expect(throws: ScriptedPowerTimeline.TimelineError.invalid(file: url.path, field: "steps[0].battery", reason: "1.5 is not within 0…1")) {
            try ScriptedPowerTimeline(contentsOf: url)
        }
        try Data(#"{"steps": [{"at": 0, "battery": 0.5, "charging": "unplugged"}]}"#.utf8).write(to: url)
        #expect(try ScriptedPowerTimeline(contentsOf: url).current().batteryLevel == 0.5)
    }
}
