import CNetlink
import Glibc
import Netlink
import PathMonitor

/// Application-level handover for an app's own protocol over plain TCP, where MPTCP is not
/// there (the kernel has none, or the server does not speak it): the connection is raced over
/// the permitted interfaces; when its interface leaves the path, or no data comes for the stall
/// threshold while the app waits for some, the interface is held down and a new connection is
/// raced over the others. The app's **resume hook** runs on every connection before any of its
/// reads or writes (the first one included): that is where it tells the peer where to carry
/// on, with whatever its protocol uses (a byte offset, a sequence number, a session token), as
/// Roam's built-in stream and bulk workloads send the byte count they hold.
///
/// ```swift
/// let connection = try HandoverConnection(racer: ConnectionRacer(namespace: phone), to: [server], port: 9000,
///                                         monitor: monitor) { descriptor, _ in
///     var offset = received.bigEndian
///     guard write(descriptor, &offset, 8) == 8 else { throw MyError.resume }
/// }
/// let count = try connection.receive(into: buffer)    // follows the phone from path to path
/// ```
///
/// Given a ``NetworkPathMonitor``, the connection wakes on its path updates: an interface that
/// leaves the path is left at once, and a connection waiting for a path starts as soon as one is
/// there. Given only a closure for the path, it looks every 20 ms.
///
/// One thread at a time, like a socket. Moving back to a cheaper path that returns happens at
/// the next move, not proactively (Roam's workloads probe for that; see the README).
public final class HandoverConnection {
    public struct Configuration: Sendable {
        /// The stall threshold's floor and ceiling (see ``StalledPaths/stallThreshold(smoothedRTT:minimum:maximum:)``).
        public var minimumStall: Duration = .milliseconds(300)
        public var maximumStall: Duration = .seconds(10)
        /// How long one race may take, and how long to wait for a path at all.
        public var connectTimeout: Duration = .seconds(10)
        public init() {}
    }

    /// Why the connection left an interface.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        case pathLost
        case stalled(threshold: Duration)
        case failed(errno: Int32)
        public var description: String {
            switch self {
            case .pathLost: "the interface left the path"
            case .stalled(let threshold): "no data for \(threshold)"
            case .failed(let code): String(cString: strerror(code))
            }
        }
    }

    public enum Event: Sendable {
        /// A connection was made (`isReconnect` after a move), with how its race went.
        case connected(ConnectionMetrics, isReconnect: Bool)
        /// The connection over `interface` was given up.
        case left(interface: String, reason: Reason)
    }

    public enum HandoverError: Error, CustomStringConvertible {
        /// No connection could be made: the racer's error (a refusal says why no path is permitted).
        case connect(ConnectionError)
        /// The resume hook threw.
        case resume(any Error)
        /// ``HandoverConnection/interrupt()`` was called (the async API: the task was cancelled).
        case interrupted
        public var description: String {
            switch self {
            case .connect(let error): "connect: \(error)"
            case .resume(let error): "resume: \(error)"
            case .interrupted: "interrupted"
            }
        }
    }

    /// Called on every new connection with its (blocking) socket and whether it replaces one.
    public typealias ResumeHook = (_ descriptor: Int32, _ isReconnect: Bool) throws -> Void

    public let racer: ConnectionRacer
    public let addresses: [IPAddress]
    public let port: UInt16
    public let configuration: Configuration
    private let path: @Sendable () -> NetworkPath?
    /// Signalled on every path update when the connection follows a monitor (nil: it polls).
    private let pathChanged: Wakeup?
    private let subscription: PathUpdateSubscription?
    /// Signalled by ``interrupt()``; nil only if no descriptor could be made for it.
    private let interruption: Wakeup?
    /// How often the path is looked at while waiting when no monitor wakes the connection.
    static let pollInterval = Duration.milliseconds(20)
    private let resume: ResumeHook
    private let onEvent: ((Event) -> Void)?
    private var descriptor: Int32 = -1
    private var interface: String?
    public private(set) var stalledPaths = StalledPaths()
    /// Every connection's race, in order.
    public private(set) var connections: [ConnectionMetrics] = []
    /// Times a new connection went over another interface than the one before.
    public private(set) var handovers = 0

    public init(racer: ConnectionRacer, to addresses: [IPAddress], port: UInt16, path: @escaping @Sendable () -> NetworkPath?,
                configuration: Configuration = Configuration(), onEvent: ((Event) -> Void)? = nil, resume: @escaping ResumeHook) {
        self.racer = racer
        self.addresses = addresses
        self.port = port
        self.path = path
        self.configuration = configuration
        self.onEvent = onEvent
        self.resume = resume
        pathChanged = nil
        subscription = nil
        interruption = try? Wakeup()
    }

    /// A connection that follows `monitor` (started, watching the racer's namespace): it wakes
    /// on every path update instead of looking at the path from time to time.
    /// - Throws: ``HandoverError/connect(_:)`` if no wake-up descriptor can be made.
    public init(racer: ConnectionRacer, to addresses: [IPAddress], port: UInt16, monitor: NetworkPathMonitor,
                configuration: Configuration = Configuration(), onEvent: ((Event) -> Void)? = nil, resume: @escaping ResumeHook) throws(HandoverError) {
        let wakeup: Wakeup
        do throws(NetlinkError) {
            wakeup = try Wakeup()
            interruption = try Wakeup()
        } catch {
            throw .connect(.system("cannot make a wake-up descriptor for path updates: \(error)"))
        }
        self.racer = racer
        self.addresses = addresses
        self.port = port
        self.path = { monitor.currentPath }
        self.configuration = configuration
        self.onEvent = onEvent
        self.resume = resume
        pathChanged = wakeup
        subscription = monitor.onUpdate { _ in wakeup.signal() }
    }

    deinit {
        subscription?.cancel()
        close()
    }

    /// Makes the blocking call in progress on another thread (``receive(into:)``, ``send(_:)``, or
    /// the wait for a path) throw ``HandoverError/interrupted`` promptly; if none is in progress,
    /// the next one does. A race already under way finishes first (it lasts at most
    /// ``Configuration/connectTimeout``). The one method safe to call from any thread.
    public func interrupt() {
        interruption?.signal()
    }

    /// Throws if ``interrupt()`` was called since the last call that threw for it.
    private func checkInterruption() throws(HandoverError) {
        guard let interruption else { return }
        var value: UInt64 = 0
        if read(interruption.fileDescriptor.rawValue, &value, 8) == 8 { throw .interrupted }
    }

    /// The interface the current connection uses, if connected.
    public var currentInterface: String? { descriptor >= 0 ? interface : nil }

    public func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    /// Receives what is there, waiting for some (the app expects data when it calls this):
    /// moves to another path when the interface leaves the path or nothing comes for the stall
    /// threshold. Returns 0 when the peer closed the connection.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(HandoverError) -> Int {
        try checkInterruption()
        while true {
            try connectIfNeeded()
            let fd = descriptor
            let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if count >= 0 { return count }
            guard errno == EAGAIN || errno == EINTR else {
                move(.failed(errno: errno))
                continue
            }
            if let reason = try wait(for: Int16(POLLIN)) { move(reason) }
        }
    }

    /// Sends all of `bytes`. If the connection is replaced on the way, the resume hook runs on
    /// the new one and the whole of `bytes` is sent again there: at least once, so the peer,
    /// told where to resume, can drop what it already had.
    public func send(_ bytes: UnsafeRawBufferPointer) throws(HandoverError) {
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
                    if let reason = try wait(for: Int16(POLLOUT)) {
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

    /// Waits until the socket is ready for `events`; or says why the connection must move: its
    /// interface left the path, or the stall threshold passed.
    private func wait(for events: Int16) throws(HandoverError) -> Reason? {
        let start = Self.now()
        let threshold = StalledPaths.stallThreshold(smoothedRTT: StalledPaths.smoothedRTT(of: descriptor), minimum: configuration.minimumStall, maximum: configuration.maximumStall)
        while true {
            let elapsed = Self.now() - start
            if elapsed >= threshold {
                if let interface { stalledPaths.markStalled(interface, at: Self.now()) }
                return .stalled(threshold: threshold)
            }
            if let interface, let path = path(), !path.availableInterfaces.contains(where: { $0.name == interface }) { return .pathLost }
            // Until the socket is ready, the threshold passes, or the path changes (without a
            // monitor, look at it every 20 ms).
            let slice = pathChanged == nil ? min(Self.pollInterval, threshold - elapsed) : threshold - elapsed
            if try waitReady(events, for: slice) { return nil }
        }
    }

    private func move(_ reason: Reason) {
        if let interface { onEvent?(.left(interface: interface, reason: reason)) }
        // The connection is given up, maybe over a dead link: reset it rather than leave the
        // kernel retrying its FIN for minutes.
        if descriptor >= 0 { ConnectionRacer.abandon(descriptor) }
        descriptor = -1
    }

    private func connectIfNeeded() throws(HandoverError) {
        guard descriptor < 0 else { return }
        let start = Self.now()
        while true {
            guard let current = path(), current.status == .satisfied else {
                // No path at all yet: wait for one, up to the connect timeout.
                let waited = Self.now() - start
                if waited >= configuration.connectTimeout {
                    throw .connect(.noPermittedPath(PathRefusal(reasons: [], refused: [])))
                }
                let remaining = configuration.connectTimeout - waited
                _ = try waitReady(nil, for: pathChanged == nil ? min(Self.pollInterval, remaining) : remaining)
                continue
            }
            let connection: RacedConnection
            do throws(ConnectionError) {
                connection = try racer.connect(to: addresses, port: port, over: stalledPaths.racePath(current, at: Self.now()),
                                               timeout: configuration.connectTimeout)
            } catch {
                throw .connect(error)
            }
            let isReconnect = !connections.isEmpty
            let chosen = connection.metrics.winner?.candidate.route.interface
            if isReconnect, let interface, interface != chosen { handovers += 1 }
            interface = chosen
            connections.append(connection.metrics)
            onEvent?(.connected(connection.metrics, isReconnect: isReconnect))
            do {
                try resume(connection.descriptor, isReconnect)
            } catch {
                ConnectionRacer.abandon(connection.descriptor)
                throw .resume(error)
            }
            ConnectionRacer.reapWhenDead(connection.descriptor, patience: configuration.connectTimeout)
            descriptor = connection.descriptor
            return
        }
    }

    /// Waits up to `limit` for the socket to be ready for `events` (true) or for a path update
    /// (false; also when `limit` passes). With no `events`, waits for a path update only.
    /// Throws when interrupted.
    private func waitReady(_ events: Int16?, for limit: Duration) throws(HandoverError) -> Bool {
        var entries: [pollfd] = []
        if let events { entries.append(pollfd(fd: descriptor, events: events, revents: 0)) }
        let pathIndex = entries.count
        if let pathChanged { entries.append(pollfd(fd: pathChanged.fileDescriptor.rawValue, events: Int16(POLLIN), revents: 0)) }
        if let interruption { entries.append(pollfd(fd: interruption.fileDescriptor.rawValue, events: Int16(POLLIN), revents: 0)) }
        let clamped = max(limit, .zero)
        var spec = timespec(tv_sec: Int(clamped.components.seconds), tv_nsec: Int(clamped.components.attoseconds / 1_000_000_000))
        guard ppoll(&entries, nfds_t(entries.count), &spec, nil) > 0 else { return false }
        try checkInterruption()
        if let pathChanged, entries[pathIndex].revents != 0 { pathChanged.reset() }
        return events != nil && entries[0].revents != 0
    }

    private static func now() -> Duration { ConnectionRacer.now() }
}
