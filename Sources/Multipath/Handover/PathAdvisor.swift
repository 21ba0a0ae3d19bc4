import Netlink
import PathMonitor

/// Advice about a connection the app keeps and decides about itself, in the vocabulary of
/// Network.framework (and of `NIOTSNetworkEvents`): whether the connection is still *viable*,
/// whether a *better path* is available, and the path's changes. It moves nothing: where
/// ``HandoverConnection`` leaves a connection, the advisor tells the app that it could, and why.
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
/// with a manual clock; RoamNIO's channel handler drives it.
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

    public let policy: ConnectionPolicy
    private var machine: HandoverStateMachine
    private var interface: String?
    private var transport: HandoverStateMachine.Transport = .tcp
    private var awaitingSince: Duration?
    /// Why the connection is not viable, while it is not.
    public private(set) var unviable: HandoverStateMachine.Reason?
    /// The better interface the app was told of, while it stands.
    public private(set) var betterInterface: String?
    /// A free interface that answered the machine's probes, while the app stays where it is.
    private var provenFree: String?

    public init(policy: ConnectionPolicy = ConnectionPolicy(), configuration: HandoverStateMachine.Configuration = HandoverStateMachine.Configuration()) {
        self.policy = policy
        var configuration = configuration
        configuration.usesPathManager = false
        configuration.controlsSubflows = false
        configuration.stream = nil
        machine = HandoverStateMachine(configuration: configuration)
    }

    public var isViable: Bool { unviable == nil }
    /// The latest path.
    public var path: NetworkPath? { machine.path }
    /// Interfaces held down after stalls.
    public var stalledPaths: StalledPaths { machine.stalledPaths }

    /// When the caller must next send a tick, at the latest (nil: nothing is timed).
    public func nextDeadline(smoothedRTT: Duration?) -> Duration? {
        machine.nextDeadline(smoothedRTT: smoothedRTT, awaitingDataSince: awaitingSince)
    }

    public mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        let now: Duration
        switch event {
        case let .connected(interface, transport, family, at):
            now = at
            self.interface = interface
            self.transport = transport
            awaitingSince = nil
            unviable = nil
            provenFree = nil
            actions += carryOut(machine.handle(.connected(interface: interface, transport: transport, family: family, at: at)), at: at)
        case let .pathUpdated(path, at):
            now = at
            actions.append(.advise(.pathChanged(path)))
            actions += carryOut(machine.handle(.pathUpdated(path, at: at)), at: at)
            let anyInterface = path.availableInterfaces.contains { $0.type != .loopback }
            if transport == .mptcp, !anyInterface, unviable == nil {
                // The kernel moves an MPTCP connection's subflows: it is lost only with every path.
                unviable = .pathLost(interface: interface ?? "every interface")
                actions.append(.advise(.viability(isViable: false, reason: unviable)))
            }
            // Lost with its interface (over MPTCP, with all of them), viable again once it is back.
            if case .pathLost(let lost)? = unviable,
               transport == .mptcp ? anyInterface : path.availableInterfaces.contains(where: { $0.name == lost }) {
                actions += becomeViable(at: at)
            }
        case let .sent(bytes, at):
            now = at
            if bytes > 0, awaitingSince == nil { awaitingSince = at }
        case let .received(bytes, at):
            now = at
            guard bytes > 0 else { return [] }
            awaitingSince = nil
            actions += carryOut(machine.handle(.received(bytes: bytes, at: at)), at: at)
            if case .stalled? = unviable { actions += becomeViable(at: at) }
        case let .tick(at, rtt):
            now = at
            actions += carryOut(machine.handle(.tick(at: at, smoothedRTT: rtt, awaitingDataSince: awaitingSince)), at: at)
        case let .probeFinished(interface, connected, at):
            now = at
            actions += carryOut(machine.handle(.probeFinished(interface: interface, connected: connected, at: at)), at: at)
        }
        return actions + reviewBetterPath(at: now)
    }

    /// The machine's actions, as advice: a move becomes "not viable" or "a better path", and the
    /// connection stays (the app decides).
    private mutating func carryOut(_ machineActions: [HandoverStateMachine.Action], at now: Duration) -> [Action] {
        var actions: [Action] = []
        for action in machineActions {
            switch action {
            case let .markStalled(interface, hold):
                actions.append(.heldDown(interface: interface, holdDown: hold))
            case .startProbe(let interface):
                actions.append(.startProbe(interface: interface))
            case .abandonProbe(let interface):
                actions.append(.abandonProbe(interface: interface))
            case .move(let reason):
                switch reason {
                case .betterPath(let target, _):
                    provenFree = target
                    // Staying keeps the probes going, so the evidence stays fresh.
                    _ = machine.handle(.stayed(at: now))
                case .stalled, .pathLost, .tooPoor, .failed:
                    // Judged again once viable: not before, or a stall would be found again at
                    // every tick, its hold-down doubling each time.
                    if unviable == nil {
                        unviable = reason
                        actions.append(.advise(.viability(isViable: false, reason: reason)))
                    }
                }
            case .restore, .switchSubflows:
                break  // Path manager and subflow control: not configured.
            }
        }
        return actions
    }

    private mutating func becomeViable(at now: Duration) -> [Action] {
        unviable = nil
        awaitingSince = nil
        _ = machine.handle(.stayed(at: now))
        return [.advise(.viability(isViable: true, reason: nil))]
    }

    /// The interface a new connection should take instead of this one, if there is one.
    private mutating func betterChoice(at now: Duration) -> (String, HandoverStateMachine.Reason)? {
        guard let path = machine.path else { return nil }
        if let reason = unviable {
            guard let racePath = machine.racePath(at: now), case .success(let permitted) = policy.permittedInterfaces(of: racePath) else { return nil }
            let other = permitted.first { $0.type != .loopback && $0.name != interface && !machine.stalledPaths.isHeldDown($0.name, at: now) }
            return other.map { ($0.name, reason) }
        }
        guard let free = provenFree, let interface else { return nil }
        let available = path.availableInterfaces
        guard let target = available.first(where: { $0.name == free }), !target.isExpensive, policy.refusal(of: target) == nil,
              !machine.stalledPaths.isHeldDown(free, at: now),
              available.first(where: { $0.name == interface })?.isExpensive ?? false else {
            provenFree = nil
            return nil
        }
        return (free, .betterPath(interface: free, probes: machine.probesRequired(for: free)))
    }

    private mutating func reviewBetterPath(at now: Duration) -> [Action] {
        let choice = betterChoice(at: now)
        switch (betterInterface, choice) {
        case (nil, let (target, reason)?):
            betterInterface = target
            return [.advise(.betterPathAvailable(interface: target, reason: reason))]
        case (_?, nil):
            betterInterface = nil
            return [.advise(.betterPathUnavailable)]
        case (_?, let (target, _)?):
            betterInterface = target
            return []
        case (nil, nil):
            return []
        }
    }
}
