/// How late packets left against their due time, in bounded memory: a log-linear histogram of
/// nanoseconds (eight buckets per power of two, so a percentile is known within 12.5%, from
/// 8 ns up to 2^40 ns, about 18 minutes; later ones count in the last bucket, their exact
/// maximum kept). Cheap enough for every packet of every run.
public struct LatenessHistogram: Sendable, Hashable {
    /// Counts per bucket, allocated at the first late packet: a direction whose packets all
    /// left on time (or that carried none) costs nothing.
    private var buckets: [UInt64] = []
    /// Packets that left at or before their due time.
    public private(set) var onTime: UInt64 = 0
    /// Every packet recorded.
    public private(set) var count: UInt64 = 0
    /// The latest, in nanoseconds.
    public private(set) var maximum: Int64 = 0

    static let subBuckets = 8
    static let largestExponent = 40
    static let bucketCount = subBuckets + (largestExponent - 2) * subBuckets

    public init() {}

    /// Records one packet `nanoseconds` late (zero or less: on time).
    @inline(__always)
    public mutating func record(_ nanoseconds: Int64) {
        count += 1
        guard nanoseconds > 0 else {
            onTime += 1
            return
        }
        if nanoseconds > maximum { maximum = nanoseconds }
        if buckets.isEmpty { buckets = [UInt64](repeating: 0, count: Self.bucketCount) }
        buckets[Self.bucket(of: nanoseconds)] += 1
    }

    /// Records `packets` that left on time (forwarded as they came).
    @inline(__always)
    public mutating func recordOnTime(_ packets: Int) {
        count += UInt64(packets)
        onTime += UInt64(packets)
    }

    /// Adds another histogram's packets.
    public mutating func merge(_ other: LatenessHistogram) {
        count += other.count
        onTime += other.onTime
        maximum = max(maximum, other.maximum)
        guard !other.buckets.isEmpty else { return }
        if buckets.isEmpty { buckets = [UInt64](repeating: 0, count: Self.bucketCount) }
        for index in other.buckets.indices { buckets[index] += other.buckets[index] }
    }

    /// The lateness (nanoseconds) that a `fraction` of the packets did not exceed, as the upper
    /// edge of its bucket (never more than ``maximum``); nil without packets.
    public func percentile(_ fraction: Double) -> Int64? {
        guard count > 0 else { return nil }
        let rank = UInt64((Double(count) * min(max(fraction, 0), 1)).rounded(.up))
        if rank <= onTime { return 0 }
        var seen = onTime
        for index in buckets.indices {
            seen += buckets[index]
            if seen >= rank { return index == Self.bucketCount - 1 ? maximum : min(Self.upperEdge(of: index), maximum) }
        }
        return maximum
    }

    /// The bucket of `value` (> 0).
    static func bucket(of value: Int64) -> Int {
        if value < Int64(subBuckets) { return Int(value) }
        let exponent = 63 - value.leadingZeroBitCount  // floor(log2 value), at least 3
        guard exponent <= largestExponent else { return bucketCount - 1 }
        let sub = Int((value >> (exponent - 3)) & 7)
        return subBuckets + (exponent - 3) * subBuckets + sub
    }

    /// The first value past bucket `index`.
    static func upperEdge(of index: Int) -> Int64 {
        if index < subBuckets { return Int64(index) + 1 }
        let exponent = (index - subBuckets) / subBuckets + 3
        let sub = Int64((index - subBuckets) % subBuckets)
        return (8 + sub + 1) << (exponent - 3)
    }
}
