/// A small, fast, reproducible generator (SplitMix64). The same seed gives the same sequence on every
/// platform and every run, which is what makes a scenario's delays and chaos replayable.
package struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double in [0, 1).
    package mutating func nextUnit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// A standard normal deviate (Box–Muller), for log-normal delays.
    package mutating func nextGaussian() -> Double {
        let u1 = max(nextUnit(), Double.leastNonzeroMagnitude)
        let u2 = nextUnit()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension DelaySpec {
    /// Draws this delay in milliseconds from `random`. Fixed delays draw nothing, so adding a fixed delay to
    /// one step does not shift the random sequence of the others.
    package func milliseconds(using random: inout SeededRandom) -> Int {
        switch self {
        case .fixed(let ms):
            return ms
        case .uniform(let low, let high):
            return high <= low ? low : low + Int(random.next() % UInt64(high - low + 1))
        case .logNormal(let median, let sigma):
            let value = median * exp(sigma * random.nextGaussian())
            return Int(min(value, 600_000).rounded())
        }
    }
}

/// FNV-1a (64-bit) over bytes fed in order: stable across runs and platforms, unlike `Hasher`. It seeds the random
/// streams (`Engine.streamSeed`) and makes resources' entity tags.
package struct FNV1a {
    package private(set) var hash: UInt64 = 0xCBF2_9CE4_8422_2325

    package init() {}

    package mutating func mix(_ byte: UInt8) {
        hash ^= UInt64(byte)
        hash &*= 0x0000_0100_0000_01B3
    }

    package mutating func mix(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { mix(byte) }
    }

    /// The value's 8 bytes, little-endian.
    package mutating func mix(littleEndian value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { mix(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    package static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var fnv = FNV1a()
        fnv.mix(bytes)
        return fnv.hash
    }
}
