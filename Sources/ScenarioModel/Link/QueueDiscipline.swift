/// How one direction's bottleneck queue (behind a `rate` or a `trace`) decides what to drop
/// (`queue:`).
public enum QueueDiscipline: Sendable, Hashable {
    /// Drop what arrives when the queue is full (the default): a deep buffer at a low rate holds
    /// seconds of traffic (bufferbloat).
    case dropTail
    /// CoDel (RFC 8289, Linux's `sch_codel`): drops at the head once packets have waited more
    /// than `target` for a whole `interval`, ever more often while they still do.
    case codel(CoDelParameters)
    /// FQ-CoDel (RFC 8290, Linux's `sch_fq_codel`): flows hashed into `flows` queues served in
    /// turn (deficit round robin, `quantum` bytes a turn, new flows first), each with CoDel; a
    /// full queue drops from the flow holding the most bytes.
    case fqCodel(CoDelParameters, flows: Int, quantum: Int)

    /// The name as a scenario writes it.
    public var name: String {
        switch self {
        case .dropTail: "drop-tail"
        case .codel: "codel"
        case .fqCodel: "fq-codel"
        }
    }

    /// CoDel's parameters, where it has them.
    public var codel: CoDelParameters? {
        switch self {
        case .dropTail: nil
        case .codel(let parameters), .fqCodel(let parameters, _, _): parameters
        }
    }

    /// Linux's defaults for fq_codel: 1024 flows, a quantum of one 1514-byte frame.
    public static let defaultFlows = 1024
    /// See ``defaultFlows``.
    public static let defaultQuantum = 1514
    /// What a scenario may set: 1 to 65536 flows, a quantum of 256 to 65536 bytes.
    public static let flowRange = 1...65536
    /// See ``flowRange``.
    public static let quantumRange = 256...65536
}

/// CoDel's two parameters; the defaults are RFC 8289's and Linux's (5 ms, 100 ms).
public struct CoDelParameters: Sendable, Hashable {
    /// The standing queue delay CoDel tolerates.
    public var target: Duration
    /// How long the delay must stay above `target` before the first drop (about a worst-case
    /// round trip).
    public var interval: Duration

    /// CoDel's parameters (RFC 8289's defaults unless given).
    public init(target: Duration = .milliseconds(5), interval: Duration = .milliseconds(100)) {
        self.target = target
        self.interval = interval
    }

    /// What a scenario may set: a target from 1 µs to 1 s, an interval from 1 ms to 10 s and not
    /// shorter than the target.
    public static let targetRange = Duration.microseconds(1)...Duration.seconds(1)
    /// See ``targetRange``.
    public static let intervalRange = Duration.milliseconds(1)...Duration.seconds(10)
}
