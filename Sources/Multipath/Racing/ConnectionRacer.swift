import CRoamLinux
import Glibc
import Netlink
import PathMonitor
import RoamDecisions
import RoamSystem
import Synchronization
import SystemPackage

/// A connection a race won, and how the race went.
public struct RacedConnection: Sendable {
    /// The connected socket (blocking); the caller owns and closes it (`try socket.close()`),
    /// or hands it to another owner (SwiftNIO's `withConnectedSocket(socket.rawValue)`).
    public var socket: FileDescriptor
    public var metrics: ConnectionMetrics

    /// The socket's number, for Roam's own modules.
    package var descriptor: Int32 { socket.rawValue }

    package init(descriptor: Int32, metrics: ConnectionMetrics) {
        socket = FileDescriptor(rawValue: descriptor)
        self.metrics = metrics
    }
}

/// How a race went, in the spirit of URLSessionTaskTransactionMetrics: every attempt with its
/// interface, addresses, start and end (from the start of the race), and outcome; the winner.
public struct ConnectionMetrics: Sendable {
    public var attempts: [ConnectionRace.Attempt]
    /// The attempt that connected.
    public var winner: ConnectionRace.Attempt?
    /// From the start of the race to the winner's connection.
    public var duration: Duration
    /// When each address family's resolution ended, from the start of the race.
    public var resolved: [AddressFamily: Duration]
    /// What the connection turned out to be: multipath (MPTCP on both ends), an MPTCP socket
    /// fallen back to TCP, or plain TCP. Its subflows: `MPTCP.subflows(of:)`.
    public var mode: MPTCP.Mode = .tcp
    public var isMultipath: Bool { mode == .multipath }
}

/// Runs a `ConnectionRace` with real sockets: each attempt is a non-blocking TCP socket made in
/// the namespace, bound to its interface (`SO_BINDTODEVICE`) and source address, so that the
/// attempt leaves by that interface whatever the routes say; one `poll` loop waits for the
/// attempts, the resolvers and the race's timer.
public struct ConnectionRacer: Sendable {
    /// The sockets attempts are made with.
    public enum Transport: String, Sendable, Hashable {
        /// Plain TCP, each attempt bound to its interface (`SO_BINDTODEVICE`) and source.
        case tcp
        /// MPTCP sockets (which fall back to TCP with a peer that does not speak it), each
        /// attempt bound to its source address only: a device binding would carry over to the
        /// connection and hold every subflow to one interface. The routes must pick the link by
        /// source address (Roam's topologies have policy routing for that).
        case mptcp
    }

    public var namespace: NetworkNamespace
    public var policy: PathPolicy
    public var configuration: ConnectionRace.Configuration
    public var transport: Transport

    /// A racer.
    ///
    /// - Parameters:
    ///   - namespace: The namespace attempts are made in.
    ///   - policy: The interfaces attempts may use.
    ///   - configuration: The race's timing.
    ///   - transport: TCP, or MPTCP sockets.
    public init(namespace: NetworkNamespace = .current, policy: PathPolicy = PathPolicy(),
                configuration: ConnectionRace.Configuration = ConnectionRace.Configuration(), transport: Transport = .tcp) {
        self.namespace = namespace
        self.policy = policy
        self.configuration = configuration
        self.transport = transport
    }

    /// Looks up a host's addresses of one family (AAAA or A); empty when there are none.
    public typealias Resolver = @Sendable (_ host: String, _ family: AddressFamily) -> [IPAddress]

    /// `getaddrinfo(3)` for one family: the hosts file, then DNS, as the system is configured
    /// (run in the racer's namespace, so DNS queries leave from there).
    public static let systemResolver: Resolver = { host, family in
        var hints = addrinfo()
        hints.ai_family = family == .inet ? AF_INET : AF_INET6
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                let raw = UnsafeRawPointer(address)
                let found = family == .inet ? IPAddress(bytes: UnsafeRawBufferPointer(start: raw + 4, count: 4))
                                            : IPAddress(bytes: UnsafeRawBufferPointer(start: raw + 8, count: 16))
                if let found, !addresses.contains(found) { addresses.append(found) }
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }

    /// Races to `host` on `port`: its AAAA and A records are looked up at once (each on a
    /// thread in the racer's namespace), IPv6 is waited for up to the resolution delay once A
    /// has answered, and attempts start as addresses arrive (RFC 8305).
    ///
    /// - Parameters:
    ///   - host: The name to look up.
    ///   - port: The port to connect to.
    ///   - path: The path whose permitted interfaces the attempts go out of.
    ///   - timeout: How long the race may take in all.
    ///   - resolver: Looks up one family's addresses (default: `getaddrinfo` in the racer's
    ///     namespace).
    /// - Returns: The winning connection, with metrics of every attempt.
    /// - Throws: ``MultipathError/Code/noPermittedPath`` when the policy permits no interface
    ///   of `path`; ``MultipathError/Code/connectFailed`` when no attempt connected in time or
    ///   the name has no address; ``MultipathError/Code/system`` when a resolver thread cannot
    ///   start.
    public func connect(toHost host: String, port: UInt16, over path: NetworkPath, timeout: Duration = .seconds(30),
                        resolver: @escaping Resolver = ConnectionRacer.systemResolver) throws(MultipathError) -> RacedConnection {
        if let literal = IPAddress(host) { return try connect(to: [literal], port: port, over: path, timeout: timeout) }
        let lookups = try Lookups()
        for family in [AddressFamily.inet6, .inet] {
            do throws(NetlinkError) {
                let thread = try namespace.spawnThread(name: "roam-resolve") { entered in
                    let found = (try? entered.get()).map { resolver(host, family) } ?? []
                    lookups.deliver(family, found)
                }
                thread.detach()
            } catch {
                throw .system(operation: "start a resolver thread", error)
            }
        }
        return try race(port: port, over: path, timeout: timeout, lookups: lookups) { _, _ in [] }
    }

    /// Races to `addresses` (both families may be given) on `port`, over the interfaces of
    /// `path` the policy permits; gives up after `timeout`.
    ///
    /// - Parameters:
    ///   - addresses: The peer's addresses, in the order to try them within each family.
    ///   - port: The port to connect to.
    ///   - path: The path whose permitted interfaces the attempts go out of.
    ///   - timeout: How long the race may take in all.
    /// - Returns: The winning connection, with metrics of every attempt.
    /// - Throws: ``MultipathError/Code/noPermittedPath`` when the policy permits no interface
    ///   of `path`; ``MultipathError/Code/connectFailed`` when no attempt connected in time.
    public func connect(to addresses: [IPAddress], port: UInt16, over path: NetworkPath,
                        timeout: Duration = .seconds(30)) throws(MultipathError) -> RacedConnection {
        try race(port: port, over: path, timeout: timeout, lookups: nil) { race, resolved in
            // Literal addresses: both families answer at once. A goes in first, so that the race
            // begins (on AAAA) knowing both: an IPv4-only Wi-Fi then comes before an IPv6-only
            // cellular, as the order says, rather than IPv6 starting alone.
            var actions: [ConnectionRace.Action] = []
            for family in [AddressFamily.inet, .inet6] {
                let found = addresses.filter { $0.family == family }
                resolved[family] = .zero
                actions += race.handle(found.isEmpty ? .resolutionFailed(family) : .resolved(family, found), at: .zero)
            }
            return actions
        }
    }

    /// Name lookups that run on their own threads and hand their answers to the race's loop.
    final class Lookups: Sendable {
        let answered: EventSignal
        private let answers = Mutex<[(AddressFamily, [IPAddress])]>([])

        init() throws(MultipathError) {
            do {
                answered = try EventSignal()
            } catch {
                throw .system(operation: "make a wake-up descriptor for name lookups", .posix("eventfd", errno: error.rawValue))
            }
        }

        func deliver(_ family: AddressFamily, _ addresses: [IPAddress]) {
            answers.withLock { $0.append((family, addresses)) }
            answered.signal()
        }

        func take() -> [(AddressFamily, [IPAddress])] {
            answered.reset()
            return answers.withLock { answers in
                defer { answers = [] }
                return answers
            }
        }
    }

    private func race(port: UInt16, over path: NetworkPath, timeout: Duration, lookups: Lookups?,
                      begin: (inout ConnectionRace, inout [AddressFamily: Duration]) -> [ConnectionRace.Action]) throws(MultipathError) -> RacedConnection {
        let interfaces: [NetworkInterface]
        switch policy.permittedInterfaces(of: path) {
        case .success(let permitted): interfaces = permitted
        case .failure(let refusal): throw .noPermittedPath(refusal)
        }
        var race = ConnectionRace(routes: ConnectionRace.Route.routes(of: interfaces), configuration: configuration)
        let start = Self.now()
        var resolved: [AddressFamily: Duration] = [:]
        var actions = begin(&race, &resolved)
        var sockets: [Int: Int32] = [:]
        var timer: Duration?
        defer { for fd in sockets.values { Self.abandon(fd) } }
        func metrics(winner: Int?) -> ConnectionMetrics {
            ConnectionMetrics(attempts: race.attempts, winner: race.attempts.first { $0.id == winner }, duration: Self.now() - start, resolved: resolved)
        }
        while true {
            var pendingActions = actions
            actions = []
            while !pendingActions.isEmpty {
                let action = pendingActions.removeFirst()
                switch action {
                case let .startAttempt(id, candidate):
                    let (fd, code) = Self.open(candidate, port: port, in: namespace, transport: transport)
                    if let fd {
                        sockets[id] = fd
                    } else {
                        pendingActions += race.handle(.failed(attempt: id, error: code), at: Self.now() - start)
                    }
                case .cancelAttempt(let id):
                    if let fd = sockets.removeValue(forKey: id) { Self.abandon(fd) }
                case .scheduleTimer(let at):
                    timer = at
                case .succeed(let id):
                    guard let fd = sockets.removeValue(forKey: id) else { throw .system(operation: "the winning attempt's socket is gone", nil) }
                    let flags = fcntl(fd, F_GETFL)
                    _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
                    var result = metrics(winner: id)
                    result.mode = MPTCP.mode(of: fd)
                    return RacedConnection(descriptor: fd, metrics: result)
                case .fail(let failure):
                    throw .connectFailed(failure, metrics(winner: nil))
                }
            }
            let elapsed = Self.now() - start
            guard elapsed < timeout else { throw .connectFailed(.timedOut, metrics(winner: nil)) }
            let wake = min(timer ?? timeout, timeout)
            let ids = Array(sockets.keys)
            var entries = ids.map { pollfd(fd: sockets[$0]!, events: Int16(POLLOUT), revents: 0) }
            let waitingForLookups = lookups != nil && resolved.count < 2
            if let lookups, waitingForLookups { entries.append(lookups.answered.pollEntry) }
            do {
                try waitForEvents(&entries, timeout: wake - elapsed)
            } catch {
                throw .system(operation: "wait for the race's sockets", .posix("poll", errno: error.rawValue))
            }
            let now = Self.now() - start
            if let lookups, waitingForLookups, entries.last!.revents != 0 {
                for (family, found) in lookups.take() where resolved[family] == nil {
                    resolved[family] = now
                    actions += race.handle(found.isEmpty ? .resolutionFailed(family) : .resolved(family, found), at: now)
                }
            }
            for (slot, id) in ids.enumerated() where entries[slot].revents != 0 {
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(entries[slot].fd, SOL_SOCKET, SO_ERROR, &error, &length)
                actions += race.handle(error == 0 ? .connected(attempt: id) : .failed(attempt: id, error: error), at: now)
                if error != 0, let fd = sockets.removeValue(forKey: id) { close(fd) }
            }
            if let due = timer, now >= due {
                timer = nil
                actions += race.handle(.timer, at: now)
            }
        }
    }

    /// Closes a socket whose connection is given up (a losing attempt, a probe, a connection a
    /// flow moved away from) at once: a reset instead of a FIN the kernel would keep retrying,
    /// and no TIME_WAIT left behind.
    ///
    /// - Parameter socket: The socket to close; it is closed whatever happens.
    public static func abandon(_ socket: FileDescriptor) { abandon(socket.rawValue) }

    package static func abandon(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
    }

    /// Makes the kernel give a connection up when its peer is gone: keepalive probes after
    /// `patience` of silence (one a second, five unanswered end it), and no data left
    /// unacknowledged for longer than `patience` plus 5 s (`TCP_USER_TIMEOUT`). Longer than an
    /// app's own timeout, so that the app decides, and the kernel only reaps what the app can no
    /// longer reach. Options an MPTCP socket does not take are left as they are.
    ///
    /// - Parameters:
    ///   - socket: A connected TCP or MPTCP socket.
    ///   - patience: The silence after which keepalive probes start.
    public static func reapWhenDead(_ socket: FileDescriptor, patience: Duration) { reapWhenDead(socket.rawValue, patience: patience) }

    package static func reapWhenDead(_ fd: Int32, patience: Duration) {
        let seconds = Int32(clamping: max(1, patience.components.seconds))
        var values: [(Int32, Int32, Int32)] = [
            (SOL_SOCKET, SO_KEEPALIVE, 1), (Int32(IPPROTO_TCP), TCP_KEEPIDLE, seconds), (Int32(IPPROTO_TCP), TCP_KEEPINTVL, 1),
            (Int32(IPPROTO_TCP), TCP_KEEPCNT, 5), (Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, Int32(clamping: (Int64(seconds) + 5) * 1000)),
        ]
        for index in values.indices {
            setsockopt(fd, values[index].0, values[index].1, &values[index].2, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    static func now() -> Duration {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
    }

    /// A non-blocking socket bound to the candidate's source (and, for TCP, its interface),
    /// connecting. Also for probes of one path outside a race.
    ///
    /// - Parameters:
    ///   - candidate: The interface, source address and destination.
    ///   - port: The port to connect to.
    ///   - namespace: The namespace the socket is made in.
    ///   - transport: TCP, or an MPTCP socket.
    /// - Returns: The socket's descriptor (the caller owns it) and 0, or nil and the errno.
    public static func open(_ candidate: ConnectionRace.Candidate, port: UInt16, in namespace: NetworkNamespace,
                            transport: Transport = .tcp) -> (Int32?, Int32) {
        let family = candidate.destination.family == .inet ? AF_INET : AF_INET6
        let made = try? namespace.perform { () -> (Int32, Int32) in
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                            transport == .mptcp ? Int32(IPPROTO_MPTCP) : 0)
            return (fd, errno)
        }
        guard let (fd, code) = made, fd >= 0 else { return (nil, made?.1 ?? EMFILE) }
        var name = Array(candidate.route.interface.utf8) + [0]
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(4))
        guard transport == .mptcp || setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, &name, socklen_t(name.count)) == 0,
              candidate.source.withSocketAddress(port: 0, { bind(fd, $0, $1) }) == 0 else {
            let failure = errno
            close(fd)
            return (nil, failure == 0 ? code : failure)
        }
        let result = candidate.destination.withSocketAddress(port: port) { Glibc.connect(fd, $0, $1) }
        if result == 0 || errno == EINPROGRESS { return (fd, 0) }
        let failure = errno
        close(fd)
        return (nil, failure)
    }
}
