import Foundation
import Testing
@testable import Ember

/// Decoding is predicted from the memory it streams, not from the compute calibration measures on cache-sized
/// shapes: on a Zen 3 (AVX2, no VNNI) the calibrated int8 and int4 rates are only ~2× fp32's while their decoding is
/// ~3.3× faster, and the earlier per-precision fractions of the calibrated rate (tuned on a Zen 5) predicted fp32,
/// int8 and int4 decoding nearly alike there — the policy could send a Q4_1 model on battery to fp32.
@Suite("Decode cost")
struct DecodeCostTests {
    /// SmolLM2 135M's weights multiplied per token (30 layers of 3.54 M and the 28.3 M tied output matrix).
    static let smolLM2Parameters = 134_515_008

    /// A table from a calibration as `ember info` printed it on a Zen 3 (AMD EPYC, AVX2, 2 threads, 2026-11-28) and
    /// the read bandwidth `ember bench kernels` measured there (30.8 GB/s): matmul GOPS per unit and precision, the
    /// energy of 2 busy cores at 6 W, decoding bound by memory at the bytes each route holds per weight.
    static func zen3Costs() -> CostModel {
        func cost(_ gops: Double, _ precision: Precision, weightBytes: Double? = nil, dispatch: Double = 20) -> UnitCost {
            UnitCost(gops: gops, joulesPerGop: 12 / gops, dispatchMicroseconds: dispatch,
                     decodeGops: UnitCost.memoryBoundDecodeGops(readGBs: 30.8, precision: precision, weightBytes: weightBytes))
        }
        return CostModel(units: UnitCostTable(units: [
            .neuralEngine: [.int4: cost(167, .int4), .int8: cost(150, .int8)],
            .gpu: [.fp32: cost(80, .fp32), .int8: cost(86, .int8, weightBytes: 4), .int4: cost(86, .int4, weightBytes: 4)],
            .cpu: [.fp32: cost(11, .fp32, dispatch: 2), .int8: cost(7, .int8, dispatch: 2), .int4: cost(4, .int4, dispatch: 2)],
        ]))
    }

    /// Tokens per second the model predicts for decoding SmolLM2 on `unit` at `precision`.
    static func predictedTokensPerSecond(_ costs: CostModel, _ unit: ComputeUnit, _ precision: Precision) throws -> Double {
        let cost = try #require(costs.units.cost(unit, precision))
        return cost.decodeGops * 1e9 / (2 * Double(smolLM2Parameters))
    }

    /// Measured on the Zen 3 (`ember bench generate`, 64 tokens, 2 threads): int4 (Q4_1) 122 tokens/s, int8 120, fp32
    /// 37. The prediction must be within 1.5× of each — the fractions of calibrated compute predicted 62, 47 and 48.
    @Test func decodingOnAZen3IsPredictedWithinHalfAgainOfWhatItMeasured() throws {
        let costs = Self.zen3Costs()
        for (unit, precision, measured) in [(ComputeUnit.neuralEngine, Precision.int4, 122.0), (.neuralEngine, .int8, 120), (.gpu, .fp32, 37)] {
            let predicted = try Self.predictedTokensPerSecond(costs, unit, precision)
            #expect(predicted > measured / 1.5 && predicted < measured * 1.5, "\(unit) \(precision): predicted \(predicted), measured \(measured) tokens/s")
        }
        // The GPU route holds its quantized weights as fp32 and decodes no faster than fp32.
        #expect(try Self.predictedTokensPerSecond(costs, .gpu, .int4) == Self.predictedTokensPerSecond(costs, .gpu, .fp32))
        // The scalar CPU route is bound by its arithmetic, not the memory.
        #expect(costs.units.cost(.cpu, .int4)!.decodeGops == 4)
    }

    /// On battery a standard generation is not sent to fp32 on a Zen 3: its quantized routes decode ~3× faster for
    /// less energy.
    @Test func aBatteryGenerationOnAZen3RunsQuantized() {
        let workload = Workload.generation(parameters: Self.smolLM2Parameters, promptTokens: 32, newTokens: 64)
        for level in [0.15, 0.5] {
            let state = PowerState(batteryLevel: level, charging: .unplugged, externalPower: false)
            let decision = BackendPolicy.decide(request: RequestRequirements(tier: .standard, workload: workload), state: state,
                                                configuration: PolicyConfiguration(threads: 2), costs: Self.zen3Costs())
            #expect(decision.precision != .fp32 && decision.unit == .neuralEngine, "battery \(level): \(decision.explanation)")
        }
    }

    /// The GPU route's fp16 keeps F16 weights 16-bit: decoding streams half of fp32's bytes there (its int8 and int4
    /// are held as fp32), so a critical generation confined to that route runs fp16; a calibration file names fp16 as
    /// it names the others, and an unknown precision's error lists them all.
    @Test func theGPURouteDecodesAtFP16() throws {
        let gpu = try #require(UnitCostTable.reference.cost(.gpu, .fp16))
        #expect(gpu.decodeGops == 2 * UnitCostTable.reference.cost(.gpu, .fp32)!.decodeGops)
        let decision = BackendPolicy.decide(request: RequestRequirements(tier: .critical, computeUnits: .cpuAndGPU,
                                                                         workload: .reference),
                                            state: .mains, configuration: PolicyConfiguration(threads: 2))
        #expect(decision.precision == .fp16 && decision.unit == .gpu, "\(decision.explanation)")
        let table = try UnitCostTable.parse(Data(#"{"read_gbs": 30, "units": {"gpu": {"fp16": {"gops": 100, "joules_per_gop": 0.1}}}}"#.utf8),
                                            file: "half.json")
        #expect(table.cost(.gpu, .fp16)?.decodeGops == UnitCost.memoryBoundDecodeGops(readGBs: 30, precision: .fp16))
        #expect(UnitCost.memoryBoundDecodeGops(readGBs: 30, precision: .fp16) > 1.8 * UnitCost.memoryBoundDecodeGops(readGBs: 30, precision: .fp32))
        #expect { try UnitCostTable.parse(Data(#"{"units": {"gpu": {"fp8": {"gops": 1, "joules_per_gop": 1}}}}"#.utf8), file: "f.json") } throws: { error in
            "\(error)".contains("units.gpu.fp8") && "\(error)".contains("fp32, fp16, int8 or int4")
        }
    }

    /// A calibration file may give `decode_gops` per entry; without it decoding is bound by the file's `read_gbs`.
    @Test func calibrationFilesCarryDecodeRatesOrTheBandwidthToDeriveThem() throws {
        let given = try UnitCostTable.parse(Data(#"{"units": {"gpu": {"fp32": {"gops": 100, "joules_per_gop": 0.1, "decode_gops": 12}}}}"#.utf8),
                                            file: "given.json")
        #expect(given.cost(.gpu, .fp32)?.decodeGops == 12)
        let derived = try UnitCostTable.parse(Data(#"{"read_gbs": 60, "units": {"neural-engine": {"int8": {"gops": 500, "joules_per_gop": 0.02}}}}"#.utf8),
                                              file: "derived.json")
        #expect(derived.cost(.neuralEngine, .int8)?.decodeGops == UnitCost.memoryBoundDecodeGops(readGBs: 60, precision: .int8))
        // A round trip keeps the rates.
        let again = try UnitCostTable.parse(try derived.json(), file: "again.json")
        #expect(again.cost(.neuralEngine, .int8)?.decodeGops == derived.cost(.neuralEngine, .int8)?.decodeGops)
        for bad in [#""fast""#, "0", "-3", "true"] {
            let json = #"{"read_gbs": \#(bad), "units": {"gpu": {"fp32": {"gops": 1, "joules_per_gop": 1}}}}"#
            #expect { try UnitCostTable.parse(Data(json.utf8), file: "bad.json") } throws: { error in
                "\(error)".contains("bad.json: read_gbs") && "\(error)".contains("GB/s")
            }
        }
    }
}
