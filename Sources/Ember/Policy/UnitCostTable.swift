import EmberCore
import EmberModels
import Foundation

/// What running a matrix product at one precision on one compute unit costs: the numbers the policy predicts time
/// and energy from. Made from this machine's calibration (``UnitCostTable/init(profiles:readGBs:)``) or read from a
/// calibration file (``UnitCostTable/read(from:)``).
public struct UnitCost: Sendable, Equatable, Encodable {
    /// Billions of operations per second on a batch of rows (prompt processing, embeddings), all threads.
    public var gops: Double
    /// Joules per billion operations: the busy cores' power ÷ ``gops``.
    public var joulesPerGop: Double
    /// Fixed time to hand work to the unit, in microseconds.
    public var dispatchMicroseconds: Double
    /// Billions of operations per second one row at a time (decoding a token, where every weight streams from
    /// memory once): the lesser of ``gops`` and what the memory's read bandwidth allows at the precision's bytes per
    /// weight (``memoryBoundDecodeGops(readGBs:precision:weightBytes:)``). Calibration's small shapes stay in the
    /// caches and cannot see this; requests correct it further.
    public var decodeGops: Double
    /// Where the numbers come from: "measured", "default", or the calibration file's name.
    public var source: String

    /// The share of the read bandwidth decoding reaches at each precision, measured on this project's Zen 3 kind
    /// (SmolLM2 135M, 64 tokens, 2 threads, read bandwidth 30.8 GB/s, 2026-11-27): fp32 37 tokens/s × 538 MB of
    /// weights = 0.65 of it, int8 (Q8_0) 120 × 143 MB = 0.56, int4 122 × 84 MB at Q4_1's 0.625 bytes per weight =
    /// 0.33 (its output matrix stays Q8_0, and the attention and barriers weigh more at fewer bytes). fp16 (F16,
    /// 269 MB a token) was not measured there; on an Intel Emerald Rapids it streamed 0.89 of fp32's bytes per second
    /// (75 tokens/s against fp32's 42, 2026-11-30), so fp32's share × 0.9.
    public static func decodeBandwidthShare(_ precision: Precision) -> Double {
        switch precision {
        case .fp32: 0.65
        case .fp16: 0.6
        case .int8: 0.55
        case .int4: 0.35
        }
    }

    /// Billions of operations per second decoding can reach at `precision` when the weights stream at `readGBs`
    /// GB/s: two per weight, at ``decodeBandwidthShare(_:)`` of the bandwidth, over the bytes each weight takes
    /// (`weightBytes`; the precision's own type when nil). Weights a backend holds as fp32 (4 bytes) stream as fp32 does.
    public static func memoryBoundDecodeGops(readGBs: Double, precision: Precision, weightBytes: Double? = nil) -> Double {
        let type = TensorType.derived(for: precision)
        let bytes = max(weightBytes ?? Double(type.blockBytes) / Double(type.blockSize), 1e-3)
        let share = bytes >= 4 ? decodeBandwidthShare(.fp32) : decodeBandwidthShare(precision)
        return 2 * max(readGBs, 1e-3) * share / bytes
    }

    /// A cost of `gops` billion operations per second at `joulesPerGop`, `decodeGops` one row at a time (`gops`
    /// when not given: a unit that is compute-bound either way).
    public init(gops: Double, joulesPerGop: Double, dispatchMicroseconds: Double = 20,
                decodeGops: Double? = nil, source: String = "measured") {
        self.gops = gops
        self.joulesPerGop = joulesPerGop
        self.dispatchMicroseconds = dispatchMicroseconds
        self.decodeGops = min(gops, decodeGops ?? gops)
        self.source = source
    }

    /// Power drawn while the unit runs, in watts.
    public var watts: Double { gops * joulesPerGop }

    enum CodingKeys: String, CodingKey {
        case gops, source
        case joulesPerGop = "joules_per_gop"
        case dispatchMicroseconds = "dispatch_us"
        case decodeGops = "decode_gops"
    }
}

/// Every compute unit's cost at every precision it runs — the shape of a calibration file:
/// `{"units": {"neural-engine": {"int8": {"gops": 120, "joules_per_gop": 0.10}, "int4": {…}}, "gpu": {"fp32": {…}}, "cpu": {…}}}`
/// (`dispatch_us`, `decode_gops` and `source` are optional; without `decode_gops` decoding is bound by the file's
/// top-level `read_gbs`, 30 GB/s when absent). `ember policy --print-calibration` writes this machine's;
/// `ember policy --calibration FILE` decides from another.
public struct UnitCostTable: Sendable, Equatable {
    /// Unit → precision → cost; a unit or precision that is absent does not run there.
    public var units: [ComputeUnit: [Precision: UnitCost]]

    /// A table of `units`.
    public init(units: [ComputeUnit: [Precision: UnitCost]]) { self.units = units }

    /// The cost of `precision` on `unit`, nil when the unit does not run it.
    public func cost(_ unit: ComputeUnit, _ precision: Precision) -> UnitCost? { units[unit]?[precision] }

    /// This machine's costs as `context` measured them: each route's matmul cost and the memory's read bandwidth.
    public init(context: ComputeContext) {
        self.init(profiles: context.unitProfiles,
                  readGBs: context.calibration.readGBs ?? Calibration.defaultReadGBs(cores: context.maximumThreads))
    }

    /// The matmul costs calibration measured for each route (``ComputeContext/unitProfiles``), decoding bound by
    /// `readGBs` GB/s of read bandwidth.
    public init(profiles: [UnitProfile], readGBs: Double) {
        var units: [ComputeUnit: [Precision: UnitCost]] = [:]
        for profile in profiles {
            for precision in Precision.allCases {
                guard let cost = profile.cost(at: precision) else { continue }
                units[profile.unit, default: [:]][precision] = UnitCost(
                    gops: cost.throughput / 1e9, joulesPerGop: cost.joulesPerUnit * 1e9,
                    dispatchMicroseconds: cost.dispatchMicroseconds,
                    decodeGops: UnitCost.memoryBoundDecodeGops(readGBs: readGBs, precision: precision,
                                                                weightBytes: profile.weightBytes[precision.rawValue]),
                    source: cost.source)
            }
        }
        self.units = units
    }

    /// The costs measured on this project's machine kind (AMD EPYC Zen 5, 2 threads, AVX-512 VNNI,
    /// OPENBLAS_CORETYPE=Haswell; `ember info`, best of five rounds, 2026-11-25): what the policy decides from when it
    /// is given no calibration (`BackendPolicy.decide` without a ``CostModel``, `ember policy --reference-costs`).
    /// Decoding there (SmolLM2 135M, 64 tokens): int4 390 tokens/s, int8 310, fp32 95 — 105, 83 and 26 billion
    /// operations per second; the GPU route holds its int8 and int4 weights as fp32 and so decodes at fp32's rate.
    /// fp16 was not measured there: the GPU route's row is fp32's batch rate (the half kernels widen each panel once
    /// and run fp32's arithmetic) with twice fp32's decode (half the bytes streamed); the CPU route's scalar
    /// reference converts F16 to fp32, so its row is fp32's.
    public static let reference = UnitCostTable(units: [
        .neuralEngine: [.int4: UnitCost(gops: 1119, joulesPerGop: 0.0107, decodeGops: 105, source: "reference"),
                        .int8: UnitCost(gops: 1001, joulesPerGop: 0.0120, decodeGops: 83, source: "reference")],
        .gpu: [.fp32: UnitCost(gops: 161, joulesPerGop: 0.0746, decodeGops: 26, source: "reference"),
               .fp16: UnitCost(gops: 161, joulesPerGop: 0.0746, decodeGops: 52, source: "reference"),
               .int8: UnitCost(gops: 164, joulesPerGop: 0.0731, decodeGops: 26, source: "reference"),
               .int4: UnitCost(gops: 166, joulesPerGop: 0.0722, decodeGops: 26, source: "reference")],
        .cpu: [.fp32: UnitCost(gops: 25, joulesPerGop: 0.49, dispatchMicroseconds: 2, decodeGops: 25, source: "reference"),
               .fp16: UnitCost(gops: 25, joulesPerGop: 0.49, dispatchMicroseconds: 2, decodeGops: 25, source: "reference"),
               .int8: UnitCost(gops: 17, joulesPerGop: 0.69, dispatchMicroseconds: 2, source: "reference"),
               .int4: UnitCost(gops: 8, joulesPerGop: 1.42, dispatchMicroseconds: 2, source: "reference")],
    ])

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
        var readGBs = Calibration.defaultReadGBs(cores: 2)
        if let raw = root["read_gbs"] {
            guard let value = jsonNumber(raw), value > 0, value < 1e6 else {
                throw PolicyInputError(file: file, field: "read_gbs", found: "\(raw)", expected: "a number of GB/s above 0")
            }
            readGBs = value
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
                    throw PolicyInputError(file: file, field: field, found: precisionName, expected: Precision.names)
                }
                guard let object = entry as? [String: Any] else {
                    throw PolicyInputError(file: file, field: field, found: "\(entry)", expected: #"{"gops": N, "joules_per_gop": N}"#)
                }
                func number(_ key: String, required: Bool, range: ClosedRange<Double>) throws -> Double? {
                    guard let raw = object[key] else {
                        if required { throw PolicyInputError(file: file, field: "\(field).\(key)", found: "nothing", expected: "a number") }
                        return nil
                    }
                    guard let value = jsonNumber(raw), range.contains(value) else {
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
                    decodeGops: try number("decode_gops", required: false, range: 1e-6...1e9)
                        ?? UnitCost.memoryBoundDecodeGops(readGBs: readGBs, precision: precision),
                    source: (object["source"] as? String) ?? name)
            }
        }
        guard table.values.contains(where: { !$0.isEmpty }) else {
            throw PolicyInputError(file: file, field: "units", found: "no unit with a precision", expected: "at least one unit's cost")
        }
        return UnitCostTable(units: table)
    }

    /// A finite JSON number, nil for anything else. JSON true/false arrive as a boolean subclass of NSNumber (and an
    /// NSNumber 1 also casts to Bool): ask the type.
    private static func jsonNumber(_ raw: Any) -> Double? {
        guard !"\(type(of: raw))".contains("Boolean"), type(of: raw) != Bool.self,
              let value = (raw as? NSNumber)?.doubleValue, value.isFinite else { return nil }
        return value
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
