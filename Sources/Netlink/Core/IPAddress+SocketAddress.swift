import Glibc

extension IPAddress {
    /// Calls `body` with this address and `port` as a `sockaddr_in` or `sockaddr_in6`, for
    /// `bind`, `connect` and `sendto`.
    public func withSocketAddress<T>(port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) rethrows -> T {
        if family == .inet {
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: bytes) }
            return try withUnsafePointer(to: &v4) { try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        withUnsafeMutableBytes(of: &v6.sin6_addr) { $0.copyBytes(from: bytes) }
        return try withUnsafePointer(to: &v6) { try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
    }
}

extension IPAddress {
    /// The address in a `sockaddr_in` or `sockaddr_in6` (as `accept` and `recvfrom` fill one in);
    /// nil for another family. An IPv4-mapped IPv6 address stays IPv6.
    public init?(socketAddress storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let bytes = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) } }
            }
            self.init(bytes: bytes)
        case AF_INET6:
            let bytes = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) } }
            }
            self.init(bytes: bytes)
        default:
            return nil
        }
    }
}
