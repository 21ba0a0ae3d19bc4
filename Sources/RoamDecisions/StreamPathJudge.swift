import RoamCore

/// Whether a stream's path still serves it: judged by what the path delivers, not by the buffer
/// level a connection inherited.
///
/// A live source keeps a healthy path's buffer full. A path is too poor for the stream when, on
/// a connection given ``settleTime`` to catch up, it delivered less than the bitrate over the
/// last ``window`` (a lossy Wi-Fi that still trickles data, which no gap in the data reveals)
/// and the buffer is low: below a quarter of its target, or below what the player would use up
/// during ``switchTime`` at the rate the buffer drains (the poorer the path, the earlier the
/// move, so that the next path has time to start). A new connection that refills
/// the buffer (more than the bitrate) is kept however low the buffer still is: a freshly made
/// cellular connection whose buffer fell while the Wi-Fi starved is not the culprit.
///
/// Pure: the caller supplies the time (its clock, as a duration) and the byte count.
/// ``HandoverStateMachine`` applies it when configured with a ``HandoverStateMachine/StreamRequirement``.
public struct StreamPathJudge: Sendable {
    /// How far back the delivery rate looks.
    public static let window = Duration.seconds(1)
    /// How long a connection has before it can be judged.
    public static let settleTime = Duration.seconds(1)
    /// About how long a move to another path takes to bring data: its race, its slow start, the
    /// source catching up.
    public static let switchTime = Duration.milliseconds(1500)
    /// Samples closer together than this are not kept.
    static let sampleSpacing = Duration.milliseconds(50)

    public let bytesPerSecond: Double
    /// The buffer the player fills before playing (seconds of media).
    public let bufferTarget: Double
    /// Bytes received at sample times, oldest first, reaching back a little over ``window``.
    private var samples: [(time: Duration, bytes: Int64)] = []

    /// A judge for a stream with no samples yet.
    ///
    /// - Parameters:
    ///   - bytesPerSecond: The stream's bitrate, in bytes a second.
    ///   - bufferTarget: The buffer its player fills before playing.
    public init(bytesPerSecond: Double, bufferTarget: Duration) {
        self.bytesPerSecond = bytesPerSecond
        self.bufferTarget = bufferTarget.seconds
    }

    /// Bytes per second received over the last ``window`` as of the last sample; nil until a
    /// sample is that old.
    public private(set) var deliveryRate: Double?

    /// Takes in the flow's byte count at `now`, which updates ``deliveryRate``.
    ///
    /// - Parameters:
    ///   - now: The time of the sample, on the flow's clock.
    ///   - bytes: The bytes received over every connection of the flow so far.
    public mutating func record(now: Duration, bytes: Int64) {
        if let last = samples.last, now - last.time < Self.sampleSpacing {} else { samples.append((now, bytes)) }
        // Keep the newest sample at least a window old as the base, and what follows it.
        while samples.count > 1, now - samples[1].time >= Self.window { samples.removeFirst() }
        guard let base = samples.first, now - base.time >= Self.window else {
            deliveryRate = nil
            return
        }
        deliveryRate = Double(bytes - base.bytes) / ((now - base.time).seconds)
    }

    /// The current connection as the judge sees it.
    public struct Connection: Sendable {
        /// Its number among the flow's connections (each judged at most once).
        public var number: Int
        public var age: Duration
        /// The interface it runs over, when known.
        public var interface: String?

        /// The connection as the judge needs it.
        ///
        /// - Parameters:
        ///   - number: Its number among the flow's connections.
        ///   - age: How long it has been connected.
        ///   - interface: The interface it runs over, when known.
        public init(number: Int, age: Duration, interface: String?) {
            self.number = number
            self.age = age
            self.interface = interface
        }
    }

    /// The last path found too poor: its connection and interface, the share of the bitrate it
    /// delivered, and when.
    public private(set) var lastCondemned: (connection: Int, interface: String?, share: Double, at: Duration)?
    /// How long what a condemned path delivered counts as evidence against returning to it.
    public static let evidenceLifetime = Duration.seconds(10)

    /// Why the current path is too poor for the stream, or nil while it serves it (or was
    /// judged already). A path that delivers more than the one the flow last left, lately,
    /// is kept even below the bitrate: when every path is poor, the flow stays on the best one
    /// measured instead of going back to a worse one.
    ///
    /// - Parameters:
    ///   - buffered: Seconds of media buffered now, while playing.
    ///   - connection: The flow's current connection, nil while it has none.
    ///   - now: The time of the judgement, on the clock the flow's samples use.
    /// - Returns: The reason to leave the path, in words for the report, or nil to stay.
    public mutating func verdict(buffered: Double, connection: Connection?, now: Duration) -> String? {
        guard let connection, connection.age >= Self.settleTime, let rate = deliveryRate, rate < bytesPerSecond else { return nil }
        let share = rate / bytesPerSecond
        // Seconds of media the player uses up, net of what arrives, while a move takes effect.
        let drainedDuringSwitch = (1 - share) * Self.switchTime.seconds
        guard buffered < max(bufferTarget / 4, drainedDuringSwitch) else { return nil }
        if let last = lastCondemned {
            if last.connection == connection.number { return nil }
            if last.interface != connection.interface, now - last.at < Self.evidenceLifetime, share > last.share { return nil }
        }
        lastCondemned = (connection.number, connection.interface, share, now)
        let hundredths = Int((buffered * 100).rounded())
        return "the stream's buffer fell to \(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100) s, its path delivering "
            + "\(Int((share * 100).rounded()))% of the bitrate"
    }
}
