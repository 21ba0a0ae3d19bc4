import CRoamLinux
import Glibc

/// One MPTCP subflow as the kernel's socket diagnostics (sock_diag, what `ss -tiM` prints)
/// describe it: the TCP connection under an MPTCP connection, with its own `tcp_info`.
///
/// Every subflow of the namespace is seen, whatever program opened its connection: this is how a
/// path manager watches unmodified programs' connections (`mptcpize run`).
public struct MPTCPSubflowInfo: Sendable, Hashable, CustomStringConvertible {
    /// The subflow's own end and its peer's.
    public var local: IPAddress
    public var localPort: UInt16
    public var remote: IPAddress
    public var remotePort: UInt16
    /// The device the subflow is bound to (an endpoint's `dev`), 0 when it is not bound.
    public var boundInterfaceIndex: UInt32
    /// The kernel's identifier of the socket, stable for its life.
    public var cookie: UInt64
    /// The MPTCP connection's local token: the subflows of one connection share it.
    public var token: UInt32
    /// Whether this end made the subflow a backup (`MP_PRIO`/`MP_JOIN` with the backup bit), and
    /// whether the peer did.
    public var isBackup: Bool
    public var isBackupForPeer: Bool
    /// `TCP_ESTABLISHED` and the rest (`tcpi_state`).
    public var state: UInt8
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    public var unacknowledged: UInt32
    /// Time since data last arrived (`tcpi_last_data_recv`) and since an acknowledgement last
    /// arrived (`tcpi_last_ack_recv`).
    public var sinceDataReceived: Duration
    public var sinceAcknowledgementReceived: Duration
    /// The smoothed round-trip time (`tcpi_rtt`), nil before the first measurement.
    public var smoothedRTT: Duration?
    /// Retransmission timeouts in a row without progress (`tcpi_backoff`).
    public var backoff: UInt8
    /// Retransmissions over the subflow's life (`tcpi_total_retrans`).
    public var totalRetransmissions: UInt32
    /// Segments with data received (`tcpi_data_segs_in`).
    public var dataSegmentsReceived: UInt32
    /// Packets that arrived out of order (`tcpi_rcv_ooopack`): holes left by losses on the way in.
    /// 0 on kernels older than 5.4, which do not count them.
    public var outOfOrderPacketsReceived: UInt32

    public var description: String {
        "\(local):\(localPort) -> \(remote):\(remotePort) token \(String(token, radix: 16))\(isBackup ? " backup" : "")"
    }

    /// Reads one `SOCK_DIAG_BY_FAMILY` message's payload (an `inet_diag_msg` and its attributes):
    /// nil for a socket that is not an MPTCP subflow, or for anything malformed.
    package init?(message payload: UnsafeRawBufferPointer) {
        let header = MemoryLayout<inet_diag_msg>.size
        guard payload.count >= header else { return nil }
        let message = payload.loadUnaligned(as: inet_diag_msg.self)
        let length = message.idiag_family == UInt8(AF_INET) ? 4 : message.idiag_family == UInt8(AF_INET6) ? 16 : 0
        guard length > 0 else { return nil }
        func address(_ words: (UInt32, UInt32, UInt32, UInt32)) -> IPAddress? {
            withUnsafeBytes(of: words) { IPAddress(bytes: Array($0.prefix(length))) }
        }
        guard let local = address(message.id.idiag_src), let remote = address(message.id.idiag_dst) else { return nil }
        self.local = local
        self.remote = remote
        localPort = UInt16(bigEndian: message.id.idiag_sport)
        remotePort = UInt16(bigEndian: message.id.idiag_dport)
        boundInterfaceIndex = message.id.idiag_if
        cookie = UInt64(message.id.idiag_cookie.0) | UInt64(message.id.idiag_cookie.1) << 32
        state = message.idiag_state
        var info: UnsafeRawBufferPointer?
        var subflow: UnsafeRawBufferPointer?
        var isMPTCP = false
        Self.forEachAttribute(in: UnsafeRawBufferPointer(rebasing: payload[header...])) { type, value in
            switch type {
            case UInt16(INET_DIAG_INFO): info = value
            case UInt16(INET_DIAG_ULP_INFO):
                Self.forEachAttribute(in: value) { type, value in
                    switch type {
                    case UInt16(INET_ULP_INFO_NAME):
                        isMPTCP = String(decoding: value.prefix { $0 != 0 }, as: UTF8.self) == "mptcp"
                    case UInt16(INET_ULP_INFO_MPTCP): subflow = value
                    default: break
                    }
                }
            default: break
            }
        }
        guard isMPTCP, let subflow, let info, info.count >= Self.tcpInfoOffsets.dataSegmentsIn + 4 else { return nil }
        var token: UInt32 = 0
        var flags: UInt32 = 0
        Self.forEachAttribute(in: subflow) { type, value in
            guard value.count >= 4 else { return }
            switch type {
            case UInt16(MPTCP_SUBFLOW_ATTR_TOKEN_LOC): token = value.loadUnaligned(as: UInt32.self)
            case UInt16(MPTCP_SUBFLOW_ATTR_FLAGS): flags = value.loadUnaligned(as: UInt32.self)
            default: break
            }
        }
        self.token = token
        isBackup = flags & Self.backupLocal != 0
        isBackupForPeer = flags & Self.backupRemote != 0
        let offsets = Self.tcpInfoOffsets
        func word(_ offset: Int) -> UInt32 { info.count >= offset + 4 ? info.loadUnaligned(fromByteOffset: offset, as: UInt32.self) : 0 }
        backoff = info[offsets.backoff]
        unacknowledged = word(offsets.unacknowledged)
        sinceDataReceived = .milliseconds(Int64(word(offsets.lastDataReceived)))
        sinceAcknowledgementReceived = .milliseconds(Int64(word(offsets.lastAcknowledgementReceived)))
        let rtt = word(offsets.rtt)
        smoothedRTT = rtt > 0 ? .microseconds(Int64(rtt)) : nil
        totalRetransmissions = word(offsets.totalRetransmissions)
        dataSegmentsReceived = word(offsets.dataSegmentsIn)
        outOfOrderPacketsReceived = word(offsets.outOfOrderPackets)
    }

    /// `MPTCP_SUBFLOW_FLAG_BKUP_LOC` and `_REM` (linux/mptcp.h's `_BITUL`s, which Swift cannot import).
    static let backupLocal: UInt32 = 1 << 5
    static let backupRemote: UInt32 = 1 << 4

    /// Where the fields read sit in the kernel's `struct tcp_info` (linux/tcp.h: an ABI the
    /// kernel only appends to; glibc's copy of the struct stops before the newer ones).
    static let tcpInfoOffsets = (backoff: 4, unacknowledged: 24, lastDataReceived: 52, lastAcknowledgementReceived: 56, rtt: 68,
                                 totalRetransmissions: 100, dataSegmentsIn: 152, outOfOrderPackets: 224)

    /// Each attribute (`struct rtattr`/`nlattr`: length, type, value, padded to 4) in `bytes`;
    /// stops at the first that does not fit.
    static func forEachAttribute(in bytes: UnsafeRawBufferPointer, _ body: (UInt16, UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while offset + 4 <= bytes.count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let type = bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self) & 0x3fff
            guard length >= 4, offset + length <= bytes.count else { return }
            body(type, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + length)]))
            offset += (length + 3) & ~3
        }
    }
}

/// Reads a namespace's MPTCP subflows through sock_diag (`NETLINK_SOCK_DIAG`): a socket opened
/// once in the namespace and asked again at each ``subflows()``. Not safe to use from two
/// threads at once.
public final class MPTCPSubflowDiagnostics {
    /// The namespace whose subflows it reads.
    public let namespace: NetworkNamespace
    private let descriptor: Int32
    private var sequence: UInt32 = 0
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)

    /// Opens a sock_diag socket in `namespace`.
    ///
    /// - Throws: ``NetlinkError`` when it cannot be opened.
    public init(namespace: NetworkNamespace = .current) throws(NetlinkError) {
        func open() -> Int32 {
            let fd = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_SOCK_DIAG)
            guard fd >= 0 else { return -errno }
            // Bounded: the kernel answers at once; a reader never waits on it for long.
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            return fd
        }
        let fd: Int32
        if namespace.isCurrent {
            fd = open()
        } else {
            do {
                fd = try namespace.perform { open() }
            } catch {
                buffer.deallocate()
                throw NetlinkError(.errno(EIO), operation: "open a sock_diag socket in \(namespace)", hint: "\(error)")
            }
        }
        guard fd >= 0 else {
            buffer.deallocate()
            throw NetlinkError.posix("socket(NETLINK_SOCK_DIAG) in \(namespace)", errno: -fd)
        }
        self.namespace = namespace
        descriptor = fd
    }

    deinit {
        close(descriptor)
        buffer.deallocate()
    }

    /// How many MPTCP connections (listeners aside) the namespace has: one small request, so that
    /// a caller polling for subflows asks for the namespace's TCP sockets only when there are any.
    ///
    /// - Throws: ``NetlinkError`` with the kernel's answer (`ENOENT`: no MPTCP diagnostics).
    public func connectionCount() throws(NetlinkError) -> Int {
        var count = 0
        for family in [AF_INET, AF_INET6] {
            try dump(family: family, protocol: Int32(IPPROTO_MPTCP), extensions: 0) { _ in count += 1 }
        }
        return count
    }

    /// Every established MPTCP subflow of the namespace, with its `tcp_info`.
    ///
    /// - Throws: ``NetlinkError`` with the kernel's answer.
    public func subflows() throws(NetlinkError) -> [MPTCPSubflowInfo] {
        var subflows: [MPTCPSubflowInfo] = []
        for family in [AF_INET, AF_INET6] {
            try dump(family: family, protocol: Int32(IPPROTO_TCP), extensions: UInt8(1 << (INET_DIAG_INFO - 1))) { payload in
                if let subflow = MPTCPSubflowInfo(message: payload) { subflows.append(subflow) }
            }
        }
        return subflows
    }

    /// Sends one dump request for established sockets of `family` and `protocol` and hands each
    /// answer's payload to `body`.
    private func dump(family: Int32, protocol: Int32, extensions: UInt8, _ body: (UnsafeRawBufferPointer) -> Void) throws(NetlinkError) {
        sequence &+= 1
        // The request, and for a protocol beyond 255 (IPPROTO_MPTCP) the attribute that carries it.
        let requestLength = MemoryLayout<nlmsghdr>.size + MemoryLayout<inet_diag_req_v2>.size
        let total = requestLength + (`protocol` > 255 ? 8 : 0)
        var bytes = [UInt8](repeating: 0, count: total)
        bytes.withUnsafeMutableBytes { raw in
            var header = nlmsghdr()
            header.nlmsg_len = UInt32(total)
            header.nlmsg_type = UInt16(SOCK_DIAG_BY_FAMILY)
            header.nlmsg_flags = UInt16(NLM_F_REQUEST | NLM_F_DUMP)
            header.nlmsg_seq = sequence
            raw.storeBytes(of: header, as: nlmsghdr.self)
            var request = inet_diag_req_v2()
            request.sdiag_family = UInt8(family)
            request.sdiag_protocol = UInt8(truncatingIfNeeded: `protocol` > 255 ? 0 : `protocol`)
            request.idiag_ext = extensions
            request.idiag_states = 1 << UInt32(TCP_ESTABLISHED)
            raw.storeBytes(of: request, toByteOffset: MemoryLayout<nlmsghdr>.size, as: inet_diag_req_v2.self)
            if `protocol` > 255 {
                raw.storeBytes(of: UInt16(8), toByteOffset: requestLength, as: UInt16.self)
                raw.storeBytes(of: UInt16(INET_DIAG_REQ_PROTOCOL), toByteOffset: requestLength + 2, as: UInt16.self)
                raw.storeBytes(of: UInt32(`protocol`), toByteOffset: requestLength + 4, as: UInt32.self)
            }
        }
        var kernel = sockaddr_nl()
        kernel.nl_family = sa_family_t(AF_NETLINK)
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &kernel) { address in
                address.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                }
            }
        }
        guard sent == total else { throw NetlinkError.posix("send(sock_diag)", errno: sent < 0 ? errno : EIO) }
        while true {
            let received = recv(descriptor, buffer.baseAddress, buffer.count, 0)
            if received < 0 {
                if errno == EINTR { continue }
                throw NetlinkError.posix("recv(sock_diag)", errno: errno)
            }
            var offset = 0
            let datagram = UnsafeRawBufferPointer(rebasing: buffer[..<received])
            while offset + MemoryLayout<nlmsghdr>.size <= datagram.count {
                let header = datagram.loadUnaligned(fromByteOffset: offset, as: nlmsghdr.self)
                let length = Int(header.nlmsg_len)
                guard length >= MemoryLayout<nlmsghdr>.size, offset + length <= datagram.count else { return }
                let payload = UnsafeRawBufferPointer(rebasing: datagram[(offset + MemoryLayout<nlmsghdr>.size)..<(offset + length)])
                if header.nlmsg_seq == sequence {
                    switch Int32(header.nlmsg_type) {
                    case NLMSG_DONE: return
                    case NLMSG_ERROR:
                        let code = payload.count >= 4 ? -payload.loadUnaligned(as: Int32.self) : EIO
                        if code == 0 { return }
                        throw NetlinkError.posix("sock_diag dump (family \(family), protocol \(`protocol`))", errno: code)
                    case Int32(SOCK_DIAG_BY_FAMILY): body(payload)
                    default: break
                    }
                }
                offset += (length + 3) & ~3
            }
        }
    }
}
