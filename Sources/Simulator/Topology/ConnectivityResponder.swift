import CRoamLinux
import Glibc
import Netlink
import PathMonitor
import RoamSystem
import SystemPackage

/// The internet's connectivity check (`http://connectivity.roam.test/generate_204`, as Android's
/// `generate_204`): every request of at most 8 KiB of head is answered `204 No Content`, and the
/// connection closed. The phones' path monitors probe it to validate each network. One thread,
/// polling its listeners, at most 64 clients at once, each given 2 s to send its request.
final class ConnectivityResponder: Sendable {
    static let name = "connectivity.roam.test"
    static let path = "/generate_204"
    static let maximumClients = 64
    static let patience = Duration.seconds(2)

    private let stopSignal: EventSignal
    private let thread: PinnedThread

    /// Listens on port 80 of `addresses` in `namespace` (the internet's).
    init(addresses: [IPAddress], in namespace: NetworkNamespace) throws(SimulatorError) {
        let listeners = try Self.listen(on: addresses, in: namespace, for: "the connectivity check")
        do {
            stopSignal = try EventSignal()
        } catch {
            for descriptor in listeners { close(descriptor) }
            throw SimulatorError(.environment, "cannot start the connectivity check: \(error)")
        }
        let stop = stopSignal, owned = listeners
        do throws(NetlinkError) {
            thread = try PinnedThread(name: "roam-connectivity") {
                Self.serve(owned, stop: stop)
                for descriptor in owned { close(descriptor) }
            }
        } catch {
            for descriptor in listeners { close(descriptor) }
            throw SimulatorError(.environment, "cannot start the connectivity check's thread: \(error)")
        }
    }

    func stop() {
        stopSignal.signal()
        thread.join()
    }

    /// A client waiting on `listener`, made close-on-exec and non-blocking, with its address
    /// (nil: none waits).
    static func acceptClient(_ listener: Int32) -> (descriptor: Int32, peer: IPAddress?)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        // Close-on-exec from the start (accept4): a program another thread starts between an
        // accept and an fcntl would inherit the connection.
        let descriptor = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                accept4(listener, $0, &length, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            }
        }
        guard descriptor >= 0 else { return nil }
        return (descriptor, IPAddress(socketAddress: storage))
    }

    /// Non-blocking TCP listeners on port 80 of `addresses` in `namespace` (all or none), for
    /// `what` (named in errors): the connectivity check's, a captive portal's.
    static func listen(on addresses: [IPAddress], in namespace: NetworkNamespace, for what: String) throws(SimulatorError) -> [Int32] {
        var listeners: [Int32] = []
        do {
            try namespace.perform {
                for address in addresses {
                    let descriptor = socket(address.family == .inet ? AF_INET : AF_INET6,
                                            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
                    guard descriptor >= 0 else { throw SimulatorError(.environment, "cannot open a socket for \(what): \(Errno.current)") }
                    listeners.append(descriptor)
                    var one: Int32 = 1
                    setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
                    guard address.withSocketAddress(port: 80, { bind(descriptor, $0, $1) }) == 0, Glibc.listen(descriptor, 64) == 0 else {
                        throw SimulatorError(.environment, "cannot listen at \(address) port 80 for \(what): \(Errno.current)")
                    }
                }
            }
        } catch {
            for descriptor in listeners { close(descriptor) }
            throw (error as? SimulatorError) ?? SimulatorError(.environment, "cannot start \(what): \(error)")
        }
        return listeners
    }

    private static func serve(_ listeners: [Int32], stop: EventSignal) {
        struct Client {
            var descriptor: Int32
            var head: [UInt8] = []
            var deadline: MonotonicInstant
        }
        var clients: [Client] = []
        let answer = Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { for client in clients { close(client.descriptor) } }
        while true {
            // Listeners are not polled while every place is taken: a connection waiting in the
            // backlog would wake the loop at once, again and again, until a client's time is up.
            let listening = Int16(clients.count < maximumClients ? POLLIN : 0)
            var entries = [stop.pollEntry] + listeners.map { pollfd(fd: $0, events: listening, revents: 0) }
                + clients.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let wake = clients.map(\.deadline).min() ?? MonotonicInstant.now + .seconds(3600)
            _ = try? waitForEvents(&entries, until: wake)
            if entries[0].revents != 0 { return }
            // The clients polled; those accepted below wait for the next round.
            let polled = clients.count
            for (index, listener) in listeners.enumerated() where entries[1 + index].revents != 0 {
                while clients.count < maximumClients {
                    guard let (descriptor, _) = acceptClient(listener) else { break }
                    clients.append(Client(descriptor: descriptor, deadline: .now + patience))
                }
            }
            var done: Set<Int32> = []
            for (index, client) in clients.prefix(polled).enumerated() where entries[1 + listeners.count + index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(client.descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else {
                    if count == 0 || errno != EAGAIN { done.insert(client.descriptor) }
                    continue
                }
                clients[index].head += buffer[..<count]
                let head = clients[index].head
                if head.count > 8192 {
                    done.insert(client.descriptor)
                } else if ProbeResponse.headEnd(of: head) != nil {
                    _ = answer.withUnsafeBytes { send(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    done.insert(client.descriptor)
                }
            }
            let now = MonotonicInstant.now
            for client in clients where now >= client.deadline { done.insert(client.descriptor) }
            for descriptor in done { close(descriptor) }
            clients.removeAll { done.contains($0.descriptor) }
        }
    }
}
