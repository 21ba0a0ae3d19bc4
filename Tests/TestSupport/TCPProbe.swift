import Glibc
import Netlink

/// Opens TCP connections between namespaces, to prove that addresses and routes work. Sockets
/// are made on threads pinned to their namespace and keep it afterwards.
public enum TCPProbe {
    /// A listening socket on `port` (all addresses of `family`) inside `namespace`.
    public static func listen(in namespace: NetworkNamespace, family: AddressFamily, port: UInt16) throws -> Int32 {
        try namespace.perform {
            let fd = socket(family.rawValue, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw NetlinkError.posix("socket") }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            let any = family == .inet ? IPAddress.v4(0, 0, 0, 0) : IPAddress("::")!
            guard any.withSocketAddress(port: port, { bind(fd, $0, $1) }) == 0, Glibc.listen(fd, 16) == 0 else {
                close(fd)
                throw NetlinkError.posix("bind/listen :\(port)")
            }
            return fd
        }
    }

    /// Connects from `source` (bound, so policy routing picks its interface) inside `namespace`
    /// to `destination`, then accepts on `listener` and returns the peer address the server saw.
    public static func connect(in namespace: NetworkNamespace, from source: IPAddress, to destination: IPAddress,
                               port: UInt16, listener: Int32) throws -> IPAddress? {
        let client = try namespace.perform { () throws -> Int32 in
            let fd = socket(source.family.rawValue, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw NetlinkError.posix("socket") }
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            guard source.withSocketAddress(port: 0, { bind(fd, $0, $1) }) == 0 else {
                close(fd)
                throw NetlinkError.posix("bind \(source)")
            }
            guard destination.withSocketAddress(port: port, { Glibc.connect(fd, $0, $1) }) == 0 else {
                let error = NetlinkError.posix("connect \(source) -> \(destination)")
                close(fd)
                throw error
            }
            return fd
        }
        defer { close(client) }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let accepted = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
        }
        guard accepted >= 0 else { throw NetlinkError.posix("accept") }
        close(accepted)
        return withUnsafeBytes(of: storage) { raw -> IPAddress? in
            if storage.ss_family == sa_family_t(AF_INET) {
                return IPAddress(bytes: raw[4..<8])
            }
            return IPAddress(bytes: raw[8..<24])
        }
    }

}
