import Glibc
import Netlink
import PathMonitor
import RoamDecisions
import Synchronization
import SystemPackage

/// A probe of one interface: a TCP connection attempt over it to the flow's server, nothing
/// sent, reset as soon as it is decided. What `HandoverStateMachine`'s
/// `HandoverStateMachine.Action.startProbe(interface:)` asks its driver to run.
///
/// Safe to use from any thread.
public final class PathProbe: Sendable {
    public let interface: String
    private let socket: Mutex<Int32>
    /// The connecting socket (non-blocking; writable once decided, so a driver waits for many
    /// probes with one `poll`), or nil once decided.
    public var connectingSocket: FileDescriptor? { socket.withLock { $0 >= 0 ? FileDescriptor(rawValue: $0) : nil } }
    /// The connecting socket's number, or -1 once decided.
    package var descriptor: Int32 { socket.withLock { $0 } }

    /// Starts a probe over `interface` to `destination`, from the interface's address of the
    /// destination's family; nil when it cannot even start (no such address, no socket).
    ///
    /// - Parameters:
    ///   - interface: The interface to probe, as the path gives it.
    ///   - destination: The address to connect to (the peer's).
    ///   - port: The port to connect to.
    ///   - namespace: The namespace the interface is in.
    public init?(_ interface: NetworkInterface, to destination: IPAddress, port: UInt16, in namespace: NetworkNamespace) {
        let route = ConnectionRace.Route.routes(of: [interface])[0]
        guard let source = destination.family == .inet ? route.ipv4 : route.ipv6 else { return nil }
        let candidate = ConnectionRace.Candidate(route: route, source: source, destination: destination)
        guard case (let fd?, _) = ConnectionRacer.open(candidate, port: port, in: namespace) else { return nil }
        self.interface = interface.name
        socket = Mutex(fd)
    }

    deinit { abandon() }

    /// Whether the probe connected, without blocking.
    ///
    /// - Returns: Nil while it is still connecting (or after it was decided); else whether it
    ///   connected, and the probe is then reset and closed.
    public func poll() -> Bool? {
        socket.withLock { fd -> Bool? in
            guard fd >= 0 else { return nil }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard Glibc.poll(&entry, 1, 0) > 0 else { return nil }
            var error: Int32 = 0
            var length = socklen_t(4)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            ConnectionRacer.abandon(fd)
            fd = -1
            return error == 0
        }
    }

    /// Resets and closes the probe, leaving nothing behind.
    public func abandon() {
        socket.withLock { fd in
            guard fd >= 0 else { return }
            ConnectionRacer.abandon(fd)
            fd = -1
        }
    }
}
