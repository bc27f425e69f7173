/// A small, fast, seedable generator (SplitMix64) for reproducible test and benchmark data.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// A generator starting from `seed`; equal seeds give equal sequences.
    public init(seed: UInt64) { state = seed }
    /// The next 64 pseudo-random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A float uniformly in [0, 1).
    public mutating func nextUnitFloat() -> Float { Float(next() >> 40) / Float(1 << 24) }
}
