import EmberCore
import EmberModels
import Foundation

/// The power state Linux exposes in sysfs, polled at a modest interval.
///
/// - `/sys/class/power_supply/*`: `type` (Battery, Mains, USB…), and for a
///   battery `status` (Charging, Discharging, Not charging, Full, Unknown) and
///   `capacity` (percent), for mains/USB `online`.
/// - `/sys/class/thermal/thermal_zone*`: `temp` (millidegrees) against the
///   zone's `trip_point_N_temp` / `_type`: at or above a `passive` trip →
///   `.fair`, a `hot` trip → `.serious`, a `critical` trip → `.critical`; the
///   hottest zone wins.
/// - low-power mode: `/sys/firmware/acpi/platform_profile` = `low-power`, or
///   power-profiles-daemon's saved profile `power-saver`.
///
/// A machine with no battery and no mains entry is taken to be on external
/// power with no battery level. Garbage, missing files or permission errors
/// never crash: the field becomes unknown and a warning is logged once.
public final class LinuxPowerSource: PowerSource, @unchecked Sendable {
    /// The directory the sysfs and `/var/lib` paths are read under: `/` except in tests.
    public let root: URL
    /// How often ``changes()`` re-reads sysfs; default 5 seconds.
    public let pollInterval: Duration
    private let warn: @Sendable (String) -> Void
    private let lock = NSLock()
    private var warned = Set<String>()

    /// A source reading under `root` every `pollInterval`; `warn` gets each distinct warning once (default: standard error, prefixed "ember: warning:").
    public init(root: URL = URL(fileURLWithPath: "/"), pollInterval: Duration = .seconds(5),
                warn: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data("ember: warning: \($0)\n".utf8)) }) {
        self.root = root
        self.pollInterval = pollInterval
        self.warn = warn
    }

    /// Reads the power supplies, thermal zones and low-power profile now.
    public func current() -> PowerState {
        var state = PowerState()
        let supplies = entries(in: "sys/class/power_supply")
        var sawMains = false, sawBattery = false
        var mainsOnline: Bool?
        for supply in supplies {
            guard let type = read(supply.appendingPathComponent("type")) else { continue }
            switch type {
            case "Battery":
                sawBattery = true
                if let status = read(supply.appendingPathComponent("status")) {
                    switch status {
                    case "Charging": state.charging = .charging
                    case "Discharging", "Not charging": state.charging = .unplugged
                    case "Full": state.charging = .full
                    case "Unknown": state.charging = .unknown
                    default: warnOnce(supply.appendingPathComponent("status"), "unknown status \(status.debugDescription); charging state unknown")
                    }
                }
                if let text = read(supply.appendingPathComponent("capacity")) {
                    if let percent = Double(text), (0...100).contains(percent) {
                        state.batteryLevel = percent / 100
                    } else {
                        warnOnce(supply.appendingPathComponent("capacity"), "\(text.debugDescription) is not a percentage; battery level unknown")
                    }
                }
            case "Mains", "USB", "USB_C", "USB_PD", "Wireless":
                sawMains = true
                if let text = read(supply.appendingPathComponent("online")) {
                    if text == "1" { mainsOnline = true } else if text == "0" { mainsOnline = mainsOnline ?? false } else {
                        warnOnce(supply.appendingPathComponent("online"), "\(text.debugDescription) is not 0 or 1")
                    }
                }
            default:
                continue
            }
        }
        if let mainsOnline {
            state.externalPower = mainsOnline
        } else if sawBattery, state.charging == .unplugged {
            state.externalPower = false
        } else if sawBattery, state.charging == .charging || state.charging == .full {
            state.externalPower = true
        } else if !sawBattery && !sawMains {
            state.externalPower = true // a desktop or server: nothing to drain
        }
        state.thermal = thermalState()
        state.lowPowerMode = lowPowerMode()
        return state
    }

    /// Re-reads every ``pollInterval`` and yields each state whose conditions differ from the last one yielded; polling stops when the stream is dropped.
    public func changes() -> AsyncStream<PowerState> {
        let interval = pollInterval
        return AsyncStream { continuation in
            let task = Task { [self] in
                var last = current()
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    let now = current()
                    if !now.sameConditions(as: last) {
                        continuation.yield(now)
                        last = now
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: Reading sysfs

    private func entries(in folder: String) -> [URL] {
        let url = root.appendingPathComponent(folder)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { return [] }
        return names.sorted().map { url.appendingPathComponent($0) }
    }

    /// The file's text, trimmed; nil (and a warning once, unless absent) when unreadable.
    private func read(_ url: URL) -> String? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        guard let data = FileManager.default.contents(atPath: url.path) else {
            warnOnce(url, "cannot read (permissions?); treated as unknown")
            return nil
        }
        guard data.count < 4096, let text = String(data: data, encoding: .utf8) else {
            warnOnce(url, "not short UTF-8 text; treated as unknown")
            return nil
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func warnOnce(_ url: URL, _ message: String) {
        let key = url.path + "|" + message
        let first = lock.withLock { warned.insert(key).inserted }
        if first { warn("\(url.path): \(message)") }
    }

    private func thermalState() -> PowerState.Thermal {
        var hottest = PowerState.Thermal.nominal
        for zone in entries(in: "sys/class/thermal") where zone.lastPathComponent.hasPrefix("thermal_zone") {
            guard let text = read(zone.appendingPathComponent("temp")) else { continue }
            guard let temperature = Int(text) else {
                warnOnce(zone.appendingPathComponent("temp"), "\(text.debugDescription) is not millidegrees; zone ignored")
                continue
            }
            for index in 0..<32 {
                guard let type = read(zone.appendingPathComponent("trip_point_\(index)_type")) else { break }
                guard let tripText = read(zone.appendingPathComponent("trip_point_\(index)_temp")), let trip = Int(tripText) else {
                    warnOnce(zone.appendingPathComponent("trip_point_\(index)_temp"), "missing or not millidegrees; trip ignored")
                    continue
                }
                guard temperature >= trip else { continue }
                let level: PowerState.Thermal = switch type {
                case "critical": .critical
                case "hot": .serious
                case "passive": .fair
                default: .nominal
                }
                hottest = max(hottest, level)
            }
        }
        return hottest
    }

    private func lowPowerMode() -> Bool {
        if read(root.appendingPathComponent("sys/firmware/acpi/platform_profile")) == "low-power" { return true }
        if let state = read(root.appendingPathComponent("var/lib/power-profiles-daemon/state.ini")),
           state.split(separator: "\n").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "Profile=power-saver" }) {
            return true
        }
        return false
    }
}
