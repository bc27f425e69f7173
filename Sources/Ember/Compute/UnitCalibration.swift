import Foundation

extension UnitProfile {
    /// The profiles in force: measured by ``calibrate(registry:)`` at first use
    /// and cached in memory and in `$XDG_CACHE_HOME/ember/` (keyed by CPU,
    /// kernel ISA, BLAS core and core count), else the documented defaults.
    public static let current: [UnitProfile] = {
        let key = calibrationKey
        let file = calibrationFile
        if let data = try? Data(contentsOf: file),
           let cached = try? JSONDecoder().decode(CalibrationCache.self, from: data), cached.key == key {
            return cached.profiles
        }
        let measured = calibrate()
        if let data = try? JSONEncoder().encode(CalibrationCache(key: key, profiles: measured)) {
            try? FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? data.write(to: file, options: .atomic)
        }
        return measured
    }()

    struct CalibrationCache: Codable {
        var key: String
        var profiles: [UnitProfile]
    }

    static var calibrationKey: String {
        "\(CPUFeatures.modelName)|\(KernelISA.active)|\(BLASLibrary.current.coreName)|\(CPUFeatures.logicalCores)|v1"
    }

    static var calibrationFile: URL {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CACHE_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
        return base.appendingPathComponent("ember/calibration.json")
    }

    /// Measures each unit × precision with one short matmul (64×576×1536,
    /// median of 3) through the kernel the registry places there; precisions
    /// a unit has no kernel for keep their default.
    public static func calibrate(registry: KernelRegistry = .shared) -> [UnitProfile] {
        let (m, n, k) = (64, 576, 1536)
        var generator = SplitMix64(seed: 99)
        guard let x = try? Tensor(shape: [m, k], values: (0..<(m * k)).map { _ in generator.nextUnitFloat() * 2 - 1 }),
              let values = try? Tensor(shape: [n, k], values: (0..<(n * k)).map { _ in generator.nextUnitFloat() - 0.5 })
        else { return defaults() }
        var weights: [Precision: WeightMatrix] = [:]
        for (precision, format) in [(Precision.fp32, WeightFormat.f32), (.int8, .q8_0), (.int4, .q4_1)] {
            weights[precision] = try? WeightMatrix(values, as: format)
        }
        let operations = 2 * Double(m * n * k)
        return defaults().map { profile in
            var profile = profile
            for precision in Array(profile.costs.keys) {
                guard let w = weights[precision] else { continue }
                let (kernel, placement) = registry.select(.matmul, format: w.format, units: ComputeUnits(profile.unit))
                guard let kernel, placement.unit == profile.unit, var y = try? Tensor(zeros: [m, n]) else { continue }
                guard (try? kernel.run(x, w, &y)) != nil else { continue } // warm-up (and build cached variants)
                let seconds = Measurement.median((0..<3).map { _ in Measurement.seconds { try? kernel.run(x, w, &y) } })
                let gops = operations / seconds / 1e9
                profile.costs[precision]?.throughputGOPS = gops
                profile.costs[precision]?.joulesPerOperation = wattsPerBusyCore * Double(CPUFeatures.logicalCores) / (gops * 1e9)
                profile.costs[precision]?.throughputSource = "measured"
            }
            return profile
        }
    }
}
