import CNetlink

/// An address assigned to an interface, as in an `RTM_NEWADDR` message.
public struct InterfaceAddress: Sendable, Hashable {
    /// The index of the interface that holds the address.
    public var interfaceIndex: Int32
    /// The address and its prefix length (`IFA_LOCAL`, or `IFA_ADDRESS` when there is no local one).
    public var prefix: IPPrefix
    /// The peer of a point-to-point address, if it differs from the local one.
    public var peer: IPAddress?
    /// The scope.
    public var scope: Scope
    /// The flags.
    public var flags: AddressFlags

    public init(interfaceIndex: Int32, prefix: IPPrefix, peer: IPAddress? = nil, scope: Scope = .universe, flags: AddressFlags = []) {
        self.interfaceIndex = interfaceIndex
        self.prefix = prefix
        self.peer = peer
        self.scope = scope
        self.flags = flags
    }

    /// The address itself.
    public var address: IPAddress { prefix.address }

    /// The family of the address.
    public var family: AddressFamily { prefix.address.family }

    /// Usable as a source address: duplicate address detection is neither running nor failed.
    public var isUsable: Bool { !flags.contains(.tentative) && !flags.contains(.dadFailed) }

    /// The identity the kernel keys addresses by.
    public struct Key: Hashable, Sendable {
        public var interfaceIndex: Int32
        public var prefix: IPPrefix
    }

    /// The identity of this address: an `RTM_NEWADDR` with the same key replaces it.
    public var key: Key { Key(interfaceIndex: interfaceIndex, prefix: prefix) }

    /// Reads a libnl `struct rtnl_addr`.
    init?(libnl address: OpaquePointer) {
        let local = LibnlAddress.ipAddress(rtnl_addr_get_local(address))
        guard let local else { return nil }
        let peer = LibnlAddress.ipAddress(rtnl_addr_get_peer(address))
        self.init(
            interfaceIndex: rtnl_addr_get_ifindex(address),
            prefix: IPPrefix(local, length: Int(rtnl_addr_get_prefixlen(address))),
            peer: peer == local ? nil : peer,
            scope: Scope(rawValue: UInt8(truncatingIfNeeded: rtnl_addr_get_scope(address))),
            flags: AddressFlags(rawValue: rtnl_addr_get_flags(address))
        )
    }
}
