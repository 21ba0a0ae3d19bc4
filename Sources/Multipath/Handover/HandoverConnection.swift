import CRoamLinux
import Glibc
import Netlink
import PathMonitor
import RoamDecisions
import RoamSystem
import SystemPackage

/// Application-level handover for an app's own protocol over plain TCP, where MPTCP is not
/// there (the kernel has none, or the server does not speak it): the connection is raced over
/// the permitted interfaces and follows `HandoverStateMachine`'s rules, the same that Roam's
/// simulator plays: when its interface leaves the path, or no data comes for the stall
/// threshold while the app waits for some, a new connection is raced over the others (a stalled
/// interface held down: raced last); while it runs over an expensive interface and a free one is back,
/// probes test the free one and, after three in a row connect, the flow moves back. The app's
/// **resume hook** runs on every connection before any of its reads or writes (the first one
/// included): that is where it tells the peer where to carry on, with whatever its protocol
/// uses (a byte offset, a sequence number, a session token), as Roam's built-in stream and bulk
/// workloads send the byte count they hold.
///
/// ```swift
/// let connection = try HandoverConnection(racer: ConnectionRacer(namespace: phone), to: [server], port: 9000,
///                                         monitor: monitor) { socket, _ in
///     var offset = received.bigEndian
///     guard write(socket.rawValue, &offset, 8) == 8 else { throw ResumeFailed() }
/// }
/// let count = try connection.receive(into: buffer)    // follows the phone from path to path
/// ```
///
/// Given a `NetworkPathMonitor`, the connection wakes on its path updates: an interface that
/// leaves the path is left at once, and a connection waiting for a path starts as soon as one is
/// there. Given only a closure for the path, it looks every 20 ms. Either way it also wakes for
/// the state machine's timers (the stall threshold, probes) and when a probe is decided.
///
/// The rules apply while the app is in a call (``receive(into:)``, ``send(_:)``): a connection
/// the app leaves idle is not judged. A stream player tells the connection its buffer with
/// ``reportPlayout(buffered:)`` so that a path too poor for the stream is left before playback
/// stalls (configure ``Configuration/stream``).
///
/// One thread at a time, like a socket.
public final class HandoverConnection {
    public struct Configuration: Sendable {
        /// The stall threshold's floor and ceiling (see `StalledPaths.stallThreshold(smoothedRTT:minimum:maximum:)`).
        public var minimumStall: Duration = .milliseconds(300)
        public var maximumStall: Duration = .seconds(10)
        /// How long one race may take, and how long to wait for a path at all.
        public var connectTimeout: Duration = .seconds(10)
        /// Whether the flow moves back from an expensive interface to a free one that proved
        /// itself to probes.
        public var movesBack = true
        /// For a stream: its bitrate and buffer, for the rule that leaves a path too poor for it.
        public var stream: HandoverStateMachine.StreamRequirement?
        /// The port probes connect to (nil: the connection's). A probe is a TCP connection
        /// attempt, reset as soon as it is decided: the server sees a connection open and reset.
        public var probePort: UInt16?
        /// What counts as a stall: silence while the app waits for data (the default), or only
        /// data of its own left unacknowledged (for request and response with a server that may
        /// take its time).
        public var stallEvidence: HandoverSession.StallEvidence = .silence
        /// After a failed race: how long to wait before the next, and when to give up (nil:
        /// ``connectTimeout`` after the first failure).
        public var retry = HandoverSession.RetryPolicy()
        /// Over MPTCP on a node whose path manager is the kernel's userspace one: open a subflow
        /// from every interface and switch which carries the data instead of reconnecting
        /// (``MPTCPSubflowController``). The racer must make MPTCP sockets.
        public var controlsSubflows = false
        /// Over MPTCP with the kernel's path manager: the ``MPTCPPathManager`` that keeps the
        /// node's endpoints in step with its path (``MPTCPPathManager/follow(_:onChange:)``). A stalled
        /// interface is demoted through it (its subflows become backups, another path's carry the
        /// data, no reconnection) and restored once it proves itself, as the simulator's
        /// `handover` over MPTCP does. The racer must make MPTCP sockets.
        public var pathManager: MPTCPPathManager?
        /// The defaults, as documented on each setting.
        public init() {}

        /// The session's configuration: these settings, and the racer's policy, so that the
        /// moves and subflows follow the rule the races do.
        ///
        /// - Parameter policy: The racer's ``ConnectionRacer/policy``.
        /// - Returns: What ``HandoverSession`` is given.
        package func session(policy: PathPolicy) -> HandoverSession.Configuration {
            var configuration = HandoverSession.Configuration()
            configuration.policy = policy
            configuration.rules.minimumStall = minimumStall
            configuration.rules.maximumStall = maximumStall
            configuration.rules.movesBack = movesBack
            configuration.rules.stream = stream
            configuration.rules.controlsSubflows = controlsSubflows
            configuration.rules.usesPathManager = controlsSubflows || pathManager != nil
            configuration.probePort = probePort
            configuration.stallEvidence = stallEvidence
            configuration.retry = retry
            if configuration.retry.giveUpAfter == nil { configuration.retry.giveUpAfter = connectTimeout }
            return configuration
        }
    }

    /// Why the connection left an interface.
    public typealias Reason = HandoverStateMachine.Reason

    public enum Event: Sendable {
        /// A connection was made (`isReconnect` after a move), with how its race went.
        case connected(ConnectionMetrics, isReconnect: Bool)
        /// The connection over `interface` was given up.
        case left(interface: String, reason: Reason)
        /// `interface` stalled and is left out of races for `holdDown`.
        case heldDown(interface: String, holdDown: Duration)
        /// A probe of `interface` (to move back to it) started, or was decided.
        case probe(interface: String, connected: Bool?)
        /// Over MPTCP with ``Configuration/controlsSubflows``: the data now goes over
        /// `interface`'s subflow, without a new connection.
        case switchedSubflows(to: String, reason: Reason)
    }

    /// Called on every new connection with its (blocking) socket and whether it replaces one.
    public typealias ResumeHook = (_ socket: FileDescriptor, _ isReconnect: Bool) throws -> Void

    public let racer: ConnectionRacer
    public let addresses: [IPAddress]
    public let port: UInt16
    public let configuration: Configuration
    private let path: @Sendable () -> NetworkPath?
    /// Signalled on every path update when the connection follows a monitor (nil: it polls).
    private let pathChanged: EventSignal?
    private let subscription: PathUpdateSubscription?
    /// Signalled by ``interrupt()``; nil only if no descriptor could be made for it.
    private let interruption: EventSignal?
    /// How often the path is looked at while waiting when no monitor wakes the connection.
    static let pollInterval = Duration.milliseconds(20)
    private let resume: ResumeHook
    private let onEvent: ((Event) -> Void)?
    private var descriptor: Int32 = -1
    private var session: HandoverSession
    private var probe: PathProbe?
    private let subflows: MPTCPSubflowController
    /// Every connection's race, in order.
    public private(set) var connections: [ConnectionMetrics] = []

    /// Interfaces held down after a stall.
    public var stalledPaths: StalledPaths { session.machine.stalledPaths }
    /// Times a new connection went over another interface than the one before (or, switching
    /// MPTCP subflows, the data moved to another interface).
    public var handovers: Int { session.machine.handovers }
    /// Bytes received per interface, and over interfaces the path called expensive.
    public var bytesByInterface: [String: Int64] { session.machine.bytesByInterface }
    public var expensiveBytes: Int64 { session.machine.expensiveBytes }

    /// A connection that looks at the path through `path` at each step (every 20 ms while it
    /// waits). Nothing connects until the first ``receive(into:)`` or ``send(_:)``.
    ///
    /// - Parameters:
    ///   - racer: Makes each connection (its namespace, policy and transport).
    ///   - addresses: The peer's addresses.
    ///   - port: The peer's port.
    ///   - path: Returns the path now (nil: none yet), from any thread.
    ///   - configuration: The handover's settings.
    ///   - onEvent: Told of each connection, move, hold-down and probe, on the thread of the call
    ///     in progress.
    ///   - resume: Runs on every new connection before data goes over it (see
    ///     <doc:ResumingAnAppsProtocol>).
    public init(racer: ConnectionRacer, to addresses: [IPAddress], port: UInt16, path: @escaping @Sendable () -> NetworkPath?,
                configuration: Configuration = Configuration(), onEvent: ((Event) -> Void)? = nil, resume: @escaping ResumeHook) {
        self.racer = racer
        self.addresses = addresses
        self.port = port
        self.path = path
        self.configuration = configuration
        self.onEvent = onEvent
        self.resume = resume
        session = HandoverSession(to: addresses, port: port, configuration: configuration.session(policy: racer.policy))
        subflows = MPTCPSubflowController(namespace: racer.namespace)
        pathChanged = nil
        subscription = nil
        interruption = try? EventSignal()
    }

    /// A connection that follows `monitor` (started, watching the racer's namespace): it wakes
    /// on every path update instead of looking at the path from time to time.
    ///
    /// - Parameters:
    ///   - racer: Makes each connection (its namespace, policy and transport).
    ///   - addresses: The peer's addresses.
    ///   - port: The peer's port.
    ///   - monitor: The path monitor of the racer's namespace, started.
    ///   - configuration: The handover's settings.
    ///   - onEvent: Told of each connection, move, hold-down and probe, on the thread of the call
    ///     in progress.
    ///   - resume: Runs on every new connection before data goes over it (see
    ///     <doc:ResumingAnAppsProtocol>).
    /// - Throws: ``MultipathError/system(operation:_:)`` if no wake-up descriptor can be made.
    public init(racer: ConnectionRacer, to addresses: [IPAddress], port: UInt16, monitor: NetworkPathMonitor,
                configuration: Configuration = Configuration(), onEvent: ((Event) -> Void)? = nil, resume: @escaping ResumeHook) throws(MultipathError) {
        let wakeup: EventSignal
        do {
            wakeup = try EventSignal()
            interruption = try EventSignal()
        } catch {
            throw .system(operation: "make a wake-up descriptor for path updates", .posix("eventfd", errno: error.rawValue))
        }
        self.racer = racer
        self.addresses = addresses
        self.port = port
        self.path = { monitor.currentPath }
        self.configuration = configuration
        self.onEvent = onEvent
        self.resume = resume
        session = HandoverSession(to: addresses, port: port, configuration: configuration.session(policy: racer.policy))
        subflows = MPTCPSubflowController(namespace: racer.namespace)
        pathChanged = wakeup
        subscription = monitor.onUpdate { _ in wakeup.signal() }
    }

    deinit {
        subscription?.cancel()
        close()
    }

    /// Makes the blocking call in progress on another thread (``receive(into:)``, ``send(_:)``, or
    /// the wait for a path) throw ``MultipathError/interrupted`` promptly; if none is in progress,
    /// the next one does. A race already under way finishes first (it lasts at most
    /// ``Configuration/connectTimeout``). The one method safe to call from any thread.
    public func interrupt() {
        interruption?.signal()
    }

    /// Throws if ``interrupt()`` was called since the last call that threw for it.
    private func checkInterruption() throws(MultipathError) {
        if interruption?.reset() == true { throw .interrupted }
    }

    /// The interface the current connection uses, if connected.
    public var currentInterface: String? { descriptor >= 0 ? session.currentInterface : nil }

    /// Closes the current connection and abandons a probe in progress. The next
    /// ``receive(into:)`` or ``send(_:)`` connects again.
    public func close() {
        probe?.abandon()
        probe = nil
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    /// Receives what is there, waiting for some (the app expects data when it calls this):
    /// moves to another path when the state machine says so.
    ///
    /// - Parameter buffer: Where to put the bytes.
    /// - Returns: How many bytes were received; 0 when the peer closed the connection.
    /// - Throws: A ``MultipathError``: ``MultipathError/Code/interrupted`` after ``interrupt()``,
    ///   ``MultipathError/Code/noPermittedPath`` or ``MultipathError/Code/connectFailed`` when the
    ///   session gives up connecting (``Configuration/retry``), ``MultipathError/Code/resume``
    ///   when the resume hook threw.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(MultipathError) -> Int {
        try checkInterruption()
        let since = Self.now()
        while true {
            try connectIfNeeded()
            let fd = descriptor
            let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { perform(session.handle(.received(bytes: count, at: Self.now()))) }
            if count >= 0 { return count }
            guard errno == EAGAIN || errno == EINTR else {
                move(.failed(errno: errno))
                continue
            }
            if let reason = try wait(for: Int16(POLLIN), awaitingDataSince: since) { move(reason) }
        }
    }

    /// Sends all of `bytes`. If the connection is replaced on the way, the resume hook runs on
    /// the new one and the whole of `bytes` is sent again there: at least once, so the peer,
    /// told where to resume, can drop what it already had.
    ///
    /// - Parameter bytes: What to send.
    /// - Throws: A ``MultipathError``, as ``receive(into:)`` does.
    public func send(_ bytes: UnsafeRawBufferPointer) throws(MultipathError) {
        try checkInterruption()
        sending: while true {
            try connectIfNeeded()
            var offset = 0
            while offset < bytes.count {
                let sent = Glibc.send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                if sent > 0 {
                    offset += sent
                    continue
                }
                if sent < 0 && (errno == EAGAIN || errno == EINTR) {
                    // A send buffer that stays full is a stall as much as silence is.
                    if let reason = try wait(for: Int16(POLLOUT), awaitingDataSince: Self.now()) {
                        move(reason)
                        continue sending
                    }
                    continue
                }
                move(.failed(errno: sent == 0 ? EPIPE : errno))
                continue sending
            }
            return
        }
    }

    /// Tells the state machine how much media a stream player holds (with
    /// ``Configuration/stream`` set): a path that delivers less than the bitrate while the buffer
    /// runs low is left at the next call that waits.
    ///
    /// - Parameter buffered: The media the player holds now.
    public func reportPlayout(buffered: Duration) {
        perform(session.handle(.playout(buffered: buffered, at: Self.now())))
    }

    /// The move the last actions asked for, until the connection is given up.
    private var pendingMove: Reason?

    /// Performs the session's requests; a move is kept for the caller to make.
    private func perform(_ requests: [HandoverSession.Request]) {
        for request in requests {
            switch request {
            case let .holdDown(interface, holdDown):
                // With a path manager, the interface's subflows become backups (in every
                // connection of the node) and another path's take over.
                _ = try? configuration.pathManager?.markStalled(interface)
                onEvent?(.heldDown(interface: interface, holdDown: holdDown))
            case .leave(let reason):
                pendingMove = reason
            case let .probe(interface, destination, port):
                probe?.abandon()
                probe = nil
                if let started = PathProbe(interface, to: destination, port: port, in: racer.namespace) {
                    probe = started
                    onEvent?(.probe(interface: interface.name, connected: nil))
                } else {
                    perform(session.handle(.probeFinished(interface: interface.name, connected: false, at: Self.now())))
                }
            case .abandonProbe:
                probe?.abandon()
                probe = nil
            case .subflow(let plan):
                do throws(MultipathError) {
                    try subflows.perform(plan)
                } catch {
                    // The kernel refuses a subflow until the connection is established: the
                    // session asks again. Anything else shows as a stall the rules handle.
                }
            case .switchedSubflows(let interface, let reason):
                onEvent?(.switchedSubflows(to: interface, reason: reason))
            case .restore(let interface):
                if !configuration.controlsSubflows { _ = try? configuration.pathManager?.clearStalled(interface) }
            case .subflowOpened, .subflowClosed, .advise:
                break
            }
        }
    }

    /// Feeds the session a path the monitor published since it last looked, and, over MPTCP,
    /// the connection's subflows.
    private func observePath() {
        let now = Self.now()
        if let current = path(), current != session.path { perform(session.handle(.pathUpdated(current, at: now))) }
        if descriptor >= 0, session.machine.connection?.transport == .mptcp {
            perform(session.handle(.subflowsSampled(MPTCP.subflows(of: descriptor), at: now)))
        }
    }

    /// Waits until the socket is ready for `events`; or says why the connection must move.
    private func wait(for events: Int16, awaitingDataSince since: Duration) throws(MultipathError) -> Reason? {
        while true {
            observePath()
            let sample = HandoverSession.TransportSample.of(descriptor)
            perform(session.handle(.tick(at: Self.now(), transport: sample, awaitingDataSince: since)))
            if let reason = pendingMove { return reason }
            // Until the socket is ready, a timer of the session is due, the path changes, or the
            // probe is decided (without a monitor, look at the path every 20 ms).
            let now = Self.now()
            var limit = (session.nextDeadline(transport: sample, awaitingDataSince: since, at: now) ?? now + configuration.maximumStall) - now
            // Over MPTCP the subflows are looked at while waiting (they come and go).
            if session.machine.connection?.transport == .mptcp { limit = min(limit, Self.subflowSampleInterval) }
            if pathChanged == nil { limit = min(limit, Self.pollInterval) }
            if try waitReady(events, for: limit) { return nil }
            if let probe, let connected = probe.poll() {
                self.probe = nil
                onEvent?(.probe(interface: probe.interface, connected: connected))
                perform(session.handle(.probeFinished(interface: probe.interface, connected: connected, at: Self.now())))
                if let reason = pendingMove { return reason }
            }
        }
    }

    private func move(_ reason: Reason) {
        if let interface = session.currentInterface ?? lastInterface ?? connections.last?.winner?.candidate.route.interface {
            onEvent?(.left(interface: interface, reason: reason))
        }
        pendingMove = nil
        if session.machine.connection != nil { _ = session.handle(.connectionEnded(at: Self.now())) }
        // The connection is given up, maybe over a dead link: reset it rather than leave the
        // kernel retrying its FIN for minutes.
        if descriptor >= 0 { ConnectionRacer.abandon(descriptor) }
        descriptor = -1
    }

    /// The interface of the connection just left (the session forgets it when it asks to leave).
    private var lastInterface: String?

    /// Connects as the session plans: races over the path, the interfaces held down last,
    /// waits for a path, or backs off after a failed race (and races at once if the path
    /// changes), until the session's retry policy gives up.
    private func connectIfNeeded() throws(MultipathError) {
        guard descriptor < 0 else { return }
        var lastError: MultipathError?
        while true {
            observePath()
            switch session.connectPlan(at: Self.now()) {
            case .giveUp:
                throw lastError ?? .noPermittedPath(PathRefusal(reasons: [], refused: []))
            case .wait(let until):
                let limit = (until ?? Self.now() + configuration.connectTimeout) - Self.now()
                _ = try waitReady(nil, for: pathChanged == nil ? min(Self.pollInterval, limit) : limit)
            case .race(let current):
                let connection: RacedConnection
                do throws(MultipathError) {
                    connection = try racer.connect(to: addresses, port: port, over: current, timeout: configuration.connectTimeout)
                } catch {
                    lastError = error
                    _ = session.handle(.raceFailed(at: Self.now()))
                    continue
                }
                let isReconnect = !connections.isEmpty
                connections.append(connection.metrics)
                let winner = connection.metrics.winner?.candidate
                let multipath = connection.metrics.mode == .multipath
                pendingMove = nil
                descriptor = connection.descriptor
                perform(session.handle(.connected(.init(interface: winner?.route.interface, transport: multipath ? .mptcp : .tcp,
                                                        local: winner?.source, remote: winner?.destination,
                                                        token: multipath ? MPTCP.token(of: connection.descriptor) : nil),
                                                  at: Self.now())))
                lastInterface = winner?.route.interface
                onEvent?(.connected(connection.metrics, isReconnect: isReconnect))
                do {
                    try resume(connection.socket, isReconnect)
                } catch {
                    ConnectionRacer.abandon(connection.descriptor)
                    descriptor = -1
                    _ = session.handle(.connectionEnded(at: Self.now()))
                    throw .resume(error)
                }
                ConnectionRacer.reapWhenDead(connection.descriptor, patience: configuration.connectTimeout)
                return
            }
        }
    }

    /// How often an MPTCP connection's subflows are looked at while waiting.
    static let subflowSampleInterval = Duration.milliseconds(20)

    /// Waits up to `limit` for the socket to be ready for `events` (true) or for a path update,
    /// a probe's decision or the limit (false). With no `events`, waits for a path update only.
    /// Throws when interrupted.
    private func waitReady(_ events: Int16?, for limit: Duration) throws(MultipathError) -> Bool {
        var entries: [pollfd] = []
        if let events { entries.append(pollfd(fd: descriptor, events: events, revents: 0)) }
        let pathIndex = entries.count
        if let pathChanged { entries.append(pathChanged.pollEntry) }
        if let interruption { entries.append(interruption.pollEntry) }
        if let probe, probe.descriptor >= 0 { entries.append(pollfd(fd: probe.descriptor, events: Int16(POLLOUT), revents: 0)) }
        guard let ready = try? waitForEvents(&entries, timeout: limit), ready > 0 else { return false }
        try checkInterruption()
        if let pathChanged, entries[pathIndex].revents != 0 { pathChanged.reset() }
        return events != nil && entries[0].revents != 0
    }

    private static func now() -> Duration { ConnectionRacer.now() }
}
