import CNetlink

/// A network interface as the kernel describes it in an `RTM_NEWLINK` message.
public struct Link: Sendable, Hashable, Identifiable {
    /// The interface index (`ifi_index`), unique within a namespace.
    public var index: Int32
    /// The interface name (`IFLA_IFNAME`).
    public var name: String
    /// The interface flags (`ifi_flags`).
    public var flags: InterfaceFlags
    /// The RFC 2863 operational state (`IFLA_OPERSTATE`).
    public var operationalState: OperationalState
    /// The maximum transmission unit (`IFLA_MTU`).
    public var mtu: UInt32
    /// The link-layer type (`ifi_type`).
    public var hardwareType: HardwareType
    /// The link kind of a virtual interface (`IFLA_INFO_KIND`): `veth`, `bridge`, `tun`, ...; nil for physical ones.
    public var kind: String?
    /// The interface alias (`IFLA_IFALIAS`), where Roam keeps its tags.
    public var alias: String?
    /// The link-layer address (`IFLA_ADDRESS`), if any.
    public var hardwareAddress: [UInt8]?
    /// The index of the master device (bridge, bond, VRF), if any.
    public var masterIndex: Int32?

    public var id: Int32 { index }

    public init(
        index: Int32, name: String, flags: InterfaceFlags, operationalState: OperationalState = .unknown,
        mtu: UInt32 = 1500, hardwareType: HardwareType = .ethernet, kind: String? = nil, alias: String? = nil,
        hardwareAddress: [UInt8]? = nil, masterIndex: Int32? = nil
    ) {
        self.index = index
        self.name = name
        self.flags = flags
        self.operationalState = operationalState
        self.mtu = mtu
        self.hardwareType = hardwareType
        self.kind = kind
        self.alias = alias
        self.hardwareAddress = hardwareAddress
        self.masterIndex = masterIndex
    }

    /// Reads a libnl `struct rtnl_link`.
    init(libnl link: OpaquePointer) {
        let master = rtnl_link_get_master(link)
        let alias = libnlString(rtnl_link_get_ifalias(link))
        self.init(
            index: rtnl_link_get_ifindex(link),
            name: libnlString(rtnl_link_get_name(link)) ?? "",
            flags: InterfaceFlags(rawValue: rtnl_link_get_flags(link)),
            operationalState: OperationalState(rawValue: rtnl_link_get_operstate(link)) ?? .unknown,
            mtu: rtnl_link_get_mtu(link),
            hardwareType: HardwareType(rawValue: UInt16(truncatingIfNeeded: rtnl_link_get_arptype(link))),
            kind: libnlString(rtnl_link_get_type(link)),
            alias: alias?.isEmpty == true ? nil : alias,
            hardwareAddress: LibnlAddress.bytes(rtnl_link_get_addr(link)),
            masterIndex: master > 0 ? master : nil
        )
    }

    /// Administratively up (`IFF_UP`).
    public var isUp: Bool { flags.contains(.up) }

    /// Administratively up and able to pass traffic: `IFF_RUNNING`, which the kernel sets for
    /// the operational states up and unknown (the state of drivers that do not report one).
    public var isRunning: Bool { flags.contains(.up) && flags.contains(.running) }

    /// True for the loopback interface.
    public var isLoopback: Bool { flags.contains(.loopback) || hardwareType == .loopback }
}

extension Link {
    /// Reads an `RTM_NEWLINK` or `RTM_DELLINK` message's payload (`struct ifinfomsg` and its
    /// attributes) directly, as libnl's link parser reads the fields ``Link`` has: a path
    /// monitor takes every link notification on its way to an update, and libnl's parser copies
    /// the message and parses every attribute (statistics, per-family data) into an object
    /// first. Nil when the payload is too short for its header; a malformed attribute ends the
    /// walk (a kernel never sends one).
    init?(rtnetlink payload: UnsafeRawBufferPointer) {
        let headerSize = 16  // struct ifinfomsg
        guard payload.count >= headerSize else { return nil }
        var name = ""
        var operationalState = OperationalState.unknown
        var mtu: UInt32 = 0
        var kind: String?
        var alias: String?
        var hardwareAddress: [UInt8]?
        var master: UInt32 = 0
        Self.forEachAttribute(in: UnsafeRawBufferPointer(rebasing: payload[headerSize...])) { type, value in
            switch Int32(type) {
            case Int32(IFLA_IFNAME):
                // libnl keeps at most IFNAMSIZ - 1 bytes, up to the first NUL.
                name = Self.string(value, limit: Int(IFNAMSIZ) - 1)
            case Int32(IFLA_MTU):
                if value.count >= 4 { mtu = value.loadUnaligned(as: UInt32.self) }
            case Int32(IFLA_OPERSTATE):
                if value.count >= 1 { operationalState = OperationalState(rawValue: value[0]) ?? .unknown }
            case Int32(IFLA_ADDRESS):
                hardwareAddress = value.isEmpty ? nil : Array(value)
            case Int32(IFLA_MASTER):
                if value.count >= 4 { master = value.loadUnaligned(as: UInt32.self) }
            case Int32(IFLA_IFALIAS):
                let text = Self.string(value, limit: value.count)
                alias = text.isEmpty ? nil : text
            case Int32(IFLA_LINKINFO):
                Self.forEachAttribute(in: value) { type, value in
                    if Int32(type) == Int32(IFLA_INFO_KIND) { kind = Self.string(value, limit: value.count) }
                }
            default:
                break
            }
        }
        let masterIndex = Int32(bitPattern: master)
        self.init(
            index: payload.loadUnaligned(fromByteOffset: 4, as: Int32.self),
            name: name,
            flags: InterfaceFlags(rawValue: payload.loadUnaligned(fromByteOffset: 8, as: UInt32.self)),
            operationalState: operationalState,
            mtu: mtu,
            hardwareType: HardwareType(rawValue: payload.loadUnaligned(fromByteOffset: 2, as: UInt16.self)),
            kind: kind,
            alias: alias,
            hardwareAddress: hardwareAddress,
            masterIndex: masterIndex > 0 ? masterIndex : nil
        )
    }

    /// Calls `body` with each attribute's type (flags masked off) and value; stops at a length
    /// that does not fit.
    private static func forEachAttribute(in bytes: UnsafeRawBufferPointer, _ body: (UInt16, UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while offset + 4 <= bytes.count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let type = bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self) & 0x3FFF  // NLA_TYPE_MASK
            guard length >= 4, offset + length <= bytes.count else { return }
            body(type, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + length)]))
            offset += (length + 3) & ~3
        }
    }

    /// The text up to the first NUL, at most `limit` bytes.
    private static func string(_ value: UnsafeRawBufferPointer, limit: Int) -> String {
        let bytes = value.prefix(limit)
        let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
