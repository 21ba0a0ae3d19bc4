import Netlink
import ScenarioModel
extension LinkConditions {
    /// The qdisc settings for these conditions: netem always, tbf when a rate is set, with the
    /// queues of ``LinkConditions/queuePlan`` (which the Chaos Mesh export translates too).
    package func qdiscConfiguration(seed: UInt64, distribution: [Int16]? = nil) -> (NetemConfiguration, TokenBucketConfiguration?) {
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

        let plan = queuePlan
        netem.limit = plan.delayLinePackets
        return (netem, plan.tokenBucket.map { TokenBucketConfiguration(rate: $0.rate, bucket: $0.bucket, limit: $0.limit) })
    }

    /// The CoDel or FQ-CoDel qdisc under tbf, when `queue` asks for one and a rate is set.
    package var coDelConfiguration: CoDelConfiguration? {
        guard let managed = queuePlan.managedQueue, let parameters = managed.discipline.codel else { return nil }
        var configuration = CoDelConfiguration(target: parameters.target, interval: parameters.interval, limit: managed.packets)
        if case let .fqCodel(_, flows, quantum) = managed.discipline {
            configuration.flows = UInt32(flows)
            configuration.quantum = UInt32(quantum)
            configuration.memoryLimit = managed.memoryBytes
        }
        return configuration
    }
}
