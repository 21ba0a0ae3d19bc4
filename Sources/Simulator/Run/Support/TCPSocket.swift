import CRoamLinux
import Glibc
import Multipath
import Netlink
import RoamSystem
import Synchronization
import SystemPackage

/// A TCP socket of a workload, made inside a node's namespace (a socket belongs to the
/// namespace it was created in, whichever thread uses it afterwards). Every blocking call polls
/// the socket together with a ``EventSignal`` and an optional deadline, so a workload can always
/// be stopped at once.
final class TCPSocket: Sendable {
    let descriptor: Int32
    /// Closed once, by whichever thread gets there first (a workload's, or the run's tear-down).
    private let isClosed = Atomic<Bool>(false)

    enum Outcome: Error, Equatable {
        case done
        case closed
        case stopped
        case timedOut
        case failed(Int32)
    }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Takes over a connected socket (made non-blocking).
    init(adopting descriptor: Int32) {
        self.descriptor = descriptor
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    deinit { close() }

    func close() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(descriptor)
    }

    /// Closes at once and for good, as an app does with a connection it gave up (see
    /// ``ConnectionRacer/abandon(_:)``).
    func abort() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        ConnectionRacer.abandon(descriptor)
    }

    /// Lets the kernel reap the connection when its peer is gone (see
    /// ``ConnectionRacer/reapWhenDead(_:patience:)``).
    func reapWhenDead(patience: Duration) {
        ConnectionRacer.reapWhenDead(descriptor, patience: patience)
    }

    /// Stops sending and receiving at once (other threads blocked on the socket wake up).
    func shutdown() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }

    private static func make(family: AddressFamily, in namespace: NetworkNamespace, mptcp: Bool = false) throws(SimulatorError) -> TCPSocket {
        let domain = family == .inet ? AF_INET : AF_INET6
        let result: Int32
        do {
            result = try namespace.perform {
                socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), mptcp ? Int32(IPPROTO_MPTCP) : 0)
            }
        } catch {
            throw SimulatorError(.environment, "enter namespace \(namespace): \(error)")
        }
        guard result >= 0 else { throw SimulatorError(.environment, "socket: \(Errno.current.description)") }
        return TCPSocket(descriptor: result)
    }


    /// A listening socket on `address`:`port` in `namespace`; an MPTCP one accepts MPTCP and
    /// plain TCP alike.
    static func listen(in namespace: NetworkNamespace, address: IPAddress, port: UInt16, mptcp: Bool = false) throws(SimulatorError) -> TCPSocket {
        let socket = try make(family: address.family, in: namespace, mptcp: mptcp)
        var one: Int32 = 1
        setsockopt(socket.descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if address == IPAddress("::") {
            // The unspecified IPv6 address takes IPv4 connections too (as v4-mapped addresses).
            var zero: Int32 = 0
            setsockopt(socket.descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = address.withSocketAddress(port: port) { bind(socket.descriptor, $0, $1) }
        guard bound == 0, Glibc.listen(socket.descriptor, 64) == 0 else {
            throw SimulatorError(.environment, "listen on \(address) port \(port): \(Errno.current.description)")
        }
        return socket
    }

    /// Connects from `namespace` to `address`:`port`; the kernel picks the source address (and
    /// so the link) from the routes in force.
    static func connect(in namespace: NetworkNamespace, to address: IPAddress, port: UInt16, deadline: MonotonicInstant,
                        stop: EventSignal, mptcp: Bool = false) -> Result<TCPSocket, Outcome> {
        let socket: TCPSocket
        do {
            socket = try make(family: address.family, in: namespace, mptcp: mptcp)
        } catch {
            return .failure(.failed(EMFILE))
        }
        var one: Int32 = 1
        setsockopt(socket.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = address.withSocketAddress(port: port) { Glibc.connect(socket.descriptor, $0, $1) }
        if result == 0 { return .success(socket) }
        guard errno == EINPROGRESS else { return .failure(.failed(errno)) }
        switch socket.poll(Int16(POLLOUT), stop: stop, deadline: deadline) {
        case .done:
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socket.descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            return error == 0 ? .success(socket) : .failure(.failed(error))
        case let other:
            return .failure(other)
        }
    }

    /// The next connection, or why there is none.
    func accept(stop: EventSignal, deadline: MonotonicInstant? = nil) -> Result<TCPSocket, Outcome> {
        while true {
            let fd = accept4(descriptor, nil, nil, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            if fd >= 0 {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return .success(TCPSocket(descriptor: fd))
            }
            guard errno == EAGAIN || errno == EINTR else { return .failure(.failed(errno)) }
            let waited = poll(Int16(POLLIN), stop: stop, deadline: deadline)
            guard waited == .done else { return .failure(waited) }
        }
    }

    /// Waits until the socket is ready for `events`, the stop signal fires, or `deadline` passes.
    /// One of `extra` being ready ends the wait as a deadline does (`.timedOut`; the caller looks
    /// at why): a path update, a probe decided.
    func poll(_ events: Int16, stop: EventSignal, deadline: MonotonicInstant?, wakingOn extra: [pollfd] = []) -> Outcome {
        var entries = [pollfd(fd: descriptor, events: events, revents: 0), stop.pollEntry] + extra
        while true {
            if let deadline, deadline <= .now { return .timedOut }
            let ready: Int
            do {
                ready = try waitForEvents(&entries, until: deadline)
            } catch {
                return .failed(error.rawValue)
            }
            if ready == 0 { return .timedOut }
            if entries[1].revents != 0 { return .stopped }
            if entries[0].revents != 0 { return .done }
            if entries.dropFirst(2).contains(where: { $0.revents != 0 }) { return .timedOut }
        }
    }

    /// Sends every byte of `bytes`, or says why not.
    func send(_ bytes: UnsafeRawBufferPointer, stop: EventSignal, deadline: MonotonicInstant?) -> Outcome {
        var offset = 0
        while offset < bytes.count {
            let sent = Glibc.send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0 && (errno == EAGAIN || errno == EINTR) {
                let waited = poll(Int16(POLLOUT), stop: stop, deadline: deadline)
                guard waited == .done else { return waited }
                continue
            }
            return sent == 0 ? .closed : (errno == EPIPE || errno == ECONNRESET ? .closed : .failed(errno))
        }
        return .done
    }

    /// Receives what is there (at most `buffer.count` bytes), waiting for some if nothing is.
    /// `extra` (descriptors that also wake the wait) is asked for only when there is a wait: a
    /// read that finds data at once, as a busy transfer's do, builds no array.
    func receive(into buffer: UnsafeMutableRawBufferPointer, stop: EventSignal, deadline: MonotonicInstant?,
                 wakingOn extra: @autoclosure () -> [pollfd] = []) -> (Int, Outcome) {
        while true {
            let count = recv(descriptor, buffer.baseAddress, buffer.count, 0)
            if count > 0 { return (count, .done) }
            if count == 0 { return (0, .closed) }
            if errno == EAGAIN || errno == EINTR {
                let waited = poll(Int16(POLLIN), stop: stop, deadline: deadline, wakingOn: extra())
                guard waited == .done else { return (0, waited) }
                continue
            }
            return (0, errno == ECONNRESET ? .closed : .failed(errno))
        }
    }

    /// Receives exactly `buffer.count` bytes.
    func receiveAll(into buffer: UnsafeMutableRawBufferPointer, stop: EventSignal, deadline: MonotonicInstant?) -> Outcome {
        var offset = 0
        while offset < buffer.count {
            let (count, outcome) = receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]), stop: stop, deadline: deadline)
            guard outcome == .done else { return outcome }
            offset += count
        }
        return .done
    }

    /// The kernel's smoothed round-trip time of the connection (`TCP_INFO`), if known.
    var smoothedRTT: Duration? { StalledPaths.smoothedRTT(of: descriptor) }

    /// The socket's own address (`getsockname`), nil when the kernel does not say.
    private var localSocketAddress: sockaddr_storage? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        return ok ? storage : nil
    }

    /// The local port (of a listener bound to port 0: the one the kernel chose).
    var localPort: UInt16? {
        guard var storage = localSocketAddress else { return nil }
        // sin_port and sin6_port sit at the same offset, in network order.
        return withUnsafeBytes(of: &storage) { UInt16(bigEndian: $0.loadUnaligned(fromByteOffset: 2, as: UInt16.self)) }
    }

    /// The local address the kernel chose, as text.
    var localAddress: String? {
        guard var storage = localSocketAddress else { return nil }
        let family = storage.ss_family
        return withUnsafeBytes(of: &storage) { raw -> String? in
            if family == sa_family_t(AF_INET) {
                let address = raw.load(fromByteOffset: 4, as: (UInt8, UInt8, UInt8, UInt8).self)
                return IPAddress(bytes: [address.0, address.1, address.2, address.3])?.description
            }
            return IPAddress(bytes: Array(raw[8..<24]))?.description
        }
    }
}

extension TCPSocket.Outcome {
    var description: String {
        switch self {
        case .done: "ok"
        case .closed: "closed by peer"
        case .stopped: "stopped"
        case .timedOut: "timed out"
        case .failed(let code): Errno(rawValue: code).description
        }
    }
}
