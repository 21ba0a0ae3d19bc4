import CRoamLinux
import Glibc
import Netlink
import RoamDecisions
import SystemPackage

extension MPTCP {
    /// `SOL_MPTCP`, the socket-option level of MPTCP sockets (missing from Glibc).
    static let socketLevel: Int32 = 284
    /// `TCP_IS_MPTCP` (Linux 5.16): 1 on an MPTCP socket that has not fallen back to TCP.
    static let isMPTCPOption: Int32 = 43
    /// `MPTCP_INFO_FLAG_FALLBACK`.
    static let fallbackFlag: UInt32 = 1

    /// Whether a namespace can make MPTCP connections.
    public enum Availability: Sendable, Hashable, CustomStringConvertible {
        case available
        /// The kernel has MPTCP, but `net.mptcp.enabled` is 0 in the namespace.
        case disabled
        /// The kernel has no MPTCP (socket() refuses `IPPROTO_MPTCP`), with the error.
        case unsupported(String)

        public var description: String {
            switch self {
            case .available: "available"
            case .disabled: "disabled (net.mptcp.enabled = 0)"
            case .unsupported(let reason): "unsupported by this kernel (\(reason))"
            }
        }
    }

    /// Probes `namespace`: the sysctl, then a socket.
    public static func availability(in namespace: NetworkNamespace = .current) -> Availability {
        if let enabled = try? namespace.sysctl("net.mptcp.enabled"), enabled.first == "0" {
            return .disabled
        }
        let (fd, code) = makeSocket(family: .inet, in: namespace)
        guard let fd else { return code == ENOPROTOOPT ? .disabled : .unsupported(Errno(rawValue: code).description) }
        close(fd)
        return .available
    }

    /// A non-blocking MPTCP stream socket made in `namespace`, or nil and the errno.
    package static func makeSocket(family: AddressFamily, in namespace: NetworkNamespace) -> (Int32?, Int32) {
        let domain = family == .inet ? AF_INET : AF_INET6
        let made = try? namespace.perform { () -> (Int32, Int32) in
            let fd = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_MPTCP))
            return (fd, errno)
        }
        guard let (fd, code) = made else { return (nil, EIO) }
        return fd >= 0 ? (fd, 0) : (nil, code)
    }

    /// What a connected socket turned out to be.
    public enum Mode: String, Sendable, Hashable {
        /// Multipath: both ends speak MPTCP.
        case multipath
        /// An MPTCP socket whose connection fell back to plain TCP: the peer does not speak MPTCP,
        /// or something on the way stripped its options.
        case fallback
        /// A plain TCP socket.
        case tcp
    }

    /// Whether the connection on `descriptor` is multipath, fell back, or was never MPTCP.
    public static func mode(of socket: FileDescriptor) -> Mode { mode(of: socket.rawValue) }

    package static func mode(of descriptor: Int32) -> Mode {
        var protocolNumber: Int32 = 0
        var length = socklen_t(4)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PROTOCOL, &protocolNumber, &length) == 0, protocolNumber == Int32(IPPROTO_MPTCP) else {
            return .tcp
        }
        var value: Int32 = 0
        length = socklen_t(4)
        if getsockopt(descriptor, Int32(IPPROTO_TCP), isMPTCPOption, &value, &length) == 0 {
            return value == 1 ? .multipath : .fallback
        }
        // Before 5.16: MPTCP_INFO says so in its flags.
        guard let info = info(of: descriptor) else { return .fallback }
        return info.mptcpi_flags & fallbackFlag != 0 ? .fallback : .multipath
    }

    /// The connection's token, which the path manager's requests name it by (`mptcpi_token`);
    /// nil for anything but a multipath connection.
    public static func token(of socket: FileDescriptor) -> UInt32? { token(of: socket.rawValue) }

    package static func token(of descriptor: Int32) -> UInt32? {
        info(of: descriptor)?.mptcpi_token
    }

    /// The kernel's `mptcp_info` for a multipath connection; nil for anything else. A C struct:
    /// kept out of the public API (``token(of:)``, ``mode(of:)`` and ``subflows(of:)`` say what it holds).
    package static func info(of descriptor: Int32) -> mptcp_info? {
        var info = mptcp_info()
        var length = socklen_t(MemoryLayout<mptcp_info>.size)
        guard getsockopt(descriptor, socketLevel, MPTCP_INFO, &info, &length) == 0, length > 0 else { return nil }
        return info
    }

    /// The subflows of a multipath connection now (`MPTCP_SUBFLOW_ADDRS` and `MPTCP_TCPINFO`);
    /// empty for plain TCP or a fallback.
    public static func subflows(of socket: FileDescriptor) -> [Subflow] { subflows(of: socket.rawValue) }

    package static func subflows(of descriptor: Int32) -> [Subflow] {
        // Read where the kernel wrote them: this runs every 20 ms of an MPTCP flow.
        let addresses = SubflowArray(descriptor, option: MPTCP_SUBFLOW_ADDRS, elementSize: MemoryLayout<mptcp_subflow_addrs>.size)
        let infos = SubflowArray(descriptor, option: MPTCP_TCPINFO, elementSize: kernelTCPInfoSize)
        var subflows: [Subflow] = []
        subflows.reserveCapacity(addresses.count)
        for index in 0..<addresses.count {
            let subflow = addresses.withElement(index) { entry -> Subflow? in
                guard let local = socketAddress(entry, remote: false), let remote = socketAddress(entry, remote: true) else { return nil }
                // A subflow that came or went between the two calls shifts the list: counters then
                // stay zero for this sample rather than land on the wrong subflow.
                let counters = infos.count == addresses.count
                    ? infos.withElement(index) { info -> (UInt64, UInt64, UInt32, UInt8) in
                        func field<T: FixedWidthInteger>(_ offset: Int, _ type: T.Type) -> T {
                            guard info.count >= offset + MemoryLayout<T>.size else { return 0 }
                            return info.loadUnaligned(fromByteOffset: offset, as: T.self)
                        }
                        return (field(TCPInfoOffset.bytesAcked, UInt64.self), field(TCPInfoOffset.bytesReceived, UInt64.self), field(TCPInfoOffset.rtt, UInt32.self),
                                field(TCPInfoOffset.state, UInt8.self))
                    }
                    : (0, 0, 0, 0)
                // Unknown (the list shifted): not established, so nothing is decided on it.
                return Subflow(local: local.0, localPort: local.1, remote: remote.0, remotePort: remote.1,
                               bytesAcked: counters.0, bytesReceived: counters.1, smoothedRTT: .microseconds(Int64(counters.2)),
                               isEstablished: counters.3 == UInt8(TCP_ESTABLISHED),
                               isOpen: counters.3 != UInt8(TCP_CLOSE))
            }
            if let subflow { subflows.append(subflow) }
        }
        return subflows
    }

    /// The kernel's `struct tcp_info` is longer than Glibc's, which stops before the byte
    /// counters: fields are read at their offsets in the kernel's layout (linux/tcp.h), which
    /// only ever grows at its end.
    static let kernelTCPInfoSize = 256
    enum TCPInfoOffset {
        static let state = 0
        static let rtt = 68
        static let bytesAcked = 120
        static let bytesReceived = 128
    }

    /// The elements the kernel fills after a `mptcp_subflow_data` header, read in place.
    private struct SubflowArray {
        static let capacity = 16
        private var buffer: [UInt8]
        private let size: Int
        /// How many elements the kernel filled (none when the option failed).
        let count: Int

        init(_ descriptor: Int32, option: Int32, elementSize: Int) {
            let headerSize = MemoryLayout<mptcp_subflow_data>.size
            let total = headerSize + Self.capacity * elementSize
            var buffer = [UInt8](repeating: 0, count: total)
            var header = mptcp_subflow_data(size_subflow_data: UInt32(headerSize), num_subflows: 0, size_kernel: 0, size_user: UInt32(elementSize))
            withUnsafeBytes(of: &header) { raw in buffer.withUnsafeMutableBytes { $0.copyMemory(from: raw) } }
            var length = socklen_t(total)
            let status = buffer.withUnsafeMutableBytes { getsockopt(descriptor, socketLevel, option, $0.baseAddress, &length) }
            let filled = buffer.withUnsafeBytes { $0.loadUnaligned(as: mptcp_subflow_data.self) }
            let size = status == 0 ? Int(filled.size_user) : 0
            self.buffer = buffer
            self.size = size
            count = size > 0 ? max(0, min(Int(filled.num_subflows), Self.capacity, (Int(length) - headerSize) / size)) : 0
        }

        /// Element `index` (below ``count``) as the bytes the kernel wrote.
        func withElement<T>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
            let start = MemoryLayout<mptcp_subflow_data>.size + index * size
            return buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<(start + size)])) }
        }
    }

    private static func socketAddress(_ raw: UnsafeRawBufferPointer, remote: Bool) -> (IPAddress, UInt16)? {
        guard raw.count >= 2 * MemoryLayout<sockaddr_storage>.size else { return nil }
        // Two sockaddr_storage-sized unions: local, then remote.
        let base = remote ? MemoryLayout<sockaddr_storage>.size : 0
        let family = raw.loadUnaligned(fromByteOffset: base, as: sa_family_t.self)
        let port = UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: base + 2, as: UInt16.self))
        // Built here rather than through `IPAddress(bytes:)`: its generic code is not
        // specialized across modules, and an IPv4 address then costs heap allocations.
        if family == sa_family_t(AF_INET) {
            return (.v4(raw[base + 4], raw[base + 5], raw[base + 6], raw[base + 7]), port)
        }
        if family == sa_family_t(AF_INET6), let bytes = IPAddress.IPv6Bytes(Array(raw[(base + 8)..<(base + 24)])) {
            return (.v6(bytes), port)
        }
        return nil
    }
}
