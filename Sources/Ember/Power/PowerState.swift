import Foundation

/// The device's energy situation at one moment: what the policy decides from.
public struct PowerState: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Whether the battery is taking charge.
    public enum Charging: String, Sendable, Codable, CaseIterable {
        case unplugged, charging, full, unknown
    }

    /// How hot the device runs, in `ProcessInfo.ThermalState`'s four steps.
    public enum Thermal: String, Sendable, Codable, CaseIterable, Comparable {
        case nominal, fair, serious, critical

        public static func < (lhs: Thermal, rhs: Thermal) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// Battery charge 0…1, nil when there is no battery or it cannot be read.
    public var batteryLevel: Double?
    public var charging: Charging
    /// Whether mains (or USB) power is connected; nil when unknown.
    public var externalPower: Bool?
    public var lowPowerMode: Bool
    public var thermal: Thermal
    public var timestamp: Date

    public init(batteryLevel: Double? = nil, charging: Charging = .unknown, externalPower: Bool? = nil,
                lowPowerMode: Bool = false, thermal: Thermal = .nominal, timestamp: Date = Date()) {
        self.batteryLevel = batteryLevel.map { min(1, max(0, $0)) }
        self.charging = charging
        self.externalPower = externalPower
        self.lowPowerMode = lowPowerMode
        self.thermal = thermal
        self.timestamp = timestamp
    }

    /// A desktop: external power, no battery, nothing throttled.
    public static let mains = PowerState(batteryLevel: nil, charging: .unknown, externalPower: true)

    /// Whether the device runs on external power (charging or full counts).
    public var onExternalPower: Bool {
        externalPower == true || charging == .charging || charging == .full
    }

    /// Equal in everything but the timestamp.
    public func sameConditions(as other: PowerState) -> Bool {
        var copy = other
        copy.timestamp = timestamp
        return copy == self
    }

    public var description: String {
        let level = batteryLevel.map { String(format: "%.0f%%", $0 * 100) } ?? "no battery level"
        let power = externalPower.map { $0 ? "external power" : "no external power" } ?? "external power unknown"
        return "\(level), \(charging.rawValue), \(power)\(lowPowerMode ? ", low-power mode" : ""), thermal \(thermal.rawValue)"
    }
}

/// Something that knows the device's ``PowerState`` and tells of its changes.
public protocol PowerSource: Sendable {
    /// The state now.
    func current() -> PowerState
    /// Every change from now on (equal states are not repeated).
    func changes() -> AsyncStream<PowerState>
}

/// A source whose state never changes (a desktop, or `EMBER_POWER` for quick experiments).
public struct FixedPowerSource: PowerSource {
    public let state: PowerState
    public init(_ state: PowerState) { self.state = state }
    public func current() -> PowerState { state }
    public func changes() -> AsyncStream<PowerState> { AsyncStream { $0.finish() } }
}
