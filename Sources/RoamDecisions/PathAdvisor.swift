import RoamCore

/// Advice about a connection the app keeps and decides about itself, in the vocabulary of
/// Network.framework (and of `NIOTSNetworkEvents`): whether the connection is still *viable*,
/// whether a *better path* is available, and the path's changes. It moves nothing: where
/// `HandoverConnection` leaves a connection, the advisor tells the app that it could, and why.
///
/// The rules are ``HandoverStateMachine``'s (there is no other copy of them):
/// - **Not viable** when the connection's interface leaves the path (over MPTCP: when no
///   interface is left), or when it stalls: data was written and nothing came back for the
///   stall threshold (four smoothed round trips plus 200 ms, within the configured bounds). Its
///   interface is then held down for races (``Action/heldDown(interface:holdDown:)``). **Viable**
///   again when data arrives, or when the interface is back in the path.
/// - **A better path is available** while the connection is not viable and the policy permits
///   another interface of the path that is not held down; and while the connection runs over an
///   expensive interface and the path's first interface is a free one that answered probes in a
///   row (three; more after repeated stalls). **Unavailable** again when that stops being true.
/// - **Path changed** on every path the monitor publishes.
///
/// The connection counts as waiting for data from a write until the next read: a request sent
/// and not answered is judged, an idle connection is not. A response that stops halfway is not
/// judged (nothing says more is due) unless the app writes again.
///
/// Events in, actions out, the caller's clock passed with every event, so every rule is tested
/// with a manual clock; RoamNIO's channel handler drives it. It is a view of a
/// ``HandoverSession`` in its advising role: the plans (probes, hold-downs, stall evidence) are
/// the session's, as for `HandoverConnection`.
public struct PathAdvisor: Sendable {
    /// What the app is told.
    public enum Advice: Sendable, Hashable {
        /// The path the monitor published.
        case pathChanged(NetworkPath)
        /// The connection can (or, with the reason, can no longer) carry data.
        case viability(isViable: Bool, reason: HandoverStateMachine.Reason?)
        /// A better path than the connection's is available: a new connection raced now would
        /// take `interface`.
        case betterPathAvailable(interface: String, reason: HandoverStateMachine.Reason)
        /// No better path than the connection's is available (any more).
        case betterPathUnavailable
    }

    public enum Event: Sendable {
        /// The connection: its interface (nil when unknown), transport and peer's address family.
        case connected(interface: String?, transport: HandoverStateMachine.Transport, family: AddressFamily?, at: Duration)
        /// The monitor published a path.
        case pathUpdated(NetworkPath, at: Duration)
        /// The app wrote `bytes`.
        case sent(bytes: Int, at: Duration)
        /// `bytes` arrived.
        case received(bytes: Int, at: Duration)
        /// Time passed; `smoothedRTT` is the connection's (TCP_INFO).
        case tick(at: Duration, smoothedRTT: Duration?)
        /// Time passed, with what the transport says of the connection (`TCP_INFO`): the round
        /// trip, and whether data of the app's own is unacknowledged (the evidence a stall needs
        /// with ``HandoverSession/StallEvidence/unacknowledgedData``).
        case sample(at: Duration, transport: HandoverSession.TransportSample?)
        /// Another connection of the app held `interface` down until `until`.
        case heldDownElsewhere(interface: String, until: Duration)
        /// A probe the advisor asked for connected, or failed.
        case probeFinished(interface: String, connected: Bool, at: Duration)
    }

    public enum Action: Sendable, Hashable {
        /// Tell the app.
        case advise(Advice)
        /// Open a probe over `interface` (a connection attempt to the peer, nothing sent) and
        /// report it with ``Event/probeFinished(interface:connected:at:)``.
        case startProbe(interface: String)
        /// Abandon the probe in flight.
        case abandonProbe(interface: String)
        /// `interface` stalled: leave it out of new races for `holdDown`.
        case heldDown(interface: String, holdDown: Duration)
    }

    public let policy: PathPolicy
    /// The session behind the advice, in its advising role: the same plans a
    /// `HandoverConnection` carries out, with its moves turned into advice.
    public private(set) var session: HandoverSession

    /// Advice for a connection to `peer` (its addresses) on `port`: probes go there (or to
    /// `configuration`'s ``HandoverSession/Configuration/probePort``). With no peer given,
    /// probes cannot be planned and fail.
    ///
    /// - Parameters:
    ///   - policy: The paths the connection may use.
    ///   - configuration: The handover rules the advice follows.
    ///   - peer: The peer's addresses, which probes go to.
    ///   - port: The connection's port.
    ///   - probePort: The port probes connect to (nil: `port`).
    ///   - stallEvidence: What counts as a stall.
    public init(policy: PathPolicy = PathPolicy(), configuration: HandoverStateMachine.Configuration = HandoverStateMachine.Configuration(),
                peer: [IPAddress] = [], port: UInt16 = 0, probePort: UInt16? = nil, stallEvidence: HandoverSession.StallEvidence = .silence) {
        self.policy = policy
        var sessionConfiguration = HandoverSession.Configuration()
        sessionConfiguration.rules = configuration
        sessionConfiguration.policy = policy
        sessionConfiguration.probePort = probePort
        sessionConfiguration.stallEvidence = stallEvidence
        session = HandoverSession(to: peer, port: port, configuration: sessionConfiguration, role: .advises)
    }

    public var isViable: Bool { session.isViable }
    /// Why the connection is not viable, while it is not.
    public var unviable: HandoverStateMachine.Reason? { session.unviableReason }
    /// The better interface the app was told of, while it stands.
    public var betterInterface: String? { session.announcedBetterInterface }
    /// The latest path.
    public var path: NetworkPath? { session.path }
    /// Interfaces held down after stalls.
    public var stalledPaths: StalledPaths { session.machine.stalledPaths }

    /// When the caller must next send a tick, at the latest.
    ///
    /// - Parameter smoothedRTT: The connection's smoothed round-trip time, or nil.
    /// - Returns: The time of the next tick, or nil when nothing is timed.
    public func nextDeadline(smoothedRTT: Duration?) -> Duration? {
        session.nextDeadline(transport: smoothedRTT.map { .init(smoothedRTT: $0, unacknowledged: 1) }, awaitingDataSince: nil, at: .zero)
    }

    /// When the caller must next send a tick, at the latest, from what the transport says now.
    ///
    /// - Parameters:
    ///   - transport: What the transport says now, if the caller read it.
    ///   - now: The time, on the caller's clock.
    /// - Returns: The time of the next tick, or nil when nothing is timed.
    public func nextDeadline(transport: HandoverSession.TransportSample?, at now: Duration) -> Duration? {
        session.nextDeadline(transport: transport, awaitingDataSince: nil, at: now)
    }

    /// Takes in what happened to the app's connection.
    ///
    /// - Parameter event: The connection made, a path update, bytes sent or received, a tick
    ///   or a transport sample, a probe's result, or a hold-down elsewhere.
    /// - Returns: What the app should hear or do: advice (viability, a better path, the path's
    ///   changes), probes to start or abandon, interfaces held down.
    public mutating func handle(_ event: Event) -> [Action] {
        let requests: [HandoverSession.Request]
        switch event {
        case let .connected(interface, transport, family, at):
            let remote = session.addresses.first { $0.family == family } ?? session.addresses.first
            requests = session.handle(.connected(.init(interface: interface, transport: transport, remote: remote), at: at))
        case let .pathUpdated(path, at):
            requests = session.handle(.pathUpdated(path, at: at))
        case let .sent(bytes, at):
            requests = session.handle(.sent(bytes: bytes, at: at))
        case let .received(bytes, at):
            requests = session.handle(.received(bytes: bytes, at: at))
        case let .tick(at, rtt):
            // Without a transport sample, silence is the evidence (unacknowledged: unknown).
            requests = session.handle(.tick(at: at, transport: rtt.map { .init(smoothedRTT: $0, unacknowledged: 1) }, awaitingDataSince: nil))
        case let .sample(at, transport):
            requests = session.handle(.tick(at: at, transport: transport, awaitingDataSince: nil))
        case let .probeFinished(interface, connected, at):
            requests = session.handle(.probeFinished(interface: interface, connected: connected, at: at))
        case let .heldDownElsewhere(interface, until):
            requests = session.handle(.heldDownElsewhere(interface: interface, until: until))
        }
        return requests.compactMap { request -> Action? in
            switch request {
            case .advise(let advice): .advise(advice)
            case let .probe(interface, _, _): .startProbe(interface: interface.name)
            case .abandonProbe(let interface): .abandonProbe(interface: interface)
            case let .holdDown(interface, hold): .heldDown(interface: interface, holdDown: hold)
            case .leave, .restore, .switchedSubflows, .subflow, .subflowOpened, .subflowClosed: nil
            }
        }
    }

    /// The probe the session plans for `interface` now: the peer's address of a family the
    /// interface has, and the port.
    ///
    /// - Parameter interface: An interface of the latest path.
    /// - Returns: The address and port to probe, or nil when the interface is not on the path
    ///   or has no address of a family the peer has.
    public func probeTarget(for interface: String) -> (destination: IPAddress, port: UInt16)? {
        guard let target = session.path?.availableInterfaces.first(where: { $0.name == interface }) else { return nil }
        let families = Set(target.addresses.filter { !$0.address.isLinkLocal }.map(\.address.family))
        guard let destination = session.addresses.first(where: { families.contains($0.family) }) else { return nil }
        return (destination, session.configuration.probePort ?? session.port)
    }
}
