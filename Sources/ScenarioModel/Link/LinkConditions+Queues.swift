extension LinkConditions {
    /// The bottleneck queue of Roam's userspace emulator where the scenario sets no `limit` (and
    /// no `queue:`), in packets: behind a trace, and what the netem backend gives a trace it steps.
    public static let emulatorQueuePackets = 1000

    /// The queues a kernel link needs for these conditions: what the netem backend installs and
    /// what the Chaos Mesh export translates, decided here once.
    ///
    /// - The scenario's `limit` (packets, or bytes) is the bottleneck queue: tbf's byte limit when
    ///   a rate is set (at 1514 bytes a packet), netem's packet limit otherwise. Without one, tbf
    ///   queues 100 ms at the rate (at least 64 KiB), a buffer like an access network's.
    /// - `queue: codel` or `fq-codel` with a rate puts that qdisc under tbf in place of its byte
    ///   FIFO, with the scenario's `limit` (else the qdisc's default).
    /// - netem's own limit must hold every packet in flight on the delay line, or it drops
    ///   packets the scenario never asked to lose: room for twice the delay (plus jitter) at the
    ///   rate, 1 Gbit/s where none is set, and never under netem's default of 1000.
    package struct QueuePlan: Sendable, Hashable {
        /// A token bucket (tbf) for a rate.
        package struct TokenBucket: Sendable, Hashable {
            /// Bytes per second.
            package var rate: UInt64
            /// The bucket, in bytes: 4 ms at the rate, at least two full frames.
            package var bucket: UInt32
            /// The queue behind the bucket, in bytes.
            package var limit: UInt32
        }

        /// CoDel or FQ-CoDel in place of tbf's byte FIFO (`queue:`).
        package struct ManagedQueue: Sendable, Hashable {
            package var discipline: QueueDiscipline
            /// The queue limit in packets: the scenario's `limit`, else codel's 1000 and
            /// fq_codel's 10240 (their defaults); a byte limit is ⌈bytes / 1514⌉ packets for codel.
            package var packets: UInt32
            /// fq_codel's memory limit, from a byte `limit` (the kernel counts buffers' true size).
            package var memoryBytes: UInt32?
        }

        /// netem's packet limit.
        package var delayLinePackets: UInt32
        /// The rate's bucket, when a rate is set.
        package var tokenBucket: TokenBucket?
        /// The managed queue under the bucket, when `queue` is codel or fq-codel and a rate is set.
        package var managedQueue: ManagedQueue?
    }

    /// The queues for these conditions (see ``QueuePlan``).
    package var queuePlan: QueuePlan {
        let impairment = self.impairment
        let delay = max(.zero, impairment.delay ?? .zero) + max(.zero, impairment.jitter ?? .zero)
        let bytesPerSecond = (impairment.rate?.bitsPerSecond ?? 1e9) / 8
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) * 1e-18
        let flight = seconds * 2 * bytesPerSecond / 1514
        var plan = QueuePlan(delayLinePackets: UInt32(clamping: max(1000, Int(flight.rounded(.up)))), tokenBucket: nil)
        let bytesAsPackets = impairment.limitBytes.map { ($0 + 1513) / 1514 }
        guard let rate = impairment.rate else {
            if let limit = impairment.limit ?? bytesAsPackets { plan.delayLinePackets = UInt32(clamping: limit) }
            return plan
        }
        let perSecond = UInt64(max(1, (rate.bitsPerSecond / 8).rounded()))
        let bucket = UInt32(clamping: max(3028, Int(Double(perSecond) * 0.004)))
        let queue = impairment.limitBytes ?? impairment.limit.map { $0 * 1514 } ?? max(65536, Int(Double(perSecond) * 0.1))
        plan.tokenBucket = QueuePlan.TokenBucket(rate: perSecond, bucket: bucket, limit: UInt32(clamping: max(queue, Int(bucket))))
        if let discipline = impairment.queue, discipline != .dropTail {
            let fq: Bool
            if case .fqCodel = discipline { fq = true } else { fq = false }
            let packets = impairment.limit ?? (fq ? nil : bytesAsPackets) ?? (fq ? 10240 : 1000)
            plan.managedQueue = QueuePlan.ManagedQueue(discipline: discipline, packets: UInt32(clamping: packets),
                                                       memoryBytes: fq ? impairment.limitBytes.map { UInt32(clamping: $0) } : nil)
        }
        return plan
    }
}
