import RoamCore

/// One flow that follows the phone from path to path, as a plan: every rule and every decision
/// (when to race and how long to keep trying, when to leave a connection, what to probe and
/// where, which MPTCP subflows the connection has and which carries the data) and no I/O. It
/// owns a ``HandoverStateMachine`` (the rules) and turns its actions into requests a driver
/// performs with its own I/O, feeding back what happened as events, with the driver's clock:
///
/// - `HandoverConnection` (blocking sockets) and `AsyncHandoverConnection` on top of it;
/// - the simulator's workloads;
/// - RoamNIO's channel handler, through ``PathAdvisor`` (the session in its advising role:
///   a move becomes advice, and the app decides).
///
/// There is no other copy of these plans: the drivers differ only in how they do I/O.
///
/// What it decides:
/// - **Racing**: ``connectPlan(at:)`` says race now over which path (the monitor's, with the
///   interfaces held down raced last), wait for a path, wait before retrying, or give up. After a failed race
///   it waits ``RetryPolicy/initialDelay`` (100 ms), doubling to ``RetryPolicy/maximumDelay``
///   (1 s), or until the path changes, whichever comes first; it gives up after
///   ``RetryPolicy/giveUpAfter`` of failing and waiting (never, by default).
/// - **Probes** go to the peer's first address of a family the probed interface has an address
///   of (an IPv4-only Wi-Fi is probed over IPv4 even when the flow runs over IPv6), on the flow's
///   port or ``Configuration/probePort``. A probe is a TCP connection attempt, reset as soon as it
///   is decided, nothing sent: the peer sees a connection open and reset.
/// - **Stalls** follow ``Configuration/stallEvidence``: silence while data is expected (a peer
///   that sends continuously), or only data of the flow's own left unacknowledged (a request the
///   peer acknowledged and has not answered yet is the server's time, not the path's, up to
///   ``HandoverStateMachine/Configuration/maximumStall``).
/// - **MPTCP subflows**, when it controls them (``HandoverStateMachine/Configuration/controlsSubflows``):
///   one from every interface of the path that has an address of the connection's family (at
///   most one request per interface per 200 ms), the active one carrying the data and the others
///   backups, and the address of an interface left for a stall or a loss withdrawn from the
///   connection at once (``SubflowRequest``; `MPTCPSubflowController` carries them out).
public struct HandoverSession: Sendable {
    public struct Configuration: Sendable {
        /// The rules: stall threshold, hold-downs, probes, moving back, MPTCP.
        public var rules = HandoverStateMachine.Configuration()
        /// Which interfaces the flow may use.
        public var policy = PathPolicy()
        /// The port probes connect to (nil: the flow's own port).
        public var probePort: UInt16?
        /// After a failed race.
        public var retry = RetryPolicy()
        /// What counts as a stall.
        public var stallEvidence: StallEvidence = .silence
        /// The defaults: the state machine's rules, a policy that permits every path, probes to
        /// the flow's port, retries from 100 ms to 1 s, and silence as a stall.
        public init() {}
    }

    /// When to race again after a race failed (or while no path permits one).
    public struct RetryPolicy: Sendable, Hashable {
        public var initialDelay: Duration
        public var maximumDelay: Duration
        /// How long the flow keeps failing and waiting before it gives up (nil: never).
        public var giveUpAfter: Duration?

        /// A retry policy.
        ///
        /// - Parameters:
        ///   - initialDelay: The wait after the first failed race; it doubles with each one after.
        ///   - maximumDelay: The longest wait.
        ///   - giveUpAfter: How long the flow keeps failing before it gives up (nil: never).
        public init(initialDelay: Duration = .milliseconds(100), maximumDelay: Duration = .seconds(1), giveUpAfter: Duration? = nil) {
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.giveUpAfter = giveUpAfter
        }

        /// The wait after `failures` failed races in a row.
        ///
        /// - Parameter failures: The failed races in a row (1: the first).
        /// - Returns: ``initialDelay`` doubled for each failure after the first, at most
        ///   ``maximumDelay``.
        public func delay(afterFailures failures: Int) -> Duration {
            min(maximumDelay, initialDelay * (1 << min(20, max(0, failures - 1))))
        }
    }

    /// What counts as a stall.
    public enum StallEvidence: Sendable, Hashable {
        /// No data for the stall threshold while data is expected: for a peer that sends
        /// continuously (a stream, a download), whose silence is the path's.
        case silence
        /// Data of the flow's own left unacknowledged for the stall threshold (`TCP_INFO`): for
        /// request and response, where a server's think time must not count as the path's.
        /// A request the peer acknowledged and has not answered counts as a stall only after
        /// ``HandoverStateMachine/Configuration/maximumStall``.
        case unacknowledgedData
    }

    /// What the transport says of the connection now (`TCP_INFO`), given with each tick.
    public struct TransportSample: Sendable, Hashable {
        public var smoothedRTT: Duration?
        /// Segments sent and not yet acknowledged.
        public var unacknowledged: Int

        /// A sample of the transport.
        ///
        /// - Parameters:
        ///   - smoothedRTT: The smoothed round-trip time (`tcpi_rtt`), nil when unknown.
        ///   - unacknowledged: Segments sent and not yet acknowledged (`tcpi_unacked`).
        public init(smoothedRTT: Duration?, unacknowledged: Int) {
            self.smoothedRTT = smoothedRTT
            self.unacknowledged = unacknowledged
        }
    }

    /// A connection the driver made, as the session needs to know it.
    public struct Connection: Sendable, Hashable {
        /// The interface it was made over (its first subflow's, for MPTCP).
        public var interface: String?
        public var transport: HandoverStateMachine.Transport
        /// Its local and remote addresses.
        public var local: IPAddress?
        public var remote: IPAddress?
        /// Over MPTCP, the connection's token (for its subflows).
        public var token: UInt32?

        /// A connection as the session needs to know it.
        ///
        /// - Parameters:
        ///   - interface: The interface it was made over (its first subflow's, for MPTCP).
        ///   - transport: TCP, or MPTCP where both ends speak it.
        ///   - local: Its local address.
        ///   - remote: Its remote address.
        ///   - token: Over MPTCP, the connection's token.
        public init(interface: String?, transport: HandoverStateMachine.Transport, local: IPAddress? = nil, remote: IPAddress? = nil,
                    token: UInt32? = nil) {
            self.interface = interface
            self.transport = transport
            self.local = local
            self.remote = remote
            self.token = token
        }
    }

    public enum Event: Sendable {
        /// The monitor published a path.
        case pathUpdated(NetworkPath, at: Duration)
        /// The race the plan asked for made `connection`.
        case connected(Connection, at: Duration)
        /// The race the plan asked for found nothing (every attempt failed, no permitted path).
        case raceFailed(at: Duration)
        /// The connection ended for a reason the driver saw (closed by the peer, an error).
        case connectionEnded(at: Duration)
        case received(bytes: Int, at: Duration)
        /// The app wrote `bytes`: from now it waits for an answer (until data arrives).
        case sent(bytes: Int, at: Duration)
        /// Time passed. `awaitingDataSince`: when the app began waiting for data (nil: the
        /// session's own clock, from the last ``sent(bytes:at:)`` to the next data).
        case tick(at: Duration, transport: TransportSample?, awaitingDataSince: Duration?)
        /// A probe the plan asked for connected, or failed.
        case probeFinished(interface: String, connected: Bool, at: Duration)
        /// A stream's playout (seconds of media buffered, while playing).
        case playout(buffered: Duration, at: Duration)
        /// MPTCP: the connection's subflows now (`MPTCP_SUBFLOW_ADDRS`, `MPTCP_TCPINFO`).
        case subflowsSampled([MPTCP.Subflow], at: Duration)
        /// MPTCP with a path manager: the interface whose subflows it prefers.
        case pathManagerPrefers(interface: String?)
        /// Another flow of the app held `interface` down (RoamNIO's channels share their
        /// bootstrap's hold-downs): it is not a better path until `until`.
        case heldDownElsewhere(interface: String, until: Duration)
    }

    /// What the driver does.
    public enum Request: Sendable, Hashable {
        /// Leave the current connection now (reset it: it may be over a dead link), for
        /// `reason`; ``connectPlan(at:)`` then says when to race again.
        case leave(HandoverStateMachine.Reason)
        /// Open a probe: a TCP connection attempt over `interface` to `destination`, nothing
        /// sent; report it with ``Event/probeFinished(interface:connected:at:)``.
        case probe(interface: NetworkInterface, destination: IPAddress, port: UInt16)
        case abandonProbe(interface: String)
        /// `interface` stalled: it is left out of races for `holdDown` (and, with a path
        /// manager, demoted: its subflows become backups).
        case holdDown(interface: String, for: Duration)
        /// With a path manager: `interface` proved itself; it gets its place back.
        case restore(interface: String)
        /// The data now goes over `interface`'s subflow (the ``SubflowRequest``s that follow
        /// carry it out); for the driver's log.
        case switchedSubflows(to: String, HandoverStateMachine.Reason)
        /// An MPTCP subflow request (`MPTCPSubflowController` performs it).
        case subflow(SubflowRequest)
        /// A subflow of the connection appeared or went (for the driver's log).
        case subflowOpened(key: String, interface: String)
        case subflowClosed(key: String, interface: String)
        /// In the advising role: what to tell the app (nothing is left or raced).
        case advise(PathAdvisor.Advice)
    }

    /// A request to the kernel's MPTCP path manager about the connection `token`.
    public enum SubflowRequest: Sendable, Hashable {
        /// Open a subflow from `local` (of interface `interfaceIndex`, identifier `id`) to the
        /// connection's peer, a backup or not.
        case open(token: UInt32, local: IPAddress, interface: String, interfaceIndex: Int32, id: UInt8, backup: Bool, remote: IPAddress, port: UInt16)
        /// Make the subflow from `local` a backup, or the one that carries the data.
        case setBackup(token: UInt32, local: IPAddress, backup: Bool, remote: IPAddress, port: UInt16)
        /// Withdraw the address `localID` (of `interface`) from the connection: the peer stops
        /// sending over it at once, and what was in flight over it goes again over the others.
        case withdraw(token: UInt32, localID: UInt8, interface: String)
    }

    /// What to do about connecting now.
    public enum ConnectPlan: Sendable, Hashable {
        /// Race over `path` (the monitor's, interfaces held down last), to the peer's addresses.
        case race(over: NetworkPath)
        /// Wait for a path update, or until `until` (nil: only a path update).
        case wait(until: Duration?)
        /// Stop trying: the retry policy's time is up. Why, for the app.
        case giveUp(String)
    }

    /// The session's role: leave connections itself, or advise an app that decides.
    public enum Role: Sendable, Hashable {
        case acts
        case advises
    }

    public let configuration: Configuration
    public let role: Role
    /// The peer's addresses, and the flow's port.
    public private(set) var addresses: [IPAddress]
    public let port: UInt16
    /// The rules, with what they hold (connections, handovers, bytes, hold-downs).
    public private(set) var machine: HandoverStateMachine

    // Racing and retrying.
    private var failures = 0
    private var troubleSince: Duration?
    private var retryAt: Duration?
    private var pathSeenAtFailure: NetworkPath?

    // The connection.
    private var connection: Connection?
    private var awaitingSince: Duration?

    // MPTCP subflows: each subflow's interface and bytes so far; what was asked of each local
    // address; the identifier each has in the connection.
    private var subflowBytes: [SubflowKey: (interface: String, bytes: UInt64)] = [:]
    private var interfaceOfAddress: [IPAddress: String] = [:]
    private var backupOf: [IPAddress: Bool] = [:]
    /// Subflows opened as backups and not yet told so once established: a kernel before 6.2
    /// (Debian 12's 6.1) ignores the backup flag of `SUBFLOW_CREATE` (its MP_JOIN goes without
    /// the B bit), and the peer would send over the new subflow as over any other.
    private var backupUnconfirmed: Set<IPAddress> = []
    /// When each local address's subflow was first sampled established.
    private var establishedSince: [IPAddress: Duration] = [:]
    /// When each local address's subflow was last told it is a backup (MP_PRIO).
    private var toldBackup: [IPAddress: Duration] = [:]
    private var lastSubflowRequest: [String: Duration] = [:]
    private var localID: [IPAddress: UInt8] = [:]
    private var nextLocalID: UInt8 = 1

    // The advising role.
    private var unviable: HandoverStateMachine.Reason?
    private var betterInterface: String?
    private var provenFree: String?
    private var heldElsewhere: [String: Duration] = [:]

    /// Between two requests for a subflow from one interface (the first may come before the
    /// connection is fully established, which the kernel refuses).
    public static let subflowRetry = Duration.milliseconds(200)

    /// A session for one flow, not connected yet.
    ///
    /// - Parameters:
    ///   - addresses: The peer's addresses, in the resolver's order.
    ///   - port: The peer's port.
    ///   - configuration: The rules, the policy, the retries and what counts as a stall.
    ///   - role: Whether the session acts (a driver moves the flow) or advises (an app decides,
    ///     and keeps its connection: no path manager, no subflows, no stream rule).
    public init(to addresses: [IPAddress], port: UInt16, configuration: Configuration = Configuration(), role: Role = .acts) {
        self.addresses = addresses
        self.port = port
        self.role = role
        var configuration = configuration
        if role == .advises {
            // An app that decides for itself keeps its connection: no path manager, no subflows
            // switched, no stream rule.
            configuration.rules.usesPathManager = false
            configuration.rules.controlsSubflows = false
            configuration.rules.stream = nil
        }
        self.configuration = configuration
        machine = HandoverStateMachine(configuration: configuration.rules, policy: configuration.policy)
    }

    /// Connects to `addresses` from now on: what a new lookup of the peer's name gave (a
    /// network's DNS64 synthesizes other addresses than the last one's resolver).
    package mutating func retarget(to addresses: [IPAddress]) {
        self.addresses = addresses
    }

    // MARK: - Views

    /// The interface the data goes over now, if connected.
    public var currentInterface: String? { connection == nil ? nil : machine.currentInterface }
    /// The latest path.
    public var path: NetworkPath? { machine.path }
    /// In the advising role: whether the connection is viable, why not, and the better
    /// interface the app was told of.
    public var isViable: Bool { unviable == nil }
    public var unviableReason: HandoverStateMachine.Reason? { unviable }
    public var announcedBetterInterface: String? { betterInterface }

    /// How long the current connection has been up.
    ///
    /// - Parameter now: The time, on the driver's clock.
    /// - Returns: Its age, or nil without a connection.
    public func connectionAge(at now: Duration) -> Duration? {
        machine.connection.map { now - $0.since }
    }

    /// The stall threshold now.
    ///
    /// - Parameter smoothedRTT: The connection's smoothed round-trip time, or nil.
    /// - Returns: How long without progress, while data is expected, counts as a stall.
    public func stallThreshold(smoothedRTT: Duration?) -> Duration { machine.stallThreshold(smoothedRTT: smoothedRTT) }

    // MARK: - Connecting

    /// What to do about connecting at `now`: race (over the path without the interfaces held
    /// down), wait (for a path, or before retrying), or give up.
    ///
    /// - Parameter now: The time, on the driver's clock.
    /// - Returns: The path to race over, how long to wait (nil: until the path changes), or why
    ///   the flow gives up (``RetryPolicy/giveUpAfter`` has passed).
    public mutating func connectPlan(at now: Duration) -> ConnectPlan {
        if let giveUp = configuration.retry.giveUpAfter, let since = troubleSince, now - since >= giveUp {
            return .giveUp(failures > 0 ? "every attempt failed for \(giveUp.roamMilliseconds)" : "no permitted path for \(giveUp.roamMilliseconds)")
        }
        let deadline = configuration.retry.giveUpAfter.flatMap { giveUp in troubleSince.map { $0 + giveUp } }
        if let retryAt, now < retryAt {
            // A new path since the failure is worth a race at once.
            if machine.path == pathSeenAtFailure { return .wait(until: min(retryAt, deadline ?? retryAt)) }
        }
        guard let path = machine.racePath(at: now), path.status == .satisfied,
              case .success = configuration.policy.permittedInterfaces(of: path) else {
            if troubleSince == nil { troubleSince = now }
            let limit = configuration.retry.giveUpAfter.map { now + $0 }
            return .wait(until: deadline ?? limit)
        }
        return .race(over: path)
    }

    // MARK: - Events

    /// Takes in what the driver saw and says what it should do.
    ///
    /// - Parameter event: A path update, a connection made or ended, a race failed, bytes
    ///   received or sent, a tick, a probe's result, a stream's playout buffer, MPTCP's
    ///   subflows sampled, the path manager's choice, or a hold-down elsewhere.
    /// - Returns: The requests to carry out, in order: leave the connection, probe or stop
    ///   probing, hold an interface down or restore it, subflows to open, mark as backups or
    ///   withdraw, and, in the advising role, advice for the app.
    public mutating func handle(_ event: Event) -> [Request] {
        switch event {
        case let .pathUpdated(path, now):
            var requests: [Request] = role == .advises ? [.advise(.pathChanged(path))] : []
            requests += carryOut(machine.handle(.pathUpdated(path, at: now)), at: now)
            for interface in path.availableInterfaces {
                for prefix in interface.addresses { interfaceOfAddress[prefix.address] = interface.name }
            }
            if role == .advises { requests += reviewViability(path, at: now) }
            return requests + afterEvent(at: now)
        case let .connected(made, now):
            machine.connectionAddress = made.transport == .tcp ? made.local : nil
            failures = 0
            troubleSince = nil
            retryAt = nil
            connection = made
            awaitingSince = nil
            unviable = nil
            provenFree = nil
            subflowBytes = [:]
            // The connection's first subflow carries the data.
            backupOf = made.local.map { [$0: false] } ?? [:]
            backupUnconfirmed = []
            establishedSince = [:]
            toldBackup = [:]
            lastSubflowRequest = [:]
            localID = made.local.map { [$0: 0] } ?? [:]
            nextLocalID = 1
            let requests = carryOut(machine.handle(.connected(interface: made.interface, transport: made.transport, family: made.remote?.family,
                                                              at: now)), at: now)
            return requests + subflowPlan(at: now) + afterEvent(at: now)
        case .raceFailed(let now):
            failures += 1
            if troubleSince == nil { troubleSince = now }
            retryAt = now + configuration.retry.delay(afterFailures: failures)
            pathSeenAtFailure = machine.path
            return []
        case .connectionEnded(let now):
            if connection != nil { _ = machine.handle(.connectionEnded(at: now)) }
            connection = nil
            awaitingSince = nil
            return []
        case let .received(bytes, now):
            guard bytes > 0 else { return [] }
            awaitingSince = nil
            var requests = carryOut(machine.handle(.received(bytes: bytes, at: now)), at: now)
            if role == .advises, case .stalled? = unviable { requests += becomeViable(at: now) }
            return requests + afterEvent(at: now)
        case let .sent(bytes, now):
            if bytes > 0, awaitingSince == nil { awaitingSince = now }
            return afterEvent(at: now)
        case let .tick(now, transport, since):
            let awaiting = judgedAwaitingSince(since ?? awaitingSince, transport: transport, at: now)
            let requests = carryOut(machine.handle(.tick(at: now, smoothedRTT: transport?.smoothedRTT, awaitingDataSince: awaiting)), at: now)
            return requests + subflowPlan(at: now) + afterEvent(at: now)
        case let .probeFinished(interface, connected, now):
            return carryOut(machine.handle(.probeFinished(interface: interface, connected: connected, at: now)), at: now) + subflowPlan(at: now)
                + afterEvent(at: now)
        case let .playout(buffered, now):
            return carryOut(machine.handle(.playout(buffered: buffered, at: now)), at: now) + subflowPlan(at: now)
        case let .subflowsSampled(subflows, now):
            return sampled(subflows, at: now)
        case .pathManagerPrefers(let interface):
            _ = machine.handle(.pathManagerPrefers(interface: interface))
            return []
        case let .heldDownElsewhere(interface, until):
            heldElsewhere[interface] = max(heldElsewhere[interface] ?? until, until)
            return []
        }
    }

    /// When the driver must next send a tick, at the latest.
    ///
    /// - Parameters:
    ///   - transport: What the transport says now, if the driver read it.
    ///   - since: Since when the flow has awaited data (nil: the session's own record).
    ///   - now: The time, on the driver's clock.
    /// - Returns: The time of the next tick, or nil when nothing is timed.
    public func nextDeadline(transport: TransportSample?, awaitingDataSince since: Duration?, at now: Duration) -> Duration? {
        let awaiting = since ?? awaitingSince
        let rtt = transport?.smoothedRTT
        guard configuration.stallEvidence == .unacknowledgedData, let awaiting, connection != nil, let transport, transport.unacknowledged == 0 else {
            return machine.nextDeadline(smoothedRTT: rtt, awaitingDataSince: awaiting)
        }
        // Everything sent is acknowledged for now: look again at the stall threshold (data may
        // be unacknowledged by then), and, past it, every threshold until the ceiling, where the
        // server's time is up.
        let ceiling = max(awaiting, machine.lastData ?? awaiting) + configuration.rules.maximumStall
        let timers = machine.nextDeadline(smoothedRTT: rtt, awaitingDataSince: nil)
        var look = machine.nextDeadline(smoothedRTT: rtt, awaitingDataSince: awaiting) ?? ceiling
        if look <= now { look = now + stallThreshold(smoothedRTT: rtt) }
        return [timers, min(look, ceiling)].compactMap { $0 }.min()
    }

    /// When the app is judged to be waiting for data: as it says, unless the evidence asked for
    /// is unacknowledged data and every byte it sent was acknowledged (the server's time), until
    /// the ceiling.
    private func judgedAwaitingSince(_ since: Duration?, transport: TransportSample?, at now: Duration) -> Duration? {
        guard let since, configuration.stallEvidence == .unacknowledgedData, let transport, transport.unacknowledged == 0 else { return since }
        let quiet = max(since, machine.lastData ?? since)
        return now - quiet >= configuration.rules.maximumStall ? since : nil
    }

    // MARK: - The machine's actions as requests

    private mutating func carryOut(_ actions: [HandoverStateMachine.Action], at now: Duration) -> [Request] {
        var requests: [Request] = []
        for action in actions {
            switch action {
            case let .markStalled(interface, hold):
                requests.append(.holdDown(interface: interface, for: hold))
            case .move(let reason):
                requests += moved(reason, at: now)
            case .startProbe(let interface):
                if let probe = probeRequest(interface) {
                    requests.append(probe)
                } else {
                    // No address of a family the peer has: the probe fails at once.
                    requests += carryOut(machine.handle(.probeFinished(interface: interface, connected: false, at: now)), at: now)
                }
            case .abandonProbe(let interface):
                requests.append(.abandonProbe(interface: interface))
            case .restore(let interface):
                requests.append(.restore(interface: interface))
            case let .switchSubflows(interface, reason):
                requests.append(.switchedSubflows(to: interface, reason))
                // The interface left is withdrawn; a better path keeps the old one as standby.
                switch reason {
                case .pathLost(let left), .stalled(let left?, _), .tooPoor(let left?, _), .connectivityLost(let left, _): requests += withdraw(left)
                default: break
                }
            }
        }
        return requests
    }

    private mutating func moved(_ reason: HandoverStateMachine.Reason, at now: Duration) -> [Request] {
        guard role == .advises else {
            // The machine let the connection go; the driver resets it.
            connection = nil
            awaitingSince = nil
            return [.leave(reason)]
        }
        switch reason {
        case .betterPath(let target, _):
            provenFree = target
            // Staying keeps the probes going, so the evidence stays fresh.
            _ = machine.handle(.stayed(at: now))
            return []
        case .stalled, .pathLost, .addressLost, .connectivityLost, .tooPoor, .failed:
            // Judged again once viable: not before, or a stall would be found at every tick,
            // its hold-down doubling each time.
            guard unviable == nil else { return [] }
            unviable = reason
            return [.advise(.viability(isViable: false, reason: reason))]
        }
    }

    /// The probe of `name`: to the peer's first address of a family the interface has.
    private func probeRequest(_ name: String) -> Request? {
        guard let interface = machine.path?.availableInterfaces.first(where: { $0.name == name }) else { return nil }
        let families = Set(interface.addresses.filter { !$0.address.isLinkLocal }.map(\.address.family))
        guard let destination = addresses.first(where: { families.contains($0.family) }) else { return nil }
        return .probe(interface: interface, destination: destination, port: configuration.probePort ?? port)
    }

    // MARK: - MPTCP subflows

    /// A subflow by its addresses and ports: what a sample is matched on (its text, for the
    /// driver's log, is made only when a subflow comes or goes, not every 20 ms).
    private struct SubflowKey: Hashable {
        var local: IPAddress
        var localPort: UInt16
        var remote: IPAddress
        var remotePort: UInt16

        init(_ subflow: MPTCP.Subflow) {
            local = subflow.local
            localPort = subflow.localPort
            remote = subflow.remote
            remotePort = subflow.remotePort
        }

        var description: String {
            MPTCP.Subflow(local: local, localPort: localPort, remote: remote, remotePort: remotePort, bytesAcked: 0, bytesReceived: 0,
                          smoothedRTT: .zero).description
        }
    }

    /// The connection's subflows as sampled: bytes each carried since the last sample go to its
    /// interface (and tell the machine where the data goes), new ones are established.
    private mutating func sampled(_ listed: [MPTCP.Subflow], at now: Duration) -> [Request] {
        // A closed first subflow stays listed: it is gone for every purpose here. (One closing
        // is not: opening another from its address at once would only add to the churn.)
        let subflows = listed.filter(\.isOpen)
        var requests: [Request] = []
        var seen = Set<SubflowKey>()
        var delivered: [String: Int] = [:]
        var established: [String] = []
        for subflow in subflows {
            let key = SubflowKey(subflow)
            seen.insert(key)
            let interface = interfaceOfAddress[subflow.local] ?? subflow.local.description
            let before = subflowBytes[key]?.bytes
            if before == nil {
                requests.append(.subflowOpened(key: key.description, interface: interface))
                established.append(interface)
            }
            let delta = subflow.bytesReceived >= (before ?? 0) ? subflow.bytesReceived - (before ?? 0) : 0
            if delta > 0 { delivered[interface, default: 0] += Int(clamping: delta) }
            subflowBytes[key] = (interface, subflow.bytesReceived)
            // A backup that still brings data a while after it was told so: MP_PRIO goes once,
            // in an ACK of the subflow itself, and a lossy link (the reason it was left) loses
            // it as any packet; the peer then goes on sending there as over any subflow. Told
            // again, at most once per ``subflowRetry`` (data it sent before it heard is harmless).
            if delta > 0, before != nil, backupOf[subflow.local] == true, interface != machine.currentInterface,
               let told = toldBackup[subflow.local], now - told >= Self.subflowRetry,
               let token = connection?.token, let remote = connection?.remote {
                requests.append(.subflow(.setBackup(token: token, local: subflow.local, backup: true, remote: remote, port: port)))
                toldBackup[subflow.local] = now
            }
        }
        for interface in established { _ = machine.handle(.subflowEstablished(interface: interface, at: now)) }
        if !delivered.isEmpty { _ = machine.handle(.subflowsDelivered(delivered, at: now)) }
        for (key, entry) in subflowBytes where !seen.contains(key) {
            requests.append(.subflowClosed(key: key.description, interface: entry.interface))
            subflowBytes[key] = nil
        }
        // A subflow that closed (its peer withdrew it, or the kernel gave up on it) is not live:
        // forgotten, unless it was asked for a moment ago and is not listed yet.
        // (An empty list is a failed read: a live connection has a subflow.)
        for address in backupOf.keys where !subflows.isEmpty && !subflows.contains(where: { $0.local == address }) {
            let asked = interfaceOfAddress[address].flatMap { lastSubflowRequest[$0] }
            if asked.map({ now - $0 >= Self.subflowRetry }) ?? true {
                backupOf[address] = nil
                backupUnconfirmed.remove(address)
            }
        }
        for subflow in subflows where subflow.isEstablished && establishedSince[subflow.local] == nil { establishedSince[subflow.local] = now }
        for address in establishedSince.keys where !subflows.contains(where: { $0.local == address && $0.isEstablished }) {
            establishedSince[address] = nil
        }
        return requests + subflowPlan(live: subflows.map(\.local), at: now)
    }

    /// With subflow control: brings the connection's subflows in step with the machine: one
    /// from every interface of the path (asked for at most once per ``subflowRetry`` each), the
    /// active one carrying the data and the others backups. An interface the flow left for
    /// trouble (demoted: it stalled, was too poor, or was lost) gets no standby subflow until
    /// its probes restore it: the one it had was withdrawn, so that the peer sends what it
    /// held there over the others at once, and a new one over a lossy network would take
    /// data again wherever the backup flag is not honoured.
    private mutating func subflowPlan(live: [IPAddress]? = nil, at now: Duration) -> [Request] {
        guard configuration.rules.controlsSubflows, let connection, connection.transport == .mptcp, let token = connection.token,
              let remote = connection.remote, let path = machine.path, let active = machine.currentInterface else { return [] }
        // Without a fresh sample, what was opened so far counts as live.
        let live = Set(live ?? Array(backupOf.keys))
        var requests: [Request] = []
        // Subflows only over interfaces the connectivity rule lets carry (besides the active
        // one): none over one left out, nor over one standing by (still being checked while
        // another is validated: a portal found a moment later would hold its subflow).
        let policy = configuration.policy
        let best = ValidationRule.bestRank(among: path.availableInterfaces.filter { policy.refusal(of: $0) == nil })
        for interface in path.availableInterfaces where interface.type != .loopback {
            if interface.name != active, policy.validation.role(of: interface, bestRank: best) != .carries { continue }
            guard let local = interface.addresses.first(where: { $0.address.family == remote.family && !$0.address.isLinkLocal })?.address else { continue }
            let backup = interface.name != active
            if live.contains(local) {
                // Told once established for a moment (a 6.1 kernel refuses MP_PRIO on a subflow
                // whose handshake just ended).
                let confirming = backupUnconfirmed.contains(local) && establishedSince[local].map { now - $0 >= Self.subflowRetry } ?? false
                if backupOf[local] ?? false != backup || (confirming && backup) {
                    // Once established, a backup is told so over the subflow itself (MP_PRIO).
                    requests.append(.subflow(.setBackup(token: token, local: local, backup: backup, remote: remote, port: port)))
                    backupOf[local] = backup
                    toldBackup[local] = backup ? now : nil
                }
                if confirming { backupUnconfirmed.remove(local) }
            } else if backup, machine.demoted.contains(interface.name) {
                continue
            } else if now - (lastSubflowRequest[interface.name] ?? .seconds(-100)) >= Self.subflowRetry {
                lastSubflowRequest[interface.name] = now
                let id = localID[local] ?? nextLocalID
                if localID[local] == nil {
                    localID[local] = id
                    nextLocalID = nextLocalID == 255 ? 1 : nextLocalID + 1
                }
                backupOf[local] = backup
                if backup { backupUnconfirmed.insert(local) } else { backupUnconfirmed.remove(local) }
                requests.append(.subflow(.open(token: token, local: local, interface: interface.name, interfaceIndex: interface.index, id: id,
                                                backup: backup, remote: remote, port: port)))
            }
        }
        return requests
    }

    /// Withdraws `interface`'s address from the connection (the path may no longer list it: the
    /// address a subflow of it was made from).
    private mutating func withdraw(_ interface: String) -> [Request] {
        guard let token = connection?.token,
              let (address, id) = localID.first(where: { interfaceOfAddress[$0.key] == interface }) else { return [] }
        localID[address] = nil
        backupOf[address] = nil
        backupUnconfirmed.remove(address)
        return [.subflow(.withdraw(token: token, localID: id, interface: interface))]
    }

    // MARK: - The advising role

    private mutating func afterEvent(at now: Duration) -> [Request] {
        role == .advises ? reviewBetterPath(at: now) : []
    }

    /// Lost with its interface (over MPTCP, with all of them), viable again once it is back.
    private mutating func reviewViability(_ path: NetworkPath, at now: Duration) -> [Request] {
        guard let connection else { return [] }
        let anyInterface = path.availableInterfaces.contains { $0.type != .loopback }
        var requests: [Request] = []
        if connection.transport == .mptcp, !anyInterface, unviable == nil {
            // The kernel moves an MPTCP connection's subflows: it is lost only with every path.
            unviable = .pathLost(interface: connection.interface ?? "every interface")
            requests.append(.advise(.viability(isViable: false, reason: unviable)))
        }
        if case .pathLost(let lost)? = unviable,
           connection.transport == .mptcp ? anyInterface : path.availableInterfaces.contains(where: { $0.name == lost }) {
            requests += becomeViable(at: now)
        }
        return requests
    }

    private mutating func becomeViable(at now: Duration) -> [Request] {
        unviable = nil
        awaitingSince = nil
        _ = machine.handle(.stayed(at: now))
        return [.advise(.viability(isViable: true, reason: nil))]
    }

    private func isHeldDown(_ interface: String, at now: Duration) -> Bool {
        machine.stalledPaths.isHeldDown(interface, at: now) || (heldElsewhere[interface].map { now < $0 } ?? false)
    }

    /// The interface a new connection should take instead of this one, if there is one.
    private mutating func betterChoice(at now: Duration) -> (String, HandoverStateMachine.Reason)? {
        guard let path = machine.path, let connection else { return nil }
        if let reason = unviable {
            guard let racePath = machine.racePath(at: now), case .success(let permitted) = configuration.policy.permittedInterfaces(of: racePath) else {
                return nil
            }
            let other = permitted.first { $0.type != .loopback && $0.name != connection.interface && !isHeldDown($0.name, at: now) }
            return other.map { ($0.name, reason) }
        }
        guard let free = provenFree, let interface = connection.interface else { return nil }
        let available = path.availableInterfaces
        guard let target = available.first(where: { $0.name == free }), !target.isExpensive, configuration.policy.refusal(of: target) == nil,
              !isHeldDown(free, at: now), available.first(where: { $0.name == interface })?.isExpensive ?? false else {
            provenFree = nil
            return nil
        }
        return (free, .betterPath(interface: free, probes: machine.probesRequired(for: free)))
    }

    private mutating func reviewBetterPath(at now: Duration) -> [Request] {
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
