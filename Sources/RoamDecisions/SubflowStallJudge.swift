import RoamCore

/// Judges from the outside when an interface stalls the MPTCP connections over it: a path
/// manager for programs it did not write (`mptcpize run`) cannot ask them whether they wait for
/// data, so it reads what the kernel says of each subflow (sock_diag's `tcp_info`) a few times a
/// second and hands the samples here. Pure: the caller's clock, no system calls.
///
/// Two rules, each for a subflow that carries (not a backup):
/// - **Sending.** It has data out and no acknowledgement for the stall threshold: the path ahead
///   passes nothing (RTO backoff, a blackhole).
/// - **Receiving.** Its connection was receiving, data arriving in ``Configuration/activeSamples``
///   samples in a row, and then nothing arrived on any of its subflows for the stall threshold,
///   while this subflow lost packets on the way in (out-of-order arrivals or retransmissions) in
///   the last ``Configuration/lossMemory``. The peer is sending into a path that loses, and its
///   retransmission timeouts back off; silence without losses is a connection gone idle, not a
///   stall, and is never judged.
///
/// A stall is the interface's only if no other connection moves over it at the time (an
/// acknowledgement or data within its own threshold): one connection whose peer stopped answering
/// says nothing of the path, and a local user must not be able to take an interface from every
/// program by opening a connection that stalls on purpose while others work.
///
/// The stall threshold is ``StalledPaths/stallThreshold(smoothedRTT:minimum:maximum:)`` of the
/// subflow's smoothed RTT, as for Roam's own handover clients. Each stall is reported once: a
/// sending stall again only after an acknowledgement arrived, a receiving one only after its
/// connection received again.
public struct SubflowStallJudge: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The stall threshold's floor and ceiling.
        public var minimumStall: Duration = .milliseconds(300)
        public var maximumStall: Duration = .seconds(10)
        /// Samples in a row with data arriving that make a connection one that receives.
        public var activeSamples = 3
        /// How long a subflow's losses count towards a receiving stall.
        public var lossMemory: Duration = .seconds(5)

        /// The defaults: a threshold from 300 ms to 10 s, three samples with data make a
        /// stream, losses count for 5 s.
        public init() {}
    }

    /// One subflow as sampled.
    public struct Sample: Sendable, Hashable {
        /// The interface its local address is on.
        public var interface: String
        /// Its connection (the MPTCP token) and the subflow itself (the socket's cookie).
        public var connection: UInt32
        public var subflow: UInt64
        /// Whether this end made it a backup.
        public var isBackup: Bool
        /// Segments out and not acknowledged.
        public var unacknowledged: Int
        /// Time since data, and since an acknowledgement, last arrived.
        public var sinceDataReceived: Duration
        public var sinceAcknowledgementReceived: Duration
        public var smoothedRTT: Duration?
        /// Counters over the subflow's life: data segments in, packets out of order in,
        /// retransmissions.
        public var dataSegmentsReceived: UInt32
        public var outOfOrderPacketsReceived: UInt32
        public var retransmissions: UInt32

        /// A sample, each value as sock_diag gives it.
        ///
        /// - Parameters:
        ///   - interface: The interface its local address is on.
        ///   - connection: Its connection's MPTCP token.
        ///   - subflow: The socket's cookie.
        ///   - isBackup: Whether this end made it a backup.
        ///   - unacknowledged: Segments out and not acknowledged.
        ///   - sinceDataReceived: Time since data last arrived.
        ///   - sinceAcknowledgementReceived: Time since an acknowledgement last arrived.
        ///   - smoothedRTT: The smoothed round-trip time, if measured.
        ///   - dataSegmentsReceived: Data segments in, over its life.
        ///   - outOfOrderPacketsReceived: Packets in out of order, over its life.
        ///   - retransmissions: Retransmissions, over its life.
        public init(interface: String, connection: UInt32, subflow: UInt64, isBackup: Bool, unacknowledged: Int,
                    sinceDataReceived: Duration, sinceAcknowledgementReceived: Duration, smoothedRTT: Duration?,
                    dataSegmentsReceived: UInt32, outOfOrderPacketsReceived: UInt32, retransmissions: UInt32) {
            self.interface = interface
            self.connection = connection
            self.subflow = subflow
            self.isBackup = isBackup
            self.unacknowledged = unacknowledged
            self.sinceDataReceived = sinceDataReceived
            self.sinceAcknowledgementReceived = sinceAcknowledgementReceived
            self.smoothedRTT = smoothedRTT
            self.dataSegmentsReceived = dataSegmentsReceived
            self.outOfOrderPacketsReceived = outOfOrderPacketsReceived
            self.retransmissions = retransmissions
        }
    }

    /// A stall judged.
    public struct Stall: Sendable, Hashable, CustomStringConvertible {
        public enum Direction: String, Sendable, Hashable { case sending, receiving }
        public var interface: String
        public var connection: UInt32
        public var direction: Direction
        /// How long it had been silent, and the threshold it passed.
        public var silence: Duration
        public var threshold: Duration

        public var description: String {
            "\(interface) stalled \(direction) (token \(String(connection, radix: 16)): nothing for \(Int(silence / .milliseconds(1))) ms, threshold \(Int(threshold / .milliseconds(1))) ms)"
        }
    }

    private struct Subflow {
        var lossCount: UInt32
        var lastLoss: Duration?
        var reportedSending = false
        var lastAcknowledgement: Duration
    }

    private struct Connection {
        var segments: UInt32
        var lastArrival: Duration
        var samplesWithData = 0
        var receiving = false
        var reported = false
    }

    public var configuration: Configuration
    private var subflows: [UInt64: Subflow] = [:]
    private var connections: [UInt32: Connection] = [:]

    /// A judge that has seen nothing yet.
    ///
    /// - Parameter configuration: The rules' parameters.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The connections it follows now (for tests and status).
    public var connectionCount: Int { connections.count }

    /// Stalls not judged because another connection moved over the same interface then.
    public private(set) var vetoes = 0

    /// Takes one sample of every subflow; a subflow or connection missing from it is forgotten.
    ///
    /// - Parameters:
    ///   - samples: Every subflow now.
    ///   - now: When they were read, on the caller's clock.
    /// - Returns: The stalls judged by this sample, at most one per interface.
    public mutating func observe(_ samples: [Sample], at now: Duration) -> [Stall] {
        var stalls: [Stall] = []
        func threshold(_ sample: Sample) -> Duration {
            StalledPaths.stallThreshold(smoothedRTT: sample.smoothedRTT, minimum: configuration.minimumStall, maximum: configuration.maximumStall)
        }
        func judge(_ stall: Stall) {
            // Another connection that moves over the interface (an acknowledgement or data within
            // its threshold) says the path works: the trouble is the stalled connection's peer.
            let moving = samples.contains { other in
                other.interface == stall.interface && other.connection != stall.connection && !other.isBackup
                    && min(other.sinceAcknowledgementReceived, other.sinceDataReceived) < threshold(other)
            }
            if moving {
                vetoes += 1
            } else if !stalls.contains(where: { $0.interface == stall.interface }) {
                stalls.append(stall)
            }
        }
        // Subflows: their losses, and the sending rule.
        var seenSubflows: Set<UInt64> = []
        for sample in samples {
            seenSubflows.insert(sample.subflow)
            let losses = sample.outOfOrderPacketsReceived &+ sample.retransmissions
            let acknowledged = now - sample.sinceAcknowledgementReceived
            var subflow = subflows[sample.subflow]
                // A subflow first seen with losses counts them as recent: a path that loses its
                // handshake's packets is the case this is for.
                ?? Subflow(lossCount: 0, lastLoss: nil, lastAcknowledgement: acknowledged)
            if losses != subflow.lossCount {
                subflow.lossCount = losses
                subflow.lastLoss = now
            }
            if acknowledged > subflow.lastAcknowledgement { subflow.reportedSending = false }
            subflow.lastAcknowledgement = acknowledged
            let limit = threshold(sample)
            if !sample.isBackup, sample.unacknowledged > 0, sample.sinceAcknowledgementReceived >= limit, !subflow.reportedSending {
                subflow.reportedSending = true
                judge(Stall(interface: sample.interface, connection: sample.connection, direction: .sending,
                            silence: sample.sinceAcknowledgementReceived, threshold: limit))
            }
            subflows[sample.subflow] = subflow
        }
        subflows = subflows.filter { seenSubflows.contains($0.key) }
        // Connections: the receiving rule.
        var byConnection: [UInt32: [Sample]] = [:]
        for sample in samples { byConnection[sample.connection, default: []].append(sample) }
        for (token, members) in byConnection {
            let segments = members.reduce(UInt32(0)) { $0 &+ $1.dataSegmentsReceived }
            let arrival = now - (members.map(\.sinceDataReceived).min() ?? .zero)
            var connection = connections[token] ?? Connection(segments: segments, lastArrival: arrival)
            if segments != connection.segments {
                connection.samplesWithData += 1
                if connection.samplesWithData >= configuration.activeSamples { connection.receiving = true }
                connection.reported = false
            } else if !connection.receiving {
                // A sample without data ends a run of them: a stream is wanted, not one reply.
                connection.samplesWithData = 0
            }
            connection.segments = segments
            connection.lastArrival = max(connection.lastArrival, arrival)
            let silence = now - connection.lastArrival
            let carrying = members.filter { !$0.isBackup }
            if connection.receiving, !connection.reported, let limit = carrying.map(threshold).min(), silence >= limit {
                let lossy = carrying.filter { sample in subflows[sample.subflow]?.lastLoss.map { now - $0 <= configuration.lossMemory } ?? false }
                if let stalled = lossy.first {
                    connection.reported = true
                    connection.receiving = false
                    connection.samplesWithData = 0
                    judge(Stall(interface: stalled.interface, connection: token, direction: .receiving, silence: silence, threshold: threshold(stalled)))
                } else if silence >= limit * 2 {
                    // Silent past twice the threshold with no loss: gone idle, not stalled. It
                    // must receive a stream again before it is judged again.
                    connection.receiving = false
                    connection.samplesWithData = 0
                }
            }
            connections[token] = connection
        }
        connections = connections.filter { byConnection[$0.key] != nil }
        return stalls
    }
}
