import CNetlink

/// A traffic-control handle, `major:minor` as `tc` prints it. The corresponding C type is the
/// `__u32` of `tcm_handle` and `tcm_parent`.
public struct QdiscHandle: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(major: UInt16, minor: UInt16) { self.rawValue = UInt32(major) << 16 | UInt32(minor) }

    public var major: UInt16 { UInt16(rawValue >> 16) }
    public var minor: UInt16 { UInt16(rawValue & 0xffff) }

    /// `TC_H_ROOT`: the parent of a device's root qdisc.
    public static let root = QdiscHandle(rawValue: 0xffff_ffff)
    /// `TC_H_UNSPEC`: no handle; the kernel picks one.
    public static let unspecified = QdiscHandle(rawValue: 0)

    public var description: String {
        switch self {
        case .root: "root"
        case .unspecified: "none"
        default: "\(String(major, radix: 16)):\(minor == 0 ? "" : String(minor, radix: 16))"
        }
    }
}

/// A queueing discipline's kind (`TCA_KIND`), as the kernel names it.
public struct QdiscKind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `sch_netem`: delay, jitter, loss, duplication, reordering, corruption.
    public static let netem = QdiscKind(rawValue: "netem")
    /// `sch_tbf`: a token bucket that limits the rate.
    public static let tokenBucket = QdiscKind(rawValue: "tbf")
    /// `sch_codel`: CoDel over one queue (RFC 8289).
    public static let codel = QdiscKind(rawValue: "codel")
    /// `sch_fq_codel`: flow queues, each with CoDel (RFC 8290).
    public static let fqCodel = QdiscKind(rawValue: "fq_codel")
    public var description: String { rawValue }
}

/// What a qdisc counted since it was made (`TCA_STATS2`), as `tc -s qdisc show` prints it.
public struct QdiscStatistics: Sendable, Hashable {
    /// Packets and bytes it sent on.
    public var packets: UInt64 = 0
    public var bytes: UInt64 = 0
    /// Packets it dropped (netem's loss, a full queue, CoDel's drops).
    public var drops: UInt64 = 0
    /// Times it held back a packet over its limit (tbf's rate).
    public var overlimits: UInt64 = 0
    /// Packets handed back to it by the device.
    public var requeues: UInt64 = 0
    /// What it holds now: packets and bytes.
    public var queueLength: UInt64 = 0
    public var backlogBytes: UInt64 = 0

    public init() {}
}

/// A queueing discipline, as in an `RTM_NEWQDISC` message.
public struct Qdisc: Sendable, Hashable {
    public var interfaceIndex: Int32
    public var handle: QdiscHandle
    public var parent: QdiscHandle
    public var kind: QdiscKind
    /// Its counters, when read from the kernel (zero in one made to be sent).
    public var statistics = QdiscStatistics()

    public init(interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle, kind: QdiscKind) {
        self.interfaceIndex = interfaceIndex
        self.handle = handle
        self.parent = parent
        self.kind = kind
    }

    init(libnl qdisc: OpaquePointer) {
        self.init(interfaceIndex: rtnl_tc_get_ifindex(qdisc),
                  handle: QdiscHandle(rawValue: rtnl_tc_get_handle(qdisc)),
                  parent: QdiscHandle(rawValue: rtnl_tc_get_parent(qdisc)),
                  kind: QdiscKind(rawValue: libnlString(rtnl_tc_get_kind(qdisc)) ?? ""))
        statistics.packets = rtnl_tc_get_stat(qdisc, RTNL_TC_PACKETS)
        statistics.bytes = rtnl_tc_get_stat(qdisc, RTNL_TC_BYTES)
        statistics.drops = rtnl_tc_get_stat(qdisc, RTNL_TC_DROPS)
        statistics.overlimits = rtnl_tc_get_stat(qdisc, RTNL_TC_OVERLIMITS)
        statistics.requeues = rtnl_tc_get_stat(qdisc, RTNL_TC_REQUEUES)
        statistics.queueLength = rtnl_tc_get_stat(qdisc, RTNL_TC_QLEN)
        statistics.backlogBytes = rtnl_tc_get_stat(qdisc, RTNL_TC_BACKLOG)
    }
}

/// The settings of a netem qdisc. Probabilities are fractions (0...1); the kernel receives them
/// scaled to `UInt32.max`, as `tc` sends them.
public struct NetemConfiguration: Sendable, Hashable {
    /// How packets are lost.
    public enum Loss: Sendable, Hashable {
        /// Each packet with `probability`; `correlation` ties a decision to the previous one.
        case random(probability: Double, correlation: Double)
        /// Gilbert-Elliott (`NETEM_LOSS_GE`): `p` good→bad, `r` bad→good, loss `lossInBad` in
        /// the bad state and `lossInGood` in the good one.
        case gilbertElliott(p: Double, r: Double, lossInBad: Double, lossInGood: Double)
    }

    public var delay: Duration = .zero
    public var jitter: Duration = .zero
    public var delayCorrelation: Double = 0
    /// A delay distribution table (`NETEM_DIST_SCALE` units, as in iproute2's `*.dist` files);
    /// nil for netem's uniform jitter.
    public var distribution: [Int16]?
    public var loss: Loss = .random(probability: 0, correlation: 0)
    public var duplicate: Double = 0
    /// Fraction of packets sent at once instead of delayed (needs a delay).
    public var reorder: Double = 0
    public var corrupt: Double = 0
    /// Packets netem holds at most (the delay line).
    public var limit: UInt32 = 1000
    /// Seed of netem's loss and corruption generator (`TCA_NETEM_PRNG_SEED`, Linux 6.3 and
    /// later; older kernels ignore it).
    public var seed: UInt64?

    public init() {}

    /// A probability as the kernel takes it.
    public static func scaled(_ probability: Double) -> UInt32 {
        guard probability > 0 else { return 0 }
        guard probability < 1 else { return UInt32.max }
        return UInt32((probability * Double(UInt32.max)).rounded())
    }
}

/// The settings of a token-bucket (tbf) qdisc.
public struct TokenBucketConfiguration: Sendable, Hashable {
    /// Bytes per second.
    public var rate: UInt64
    /// Bytes that may leave at once after an idle time.
    public var bucket: UInt32
    /// Bytes queued at most while waiting for tokens.
    public var limit: UInt32

    public init(rate: UInt64, bucket: UInt32, limit: UInt32) {
        self.rate = rate
        self.bucket = bucket
        self.limit = limit
    }

    /// The largest rate libnl's tbf API carries (an `int` of bytes per second, about 17 Gbit/s).
    public static let maximumRate = UInt64(Int32.max)
}

/// The settings of a CoDel (`codel`) or FQ-CoDel (`fq_codel`) qdisc. ECN marking is always off:
/// both drop, as Roam's userspace emulator does.
public struct CoDelConfiguration: Sendable, Hashable {
    /// CoDel's target (`TCA_CODEL_TARGET`, sent in microseconds).
    public var target: Duration
    /// CoDel's interval (`TCA_CODEL_INTERVAL`, sent in microseconds).
    public var interval: Duration
    /// The queue limit in packets.
    public var limit: UInt32
    /// FQ-CoDel's flow queues and quantum; nil for plain CoDel.
    public var flows: UInt32?
    /// See ``flows``.
    public var quantum: UInt32?
    /// FQ-CoDel's memory limit in bytes (the kernel counts buffers' true size), if set.
    public var memoryLimit: UInt32?

    /// A codel qdisc's settings; with `flows`, fq_codel's.
    public init(target: Duration, interval: Duration, limit: UInt32, flows: UInt32? = nil, quantum: UInt32? = nil, memoryLimit: UInt32? = nil) {
        self.target = target
        self.interval = interval
        self.limit = limit
        self.flows = flows
        self.quantum = quantum
        self.memoryLimit = memoryLimit
    }

    /// `codel` or `fq_codel`.
    public var kind: QdiscKind { flows == nil ? .codel : .fqCodel }
}
