import Foundation

/// What a generated JSON number may be: an integer or any number, within optional bounds. The matcher asks it, byte
/// by byte, whether the digits so far can still end as an allowed number, so a bound like `"maximum": 150` is kept
/// exactly (decimal arithmetic: `0.2 + 0.1` is `0.3` here). Numbers are written without an exponent, with at most
/// 15 digits before the point and 15 after — a valid subset of JSON numbers that keeps a small model from writing
/// digits forever; a prefix is accepted only when some number of that form completes it inside the bounds.
public struct NumberBounds: Hashable, Sendable {
    /// Whether only integers are allowed.
    var integer: Bool
    var minimum: Decimal?
    var minimumExclusive = false
    var maximum: Decimal?
    var maximumExclusive = false

    static let maximumIntegerDigits = 15
    static let maximumFractionDigits = 15

    /// Whether some allowed number can be written at all.
    var isSatisfiable: Bool { "-0123456789".utf8.contains { canExtend([$0]) } }

    /// The fewest bytes of an allowed number (an upper bound: the shortest of a few allowed candidates), what the
    /// grammar counts to know how soon a value can be finished.
    var shortestLength: Int {
        var candidates: [Decimal] = [0, 1, -1]
        for bound in [minimum, maximum].compactMap({ $0 }) {
            for scale in 0...(integer ? 0 : Self.maximumFractionDigits) {
                candidates += [Self.rounded(bound, scale, .up), Self.rounded(bound, scale, .down)]
            }
        }
        let lengths = candidates.filter { allows($0) }.map { Self.text($0).utf8.count }
        return lengths.min() ?? Self.maximumIntegerDigits + Self.maximumFractionDigits + 2
    }

    private static func rounded(_ value: Decimal, _ scale: Int, _ mode: NSDecimalNumber.RoundingMode) -> Decimal {
        var input = value, output = Decimal()
        NSDecimalRound(&output, &input, scale, mode)
        return output
    }

    private static func text(_ value: Decimal) -> String { NSDecimalNumber(decimal: value).stringValue }

    private func allows(_ value: Decimal) -> Bool {
        if let minimum, value < minimum || (minimumExclusive && value == minimum) { return false }
        if let maximum, value > maximum || (maximumExclusive && value == maximum) { return false }
        let parts = Self.text(value).split(separator: ".")
        let digits = parts[0].filter(\.isNumber).count
        let fraction = parts.count > 1 ? parts[1].count : 0
        return digits <= Self.maximumIntegerDigits && fraction <= Self.maximumFractionDigits && (!integer || fraction == 0)
    }

    /// Whether [low, high] (ends included as flagged; nil: unbounded) holds an allowed number of the written form:
    /// inside the bounds and on the grid of the digits allowed (1 for integers, 10⁻¹⁵ otherwise).
    private func meets(low: Decimal?, lowClosed: Bool, high: Decimal?, highClosed: Bool) -> Bool {
        var (lo, loClosed) = (low, lowClosed)
        if let minimum, lo.map({ minimum > $0 || (minimum == $0 && minimumExclusive) }) ?? true { (lo, loClosed) = (minimum, !minimumExclusive) }
        var (hi, hiClosed) = (high, highClosed)
        if let maximum, hi.map({ maximum < $0 || (maximum == $0 && maximumExclusive) }) ?? true { (hi, hiClosed) = (maximum, !maximumExclusive) }
        guard let lo, let hi else { return true } // unbounded on a side: grid points exist
        let scale = integer ? 0 : Self.maximumFractionDigits
        var first = Self.rounded(lo, scale, .up)
        if first == lo, !loClosed { first += integer ? 1 : Decimal(sign: .plus, exponent: -scale, significand: 1) }
        return first < hi || (first == hi && hiClosed)
    }

    /// Whether `text` (the number's bytes so far) can still be continued to an allowed number.
    func canExtend(_ text: [UInt8]) -> Bool {
        guard let parts = Parts(text, integer: integer) else { return false }
        /// Magnitudes [low, high) (or [low, high]) with the prefix's sign.
        func meetsMagnitudes(_ low: Decimal, _ high: Decimal, highOpen: Bool) -> Bool {
            if parts.negative { return meets(low: -high, lowClosed: !highOpen, high: -low, highClosed: true) }
            return meets(low: low, lowClosed: true, high: high, highClosed: !highOpen)
        }
        guard let integerDigits = parts.integerDigits else {
            // Only a sign, or nothing: some first digit must lead somewhere.
            return "0123456789".utf8.contains { canExtend(text + [$0]) }
        }
        let whole = Decimal(string: String(decoding: integerDigits, as: UTF8.self)) ?? 0
        if let fraction = parts.fractionDigits {
            let value = Decimal(string: String(decoding: integerDigits + [UInt8(ascii: ".")] + (fraction.isEmpty ? [UInt8(ascii: "0")] : fraction),
                                               as: UTF8.self)) ?? 0
            let room = fraction.count < Self.maximumFractionDigits
            let width = room ? Decimal(sign: .plus, exponent: -fraction.count, significand: 1) : 0
            return meetsMagnitudes(value, value + width, highOpen: room)
        }
        // No point yet: this integer, a fraction after it, or more digits.
        if meetsMagnitudes(whole, integer ? whole : whole + 1, highOpen: !integer) { return true }
        if integerDigits == [UInt8(ascii: "0")] { return false }
        let room = Self.maximumIntegerDigits - integerDigits.count
        guard room > 0 else { return false }
        var scale: Decimal = 1
        for _ in 1...room {
            scale *= 10
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
        guard let value = Decimal(string: String(decoding: text, as: UTF8.self)) else { return false }
        if let minimum, value < minimum || (minimumExclusive && value == minimum) { return false }
        if let maximum, value > maximum || (maximumExclusive && value == maximum) { return false }
        return true
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
