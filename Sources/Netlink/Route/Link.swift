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
