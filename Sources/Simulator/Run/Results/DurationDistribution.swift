/// Durations summarised in bounded memory, for the figures of a run that may last a day: every
/// value is kept exactly up to ``exactLimit``; past that, values are counted in log-linear
/// buckets (128 per power of two, as HdrHistogram does with two significant digits), so that a
/// percentile is within 0.4 % of the true value, and the count, the minimum and the maximum stay
/// exact. At most about 5,500 buckets exist between a nanosecond and a day, whatever the count,
/// held as one array from the smallest value's bucket to the largest's.
public struct DurationDistribution: Sendable, Equatable {
    /// How many values are kept exactly before they are counted in buckets.
    public static let exactLimit = 4_096

    /// Buckets per power of two.
    private static let subBuckets: Int64 = 128

    /// How many values were recorded.
    public private(set) var count = 0
    /// The smallest and largest values recorded (exact).
    public private(set) var minimum: Duration?
    public private(set) var maximum: Duration?
    /// The values while there are at most ``exactLimit`` of them.
    private var exact: [Duration] = []
    /// Past ``exactLimit``: how many values fell in each bucket, by key (see ``key(_:)``), from
    /// key ``bucketBase`` on: one flat array from the smallest key recorded to the largest, which
    /// grows only when a value falls outside every bucket so far (a few thousand entries at
    /// most; about 2,200 between a millisecond and 30 seconds), so that the memory of a run's
    /// figures stops growing once its range of values is seen.
    private var buckets: [Int] = []
    private var bucketBase = 0

    public init() {}

    public init(_ values: some Sequence<Duration>) {
        for value in values { record(value) }
    }

    /// How many buckets hold values (none while ``isExact``): what the memory grows with.
    package var bucketCount: Int { buckets.count { $0 > 0 } }
    /// How many buckets are held, empty ones between them included.
    package var bucketStorage: Int { buckets.count }

    /// True while every value is held as recorded (percentiles are exact).
    public var isExact: Bool { count <= Self.exactLimit }

    public mutating func record(_ value: Duration) {
        count += 1
        minimum = Swift.min(minimum ?? value, value)
        maximum = Swift.max(maximum ?? value, value)
        if count <= Self.exactLimit {
            exact.append(value)
            return
        }
        if !exact.isEmpty {
            for held in exact { count(Self.key(held)) }
            exact = []
        }
        count(Self.key(value))
    }

    /// Counts one value in bucket `key`, widening the array to reach it.
    private mutating func count(_ key: Int) {
        if buckets.isEmpty {
            bucketBase = key
            buckets = [0]
        } else if key < bucketBase {
            buckets.insert(contentsOf: repeatElement(0, count: bucketBase - key), at: 0)
            bucketBase = key
        } else if key - bucketBase >= buckets.count {
            buckets.append(contentsOf: repeatElement(0, count: key - bucketBase - buckets.count + 1))
        }
        buckets[key - bucketBase] += 1
    }

    /// The value at `fraction` (0...1) by nearest rank: exact while ``isExact``, otherwise the
    /// middle of its bucket (within 0.4 %), never outside the recorded minimum and maximum; the
    /// smallest and largest ranks are the exact minimum and maximum. Nil when nothing was recorded.
    public func percentile(_ fraction: Double) -> Duration? {
        guard count > 0, let minimum, let maximum else { return nil }
        let rank = Swift.min(Swift.max(Int((fraction * Double(count)).rounded(.up)) - 1, 0), count - 1)
        if isExact { return exact.sorted()[rank] }
        if rank == 0 { return minimum }
        if rank == count - 1 { return maximum }
        var seen = 0
        for (offset, held) in buckets.enumerated() where held > 0 {
            seen += held
            if seen > rank { return Swift.min(Swift.max(Self.representative(bucketBase + offset), minimum), maximum) }
        }
        return maximum
    }

    /// The values: as recorded (in order) while ``isExact``; past that, in ascending order, each
    /// as the middle of its bucket. ``count`` values either way.
    public var values: [Duration] {
        if isExact { return exact }
        return buckets.enumerated().flatMap { offset, held in
            repeatElement(Swift.min(Swift.max(Self.representative(bucketBase + offset), minimum!), maximum!), count: held)
        }
    }

    /// A value's bucket: nanoseconds below 256 each have their own; above, a power of two
    /// [2^e, 2^(e+1)) is cut into 128 buckets of 2^(e-7) nanoseconds. Keys grow with the value.
    /// Negative durations count as zero.
    private static func key(_ value: Duration) -> Int {
        let nanoseconds = value.clampedNanoseconds
        guard nanoseconds >= 2 * subBuckets else { return Int(nanoseconds) }
        let shift = Int64(63 - nanoseconds.leadingZeroBitCount) - 7
        return Int(shift * subBuckets + (nanoseconds >> shift))
    }

    /// The middle of a bucket.
    private static func representative(_ key: Int) -> Duration {
        let key = Int64(key)
        guard key >= 2 * subBuckets else { return .nanoseconds(key) }
        let shift = key / subBuckets - 1
        let mantissa = key - shift * subBuckets
        let lower = mantissa << shift
        return .nanoseconds(lower + (Int64(1) << shift) / 2)
    }
}

extension Duration {
    /// Whole nanoseconds, negative values as zero, values past `Int64.max` nanoseconds as that.
    fileprivate var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        guard seconds < Int64.max / 1_000_000_000 - 1 else { return .max }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
