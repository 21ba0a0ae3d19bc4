import RoamCore

/// Roam's handover policy, as a state machine: events in, actions out, time passed in with
/// every event (the caller's clock, as a duration), so that every rule is tested with a manual
/// clock. `HandoverConnection` drives it with real sockets, and so do the simulator's
/// workloads: there is no other copy of these rules.
///
/// The rules:
/// - **Stall.** While the app waits for data, a connection that brings none for the stall
///   threshold (four smoothed round trips plus 200 ms, within the configured floor and
///   ceiling) is given up. Its interface is held down: raced last, after every other, for one
///   second, doubling with each stall up to thirty (``StalledPaths``).
/// - **Path lost.** A plain TCP connection whose interface leaves the path is given up at once
///   (over MPTCP the kernel moves the subflows).
/// - **Too poor.** A stream's path that delivers less than the bitrate while the buffer runs low
///   is held down and left (``StreamPathJudge``: by what the path delivers, never by the buffer a
///   new connection inherited).
/// - **Back to a cheaper path.** While the flow runs over an expensive interface and the path's
///   first choice is a free one that is not held down, that interface is probed (a connection
///   attempt over it, nothing sent) every second, and every 200 ms within a streak; after three
///   probes in a row connect, the flow moves back. The evidence asked for grows as the hold-down
///   does: three probes after no stall or one, six after two, twelve after three or more (at
///   40% loss each way three SYNs in a row get through 5% of the time, twelve almost never; at
///   5% loss twelve still do 8% of the time per streak, and streaks repeat). A path the stream
///   rule found too poor is not probed until that evidence is ``StreamPathJudge/evidenceLifetime``
///   old. If the race after a move back picks another interface, the probes were luck: the
///   cheaper one is held down again.
/// - **MPTCP.** With a path manager, a stalled interface is demoted (its subflows become
///   backups); once its hold-down has passed and three probes in a row connect over it, it is
///   restored. Until then a race tries it last. An interface whose link the monitor calls
///   minimal is neither moved back to nor restored while the current one's is better. A
///   connection whose subflow on the current interface still brings data while the app gets
///   none is head-of-line blocked behind a gap another subflow left, not stalled: it is given
///   ``Configuration/headOfLineWait`` more for the kernel to resend the gap, then replaced by
///   a new connection, nothing held down.
/// - **Accounting.** Bytes per interface, and over expensive interfaces; handovers.
public struct HandoverStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The stall threshold's floor and ceiling.
        public var minimumStall: Duration = .milliseconds(300)
        public var maximumStall: Duration = .seconds(10)
        /// A stalled interface's first hold-down, and the most it doubles to.
        public var initialHold: Duration = .seconds(1)
        public var maximumHold: Duration = .seconds(30)
        /// Probes in a row that must connect before the flow moves back (or, over MPTCP, an
        /// interface is restored) to an interface that stalled at most once; one SYN getting
        /// through proves little on a lossy Wi-Fi (at 40% loss each way three in a row succeed
        /// about 5% of the time, at 5% about 74%). Doubles with each further stall, up to four
        /// times this (``probesRequired(for:)``).
        public var probesToReturn = 3
        /// Between probes after a failure, and how long one may take.
        public var probeInterval: Duration = .seconds(1)
        /// Between the probes of a streak.
        public var probeSpacing: Duration = .milliseconds(200)
        /// Whether the flow moves back to a free interface from an expensive one.
        public var movesBack = true
        /// Whether a path manager acts on stalls (MPTCP): stalled interfaces are demoted, and
        /// restored once they prove themselves.
        public var usesPathManager = false
        /// Whether the driver controls each MPTCP connection's subflows itself (the kernel's
        /// userspace path manager): instead of reconnecting, a stall or a lost path switches the
        /// data to another interface's subflow (``Action/switchSubflows(to:_:)``), and the
        /// interface left must answer probes before it carries data again.
        public var controlsSubflows = false
        /// The flow's service type: in `.handover` a change of the MPTCP subflow that carries the
        /// data counts as a handover (in the other types data takes several paths at once).
        public var serviceType: MultipathServiceType = .handover
        /// For a stream: what it needs from a path (nil: no stream rule).
        public var stream: StreamRequirement?
        /// Over MPTCP, how long past the stall threshold the flow waits while the subflow it is
        /// on brings data the app cannot have yet (head-of-line blocked behind a gap another
        /// subflow left) before it makes a new connection.
        public var headOfLineWait: Duration = .seconds(1)
        /// 0.3.0's connectivity setting, now the one rule of races, moves and subflows:
        /// `PathPolicy/validation`, given to ``HandoverStateMachine/init(configuration:policy:)``.
        @available(*, unavailable, message: "set PathPolicy.validation (.ignore for false) and pass the policy to HandoverStateMachine(configuration:policy:) or HandoverSession.Configuration.policy")
        public var leavesUnvalidated: Bool {
            get { true }
            set {}
        }

        /// Roam's defaults, as documented on each setting.
        public init() {}
    }

    /// A stream's needs: its bitrate and the buffer its player fills before playing.
    public struct StreamRequirement: Sendable, Hashable {
        public var bytesPerSecond: Double
        public var buffer: Duration

        /// A stream's needs.
        ///
        /// - Parameters:
        ///   - bytesPerSecond: Its bitrate, in bytes a second.
        ///   - buffer: The media its player buffers before playing.
        public init(bytesPerSecond: Double, buffer: Duration) {
            self.bytesPerSecond = bytesPerSecond
            self.buffer = buffer
        }
    }

    public enum Transport: Sendable, Hashable {
        case tcp
        /// Both ends speak MPTCP: the kernel (and the path manager) moves the subflows.
        case mptcp
    }

    /// Why the flow leaves its connection.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// The interface left the path (carrier lost, address gone).
        case pathLost(interface: String)
        /// The interface stays, without the connection's address (renumbered).
        case addressLost(interface: String, address: IPAddress)
        /// The interface's connectivity check found a portal or no internet, while another
        /// interface is validated.
        case connectivityLost(interface: String, connectivity: InterfaceConnectivity.State)
        /// No data for the threshold while data was expected.
        case stalled(interface: String?, threshold: Duration)
        /// The stream judged the path too poor (``StreamPathJudge``).
        case tooPoor(interface: String?, detail: String)
        /// Back to a free interface that answered probes in a row.
        case betterPath(interface: String, probes: Int)
        /// The connection failed (an errno).
        case failed(errno: Int32)

        public var description: String {
            switch self {
            case .pathLost(let interface): "\(interface) left the path"
            case let .addressLost(interface, address): "\(interface) lost the connection's address \(address)"
            case let .connectivityLost(interface, connectivity): "\(interface) is \(connectivity == .portal ? "behind a captive portal" : "without internet") while another interface is validated"
            case .stalled(_, let threshold): "no data for \(threshold.roamMilliseconds)"
            case .tooPoor(_, let detail): detail
            case .betterPath(let interface, let probes): "back to \(interface), which answered \(probes) probes in a row"
            case .failed(let code): "failed (errno \(code))"
            }
        }

        /// Whether the flow leaves for a better path rather than for trouble.
        var isBetterPath: Bool { if case .betterPath = self { true } else { false } }
    }

    public enum Event: Sendable {
        /// A new connection over `interface` (its first subflow's, for MPTCP), to an address of
        /// `family` (with ``Configuration/controlsSubflows``, only interfaces with an address of
        /// that family can carry a subflow of it; nil: any).
        case connected(interface: String?, transport: Transport, family: AddressFamily? = nil, at: Duration)
        /// The connection ended for a reason the driver saw (closed, an error): no policy
        /// applies, the next connection races as usual.
        case connectionEnded(at: Duration)
        /// `bytes` arrived on the connection (over a plain TCP connection, counted for its interface).
        case received(bytes: Int, at: Duration)
        /// MPTCP: what each interface's subflows carried since the last sample (already counted
        /// by ``received(bytes:at:)``). The interface that carried the most is the one the data
        /// goes over now.
        case subflowsDelivered([String: Int], at: Duration)
        /// MPTCP with ``Configuration/controlsSubflows``: a subflow over `interface` is now
        /// established. When the data was switched to that interface before its subflow existed
        /// (a standby subflow still being opened), the wait for data over it starts now: a path
        /// is not judged stalled for the time it could not yet carry anything.
        case subflowEstablished(interface: String, at: Duration)
        /// The monitor published a new path.
        case pathUpdated(NetworkPath, at: Duration)
        /// Time passed. `smoothedRTT` is the connection's; `awaitingDataSince` is when the app
        /// began waiting for data it expects (nil: it expects none, so no stall can happen).
        case tick(at: Duration, smoothedRTT: Duration?, awaitingDataSince: Duration?)
        /// A probe over `interface` connected, or failed.
        case probeFinished(interface: String, connected: Bool, at: Duration)
        /// A stream's playout: seconds of media buffered, while playing.
        case playout(buffered: Duration, at: Duration)
        /// MPTCP with a path manager: the interface whose subflows the manager prefers (the one
        /// that is not a backup in handover), which is where the kernel sends the data.
        case pathManagerPrefers(interface: String?)
        /// The driver kept the connection the machine just asked it to leave (``Action/move(_:)``):
        /// an app that decides for itself, as a SwiftNIO channel's does, may stay. Judging resumes
        /// from now, over the same interface; a move back the app did not take is not held
        /// against the interface it pointed to.
        case stayed(at: Duration)
    }

    public enum Action: Sendable, Hashable {
        /// Hold `interface` down (and, with a path manager, demote it) for `holdDown`.
        case markStalled(interface: String, holdDown: Duration)
        /// Give up the connection now and connect again, racing over ``racePath(at:)``.
        case move(Reason)
        /// Open a probe connection over `interface` (report it with ``Event/probeFinished(interface:connected:at:)``).
        case startProbe(interface: String)
        /// Abandon the probe in flight (it took too long, or is no longer wanted).
        case abandonProbe(interface: String)
        /// MPTCP: `interface` proved itself; the path manager gives it its place back.
        case restore(interface: String)
        /// MPTCP with ``Configuration/controlsSubflows``: make `interface`'s subflow the one that
        /// carries the data (the others backups), opening it if there is none.
        case switchSubflows(to: String, Reason)
    }

    public let configuration: Configuration
    /// What the flow may use; the machine follows its connectivity rule
    /// (`PathPolicy/validation`): a flow leaves an interface the rule leaves out (a Wi-Fi whose
    /// connectivity turns `portal` or `limited` while another is validated, as Wi-Fi Assist
    /// leaves one that passes nothing, without waiting for a stall), and moves back or restores
    /// a subflow only onto an interface that carries (not onto one still being checked while
    /// the flow is on a validated one, as a phone joining a hotel's Wi-Fi stays on cellular).
    public let policy: PathPolicy
    public private(set) var stalledPaths: StalledPaths
    /// The latest path the monitor published.
    public private(set) var path: NetworkPath?
    /// The current connection: its interface, transport, when it was made, and its number.
    public private(set) var connection: (interface: String?, transport: Transport, since: Duration, number: Int)?
    /// The local address of the current TCP connection, when the driver knows it: once its
    /// interface no longer has it (the network renumbered the phone), the connection is as good
    /// as gone, and the flow leaves it at once rather than after a stall. Set after
    /// ``Event/connected(interface:transport:family:at:)``.
    package var connectionAddress: IPAddress? {
        didSet { connectionAddressSeen = false }
    }
    /// Whether a path since the connection was made listed its address (a path published before
    /// the address came, as a join adds IPv4 and IPv6 one after the other, says nothing).
    private var connectionAddressSeen = false
    /// Over MPTCP, the interface whose subflows brought the most data in the last sample.
    public private(set) var carrier: String?
    /// Over MPTCP, the interface the path manager prefers, when there is one.
    public private(set) var preferred: String?
    /// Connections made so far; handovers (a new connection over another interface than the
    /// one before, or, in MPTCP handover, data moving to another subflow's interface).
    public private(set) var connections = 0
    public private(set) var handovers = 0
    public private(set) var bytesReceived: Int64 = 0
    public private(set) var bytesByInterface: [String: Int64] = [:]
    /// Bytes that arrived over an interface the path called expensive at the time.
    public private(set) var expensiveBytes: Int64 = 0
    /// When data last arrived (on any connection).
    public private(set) var lastData: Duration?
    /// Over MPTCP, when each interface's subflows last brought data (TCP's in-order bytes,
    /// which the app may not see yet: MPTCP hands data over in its own order).
    private var lastSubflowDelivery: [String: Duration] = [:]

    /// Over MPTCP, when the current interface's subflows last brought data.
    private var currentSubflowDelivery: Duration? {
        guard connection?.transport == .mptcp, let current = currentInterface else { return nil }
        return lastSubflowDelivery[current]
    }
    /// Interfaces demoted with the path manager, until restored.
    public private(set) var demoted: Set<String> = []
    /// Of those, the ones demoted for a stall (not for a lost path or address) and in the path
    /// ever since, until restored.
    private var demotedForStalls: Set<String> = []
    /// The probe in flight.
    public private(set) var probe: (interface: String, started: Duration)?
    private var probeStreak = 0
    private var lastProbe: Duration?
    /// The interface the flow was just moved back to, until the next connection says whether it
    /// got there.
    private var movingBackTo: String?
    private var lastInterface: String?
    /// The connection the last move left, until the next one (for ``Event/stayed(at:)``).
    private var left: (interface: String?, transport: Transport, number: Int)?
    private var judge: StreamPathJudge?

    /// A state machine with no path and no connection yet.
    ///
    /// - Parameters:
    ///   - configuration: Its rules.
    ///   - policy: What the flow may use; the machine follows its connectivity rule (the
    ///     policy's costs and types are the race's: `PathPolicy/permittedInterfaces(of:)`).
    public init(configuration: Configuration = Configuration(), policy: PathPolicy = PathPolicy()) {
        self.configuration = configuration
        self.policy = policy
        stalledPaths = StalledPaths(initialHold: configuration.initialHold, maximumHold: configuration.maximumHold)
        judge = configuration.stream.map { StreamPathJudge(bytesPerSecond: $0.bytesPerSecond, bufferTarget: $0.buffer) }
    }

    /// The stall threshold for a connection with this smoothed RTT.
    ///
    /// - Parameter smoothedRTT: The connection's smoothed round-trip time, or nil.
    /// - Returns: ``StalledPaths/stallThreshold(smoothedRTT:minimum:maximum:)`` within the
    ///   configuration's ``Configuration/minimumStall`` and ``Configuration/maximumStall``.
    public func stallThreshold(smoothedRTT: Duration?) -> Duration {
        StalledPaths.stallThreshold(smoothedRTT: smoothedRTT, minimum: configuration.minimumStall, maximum: configuration.maximumStall)
    }

    /// The path to race over at `now`: the monitor's, with the interfaces held down, and those
    /// the path manager demoted and probes have not restored, moved last
    /// (``StalledPaths/racePath(_:at:alsoLast:)``).
    ///
    /// - Parameter now: The time, on the driver's clock.
    /// - Returns: The path to race over, or nil before the monitor published one.
    public func racePath(at now: Duration) -> NetworkPath? {
        path.map { stalledPaths.racePath($0, at: now, alsoLast: demoted) }
    }

    /// The interface data goes over now: over MPTCP the one whose subflow this machine made
    /// active (``Configuration/controlsSubflows``), the one the path manager prefers, or else the
    /// one whose subflows brought the most data lately.
    public var currentInterface: String? {
        guard let connection else { return nil }
        guard connection.transport == .mptcp else { return connection.interface }
        if configuration.controlsSubflows { return activeSubflow ?? connection.interface }
        return preferred ?? carrier ?? connection.interface
    }

    /// With ``Configuration/controlsSubflows``: the interface whose subflow carries the data.
    public private(set) var activeSubflow: String?

    /// The address family of the connection's peer address (nil: not told).
    private var connectionFamily: AddressFamily?

    /// Whether `interface` can carry a subflow of the connection: it has an address of the
    /// connection's family (an IPv4-only Wi-Fi cannot join a connection made over IPv6).
    private func canCarrySubflow(_ interface: NetworkInterface) -> Bool {
        guard let family = connectionFamily else { return true }
        return interface.addresses.contains { $0.address.family == family && !$0.address.isLinkLocal }
    }

    /// Whether the path ranks `interface` before `other` (true when `other` is not in it).
    private func precedes(_ interface: String, _ other: String?) -> Bool {
        guard let names = path?.availableInterfaces.map(\.name), let mine = names.firstIndex(of: interface) else { return false }
        guard let other, let theirs = names.firstIndex(of: other) else { return true }
        return mine < theirs
    }

    /// The interface the data should take: the path's first that is neither demoted nor held
    /// down (nil when every one is).
    private func subflowChoice(at now: Duration) -> String? {
        path?.availableInterfaces.first {
            $0.type != .loopback && canCarrySubflow($0) && !demoted.contains($0.name) && !stalledPaths.isHeldDown($0.name, at: now)
        }?.name
    }

    /// When the driver must next send a tick, at the latest (a stall would be due, a probe is
    /// due or overdue); nil when nothing is timed. Path updates, data and probe results are
    /// events of their own.
    ///
    /// - Parameters:
    ///   - smoothedRTT: The connection's smoothed round-trip time, or nil.
    ///   - awaitingDataSince: Since when the flow has awaited data (nil: it awaits none).
    /// - Returns: The time of the next tick, or nil when nothing is timed.
    public func nextDeadline(smoothedRTT: Duration?, awaitingDataSince: Duration?) -> Duration? {
        var deadline: Duration?
        func consider(_ time: Duration) { deadline = min(deadline ?? time, time) }
        if let connection, let since = awaitingDataSince {
            let stallAt = max(since, lastData ?? since, connection.since) + stallThreshold(smoothedRTT: smoothedRTT)
            // Head-of-line blocked then (the subflow it is on still brings data): when that data
            // would count as stopped, or the wait is over.
            if let delivered = currentSubflowDelivery, delivered + stallThreshold(smoothedRTT: smoothedRTT) > stallAt {
                consider(min(delivered + stallThreshold(smoothedRTT: smoothedRTT), stallAt + configuration.headOfLineWait))
            } else {
                consider(stallAt)
            }
        }
        if let probe {
            consider(probe.started + configuration.probeInterval)
        } else if let target = probeTarget(at: nil) {
            consider(max(nextProbeTime, stalledPaths.holdDownEnd(target) ?? nextProbeTime, condemnedUntil(target) ?? nextProbeTime))
        }
        return deadline
    }

    private var nextProbeTime: Duration { (lastProbe ?? .seconds(-1_000_000)) + configuration.probeInterval }

    /// Probes in a row `interface` must answer before the flow returns to it: more the more it
    /// stalled.
    ///
    /// - Parameter interface: An interface's name.
    /// - Returns: ``Configuration/probesToReturn``, doubled for its second stall and again for
    ///   its third and later.
    public func probesRequired(for interface: String) -> Int {
        let stalls = stalledPaths.stalls(of: interface)
        return configuration.probesToReturn << min(2, max(0, stalls - 1))
    }

    /// Until when the stream rule's evidence against `interface` stands (nil: none).
    private func condemnedUntil(_ interface: String) -> Duration? {
        guard let last = judge?.lastCondemned, last.interface == interface else { return nil }
        return last.at + StreamPathJudge.evidenceLifetime
    }

    /// Takes in what happened to the flow and applies the rules.
    ///
    /// - Parameter event: A connection made, a path update, data, a tick, a probe's result, a
    ///   stream's playout buffer, MPTCP's subflows, or the path manager's choice.
    /// - Returns: The actions for the driver, in order: interfaces to hold down or restore, a
    ///   move, probes to start or abandon, subflows to switch.
    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case let .connected(interface, transport, family, now):
            connectionFamily = family
            return connected(interface: interface, transport: transport, at: now)
        case .connectionEnded:
            connection = nil
            left = nil
            carrier = nil
            return []
        case let .received(bytes, now):
            received(bytes, at: now)
            return []
        case let .subflowsDelivered(delivered, now):
            for (interface, bytes) in delivered where bytes > 0 {
                account(bytes, over: interface)
                lastSubflowDelivery[interface] = now
            }
            // Ties go to the interface first in name order, so that a sample decides the same way every time.
            guard connection?.transport == .mptcp,
                  let top = delivered.filter({ $0.value > 0 }).max(by: { ($0.value, $1.key) < ($1.value, $0.key) })?.key else { return [] }
            // In handover one path carries the data at a time: a change of path is a handover.
            if configuration.serviceType == .handover, !configuration.controlsSubflows, let carrier, carrier != top { handovers += 1 }
            carrier = top
            return []
        case let .subflowEstablished(interface, now):
            if let current = connection, current.transport == .mptcp, configuration.controlsSubflows, activeSubflow == interface,
               current.since < now {
                connection = (current.interface, current.transport, now, current.number)
            }
            return []
        case let .pathUpdated(path, now):
            self.path = path
            // One that went since it stalled comes back as a network the stall says nothing of.
            if !demotedForStalls.isEmpty { demotedForStalls.formIntersection(path.availableInterfaces.map(\.name)) }
            return evaluate(at: now, smoothedRTT: nil, awaitingDataSince: nil)
        case let .tick(now, rtt, since):
            return evaluate(at: now, smoothedRTT: rtt, awaitingDataSince: since)
        case let .probeFinished(interface, succeeded, now):
            return probeFinished(interface, connected: succeeded, at: now)
        case let .playout(buffered, now):
            return playout(buffered: buffered, at: now)
        case .pathManagerPrefers(let interface):
            preferred = interface
            return []
        case .stayed(let now):
            guard connection == nil, let left else { return [] }
            connection = (left.interface, left.transport, now, left.number)
            carrier = left.interface
            movingBackTo = nil
            self.left = nil
            return []
        }
    }

    private mutating func connected(interface: String?, transport: Transport, at now: Duration) -> [Action] {
        var actions: [Action] = []
        connections += 1
        if let lastInterface, let interface, lastInterface != interface { handovers += 1 }
        // Moved back to an interface that then lost the race: its probes were luck.
        if let target = movingBackTo, target != interface { actions += markStalled(target, at: now) }
        movingBackTo = nil
        left = nil
        lastInterface = interface ?? lastInterface
        connection = (interface, transport, now, connections)
        carrier = interface
        lastSubflowDelivery = [:]
        activeSubflow = transport == .mptcp && configuration.controlsSubflows ? interface : nil
        return actions
    }

    private mutating func received(_ count: Int, at now: Duration) {
        guard count > 0 else { return }
        bytesReceived += Int64(count)
        lastData = now
        judge?.record(now: now, bytes: bytesReceived)
        if let connection, connection.transport == .tcp, let interface = connection.interface { account(count, over: interface) }
    }

    private mutating func account(_ count: Int, over interface: String) {
        guard count > 0 else { return }
        bytesByInterface[interface, default: 0] += Int64(count)
        if path?.availableInterfaces.first(where: { $0.name == interface })?.isExpensive ?? false { expensiveBytes += Int64(count) }
    }

    private mutating func markStalled(_ interface: String, at now: Duration) -> [Action] {
        let hold = stalledPaths.markStalled(interface, at: now)
        if configuration.usesPathManager {
            demoted.insert(interface)
            demotedForStalls.insert(interface)
        }
        return [.markStalled(interface: interface, holdDown: hold)]
    }

    /// Leaves the connection for `reason`, holding its interface down first when `stalled`.
    private mutating func move(_ reason: Reason, holdDown: Bool, at now: Duration) -> [Action] {
        var actions: [Action] = []
        let left = currentInterface
        if holdDown, let interface = left { actions += markStalled(interface, at: now) }
        if let current = connection, current.transport == .mptcp, configuration.controlsSubflows {
            // The connection stays: the data goes over another interface's subflow, and the one
            // left for trouble must answer probes before it carries data again (one left for a
            // better path is not: probed, it would be returned to).
            if let left, !reason.isBetterPath { demoted.insert(left) }
            if let next = subflowChoice(at: now), next != left {
                activeSubflow = next
                connection = (current.interface, current.transport, now, current.number)
                if configuration.serviceType == .handover { handovers += 1 }
                return actions + [.switchSubflows(to: next, reason)]
            }
        }
        self.left = connection.map { ($0.interface, $0.transport, $0.number) }
        connection = nil
        carrier = nil
        actions.append(.move(reason))
        return actions
    }

    /// Why the flow should leave `current`: the connectivity rule leaves it out (``policy``;
    /// with `.prefer`, it is `portal` or `limited` while another interface is validated) and
    /// another interface carries.
    private func connectivityLost(_ current: NetworkInterface, in path: NetworkPath) -> Reason? {
        guard policy.validation != .ignore else { return nil }
        let best = bestConnectivity(in: path)
        guard policy.validation.role(of: current, bestRank: best) == .leftOut,
              path.availableInterfaces.contains(where: { $0.name != current.name && policy.refusal(of: $0) == nil && policy.validation.role(of: $0, bestRank: best) == .carries })
        else { return nil }
        return .connectivityLost(interface: current.name, connectivity: current.connectivity.state)
    }

    /// The best connectivity rank among the interfaces of `path` the policy permits.
    private func bestConnectivity(in path: NetworkPath) -> Int? {
        ValidationRule.bestRank(among: path.availableInterfaces.lazy.filter { policy.refusal(of: $0) == nil })
    }

    /// Whether the connectivity rule lets `interface` carry the flow's data (moved back to, a
    /// subflow restored).
    private func carries(_ interface: NetworkInterface, in path: NetworkPath) -> Bool {
        policy.validation.role(of: interface, bestRank: bestConnectivity(in: path)) == .carries
    }

    private mutating func evaluate(at now: Duration, smoothedRTT: Duration?, awaitingDataSince: Duration?) -> [Action] {
        guard let connection else { return probeActions(at: now) }
        if let since = awaitingDataSince {
            let threshold = stallThreshold(smoothedRTT: smoothedRTT)
            let quiet = now - max(since, lastData ?? since, connection.since)
            if quiet >= threshold {
                guard let delivered = currentSubflowDelivery, now - delivered < threshold else {
                    return abandonStaleProbe() + move(.stalled(interface: currentInterface, threshold: threshold), holdDown: true, at: now)
                }
                // Head-of-line blocking: the subflow the data goes over brings it, but the app gets
                // none, so MPTCP waits for a gap another subflow left (data it held when the flow
                // left it, or one sent over a standby the peer did not take for a backup). Not this
                // path's fault; the kernel resends the gap. If it has not in ``headOfLineWait``, a
                // new connection (which has no gap) is made, nothing held down.
                if quiet >= threshold + configuration.headOfLineWait {
                    self.left = (connection.interface, connection.transport, connection.number)
                    self.connection = nil
                    carrier = nil
                    return abandonStaleProbe() + [.move(.stalled(interface: nil, threshold: quiet))]
                }
            }
        }
        if connection.transport == .tcp, let interface = connection.interface, let path {
            guard let current = path.availableInterfaces.first(where: { $0.name == interface }) else {
                return abandonStaleProbe() + move(.pathLost(interface: interface), holdDown: false, at: now)
            }
            if let address = connectionAddress {
                if current.addresses.contains(where: { $0.address == address }) {
                    connectionAddressSeen = true
                } else if connectionAddressSeen {
                    return abandonStaleProbe() + move(.addressLost(interface: interface, address: address), holdDown: false, at: now)
                }
            }
            if let lost = connectivityLost(current, in: path) {
                return abandonStaleProbe() + move(lost, holdDown: false, at: now)
            }
        }
        if connection.transport == .mptcp, configuration.controlsSubflows, let interface = activeSubflow, let path {
            guard let current = path.availableInterfaces.first(where: { $0.name == interface }) else {
                return abandonStaleProbe() + move(.pathLost(interface: interface), holdDown: false, at: now)
            }
            if let lost = connectivityLost(current, in: path) {
                return abandonStaleProbe() + move(lost, holdDown: false, at: now)
            }
        }
        return probeActions(at: now)
    }

    /// What to probe now: over TCP, the path's first choice when it is free and the flow is on
    /// an expensive interface; over MPTCP, the first demoted interface back in the path.
    /// `now` nil: ignoring hold-downs (for the deadline).
    private func probeTarget(at now: Duration?) -> String? {
        guard let connection, let path else { return nil }
        switch connection.transport {
        case .tcp:
            return freePrimary(over: connection.interface, at: now)?.name
        case .mptcp:
            // Asked on every tick of the flow: nothing to look up while nothing is demoted.
            var target: String?
            if !demoted.isEmpty {
                let available = Set(path.availableInterfaces.map(\.name))
                // As over TCP, not while held down, nor while the stream rule's evidence against it stands.
                let notCarrying = Set(path.availableInterfaces.filter { !carries($0, in: path) }.map(\.name))
                target = demoted.sorted().first { name in
                    guard available.contains(name), !staysLeft(name, comparedTo: currentInterface) else { return false }
                    if notCarrying.contains(name) { return false }
                    guard let now else { return true }
                    return !stalledPaths.isHeldDown(name, at: now) && !(condemnedUntil(name).map { now < $0 } ?? false)
                }
            }
            // A free primary the flow was never on (a hotel's Wi-Fi, validated once its portal is
            // passed) is probed as a demoted one is: then the data goes to its subflow; one that
            // cannot join the connection (another address family) gets a new connection over it.
            if target == nil, configuration.controlsSubflows, let primary = freePrimary(over: currentInterface, at: now) {
                return primary.name
            }
            return target
        }
    }

    /// The path's first interface when it is free, the flow is on an expensive `current`, and it
    /// is neither held down nor condemned by the stream rule (`now` nil: ignoring both).
    private func freePrimary(over current: String?, at now: Duration?) -> NetworkInterface? {
        guard configuration.movesBack, let path, let current, let primary = path.availableInterfaces.first,
              primary.name != current, !primary.isExpensive, !staysLeft(primary.name, comparedTo: current),
              path.availableInterfaces.first(where: { $0.name == current })?.isExpensive ?? false else { return nil }
        if let now, stalledPaths.isHeldDown(primary.name, at: now) || condemnedUntil(primary.name).map({ now < $0 }) ?? false { return nil }
        // Not back behind a portal, onto a network without internet, nor off a validated network
        // onto one whose check has not answered yet: only onto one the connectivity rule lets carry.
        guard carries(primary, in: path) else { return nil }
        return primary
    }

    /// Whether the flow stays off `interface` for now, because the monitor grades its link below
    /// the one the flow is on (`unknown` ranks with nothing), and either
    /// - it is minimal (it barely works: a Wi-Fi at the edge of its range): the flow is not moved
    ///   back to it, nor its subflow restored, however many probes a lossy link lets through by
    ///   luck (three SYNs in a row get through 40% loss each way 5% of the time, so a flow
    ///   probing every second finds such a streak within a minute); or
    /// - the flow left it for a stall: a Wi-Fi left at 5% loss (`moderate`) for a `good`
    ///   cellular link is not probed and returned to while it stays that way (three probes get
    ///   through 5% loss most of the time, and the flow went back into the trouble it had just
    ///   left, then left again: a walk out of Wi-Fi range counted three handovers instead of
    ///   one). Once the monitor grades it as well as the current one (the walk back into
    ///   range), it is probed as before. One left because it went (its grade says nothing of
    ///   why), one that went after it stalled (it comes back as a network the stall says
    ///   nothing of), and a free primary the flow was never on are held only to the first rule.
    ///
    /// Such an interface is still raced and switched to when nothing else works.
    private func staysLeft(_ interface: String, comparedTo current: String?) -> Bool {
        guard let interfaces = path?.availableInterfaces, let link = interfaces.first(where: { $0.name == interface })?.linkQuality,
              let candidate = link.rank, let quality = interfaces.first(where: { $0.name == current })?.linkQuality.rank,
              candidate < quality else { return false }
        return link == .minimal || demotedForStalls.contains(interface)
    }

    private mutating func abandonStaleProbe() -> [Action] {
        guard let running = probe else { return [] }
        probe = nil
        probeStreak = 0
        return [.abandonProbe(interface: running.interface)]
    }

    private mutating func probeActions(at now: Duration) -> [Action] {
        let target = probeTarget(at: now)
        if let running = probe {
            // A probe that is no longer wanted, or took too long, ends the streak.
            guard running.interface == target, now - running.started < configuration.probeInterval else { return abandonStaleProbe() }
            return []
        }
        guard let target, now >= nextProbeTime else { return [] }
        lastProbe = now
        probe = (target, now)
        return [.startProbe(interface: target)]
    }

    private mutating func probeFinished(_ interface: String, connected: Bool, at now: Duration) -> [Action] {
        guard probe?.interface == interface else { return [] }
        probe = nil
        guard connected else {
            probeStreak = 0
            return []
        }
        probeStreak += 1
        // The next probe of a streak goes soon after.
        lastProbe = now - configuration.probeInterval + configuration.probeSpacing
        let required = probesRequired(for: interface)
        guard probeStreak >= required else { return [] }
        probeStreak = 0
        guard probeTarget(at: now) == interface, let connection else { return [] }
        switch connection.transport {
        case .tcp:
            movingBackTo = interface
            return move(.betterPath(interface: interface, probes: required), holdDown: false, at: now)
        case .mptcp:
            demoted.remove(interface)
            demotedForStalls.remove(interface)
            if configuration.controlsSubflows, let target = path?.availableInterfaces.first(where: { $0.name == interface }),
               !canCarrySubflow(target) {
                // Back to an interface of another address family: a new connection over it, if
                // the path ranks it before the one the flow is on (else it is a standby again).
                guard precedes(interface, currentInterface) else { return [.restore(interface: interface)] }
                movingBackTo = interface
                return move(.betterPath(interface: interface, probes: required), holdDown: false, at: now)
            }
            guard configuration.controlsSubflows else { return [.restore(interface: interface)] }
            // Back to it if it comes before the active one in the path's order.
            guard let choice = subflowChoice(at: now), choice != activeSubflow else { return [.restore(interface: interface)] }
            activeSubflow = choice
            if configuration.serviceType == .handover { handovers += 1 }
            return [.restore(interface: interface), .switchSubflows(to: choice, .betterPath(interface: choice, probes: required))]
        }
    }

    private mutating func playout(buffered: Duration, at now: Duration) -> [Action] {
        guard let connection, judge != nil else { return [] }
        // What the path delivered up to now, silence included.
        judge?.record(now: now, bytes: bytesReceived)
        let seconds = buffered.seconds
        let judged = StreamPathJudge.Connection(number: connection.number, age: now - connection.since, interface: currentInterface)
        guard let detail = judge?.verdict(buffered: seconds, connection: judged, now: now) else { return [] }
        return abandonStaleProbe() + move(.tooPoor(interface: currentInterface, detail: detail), holdDown: true, at: now)
    }
}

extension Duration {
    /// "250 ms".
    var roamMilliseconds: String {
        let milliseconds = Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
        return milliseconds.rounded() == milliseconds ? "\(Int64(milliseconds)) ms" : "\(milliseconds) ms"
    }
}

extension LinkQuality {
    /// The grade's place, worst first (nil: `unknown`, which ranks with nothing).
    fileprivate var rank: Int? {
        switch self {
        case .unknown: nil
        case .minimal: 0
        case .moderate: 1
        case .good: 2
        }
    }
}
