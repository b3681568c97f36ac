/// SplitMix64 (Steele, Lea and Flood, 2014): a small, well-mixed, deterministic generator, so a
/// test or benchmark that takes a seed draws the same numbers on every run and machine. The one
/// definition for the test suites and locus-bench; tests that depend on seeds rely on these
/// exact sequences, so the arithmetic below must not change.
public struct SplitMix64: Sendable {
    public var state: UInt64

    public init(state: UInt64) { self.state = state }

    public init(seed: UInt64) { self.init(state: seed) }

    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// In `0..<bound` (by remainder: slightly biased for bounds that are not powers of two,
    /// which the tests do not mind).
    @inlinable
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// True in about `percent` cases out of 100.
    @inlinable
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    @inlinable
    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    /// Uniform in [0, 1): the top 53 bits.
    @inlinable
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// Uniform in [low, high).
    @inlinable
    public mutating func uniform(_ low: Double, _ high: Double) -> Double { low + (high - low) * unit() }

    /// Irwin-Hall: the sum of 12 uniforms minus 6 has mean 0, standard deviation 1 and a bell
    /// shape (tails cut at +-6 sd).
    @inlinable
    public mutating func gaussian() -> Double {
        var sum = 0.0
        for _ in 0..<12 { sum += unit() }
        return sum - 6
    }
}
