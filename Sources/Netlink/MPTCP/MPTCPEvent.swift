import CNetlink
import CRoamLinux
import Glibc

/// An event of the kernel's MPTCP path manager, from the `mptcp_pm_events` multicast group
/// (what `ip mptcp monitor` prints): a connection created, established or closed, an address
/// announced or removed by the peer, a subflow established, closed or given a new priority.
/// Every MPTCP connection of the namespace, whatever program opened it.
public struct MPTCPEvent: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case created, established, closed, announced, removed
        case subflowEstablished, subflowClosed, subflowPriority
        /// A kind this code does not know (a newer kernel's).
        case other(UInt8)

        init(command: UInt8) {
            switch Int(command) {
            case Int(MPTCP_EVENT_CREATED.rawValue): self = .created
            case Int(MPTCP_EVENT_ESTABLISHED.rawValue): self = .established
            case Int(MPTCP_EVENT_CLOSED.rawValue): self = .closed
            case Int(MPTCP_EVENT_ANNOUNCED.rawValue): self = .announced
            case Int(MPTCP_EVENT_REMOVED.rawValue): self = .removed
            case Int(MPTCP_EVENT_SUB_ESTABLISHED.rawValue): self = .subflowEstablished
            case Int(MPTCP_EVENT_SUB_CLOSED.rawValue): self = .subflowClosed
            case Int(MPTCP_EVENT_SUB_PRIORITY.rawValue): self = .subflowPriority
            default: self = .other(command)
            }
        }
    }

    public var kind: Kind
    /// The connection's token (its identifier for the path manager).
    public var token: UInt32
    public var local: IPAddress?
    public var localPort: UInt16?
    public var remote: IPAddress?
    public var remotePort: UInt16?
    public var localID: UInt8?
    public var remoteID: UInt8?
    /// For subflow events: whether the subflow is a backup.
    public var isBackup: Bool?
    /// For a closed subflow: the error that closed it, if any.
    public var error: UInt8?

    public init(kind: Kind, token: UInt32) {
        self.kind = kind
        self.token = token
    }

    public var description: String {
        var text = "\(kind) token \(token)"
        if let local { text += " \(local)" + (localPort.map { ":\($0)" } ?? "") }
        if let remote { text += " -> \(remote)" + (remotePort.map { ":\($0)" } ?? "") }
        if isBackup == true { text += " backup" }
        return text
    }

    /// Parses one generic netlink message of the `mptcp_pm` family: the generic header
    /// (command, version, reserved), then attributes. Nil for anything malformed.
    init?(message payload: UnsafeRawBufferPointer) {
        guard payload.count >= 4 else { return nil }
        kind = Kind(command: payload[0])
        token = 0
        var sawToken = false
        var offset = 4
        while offset + 4 <= payload.count {
            let length = Int(payload.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let type = Int(payload.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self) & 0x3fff)
            guard length >= 4, offset + length <= payload.count else { return nil }
            let value = UnsafeRawBufferPointer(rebasing: payload[(offset + 4)..<(offset + length)])
            func bytes(_ count: Int) -> [UInt8]? { value.count >= count ? Array(value.prefix(count)) : nil }
            func bigEndian16() -> UInt16? { bytes(2).map { UInt16($0[0]) << 8 | UInt16($0[1]) } }
            switch type {
            case Int(MPTCP_ATTR_TOKEN.rawValue):
                guard value.count >= 4 else { return nil }
                token = value.loadUnaligned(as: UInt32.self)
                sawToken = true
            case Int(MPTCP_ATTR_LOC_ID.rawValue): localID = value.first
            case Int(MPTCP_ATTR_REM_ID.rawValue): remoteID = value.first
            case Int(MPTCP_ATTR_SADDR4.rawValue): local = bytes(4).flatMap { IPAddress(bytes: $0) }
            case Int(MPTCP_ATTR_SADDR6.rawValue): local = bytes(16).flatMap { IPAddress(bytes: $0) }
            case Int(MPTCP_ATTR_DADDR4.rawValue): remote = bytes(4).flatMap { IPAddress(bytes: $0) }
            case Int(MPTCP_ATTR_DADDR6.rawValue): remote = bytes(16).flatMap { IPAddress(bytes: $0) }
            case Int(MPTCP_ATTR_SPORT.rawValue): localPort = bigEndian16()
            case Int(MPTCP_ATTR_DPORT.rawValue): remotePort = bigEndian16()
            case Int(MPTCP_ATTR_BACKUP.rawValue): isBackup = value.first.map { $0 != 0 }
            case Int(MPTCP_ATTR_ERROR.rawValue): error = value.first
            default: break
            }
            offset += (length + 3) & ~3
        }
        guard sawToken else { return nil }
    }
}

extension NetlinkSocket {
    /// Joins the `mptcp_pm_events` group (a ``NetlinkProtocol/generic`` socket), so that
    /// ``receiveMPTCPEvents(_:)`` hears about every MPTCP connection of the namespace.
    public func subscribeToMPTCPEvents() throws(NetlinkError) {
        _ = try genericFamily(MPTCP_PM_NAME, hint: "this kernel has no MPTCP (CONFIG_MPTCP)")
        let group = genl_ctrl_resolve_grp(handle, MPTCP_PM_NAME, MPTCP_PM_EV_GRP_NAME)
        if group < 0 { throw NetlinkError.libnl(group, "resolve the \(MPTCP_PM_EV_GRP_NAME) group") }
        nl_socket_disable_seq_check(handle)
        try libnlCall("nl_socket_add_membership(\(MPTCP_PM_EV_GRP_NAME))") { nl_socket_add_membership(handle, group) }
    }

    /// Reads every queued MPTCP event and hands each to `handler`, without blocking (call it when
    /// ``fileDescriptor`` is readable, after ``subscribeToMPTCPEvents()`` and ``setNonBlocking()``).
    public func receiveMPTCPEvents(_ handler: (MPTCPEvent) -> Void) throws(NetlinkError) -> ReceiveOutcome {
        guard let family = genericFamilies[MPTCP_PM_NAME] else {
            throw NetlinkError(.errno(EINVAL), operation: "receive MPTCP events", hint: "subscribe to them first")
        }
        return try drainDatagrams { datagram in
            NetlinkSocket.forEachMessage(in: datagram) { type, _, payload in
                if type == family, let event = MPTCPEvent(message: payload) { handler(event) }
            }
        }
    }
}
