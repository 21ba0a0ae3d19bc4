import CRoamLinux
import Glibc
import Synchronization
import SystemPackage

/// Who is at the other end of a loopback TCP connection: the owner of the peer's socket, asked
/// of the kernel (sock_diag) with the connection's two ends. For a port whose clients send no
/// token (toxiproxy's API): only the run's user and root are let in, as on the Unix socket.
///
/// The uid is the one the user namespace of whoever made this sees: made before a rootless run
/// enters its own, it sees the host's uids.
package final class LoopbackPeers: Sendable {
    private let descriptor: Mutex<Int32>

    package init() throws(ControlListeners.Failure) {
        let fd = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_SOCK_DIAG)
        guard fd >= 0 else { throw ControlListeners.Failure(description: "cannot open a sock_diag socket to check who connects: \(Errno.current)") }
        // Bounded: the kernel answers at once, but a lookup never holds the event loop long.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        descriptor = Mutex(fd)
    }

    deinit {
        _ = descriptor.withLock { close($0) }
    }

    /// The owner of the socket at `remote` that is connected to `local` (both IPv4 or both
    /// IPv6, as 4 or 16 bytes), or nil when the kernel does not say.
    package func owner(local: (address: [UInt8], port: UInt16), remote: (address: [UInt8], port: UInt16)) -> uid_t? {
        guard local.address.count == remote.address.count, local.address.count == 4 || local.address.count == 16 else { return nil }
        let family = local.address.count == 4 ? AF_INET : AF_INET6
        var uid: UInt32 = 0
        // The peer's socket: its own end is `remote`, its peer `local`.
        let result = descriptor.withLock { fd in
            roam_tcp_socket_owner(fd, family, remote.address, remote.port, local.address, local.port, &uid)
        }
        return result == 0 ? uid_t(uid) : nil
    }
}
