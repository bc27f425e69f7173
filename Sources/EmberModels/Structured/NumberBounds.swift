import Foundation

/// What a generated JSON number may be: an integer or any number, within optional bounds. The matcher asks it, byte
/// by byte, whether the digits so far can still end as an allowed number, so a bound like `"maximum": 150` is kept
/// exactly. Numbers are written without an exponent, with at most 15 digits before the point and 15 after — a
/// valid subset of JSON numbers that keeps a small model from writing digits forever.
public struct NumberBounds: Hashable, Sendable {
    /// Whether only integers are allowed.
    var integer: Bool
    var minimum: Double?
    var minimumExclusive = false
    var maximum: Double?
    var maximumExclusive = false

    static let maximumIntegerDigits = 15
    static let maximumFractionDigits = 15

    /// Whether some allowed number exists at all.
    var isSatisfiable: Bool { canExtend([]) }

    private func allows(_ value: Double) -> Bool {
        if let minimum, value < minimum || (minimumExclusive && value == minimum) { return false }
        if let maximum, value > maximum || (maximumExclusive && value == maximum) { return false }
        return true
    }

    /// Whether [low, high] (ends included as flagged) meets the allowed range.
    private func meets(low: Double, lowClosed: Bool, high: Double, highClosed: Bool) -> Bool {
        var (lo, loClosed) = (low, lowClosed)
        if let minimum, minimum > lo || (minimum == lo && minimumExclusive) { (lo, loClosed) = (minimum, !minimumExclusive) }
        var (hi, hiClosed) = (high, highClosed)
        if let maximum, maximum < hi || (maximum == hi && maximumExclusive) { (hi, hiClosed) = (maximum, !maximumExclusive) }
        if lo < hi { return !integer || integerBetween(lo, loClosed, hi, hiClosed) }
        return lo == hi && loClosed && hiClosed && (!integer || lo.rounded() == lo)
    }

    private func integerBetween(_ lo: Double, _ loClosed: Bool, _ hi: Double, _ hiClosed: Bool) -> Bool {
        var first = lo.rounded(.up)
        if first == lo, !loClosed { first += 1 }
        return first < hi || (first == hi && hiClosed)
    }

    /// Whether `text` (the number's bytes so far) can still be continued to an allowed number.
    func canExtend(_ text: [UInt8]) -> Bool {
        guard let parts = Parts(text, integer: integer) else { return false }
        func meetsMagnitudes(_ low: Double, _ high: Double, highOpen: Bool) -> Bool {
            // Magnitudes [low, high) or [low, high]; negative numbers mirror them.
            if parts.negative { return meets(low: -high, lowClosed: !highOpen, high: -low, highClosed: true) }
            return meets(low: low, lowClosed: true, high: high, highClosed: !highOpen)
        }
        guard let integerDigits = parts.integerDigits else {
            // Only a sign (or nothing): any magnitude of that sign.
            return parts.negative ? meets(low: -.infinity, lowClosed: false, high: 0, highClosed: true)
                                  : meets(low: -.infinity, lowClosed: false, high: .infinity, highClosed: false)
        }
        let whole = Double(String(decoding: integerDigits, as: UTF8.self)) ?? 0
        if let fraction = parts.fractionDigits {
            let value = Double(String(decoding: integerDigits + [UInt8(ascii: ".")] + (fraction.isEmpty ? [UInt8(ascii: "0")] : fraction),
                                      as: UTF8.self)) ?? 0
            let room = fraction.count < Self.maximumFractionDigits
            let width = room ? pow(10, -Double(fraction.count)) : 0
            return meetsMagnitudes(value, value + width, highOpen: room)
        }
        // No point yet: this integer, a fraction after it, or more digits.
        if meetsMagnitudes(whole, integer ? whole : whole + 1, highOpen: !integer) { return true }
        if integerDigits == [UInt8(ascii: "0")] { return false }
        let room = Self.maximumIntegerDigits - integerDigits.count
        guard room > 0 else { return false }
        for extra in 1...room {
            let scale = pow(10, Double(extra))
            let low = whole * scale, high = (whole + 1) * scale
            if meetsMagnitudes(low, integer ? high - 1 : high, highOpen: !integer) { return true }
        }
        return false
    }

    /// Whether `text` is a whole number that is allowed, so the number may end here.
    func canComplete(_ text: String) -> Bool { canComplete(Array(text.utf8)) }

    func canComplete(_ text: [UInt8]) -> Bool {
        guard let parts = Parts(text, integer: integer), parts.integerDigits != nil else { return false }
        if let fraction = parts.fractionDigits, fraction.isEmpty { return false }
        guard let value = Double(String(decoding: text, as: UTF8.self)) else { return false }
        return allows(value)
    }

    /// A prefix of `-?(0|[1-9][0-9]*)(\.[0-9]*)?` split into its parts; nil when the bytes cannot start a number.
    private struct Parts {
        var negative = false
        var integerDigits: [UInt8]?
        var fractionDigits: [UInt8]?

        init?(_ text: [UInt8], integer: Bool) {
            var index = 0
            if index < text.count, text[index] == UInt8(ascii: "-") { negative = true; index += 1 }
            var digits: [UInt8] = []
            while index < text.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[index]) {
                digits.append(text[index]); index += 1
            }
            if digits.count > 1, digits[0] == UInt8(ascii: "0") { return nil }
            if digits.count > NumberBounds.maximumIntegerDigits { return nil }
            if !digits.isEmpty { integerDigits = digits }
            guard index < text.count else { return }
            guard !digits.isEmpty, !integer, text[index] == UInt8(ascii: ".") else { return nil }
            index += 1
            var fraction: [UInt8] = []
            while index < text.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[index]) {
                fraction.append(text[index]); index += 1
            }
            guard index == text.count, fraction.count <= NumberBounds.maximumFractionDigits else { return nil }
            fractionDigits = fraction
        }
    }
}
