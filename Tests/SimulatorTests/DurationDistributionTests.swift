import Foundation
@testable import Simulator
import Testing

@Suite struct DurationDistributionTests {
    /// Nearest rank over the values, written out here rather than taken from the type.
    func nearestRank(_ values: [Duration], _ fraction: Double) -> Duration {
        let sorted = values.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// A seeded generator (SplitMix64), so that a failure can be replayed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Values spread evenly over the orders of magnitude from a nanosecond to a day.
    func logUniform(_ count: Int, seed: UInt64) -> [Duration] {
        var generator = Generator(state: seed)
        return (0..<count).map { _ in .nanoseconds(Int64(pow(10, Double.random(in: 0..<13.9, using: &generator)))) }
    }

    @Test func upToItsLimitEveryValueAndPercentileIsExact() {
        let values = logUniform(DurationDistribution.exactLimit, seed: 7)
        let distribution = DurationDistribution(values)
        #expect(distribution.isExact)
        #expect(distribution.values == values)
        #expect(distribution.bucketCount == 0)
        for fraction in [0, 0.01, 0.5, 0.95, 0.99, 1] {
            #expect(distribution.percentile(fraction) == nearestRank(values, fraction))
        }
        #expect(distribution.minimum == values.min())
        #expect(distribution.maximum == values.max())
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func pastItsLimitPercentilesAreWithinFourTenthsOfAPercentAndTheExtremesExact(seed: UInt64) {
        let values = logUniform(100_000, seed: seed)
        let distribution = DurationDistribution(values)
        #expect(!distribution.isExact)
        #expect(distribution.count == values.count)
        #expect(distribution.minimum == values.min())
        #expect(distribution.maximum == values.max())
        #expect(distribution.percentile(1) == values.max())
        for fraction in [0.001, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999] {
            let exact = Double(nearestRank(values, fraction).nanosecondsForTest)
            let estimate = Double(distribution.percentile(fraction)!.nanosecondsForTest)
            // Below 256 ns every nanosecond has its bucket; truncation to whole nanoseconds adds 1.
            #expect(abs(estimate - exact) <= max(exact * 0.004, 1), "p\(fraction): \(estimate) ns against \(exact) ns")
        }
        let held = distribution.values
        #expect(held.count == values.count)
        #expect(held == held.sorted())
    }

    @Test func itsMemoryIsBoundedWhateverTheCount() {
        var distribution = DurationDistribution()
        // Every bucket from a nanosecond to a day, many times over.
        var value: Int64 = 1
        for _ in 0..<300_000 {
            distribution.record(.nanoseconds(value))
            value = value >= 86_400_000_000_000 ? 1 : value + value / 300 + 1
        }
        #expect(distribution.count == 300_000)
        #expect(distribution.bucketCount > 5_000)
        #expect(distribution.bucketCount <= 5_500)
        let before = distribution.bucketCount
        let storage = distribution.bucketStorage
        #expect(storage <= 5_500, "one array from the smallest bucket to the largest")
        for _ in 0..<100_000 { distribution.record(.milliseconds(20)) }
        #expect(distribution.bucketCount == before)
        #expect(distribution.bucketStorage == storage, "values within the range seen take no more memory")
    }

    /// Past the exact values, a run's latencies (a millisecond to its timeout) take a fixed
    /// array once their range is seen, and its percentiles are within 0.4 % of the truth.
    @Test func latenciesPastTheExactOnesTakeAFixedArray() {
        var distribution = DurationDistribution()
        var generator = SystemRandomNumberGenerator()
        var recorded: [Duration] = []
        for index in 0..<20_000 {
            let value: Duration = index == 0 ? .seconds(30) : index == 1 ? .milliseconds(1) : .microseconds(Int64.random(in: 1_000...30_000_000, using: &generator))
            distribution.record(value)
            recorded.append(value)
        }
        let storage = distribution.bucketStorage
        #expect(storage < 2_300, "about 2,200 buckets between a millisecond and 30 seconds")
        for _ in 0..<50_000 { distribution.record(.microseconds(Int64.random(in: 1_000...30_000_000, using: &generator))) }
        #expect(distribution.bucketStorage == storage)
        recorded.sort()
        var check = DurationDistribution()
        for value in recorded.shuffled() { check.record(value) }
        for fraction in [0.5, 0.9, 0.99] {
            let truth = recorded[Int((fraction * Double(recorded.count)).rounded(.up)) - 1]
            let estimate = check.percentile(fraction)!
            #expect(abs(Double((estimate - truth).nanoseconds)) <= Double(truth.nanoseconds) * 0.004 + 1, "p\(fraction)")
        }
    }

    @Test func negativeAndHugeValuesAreCountedWithoutTrapping() {
        var distribution = DurationDistribution((0..<5_000).map { .milliseconds($0) })
        distribution.record(.seconds(-3))
        distribution.record(.seconds(Int64.max / 2))
        #expect(distribution.minimum == .seconds(-3))
        #expect(distribution.maximum == .seconds(Int64.max / 2))
        #expect(distribution.percentile(0) == .seconds(-3))
        #expect(distribution.percentile(1) == .seconds(Int64.max / 2))
        #expect(distribution.percentile(0.5)! > .milliseconds(2_480))
        #expect(distribution.percentile(0.5)! < .milliseconds(2_520))
        #expect(DurationDistribution().percentile(0.5) == nil)
    }
}

extension Duration {
    fileprivate var nanosecondsForTest: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
