import Glibc
import RoamCore

/// The random numbers of one direction of one emulated link: xoshiro256** seeded through
/// splitmix64, so that a seed gives the same sequence on every machine and every run.
public struct LinkRandom: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    public init(seed: UInt64) {
        var mix = seed
        state = (splitMix64(&mix), splitMix64(&mix), splitMix64(&mix), splitMix64(&mix))
    }

    public mutating func next() -> UInt64 {
        let result = rotate(state.1 &* 5, 7) &* 9
        let shifted = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= shifted
        state.3 = rotate(state.3, 45)
        return result
    }

    private func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 { (value << count) | (value >> (64 - count)) }

    /// Uniform in [0, 1), 53 bits.
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// Standard normal (Box-Muller; the second value is dropped so that one draw is one call).
    public mutating func normal() -> Double {
        let u1 = max(unit(), 0x1p-53), u2 = unit()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// A correlated uniform draw as netem makes it: each value leans on the previous one by
/// `correlation` (0: independent).
package struct CorrelatedDraw: Sendable {
    private var last = 0.0

    public init() {}

    public mutating func next(_ random: inout LinkRandom, correlation: Double) -> Double {
        let fresh = random.unit()
        guard correlation > 0 else {
            last = fresh
            return fresh
        }
        last = (1 - correlation) * fresh + correlation * last
        return last
    }
}

