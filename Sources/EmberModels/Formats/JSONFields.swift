import Foundation

/// The fields of one JSON object from a model folder (config.json,
/// tokenizer.json, …) read strictly: a field of the wrong type or out of
/// range is a ``ModelFileError`` naming the file, the field, the value found
/// and what is expected — never a default put in its place. An absent field
/// takes its default where the format gives one. Booleans are not numbers
/// (`true` is not 1) and integers are whole (`1.5` is not 1).
struct JSONFields {
    let object: [String: Any]
    let file: String

    init(_ object: [String: Any], file: String) {
        self.object = object
        self.file = file
    }

    /// Reads the file at `path` as one JSON object; nil when the file does not exist and `optional`.
    static func load(_ path: String, optional: Bool = false) throws -> JSONFields? {
        guard FileManager.default.fileExists(atPath: path) else {
            if optional { return nil }
            throw ModelFileError.unreadable(file: path, reason: "missing")
        }
        let data = try MappedFile.contents(ofSmallFile: path)
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw ModelFileError.invalidField(file: path, field: "(root)", found: "not a JSON object", expected: "a JSON object")
        }
        return JSONFields(object, file: path)
    }

    private func refuse(_ key: String, _ expected: String) -> ModelFileError {
        .invalidField(file: file, field: key, found: object[key].map(Self.describe) ?? "missing", expected: expected)
    }

    /// An integer in `range`; `fallback` when absent (absent without one is an error).
    func integer(_ key: String, in range: ClosedRange<Int>, default fallback: Int? = nil) throws -> Int {
        guard let value = object[key], !(value is NSNull) else {
            if let fallback { return fallback }
            throw refuse(key, "an integer in \(range.lowerBound)…\(range.upperBound)")
        }
        guard let number = Self.integer(value), range.contains(number) else { throw refuse(key, "an integer in \(range.lowerBound)…\(range.upperBound)") }
        return number
    }

    /// A finite number in `range`; `fallback` when absent.
    func real(_ key: String, in range: ClosedRange<Double>, default fallback: Double) throws -> Double {
        guard let value = object[key], !(value is NSNull) else { return fallback }
        guard !Self.isBoolean(value), let number = (value as? NSNumber)?.doubleValue, number.isFinite, range.contains(number) else {
            throw refuse(key, "a number in \(range.lowerBound)…\(range.upperBound)")
        }
        return number
    }

    /// A Boolean; `fallback` when absent.
    func bool(_ key: String, default fallback: Bool) throws -> Bool {
        guard let value = object[key], !(value is NSNull) else { return fallback }
        guard Self.isBoolean(value), let flag = value as? Bool else { throw refuse(key, "true or false") }
        return flag
    }

    /// An optional Boolean: nil when absent.
    func optionalBool(_ key: String) throws -> Bool? {
        guard object[key] != nil, !(object[key] is NSNull) else { return nil }
        return try bool(key, default: false)
    }

    /// A string; `fallback` when absent (nil: the field is optional).
    func string(_ key: String, default fallback: String? = nil) throws -> String? {
        guard let value = object[key], !(value is NSNull) else { return fallback }
        guard let text = value as? String else { throw refuse(key, "a string") }
        return text
    }

    /// A nested object.
    func object(_ key: String) throws -> JSONFields? {
        guard let value = object[key], !(value is NSNull) else { return nil }
        guard let nested = value as? [String: Any] else { throw refuse(key, "an object") }
        return JSONFields(nested, file: file)
    }

    /// Whether a decoded JSON value is `true` or `false` (not a number).
    static func isBoolean(_ value: Any) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) == "c"
    }

    /// A decoded JSON value as a whole number, nil for anything else (a Boolean, 1.5, 1e300, a string).
    static func integer(_ value: Any) -> Int? {
        guard !isBoolean(value), let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        guard double.magnitude < 9e15, let whole = Int(exactly: double) else { return nil }
        return whole
    }

    static func describe(_ value: Any) -> String {
        switch value {
        case let text as String: "\"\(text.prefix(60))\""
        case let number as NSNumber: isBoolean(number) ? (number.boolValue ? "true" : "false") : "\(number)"
        case is [Any]: "an array"
        case is [String: Any]: "an object"
        default: "\(value)"
        }
    }
}
