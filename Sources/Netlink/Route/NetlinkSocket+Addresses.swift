import CNetlink
import CRoamLinux
import Glibc

extension NetlinkSocket {
    /// Every address of every interface in the socket's namespace.
    public func addresses() throws(NetlinkError) -> [InterfaceAddress] {
        try dump("dump addresses (RTM_GETADDR)", allocate: { rtnl_addr_alloc_cache($0, $1) }, convert: { InterfaceAddress(libnl: $0) })
    }

    /// Adds `prefix` (address and prefix length) to interface `interfaceIndex`.
    ///
    /// - Parameters:
    ///   - prefix: the address and its prefix length.
    ///   - interfaceIndex: the interface it goes on.
    ///   - skipDAD: for IPv6, mark the address `nodad` so that it is usable at once.
    public func addAddress(_ prefix: IPPrefix, interfaceIndex: Int32, skipDAD: Bool = true) throws(NetlinkError) {
        try changeAddress(prefix, interfaceIndex: interfaceIndex, add: true, skipDAD: skipDAD)
    }

    /// Removes `prefix` from interface `interfaceIndex`.
    public func deleteAddress(_ prefix: IPPrefix, interfaceIndex: Int32) throws(NetlinkError) {
        try changeAddress(prefix, interfaceIndex: interfaceIndex, add: false, skipDAD: false)
    }

    private func changeAddress(_ prefix: IPPrefix, interfaceIndex: Int32, add: Bool, skipDAD: Bool) throws(NetlinkError) {
        let address = rtnl_addr_alloc()!
        defer { rtnl_addr_put(address) }
        let local = try LibnlAddress.make(prefix.address, prefixLength: prefix.length)
        defer { nl_addr_put(local) }
        rtnl_addr_set_ifindex(address, interfaceIndex)
        rtnl_addr_set_family(address, prefix.address.family.rawValue)
        _ = rtnl_addr_set_local(address, local)
        rtnl_addr_set_prefixlen(address, Int32(prefix.length))
        if add && skipDAD && prefix.address.family == .inet6 {
            rtnl_addr_set_flags(address, UInt32(IFA_F_NODAD))
        }
        if add {
            try request("add address \(prefix) to #\(interfaceIndex)") { rtnl_addr_add($0, address, NLM_F_CREATE | NLM_F_EXCL) }
        } else {
            try request("delete address \(prefix) from #\(interfaceIndex)") { rtnl_addr_delete($0, address, 0) }
        }
    }
}
