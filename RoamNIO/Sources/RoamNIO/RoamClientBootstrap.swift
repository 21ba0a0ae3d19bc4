import Glibc
import Multipath
import NIOCore
import NIOPosix
import Netlink
import PathMonitor

/// A client bootstrap for SwiftNIO that connects the way Roam's racer does, then hands the
/// connected socket to NIO, so every existing handler works unchanged:
///
/// - **Racing** over the interfaces and address families the path offers and the policy
///   permits (RFC 8305: AAAA and A looked up at once, attempts `ConnectionRace/Configuration/attemptDelay`
///   apart, each bound to its interface), so that a Wi-Fi that passes nothing costs one attempt
///   delay, not a connect timeout (Wi-Fi Assist).
/// - **Policy**: `PathPolicy`'s required and prohibited interface types, expensive,
///   constrained and ultra-constrained paths and its connectivity rule (the one every Roam
///   driver follows), and the multipath service type (``multipathServiceType(_:)``): other than
///   `.none`, the attempts are MPTCP sockets where the kernel has MPTCP (falling back to TCP
///   with a peer that does not speak it; ``RoamPathHandler/metrics`` says which it became).
/// - **Waiting for connectivity**: when no connection can be made now (no permitted interface,
///   no route, the attempts could not reach the peer), it says so
///   (``onWaitingForConnectivity(_:)``), waits for the path to change and races again, until
///   the connect timeout.
/// - **Path events** in the channel's pipeline: ``RoamNetworkEvents``, from the namespace's
///   `NetworkPathMonitor` and Roam's handover rules (`PathAdvisor`), with the meaning of
///   `NIOTSNetworkEvents`.
///
/// ```swift
/// let bootstrap = try RoamClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
///     .policy(PathPolicy(allowsExpensive: false))
///     .channelInitializer { channel in
///         channel.pipeline.addHTTPClientHandlers().flatMap { channel.pipeline.addHandler(MyHTTPHandler()) }
///     }
/// let channel = try await bootstrap.connect(host: "api.example.com", port: 80).get()
/// ```
///
/// The race runs on a thread of the bootstrap's `NIOThreadPool` (it blocks, as name lookups
/// do), never on an event loop.
public struct RoamClientBootstrap: Sendable {
    private let group: any EventLoopGroup
    private let source: PathSource
    private var policy = PathPolicy()
    private var serviceType = MultipathServiceType.none
    private var raceConfiguration = ConnectionRace.Configuration()
    private var advisorConfiguration = HandoverStateMachine.Configuration()
    private var probePort: UInt16?
    private var stallEvidence = HandoverSession.StallEvidence.unacknowledgedData
    private var retry = HandoverSession.RetryPolicy()
    private var timeout: TimeAmount = .seconds(10)
    private var waits = true
    private var options = ChannelOptions.Storage()
    private var initializer: (@Sendable (any Channel) -> EventLoopFuture<Void>)?
    private var waitingHandler: (@Sendable (RoamNetworkEvents.WaitingForConnectivity) -> Void)?
    private var threadPool = NIOThreadPool.singleton

    /// A bootstrap whose channels follow `monitor` (started, or started here), in its namespace.
    ///
    /// - Parameters:
    ///   - group: The event loops the channels run on.
    ///   - monitor: The path monitor of the namespace to connect from.
    /// - Throws: `PathMonitorError` when the monitor was not started and cannot start.
    public init(group: any EventLoopGroup, monitor: NetworkPathMonitor) throws(PathMonitorError) {
        if monitor.currentPath == nil, monitor.failure == nil {
            do throws(PathMonitorError) {
                try monitor.start()
            } catch where monitor.currentPath != nil {
                // Started by another caller in the meantime.
            }
        }
        self.group = group
        source = PathSource(monitor: monitor, owned: false)
    }

    /// A bootstrap that connects from `namespace` (the calling thread's by default) and
    /// follows its paths with a monitor of its own, stopped when the bootstrap and its channels
    /// are gone.
    ///
    /// - Parameters:
    ///   - group: The event loops the channels run on.
    ///   - namespace: The namespace to connect from.
    /// - Throws: `PathMonitorError` when the monitor cannot start (the namespace does not
    ///   exist, or entering it needs a privilege the process lacks).
    public init(group: any EventLoopGroup, namespace: NetworkNamespace = .current) throws(PathMonitorError) {
        let monitor = NetworkPathMonitor(namespace: namespace)
        try monitor.start()
        self.group = group
        source = PathSource(monitor: monitor, owned: true)
    }

    /// The monitor the channels follow.
    public var monitor: NetworkPathMonitor { source.monitor }

    /// Which interfaces the connection may use, and how it treats those not validated.
    ///
    /// - Parameter policy: The policy.
    /// - Returns: A copy of the bootstrap with it set.
    public func policy(_ policy: PathPolicy) -> Self {
        var copy = self
        copy.policy = policy
        return copy
    }

    /// How the connection may use multiple paths, as URLSession's `multipathServiceType`:
    /// other than `.none` (the default), the attempts are MPTCP sockets where the kernel has
    /// MPTCP, and the channel's path events follow the type's rules.
    ///
    /// - Parameter serviceType: The service type.
    /// - Returns: A copy of the bootstrap with it set.
    public func multipathServiceType(_ serviceType: MultipathServiceType) -> Self {
        var copy = self
        copy.serviceType = serviceType
        return copy
    }

    /// The race's timers (attempt delay, resolution delay).
    ///
    /// - Parameter configuration: The timers.
    /// - Returns: A copy of the bootstrap with it set.
    public func raceConfiguration(_ configuration: ConnectionRace.Configuration) -> Self {
        var copy = self
        copy.raceConfiguration = configuration
        return copy
    }

    /// The rules behind the path events: the stall threshold's bounds, probes, hold-downs.
    ///
    /// - Parameter configuration: The rules.
    /// - Returns: A copy of the bootstrap with it set.
    public func pathAdvice(_ configuration: HandoverStateMachine.Configuration) -> Self {
        var copy = self
        copy.advisorConfiguration = configuration
        return copy
    }

    /// Where probes go: a port of the peer of the app's choosing (a health endpoint, say)
    /// instead of the channel's own. A probe is a TCP connection attempt over the interface to
    /// probe, reset as soon as it is decided, nothing sent: the server sees a connection opened
    /// and reset (about one a second while a better interface is being tested, five a second
    /// within a streak of three).
    ///
    /// - Parameter port: The port probes connect to (nil: the channel's).
    /// - Returns: A copy of the bootstrap with it set.
    public func probePort(_ port: UInt16?) -> Self {
        var copy = self
        copy.probePort = port
        return copy
    }

    /// What makes a channel unviable for a stall: by default, data the app wrote that the peer
    /// has not acknowledged for the stall threshold (`TCP_INFO`), so that a server taking its
    /// time over a request it received (acknowledged) is not taken for a dead path until the
    /// configured `HandoverStateMachine/Configuration/maximumStall` (10 s). `.silence` judges
    /// silence alone, for a peer that streams continuously.
    ///
    /// - Parameter evidence: What counts as a stall.
    /// - Returns: A copy of the bootstrap with it set.
    public func stallEvidence(_ evidence: HandoverSession.StallEvidence) -> Self {
        var copy = self
        copy.stallEvidence = evidence
        return copy
    }

    /// When a connect races again after a race failed for a reason a change of the network may
    /// cure (no route, unreachable, timed out): after 100 ms, doubling to 1 s, or at once when
    /// the path changes; within the connect timeout.
    ///
    /// - Parameter policy: The waits between races.
    /// - Returns: A copy of the bootstrap with it set.
    public func retryPolicy(_ policy: HandoverSession.RetryPolicy) -> Self {
        var copy = self
        copy.retry = policy
        return copy
    }

    /// How long a connect may take in all, waiting for connectivity included (10 s by default).
    ///
    /// - Parameter timeout: The time allowed.
    /// - Returns: A copy of the bootstrap with it set.
    public func connectTimeout(_ timeout: TimeAmount) -> Self {
        var copy = self
        copy.timeout = timeout
        return copy
    }

    /// Whether a connect that cannot be made now waits for the path to change (the default,
    /// as `NIOTSChannelOptions.waitForActivity`) or fails at once.
    ///
    /// - Parameter waits: Whether to wait.
    /// - Returns: A copy of the bootstrap with it set.
    public func waitsForConnectivity(_ waits: Bool) -> Self {
        var copy = self
        copy.waits = waits
        return copy
    }

    /// Called, on a thread of the pool, each time a connect has to wait for connectivity.
    ///
    /// - Parameter handler: Told what stood in the way.
    /// - Returns: A copy of the bootstrap with it set.
    public func onWaitingForConnectivity(_ handler: @escaping @Sendable (RoamNetworkEvents.WaitingForConnectivity) -> Void) -> Self {
        var copy = self
        copy.waitingHandler = handler
        return copy
    }

    /// A channel option, applied as `ClientBootstrap` applies it.
    ///
    /// - Parameters:
    ///   - option: The option.
    ///   - value: Its value.
    /// - Returns: A copy of the bootstrap with it added.
    public func channelOption<Option: ChannelOption>(_ option: Option, value: Option.Value) -> Self {
        var copy = self
        copy.options.append(key: option, value: value)
        return copy
    }

    /// Sets up each new channel's pipeline (after ``RoamPathHandler``, which is first).
    ///
    /// - Parameter handler: Adds the channel's handlers.
    /// - Returns: A copy of the bootstrap with it set.
    public func channelInitializer(_ handler: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) -> Self {
        var copy = self
        copy.initializer = handler
        return copy
    }

    /// The pool whose threads run the races (`NIOThreadPool.singleton` by default). A race holds
    /// its thread until it is decided (one attempt delay on a blackholed Wi-Fi, up to the connect
    /// timeout when waiting for connectivity).
    ///
    /// - Parameter pool: The pool.
    /// - Returns: A copy of the bootstrap with it set.
    public func threadPool(_ pool: NIOThreadPool) -> Self {
        var copy = self
        copy.threadPool = pool
        return copy
    }

    // MARK: Connecting

    /// Races to `host` (looked up in the bootstrap's namespace, AAAA and A at once) on `port`.
    ///
    /// - Parameters:
    ///   - host: The name to look up.
    ///   - port: The port to connect to.
    /// - Returns: A future of the connected channel, after its pipeline is set up; it fails
    ///   with a ``RoamNIOError``: ``RoamNIOError/Code/connect`` when the race made no connection
    ///   (the racer's error says why), ``RoamNIOError/Code/timedOut`` when no race could start
    ///   within the connect timeout, ``RoamNIOError/Code/invalidPort`` for a port that is not
    ///   TCP's.
    public func connect(host: String, port: Int) -> EventLoopFuture<any Channel> {
        connect(.host(host), port: port)
    }

    /// Races to `addresses` (of either family) on `port`.
    ///
    /// - Parameters:
    ///   - addresses: The peer's addresses.
    ///   - port: The port to connect to.
    /// - Returns: A future of the connected channel, after its pipeline is set up; it fails
    ///   with a ``RoamNIOError``: ``RoamNIOError/Code/connect`` when the race made no connection
    ///   (the racer's error says why), ``RoamNIOError/Code/timedOut`` when no race could start
    ///   within the connect timeout, ``RoamNIOError/Code/invalidPort`` for a port that is not
    ///   TCP's.
    public func connect(to addresses: [IPAddress], port: Int) -> EventLoopFuture<any Channel> {
        connect(.addresses(addresses), port: port)
    }

    /// Races to `host` on `port`, then returns what `channelInitializer` made of the channel
    /// (after the bootstrap's own initializer): an `NIOAsyncChannel`, typically.
    ///
    /// ```swift
    /// let client = try await bootstrap.connect(host: "api.example.com", port: 80) { channel in
    ///     channel.eventLoop.makeCompletedFuture {
    ///         let events = try channel.pipeline.syncOperations.roamPathEvents()
    ///         return (try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel), events)
    ///     }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - host: The name to look up.
    ///   - port: The port to connect to.
    ///   - channelInitializer: Makes the output from the connected channel.
    /// - Returns: What `channelInitializer` made.
    /// - Throws: A ``RoamNIOError``, as ``connect(host:port:)``'s future fails, or what
    ///   `channelInitializer` failed with.
    public func connect<Output: Sendable>(host: String, port: Int,
                                          channelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>) async throws -> Output {
        try await connect(.host(host), port: port, channelInitializer: channelInitializer)
    }

    /// Races to `addresses` on `port`, then returns what `channelInitializer` made of the channel.
    ///
    /// - Parameters:
    ///   - addresses: The peer's addresses.
    ///   - port: The port to connect to.
    ///   - channelInitializer: Makes the output from the connected channel.
    /// - Returns: What `channelInitializer` made.
    /// - Throws: A ``RoamNIOError``, as ``connect(host:port:)``'s future fails, or what
    ///   `channelInitializer` failed with.
    public func connect<Output: Sendable>(to addresses: [IPAddress], port: Int,
                                          channelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>) async throws -> Output {
        try await connect(.addresses(addresses), port: port, channelInitializer: channelInitializer)
    }

    /// The local address a connection to `host` on `port` would be made from now: races as
    /// ``connect(host:port:)`` does (the policy, the hold-downs, waiting for connectivity), then
    /// closes the winning connection and returns its source address.
    ///
    /// For clients that make their own connections and let the caller choose only the source
    /// address, as AsyncHTTPClient does (`HTTPClientRequest.localAddress`): on a host whose routes
    /// pick the interface by source address (policy routing, as in Roam's scenarios), the
    /// client's next connection then leaves by the interface the race chose. It costs one
    /// connection attempt per call; call it when the path changes or a request timed out, not
    /// before every request.
    ///
    /// - Parameters:
    ///   - host: The name to race to.
    ///   - port: The port to race to.
    /// - Returns: The winning connection's source address, as text.
    /// - Throws: A ``RoamNIOError``, as ``connect(host:port:)``'s future fails.
    public func localAddress(racingTo host: String, port: Int) async throws -> String {
        let eventLoop = group.next()
        guard let port = UInt16(exactly: port) else { throw RoamNIOError.invalidPort(port) }
        let raced = try await race(.host(host), port: port, on: eventLoop).get()
        ConnectionRacer.abandon(raced.socket)
        guard let winner = raced.metrics.winner else { throw RoamNIOError.connect(.system(operation: "the race has no winner", nil)) }
        return winner.candidate.source.description
    }

    enum Target: Sendable {
        case host(String)
        case addresses([IPAddress])
    }

    private func connect(_ target: Target, port: Int) -> EventLoopFuture<any Channel> {
        let eventLoop = group.next()
        guard let port = UInt16(exactly: port) else {
            return eventLoop.makeFailedFuture(RoamNIOError.invalidPort(port))
        }
        return race(target, port: port, on: eventLoop).flatMap { raced in
            self.channelBootstrap(on: eventLoop, raced: raced, port: port).withConnectedSocket(raced.socket.rawValue)
        }
    }

    private func connect<Output: Sendable>(_ target: Target, port: Int,
                                           channelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>) async throws -> Output {
        let eventLoop = group.next()
        guard let port = UInt16(exactly: port) else { throw RoamNIOError.invalidPort(port) }
        let raced = try await race(target, port: port, on: eventLoop).get()
        return try await channelBootstrap(on: eventLoop, raced: raced, port: port)
            .withConnectedSocket(raced.socket.rawValue, channelInitializer: channelInitializer)
    }

    /// A `ClientBootstrap` on `eventLoop` whose channels get the path handler first, then the
    /// app's initializer.
    private func channelBootstrap(on eventLoop: any EventLoop, raced: RacedConnection, port: UInt16) -> ClientBootstrap {
        var rules = advisorConfiguration
        if serviceType != .none { rules.serviceType = serviceType }
        let handler = RoamPathHandler.Setup(source: source, policy: policy, configuration: rules, raced: raced,
                                            port: port, probePort: probePort, stallEvidence: stallEvidence)
        let initializer = self.initializer
        let options = self.options
        return ClientBootstrap(group: eventLoop).channelInitializer { channel in
            options.applyAllChannelOptions(to: channel).flatMapThrowing {
                try channel.pipeline.syncOperations.addHandler(RoamPathHandler(handler))
            }.flatMap {
                initializer?(channel) ?? channel.eventLoop.makeSucceededVoidFuture()
            }
        }
    }

    /// Races on a thread of the pool until a connection is made, the timeout passes, or (when
    /// not waiting for connectivity) the first race fails.
    private func race(_ target: Target, port: UInt16, on eventLoop: any EventLoop) -> EventLoopFuture<RacedConnection> {
        let deadline = NIODeadline.now() + timeout
        let source = source
        let transport: ConnectionRacer.Transport =
            serviceType != .none && MPTCP.availability(in: source.namespace) == .available ? .mptcp : .tcp
        let racer = ConnectionRacer(namespace: source.namespace, policy: policy, configuration: raceConfiguration, transport: transport)
        let waits = waits
        let waitingHandler = waitingHandler
        // The session's plan decides when to race again (the same rule as HandoverConnection's
        // and the simulator's); the path it is given is the bootstrap's race path, without the
        // interfaces its channels held down.
        var configuration = HandoverSession.Configuration()
        configuration.policy = policy
        configuration.retry = retry
        configuration.retry.giveUpAfter = Duration(timeout)
        let sessionConfiguration = configuration
        return threadPool.runIfActive(eventLoop: eventLoop) { () throws -> RacedConnection in
            var session = HandoverSession(to: [], port: port, configuration: sessionConfiguration)
            var lastError: MultipathError?
            var published: NetworkPath?
            while true {
                let now = PathSource.now()
                if let current = source.racePath(), current.published != published {
                    published = current.published
                    _ = session.handle(.pathUpdated(current.race, at: now))
                }
                let remaining = deadline - NIODeadline.now()
                switch session.connectPlan(at: now) {
                case .giveUp:
                    throw lastError.map { RoamNIOError.connect($0) } ?? RoamNIOError.timedOut
                case .wait(let until):
                    guard remaining > .zero else { throw lastError.map { RoamNIOError.connect($0) } ?? RoamNIOError.timedOut }
                    if lastError == nil, session.path != nil, let error = Self.refusal(of: session.path!, by: racer) {
                        // A path the policy permits nothing of: as a race would have found.
                        guard waits, let waiting = Self.waiting(for: error) else { throw RoamNIOError.connect(error) }
                        lastError = error
                        waitingHandler?(waiting)
                    }
                    let wake = until.map { min(deadline, PathSource.deadline(at: $0)) } ?? deadline
                    _ = source.waitForChange(from: published, until: wake)
                case .race(let path):
                    do throws(MultipathError) {
                        let timeout = Duration.nanoseconds(max(1, remaining.nanoseconds))
                        switch target {
                        case .host(let host): return try racer.connect(toHost: host, port: port, over: path, timeout: timeout)
                        case .addresses(let addresses): return try racer.connect(to: addresses, port: port, over: path, timeout: timeout)
                        }
                    } catch let error {
                        guard waits, let waiting = Self.waiting(for: error) else { throw RoamNIOError.connect(error) }
                        lastError = error
                        waitingHandler?(waiting)
                        _ = session.handle(.raceFailed(at: PathSource.now()))
                    }
                }
            }
        }
    }

    /// What the racer would refuse over `path` before trying (no permitted interface), if anything.
    static func refusal(of path: NetworkPath, by racer: ConnectionRacer) -> MultipathError? {
        if case .failure(let refusal) = racer.policy.permittedInterfaces(of: path) { return .noPermittedPath(refusal) }
        return nil
    }

    /// The failures a change of the network may cure, as the event that says so.
    static func waiting(for error: MultipathError) -> RoamNetworkEvents.WaitingForConnectivity? {
        if error.code == .noPermittedPath, let refusal = error.refusal {
            return .init(transientError: "\(refusal)", refusal: refusal)
        }
        if error.code == .connectFailed, let failure = error.raceFailure {
            switch failure {
            case .noRoute, .noUsableAddress, .resolutionFailed:
                return .init(transientError: "\(failure)")
            case .allAttemptsFailed(let code) where [ENETUNREACH, EHOSTUNREACH, ENETDOWN, ETIMEDOUT, EADDRNOTAVAIL].contains(code):
                return .init(transientError: "\(failure)")
            case .allAttemptsFailed, .timedOut:
                return nil
            }
        }
        return nil
    }
}

/// Why ``RoamClientBootstrap`` could not connect. A struct with a code rather than an enum (as
/// SwiftNIO's errors are), so that a new kind of failure does not break code that switches.
public struct RoamNIOError: Error, CustomStringConvertible {
    /// What kind of failure it was.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The race made no connection: ``RoamNIOError/racerError`` is the racer's error (a
        /// refusal by the policy, every attempt failed, the connect timeout).
        public static let connect = Code("connect")
        /// Not a TCP port (0 to 65535).
        public static let invalidPort = Code("invalidPort")
        /// The connect timeout passed before a race could start (no path, waiting for connectivity).
        public static let timedOut = Code("timedOut")

        public var description: String { name }
    }

    /// What kind of failure it was.
    public var code: Code
    /// The racer's error (``Code/connect``).
    public var racerError: MultipathError?
    /// The port asked for (``Code/invalidPort``).
    public var port: Int?

    private init(_ code: Code) { self.code = code }

    /// The race made no connection.
    ///
    /// - Parameter error: The racer's error.
    /// - Returns: An error with ``Code/connect`` and ``racerError``.
    public static func connect(_ error: MultipathError) -> RoamNIOError {
        var result = RoamNIOError(.connect)
        result.racerError = error
        return result
    }

    /// Not a TCP port.
    ///
    /// - Parameter port: The port asked for.
    /// - Returns: An error with ``Code/invalidPort`` and ``port``.
    public static func invalidPort(_ port: Int) -> RoamNIOError {
        var result = RoamNIOError(.invalidPort)
        result.port = port
        return result
    }

    /// No race could start within the connect timeout.
    public static var timedOut: RoamNIOError { RoamNIOError(.timedOut) }

    public var description: String {
        switch code {
        case .connect: "connect: \(racerError.map { "\($0)" } ?? "failed")"
        case .invalidPort: "\(port ?? -1) is not a TCP port (0 to 65535)"
        case .timedOut: "connect: no connection within the connect timeout"
        default: code.description
        }
    }

    /// The racer's metrics of the last race, when there was one.
    public var metrics: ConnectionMetrics? { racerError?.metrics }
}
