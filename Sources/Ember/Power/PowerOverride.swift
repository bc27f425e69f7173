import EmberCore
import EmberModels
import Foundation

/// `EMBER_POWER` for quick experiments: comma-separated `key=value` pairs,
/// e.g. `EMBER_POWER=battery=0.15,charging=unplugged,lowpower=1,thermal=serious`.
/// Keys: `battery` (0…1, or a percentage such as `15%`), `charging`
/// (unplugged|charging|full|unknown), `external` (0|1), `lowpower` (0|1),
/// `thermal` (nominal|fair|serious|critical).
public enum PowerOverride {
    /// The variable's name, "EMBER_POWER".
    public static let environmentVariable = "EMBER_POWER"

    /// Why an `EMBER_POWER` value was refused.
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        /// The key of the refused pair, lowercased.
        public var key: String
        /// The value as given.
        public var value: String
        /// What the key takes, e.g. "0 or 1".
        public var expected: String
        /// A one-line form, e.g. "EMBER_POWER: lowpower=maybe: expected 0 or 1".
        public var description: String { "\(PowerOverride.environmentVariable): \(key)=\(value): expected \(expected)" }
    }

    /// The state `text` describes (unspecified fields as on a desktop: external power, nominal).
    public static func parse(_ text: String) throws -> PowerState {
        var state = PowerState.mains
        for pair in text.split(separator: ",") where !pair.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let key = parts[0].lowercased(), value = parts.count > 1 ? parts[1] : ""
            func fail(_ expected: String) -> ParseError { ParseError(key: key, value: value, expected: expected) }
            func flag() throws -> Bool {
                switch value.lowercased() {
                case "1", "true", "yes", "on": return true
                case "0", "false", "no", "off": return false
                default: throw fail("0 or 1")
                }
            }
            switch key {
            case "battery":
                let percent = value.hasSuffix("%")
                guard let number = Double(percent ? String(value.dropLast()) : value) else { throw fail("a level 0…1 or a percentage") }
                let level = percent ? number / 100 : number
                guard (0...1).contains(level) else { throw fail("a level 0…1 or a percentage") }
                state.batteryLevel = level
                if state.charging == .unknown { state.charging = .unplugged; state.externalPower = false }
            case "charging":
                guard let charging = PowerState.Charging(rawValue: value.lowercased()) else {
                    throw fail(PowerState.Charging.allCases.map(\.rawValue).joined(separator: "|"))
                }
                state.charging = charging
                state.externalPower = charging == .unplugged ? false : (charging == .unknown ? state.externalPower : true)
            case "external": state.externalPower = try flag()
            case "lowpower": state.lowPowerMode = try flag()
            case "thermal":
                guard let thermal = PowerState.Thermal(rawValue: value.lowercased()) else {
                    throw fail(PowerState.Thermal.allCases.map(\.rawValue).joined(separator: "|"))
                }
                state.thermal = thermal
            default:
                throw ParseError(key: key, value: value, expected: "one of battery, charging, external, lowpower, thermal")
            }
        }
        return state
    }
}
