import EmberCore
import EmberModels
import Foundation

/// What running a matrix product at one precision on one compute unit costs: the numbers the policy predicts time
/// and energy from. Made from this machine's calibration (``UnitCostTable/init(profiles:)``) or read from a
/// calibration file (``UnitCostTable/read(from:)``).
public struct UnitCost: Sendable, Equatable, Encodable {
    /// Billions of operations per second on a batch of rows (prompt processing, embeddings), all threads.
    public var gops: Double
    /// Joules per billion operations: the busy cores' power ÷ ``gops``.
    public var joulesPerGop: Double
    /// Fixed time to hand work to the unit, in microseconds.
    public var dispatchMicroseconds: Double
    /// The fraction of ``gops`` reached one row at a time (decoding, where the weights stream from memory);
    /// calibration cannot see it on small shapes, so it starts at the documented default and is learned from requests.
    public var decodeEfficiency: Double
    /// Where the numbers come from: "measured", "default", or the calibration file's name.
    public var source: String

    /// Documented starting point for ``decodeEfficiency``: decode rates over calibrated rates on this project's
    /// machine kind (SmolLM2 135M, 64 tokens, 2 threads, 2026-11-25: int4 390 tok/s, int8 310, fp32 95, i.e. 105, 83
    /// and 26 billion operations per second against calibrated 1000, 970 and 160).
    public static func defaultDecodeEfficiency(_ precision: Precision) -> Double {
        switch precision {
        case .fp32: 0.16
        case .int8: 0.085
        case .int4: 0.10
        }
    }

    /// A cost of `gops` billion operations per second at `joulesPerGop`.
    public init(gops: Double, joulesPerGop: Double, dispatchMicroseconds: Double = 20,
                decodeEfficiency: Double = 0.1, source: String = "measured") {
        self.gops = gops
        self.joulesPerGop = joulesPerGop
        self.dispatchMicroseconds = dispatchMicroseconds
        self.decodeEfficiency = decodeEfficiency
        self.source = source
    }

    /// Power drawn while the unit runs, in watts.
    public var watts: Double { gops * joulesPerGop }

    enum CodingKeys: String, CodingKey {
        case gops, source
        case joulesPerGop = "joules_per_gop"
        case dispatchMicroseconds = "dispatch_us"
        case decodeEfficiency = "decode_efficiency"
    }
}

/// Every compute unit's cost at every precision it runs — the shape of a calibration file:
/// `{"units": {"neural-engine": {"int8": {"gops": 120, "joules_per_gop": 0.10}, "int4": {…}}, "gpu": {"fp32": {…}}, "cpu": {…}}}`
/// (`dispatch_us`, `decode_efficiency` and `source` are optional). `ember policy --print-calibration` writes this
/// machine's; `ember policy --calibration FILE` decides from another.
public struct UnitCostTable: Sendable, Equatable {
    /// Unit → precision → cost; a unit or precision that is absent does not run there.
    public var units: [ComputeUnit: [Precision: UnitCost]]

    /// A table of `units`.
    public init(units: [ComputeUnit: [Precision: UnitCost]]) { self.units = units }

    /// The cost of `precision` on `unit`, nil when the unit does not run it.
    public func cost(_ unit: ComputeUnit, _ precision: Precision) -> UnitCost? { units[unit]?[precision] }

    /// The matmul costs calibration measured for each route (``ComputeContext/unitProfiles``).
    public init(profiles: [UnitProfile]) {
        var units: [ComputeUnit: [Precision: UnitCost]] = [:]
        for profile in profiles {
            for precision in Precision.allCases {
                guard let cost = profile.cost(at: precision) else { continue }
                units[profile.unit, default: [:]][precision] = UnitCost(
                    gops: cost.throughput / 1e9, joulesPerGop: cost.joulesPerUnit * 1e9,
                    dispatchMicroseconds: cost.dispatchMicroseconds, decodeEfficiency: UnitCost.defaultDecodeEfficiency(precision),
                    source: cost.source)
            }
        }
        self.units = units
    }

    /// The costs measured on this project's machine kind (AMD EPYC Zen 5, 2 threads, AVX-512 VNNI,
    /// OPENBLAS_CORETYPE=Haswell; `ember info`, best of five rounds, 2026-11-25): what the policy decides from when it
    /// is given no calibration (`BackendPolicy.decide` without a ``CostModel``, `ember policy --reference-costs`).
    public static let reference = UnitCostTable(units: ([
        .neuralEngine: [.int4: UnitCost(gops: 1119, joulesPerGop: 0.0107, source: "reference"),
                        .int8: UnitCost(gops: 1001, joulesPerGop: 0.0120, source: "reference")],
        .gpu: [.fp32: UnitCost(gops: 161, joulesPerGop: 0.0746, source: "reference"),
               .int8: UnitCost(gops: 164, joulesPerGop: 0.0731, source: "reference"),
               .int4: UnitCost(gops: 166, joulesPerGop: 0.0722, source: "reference")],
        .cpu: [.fp32: UnitCost(gops: 25, joulesPerGop: 0.49, dispatchMicroseconds: 2, source: "reference"),
               .int8: UnitCost(gops: 17, joulesPerGop: 0.69, dispatchMicroseconds: 2, source: "reference"),
               .int4: UnitCost(gops: 8, joulesPerGop: 1.42, dispatchMicroseconds: 2, source: "reference")],
    ] as [ComputeUnit: [Precision: UnitCost]]).mapValues { precisions in
        Dictionary(uniqueKeysWithValues: precisions.map { precision, cost in
            var cost = cost
            cost.decodeEfficiency = UnitCost.defaultDecodeEfficiency(precision)
            return (precision, cost)
        })
    })

    /// Reads a calibration file; the error names the file, the field, what was found and what is expected.
    public static func read(from path: String) throws -> UnitCostTable {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PolicyInputError(file: path, field: "", found: "no readable file", expected: "a JSON calibration file")
        }
        return try parse(data, file: path)
    }

    /// Parses a calibration file's bytes (`file` names it in errors).
    public static func parse(_ data: Data, file: String) throws -> UnitCostTable {
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw PolicyInputError(file: file, field: "", found: "not a JSON object", expected: #"{"units": {UNIT: {PRECISION: {"gops", "joules_per_gop"}}}}"#)
        }
        guard let units = root["units"] as? [String: Any] else {
            throw PolicyInputError(file: file, field: "units", found: root["units"].map { "\($0)" } ?? "nothing",
                                   expected: "an object keyed by unit: neural-engine, gpu, cpu")
        }
        var table: [ComputeUnit: [Precision: UnitCost]] = [:]
        for (unitName, value) in units {
            guard let unit = ComputeUnit(rawValue: unitName) else {
                throw PolicyInputError(file: file, field: "units.\(unitName)", found: unitName, expected: "neural-engine, gpu or cpu")
            }
            guard let precisions = value as? [String: Any] else {
                throw PolicyInputError(file: file, field: "units.\(unitName)", found: "\(value)", expected: "an object keyed by precision")
            }
            for (precisionName, entry) in precisions {
                let field = "units.\(unitName).\(precisionName)"
                guard let precision = Precision(rawValue: precisionName) else {
                    throw PolicyInputError(file: file, field: field, found: precisionName, expected: "fp32, int8 or int4")
                }
                guard let object = entry as? [String: Any] else {
                    throw PolicyInputError(file: file, field: field, found: "\(entry)", expected: #"{"gops": N, "joules_per_gop": N}"#)
                }
                func number(_ key: String, required: Bool, range: ClosedRange<Double>) throws -> Double? {
                    guard let raw = object[key] else {
                        if required { throw PolicyInputError(file: file, field: "\(field).\(key)", found: "nothing", expected: "a number") }
                        return nil
                    }
                    // JSON true/false arrive as a boolean subclass of NSNumber (and an NSNumber 1 also casts to Bool): ask the type.
                    let boolean = "\(type(of: raw))".contains("Boolean") || type(of: raw) == Bool.self
                    guard let value = (raw as? NSNumber)?.doubleValue, !boolean, value.isFinite, range.contains(value) else {
                        throw PolicyInputError(file: file, field: "\(field).\(key)", found: "\(raw)",
                                               expected: "a number from \(range.lowerBound) to \(range.upperBound)")
                    }
                    return value
                }
                let name = URL(fileURLWithPath: file).lastPathComponent
                table[unit, default: [:]][precision] = UnitCost(
                    gops: try number("gops", required: true, range: 1e-6...1e9)!,
                    joulesPerGop: try number("joules_per_gop", required: true, range: 0...1e6)!,
                    dispatchMicroseconds: try number("dispatch_us", required: false, range: 0...1e7) ?? 20,
                    decodeEfficiency: try number("decode_efficiency", required: false, range: 1e-4...1) ?? UnitCost.defaultDecodeEfficiency(precision),
                    source: (object["source"] as? String) ?? name)
            }
        }
        guard table.values.contains(where: { !$0.isEmpty }) else {
            throw PolicyInputError(file: file, field: "units", found: "no unit with a precision", expected: "at least one unit's cost")
        }
        return UnitCostTable(units: table)
    }

    /// The table as a calibration file: `{"units": {…}}`, sorted keys.
    public func json() throws -> Data {
        var object: [String: [String: UnitCost]] = [:]
        for (unit, precisions) in units {
            object[unit.rawValue] = Dictionary(uniqueKeysWithValues: precisions.map { ($0.key.rawValue, $0.value) })
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return try encoder.encode(["units": object])
    }
}

/// A calibration or quality file the policy cannot use: which file, which field, what was found, what is expected.
public struct PolicyInputError: Error, CustomStringConvertible {
    /// The file read.
    public var file: String
    /// The field at fault ("units.gpu.fp32.gops"), empty for the whole file.
    public var field: String
    /// What the file holds there.
    public var found: String
    /// What it should hold.
    public var expected: String

    /// One line naming all four, and what to do.
    public var description: String {
        "\(file)\(field.isEmpty ? "" : ": \(field)"): found \(found.prefix(120)), expected \(expected) "
            + "(`ember policy --print-calibration` writes this machine's calibration in that shape)"
    }
}
