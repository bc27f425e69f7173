import EmberCore
import EmberModels
import Foundation

/// The device's energy situation at one moment: what the policy decides from.
public struct PowerState: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Whether the battery is taking charge.
    public enum Charging: String, Sendable, Codable, CaseIterable {
        /// `unplugged`: on battery (Linux's "Discharging" or "Not charging"); `charging`; `full`: charged and on external power; `unknown`: no battery, or its status cannot be read.
        case unplugged, charging, full, unknown
    }

    /// How hot the device runs, in `ProcessInfo.ThermalState`'s four steps.
    public enum Thermal: String, Sendable, Codable, CaseIterable, Comparable {
        /// `nominal`, `fair`, `serious`, `critical`, from cool to hottest; on Linux, a zone at or past a `passive`, `hot` or `critical` trip point gives `fair`, `serious` or `critical`.
        case nominal, fair, serious, critical

        /// Orders by heat: nominal < fair < serious < critical.
        public static func < (lhs: Thermal, rhs: Thermal) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// Battery charge 0…1, nil when there is no battery or it cannot be read.
    public var batteryLevel: Double?
    /// Whether the battery is unplugged, charging or full; `.unknown` with no battery or an unreadable status.
    public var charging: Charging
    /// Whether mains (or USB) power is connected; nil when unknown.
    public var externalPower: Bool?
    /// Whether the system's low-power (power-saver) mode is on.
    public var lowPowerMode: Bool
    /// How hot the device runs.
    public var thermal: Thermal
    /// When the state was read or made.
    public var timestamp: Date

    /// A state; `batteryLevel` is clamped to 0…1, and the defaults are no battery level, unknown charging and external power, low-power mode off, thermal nominal, now.
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

    enum CodingKeys: String, CodingKey {
        case charging, thermal, timestamp
        case batteryLevel = "battery_level"
        case externalPower = "external_power"
        case lowPowerMode = "low_power_mode"
    }

    /// Decodes the snake_case form ``encode(to:)`` writes (the timestamp in seconds since 1970).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(batteryLevel: try container.decodeIfPresent(Double.self, forKey: .batteryLevel),
                  charging: try container.decode(Charging.self, forKey: .charging),
                  externalPower: try container.decodeIfPresent(Bool.self, forKey: .externalPower),
                  lowPowerMode: try container.decode(Bool.self, forKey: .lowPowerMode),
                  thermal: try container.decode(Thermal.self, forKey: .thermal),
                  timestamp: Date(timeIntervalSince1970: try container.decode(Double.self, forKey: .timestamp)))
    }

    /// Encodes snake_case keys, the timestamp as seconds since 1970 (whatever the encoder's date strategy).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(batteryLevel, forKey: .batteryLevel)
        try container.encode(charging, forKey: .charging)
        try container.encodeIfPresent(externalPower, forKey: .externalPower)
        try container.encode(lowPowerMode, forKey: .lowPowerMode)
        try container.encode(thermal, forKey: .thermal)
        try container.encode(timestamp.timeIntervalSince1970, forKey: .timestamp)
    }

    /// Equal in everything but the timestamp.
    public func sameConditions(as other: PowerState) -> Bool {
        var copy = other
        copy.timestamp = timestamp
        return copy == self
    }

    /// A one-line human-readable form, e.g. "15%, unplugged, no external power, low-power mode, thermal serious" ("no battery level" and "external power unknown" when nil).
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
    /// The state ``current()`` always returns.
    public let state: PowerState
    /// A source that always reports `state`.
    public init(_ state: PowerState) { self.state = state }
    /// The fixed state.
    public func current() -> PowerState { state }
    /// A stream that finishes at once: the state never changes.
    public func changes() -> AsyncStream<PowerState> { AsyncStream { $0.finish() } }
}
