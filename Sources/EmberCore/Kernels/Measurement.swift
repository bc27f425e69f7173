import Dispatch

/// Timing helpers the benchmarks share: monotonic wall-clock seconds and medians.
public enum Measurement {
    /// Wall-clock seconds `body` takes (monotonic clock).
    public static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// The median of `values` (NaN when empty).
    public static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
    }

    /// How many calls of `body` make a round of at least `seconds` (after one warm-up call).
    public static func callsPerRound(lasting seconds: Double, _ body: () throws -> Void) rethrows -> Int {
        try body()
        let single = try Self.seconds(body)
        return max(1, Int((seconds / max(single, 1e-9)).rounded(.up)))
    }
}
