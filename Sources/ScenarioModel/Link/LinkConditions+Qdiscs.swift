import Netlink

extension LinkConditions {
    /// The qdisc settings for these conditions (what the netem backend installs, and what the
    /// Chaos Mesh export translates): netem always, tbf when a rate is set.
    ///
    /// - The scenario's `limit` (packets) is the bottleneck queue: tbf's byte limit when a rate is
    ///   set (at 1514 bytes a packet), netem's packet limit otherwise. Without one, tbf queues
    ///   100 ms at the rate (at least 64 KiB), a buffer like an access network's.
    /// - netem's own limit must hold every packet in flight on the delay line, or it drops
    ///   packets the scenario never asked to lose: room for twice the delay (plus jitter) at the
    ///   rate, 1 Gbit/s where none is set, and never under netem's default of 1000.
    public func qdiscConfiguration(seed: UInt64, distribution: [Int16]? = nil) -> (NetemConfiguration, TokenBucketConfiguration?) {
        let impairment = self.impairment
        var netem = NetemConfiguration()
        netem.delay = max(.zero, impairment.delay ?? .zero)
        netem.jitter = max(.zero, impairment.jitter ?? .zero)
        netem.delayCorrelation = impairment.delayCorrelation ?? 0
        netem.distribution = distribution
        switch impairment.loss {
        case .none: netem.loss = .random(probability: 0, correlation: 0)
        case .random(let rate, let correlation)?: netem.loss = .random(probability: rate, correlation: correlation)
        case let .gilbertElliott(p, r, bad, good)?: netem.loss = .gilbertElliott(p: p, r: r, lossInBad: bad, lossInGood: good)
        }
        if isBlackholed { netem.loss = .random(probability: 1, correlation: 0) }
        netem.duplicate = impairment.duplicate ?? 0
        netem.reorder = impairment.reorder ?? 0
        netem.corrupt = impairment.corrupt ?? 0
        netem.seed = seed

        let bytesPerSecond = (impairment.rate?.bitsPerSecond ?? 1e9) / 8
        let flight = (netem.delay + netem.jitter).seconds * 2 * bytesPerSecond / 1514
        netem.limit = UInt32(clamping: max(1000, Int(flight.rounded(.up))))

        guard let rate = impairment.rate else {
            if let limit = impairment.limit { netem.limit = UInt32(clamping: limit) }
            return (netem, nil)
        }
        let perSecond = UInt64(max(1, (rate.bitsPerSecond / 8).rounded()))
        let bucket = UInt32(clamping: max(3028, Int(Double(perSecond) * 0.004)))
        let queue = impairment.limit.map { $0 * 1514 } ?? max(65536, Int(Double(perSecond) * 0.1))
        return (netem, TokenBucketConfiguration(rate: perSecond, bucket: bucket, limit: UInt32(clamping: max(queue, Int(bucket)))))
    }
}
