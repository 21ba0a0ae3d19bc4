import CRoamLinux
import Glibc
import Synchronization
import SystemPackage

/// Who is at the other end of a loopback TCP connection: the owner of the peer's socket, asked
/// of the kernel (sock_diag) with the connection's two ends. For ports whose clients send no
/// token (toxiproxy's API, a run's proxies on the host's loopback): only the run's user and root
/// are let in, as on the control API's Unix socket.
///
/// The uid is the one the user namespace of whoever made this sees: made before a rootless run
/// enters its own, it sees the host's uids.
package final class LoopbackPeers: Sendable {
    private let descriptor: Mutex<Int32>

    package init() throws(Errno) {
        let fd = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_SOCK_DIAG)
        guard fd >= 0 else { throw Errno.current }
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

    /// The owner of the peer of `connection`, an accepted TCP socket (IPv4 or IPv6).
    package func owner(ofPeerOf connection: Int32) -> uid_t? {
        func end(_ call: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> (address: [UInt8], port: UInt16)? {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let result = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, &length) } }
            guard result == 0 else { return nil }
            let family = Int32(storage.ss_family)
            return withUnsafePointer(to: &storage) { pointer -> (address: [UInt8], port: UInt16)? in
                switch family {
                case AF_INET:
                    return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        (withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }, UInt16(bigEndian: $0.pointee.sin_port))
                    }
                case AF_INET6:
                    return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        (withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }, UInt16(bigEndian: $0.pointee.sin6_port))
                    }
                default:
                    return nil
                }
            }
        }
        guard let local = end({ getsockname(connection, $0, $1) }), let remote = end({ getpeername(connection, $0, $1) }) else { return nil }
        return owner(local: local, remote: remote)
    }
}
