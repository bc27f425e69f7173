import Ember

/// A logit bias as both request protocols write it — a JSON object from token ids (as strings) to numbers from −100
/// to 100, at most 1,024 of them — read once for the worker protocol and the HTTP API, each wording its own refusal.
public enum LogitBiasJSON {
    /// The most entries one request may give.
    public static let maxEntries = 1024

    /// What is wrong with a bias: the key at fault (nil for the whole value), what was found and what is expected.
    public struct Problem: Error, Sendable {
        /// The key at fault (its first 40 characters), nil when the whole value is.
        public var key: String?
        /// What was found there.
        public var found: String
        /// What is expected instead.
        public var expected: String
    }

    /// The bias `value` gives, or the first problem with it.
    public static func parse(_ value: JSONValue) -> Result<[Int: Float], Problem> {
        guard case let .object(pairs) = value else {
            return .failure(Problem(key: nil, found: value.shortText, expected: "an object from token ids to numbers, such as {\"50256\": -100}"))
        }
        guard pairs.count <= maxEntries else {
            return .failure(Problem(key: nil, found: "\(pairs.count) entries", expected: "at most \(maxEntries)"))
        }
        var bias: [Int: Float] = [:]
        for (key, number) in pairs {
            guard let token = Int(key), token >= 0, String(token) == key else {
                return .failure(Problem(key: String(key.prefix(40)), found: "the key \"\(key.prefix(40))\"",
                                        expected: "a token id (a whole number ≥ 0, written as a string)"))
            }
            guard case let .number(amount) = number, amount.isFinite, abs(amount) <= 100 else {
                return .failure(Problem(key: key, found: number.shortText, expected: "a number from -100 to 100"))
            }
            bias[token] = Float(amount)
        }
        return .success(bias)
    }
}

extension JSONValue {
    /// The value as JSON, cut at 60 characters: how refusals show what they found.
    public var shortText: String {
        let text = self.text
        return text.count > 60 ? String(text.prefix(60)) + "…" : text
    }
}
