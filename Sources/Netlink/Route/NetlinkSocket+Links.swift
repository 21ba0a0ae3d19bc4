import CNetlink
import CRoamLinux
import Glibc
import RoamSystem

extension NetlinkSocket {
    /// Every interface of the socket's namespace.
    public func links() throws(NetlinkError) -> [Link] {
        try dump("dump links (RTM_GETLINK)", allocate: { rtnl_link_alloc_cache($0, AF_UNSPEC, $1) }, convert: { Link(libnl: $0) })
    }

    /// The byte and packet counters of every interface, by name, as the kernel keeps them
    /// (`ip -s link`): what the interface received and sent since it was created.
    public func interfaceCounters() throws(NetlinkError) -> [String: InterfaceCounters] {
        let pairs = try dump("dump links (RTM_GETLINK)", allocate: { rtnl_link_alloc_cache($0, AF_UNSPEC, $1) }) { link -> (String, InterfaceCounters) in
            let name = rtnl_link_get_name(link).map { String(cString: $0) } ?? ""
            return (name, InterfaceCounters(
                receivedBytes: rtnl_link_get_stat(link, RTNL_LINK_RX_BYTES), sentBytes: rtnl_link_get_stat(link, RTNL_LINK_TX_BYTES),
                receivedPackets: rtnl_link_get_stat(link, RTNL_LINK_RX_PACKETS), sentPackets: rtnl_link_get_stat(link, RTNL_LINK_TX_PACKETS)))
        }
        return Dictionary(pairs, uniquingKeysWith: { _, last in last })
    }

    /// The interface named `name`, or nil when there is none.
    public func link(named name: String) throws(NetlinkError) -> Link? {
        try fetchLink(index: 0, name: name)
    }

    /// The interface with index `index`, or nil when there is none.
    public func link(index: Int32) throws(NetlinkError) -> Link? {
        try fetchLink(index: index, name: nil)
    }

    private func fetchLink(index: Int32, name: String?) throws(NetlinkError) -> Link? {
        var result: OpaquePointer?
        let code = rtnl_link_get_kernel(handle, index, name, &result)
        if code == -NLE_NODEV || code == -NLE_OBJ_NOTFOUND { return nil }
        if code < 0 { throw NetlinkError.libnl(code, "get link \(name ?? "#\(index)")") }
        guard let result else { return nil }
        defer { rtnl_link_put(result) }
        return Link(libnl: result)
    }

    /// Creates a veth pair: `name` in this socket's namespace and `peerName` in `peerNamespace`
    /// (the same namespace when nil). Both ends start down. Nothing is created anywhere else:
    /// the kernel places the peer directly, so the host's namespace never holds it.
    public func createVethPair(_ name: String, peer peerName: String, peerNamespace: NetworkNamespace? = nil) throws(NetlinkError) {
        guard let link = rtnl_link_veth_alloc() else { throw NetlinkError.libnl(NLE_NOMEM, "rtnl_link_veth_alloc") }
        defer { rtnl_link_veth_release(link) }
        let peer = rtnl_link_veth_get_peer(link)!
        defer { rtnl_link_put(peer) }
        rtnl_link_set_name(link, name)
        rtnl_link_set_name(peer, peerName)
        var namespaceFile: OwnedFileDescriptor?
        if let peerNamespace, peerNamespace != namespace {
            namespaceFile = try peerNamespace.open()
            rtnl_link_set_ns_fd(peer, namespaceFile!.rawValue)
        }
        try withExtendedLifetime(namespaceFile) { () throws(NetlinkError) in
            try request("create veth \(name) <-> \(peerName)") {
                rtnl_link_add($0, link, NLM_F_CREATE | NLM_F_EXCL)
            }
        }
    }

    /// Deletes the interface with index `index` (deleting one end of a veth pair removes both).
    public func deleteLink(index: Int32) throws(NetlinkError) {
        let link = rtnl_link_alloc()!
        defer { rtnl_link_put(link) }
        rtnl_link_set_ifindex(link, index)
        try request("delete link #\(index)") { rtnl_link_delete($0, link) }
    }

    /// Changes attributes of an interface. Each argument left nil stays as it is.
    ///
    /// - Parameters:
    ///   - index: the interface's index.
    ///   - up: sets (`true`) or clears (`false`) `IFF_UP`.
    ///   - alias: the new alias; an empty string removes it.
    ///   - mtu: the new MTU.
    ///   - name: the new name (the interface must be down).
    public func setLink(index: Int32, up: Bool? = nil, alias: String? = nil, mtu: UInt32? = nil, name: String? = nil) throws(NetlinkError) {
        let original = rtnl_link_alloc()!
        let change = rtnl_link_alloc()!
        defer {
            rtnl_link_put(original)
            rtnl_link_put(change)
        }
        rtnl_link_set_ifindex(original, index)
        var what: [String] = []
        if let up {
            if up { rtnl_link_set_flags(change, UInt32(IFF_UP.rawValue)) } else { rtnl_link_unset_flags(change, UInt32(IFF_UP.rawValue)) }
            what.append(up ? "up" : "down")
        }
        if let alias {
            rtnl_link_set_ifalias(change, alias)
            what.append("alias '\(alias)'")
        }
        if let mtu {
            rtnl_link_set_mtu(change, mtu)
            what.append("mtu \(mtu)")
        }
        if let name {
            rtnl_link_set_name(change, name)
            what.append("name \(name)")
        }
        try request("set link #\(index) \(what.joined(separator: " "))") { rtnl_link_change($0, original, change, 0) }
    }
}

/// An interface's traffic counters (`ip -s link`).
public struct InterfaceCounters: Sendable, Hashable {
    public var receivedBytes: UInt64
    public var sentBytes: UInt64
    public var receivedPackets: UInt64
    public var sentPackets: UInt64

    public init(receivedBytes: UInt64 = 0, sentBytes: UInt64 = 0, receivedPackets: UInt64 = 0, sentPackets: UInt64 = 0) {
        self.receivedBytes = receivedBytes
        self.sentBytes = sentBytes
        self.receivedPackets = receivedPackets
        self.sentPackets = sentPackets
    }
}
