import CNetlink
import CRoamLinux
import Glibc

/// The in-kernel MPTCP path manager over generic netlink (the `mptcp_pm` family, what
/// `ip mptcp` speaks): endpoints and limits of the socket's namespace. The socket must be a
/// ``NetlinkProtocol/generic`` one.
extension NetlinkSocket {
    /// Whether the kernel has the `mptcp_pm` family (built with MPTCP). A kernel without it
    /// fails every other call here with ``NetlinkError/isNotFound``.
    public func hasMPTCPPathManager() -> Bool {
        (try? mptcpFamily()) != nil
    }

    /// Every endpoint of the namespace (`ip mptcp endpoint show`).
    public func mptcpEndpoints() throws(NetlinkError) -> [MPTCPEndpoint] {
        let replies = try mptcpRequest(MPTCP_PM_CMD_GET_ADDR, "list MPTCP endpoints", flags: NLM_F_DUMP) { _ in }
        return replies.compactMap { $0.endpoint }
    }

    /// Adds an endpoint; returns it with the identifier the kernel gave it.
    @discardableResult
    public func addMPTCPEndpoint(_ endpoint: MPTCPEndpoint) throws(NetlinkError) -> MPTCPEndpoint {
        try mptcpRequest(MPTCP_PM_CMD_ADD_ADDR, "add MPTCP endpoint \(endpoint)") { message throws(NetlinkError) in
            try Self.putEndpoint(endpoint, into: message)
        }
        if endpoint.id != 0 { return endpoint }
        // The kernel does not answer with the identifier it chose: read it back.
        guard let added = try mptcpEndpoints().first(where: { $0.address == endpoint.address && $0.port == endpoint.port }) else {
            throw NetlinkError(.errno(ENOENT), operation: "add MPTCP endpoint \(endpoint)", hint: "the endpoint was gone right after it was added")
        }
        return added
    }

    /// Removes the endpoint with this identifier; the kernel closes the subflows that use it.
    public func removeMPTCPEndpoint(id: UInt8) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_DEL_ADDR, "remove MPTCP endpoint \(id)") { message throws(NetlinkError) in
            // The kernel wants the whole address attribute, though only the identifier counts.
            try Self.putEndpoint(MPTCPEndpoint(id: id, address: .v4(0, 0, 0, 0), flags: []), into: message, identifierOnly: true)
        }
    }

    /// Removes every endpoint of the namespace.
    public func flushMPTCPEndpoints() throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_FLUSH_ADDRS, "flush MPTCP endpoints") { _ in }
    }

    /// Changes an endpoint's `backup` flag (the only one the kernel lets change), for the
    /// endpoint and for the subflows of every connection that use it.
    public func setMPTCPEndpoint(id: UInt8, address: IPAddress, backup: Bool) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_SET_FLAGS, "set MPTCP endpoint \(id) \(backup ? "backup" : "nobackup")") { message throws(NetlinkError) in
            try Self.putEndpoint(MPTCPEndpoint(id: id, address: address, flags: backup ? .backup : []), into: message)
        }
    }

    /// The namespace's per-connection limits.
    public func mptcpLimits() throws(NetlinkError) -> MPTCPLimits {
        let replies = try mptcpRequest(MPTCP_PM_CMD_GET_LIMITS, "read MPTCP limits") { _ in }
        guard let limits = replies.compactMap(\.limits).first else {
            throw NetlinkError(.errno(EPROTO), operation: "read MPTCP limits", hint: "the kernel answered without limits")
        }
        return limits
    }

    public func setMPTCPLimits(_ limits: MPTCPLimits) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_SET_LIMITS, "set MPTCP limits (subflows \(limits.subflows), add_addr_accepted \(limits.addAddressAccepted))") { message throws(NetlinkError) in
            try putAttribute("MPTCP_PM_ATTR_SUBFLOWS") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_SUBFLOWS), limits.subflows) }
            try putAttribute("MPTCP_PM_ATTR_RCV_ADD_ADDRS") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_RCV_ADD_ADDRS), limits.addAddressAccepted) }
        }
    }

    // MARK: - The userspace path manager

    /// Userspace path manager (`net.mptcp.pm_type = 1` in the namespace when the connection was
    /// made): opens a subflow of connection `token` from `local` (an address of this host; its
    /// identifier 0 lets the kernel pick one; `backup` in its flags makes it a backup) to
    /// `remote` port `remotePort`. The new subflow's events (`subflowEstablished` or
    /// `subflowClosed` with an error) say how it went.
    public func createMPTCPSubflow(token: UInt32, from local: MPTCPEndpoint, to remote: IPAddress, port remotePort: UInt16) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_SUBFLOW_CREATE, "create an MPTCP subflow of \(token) from \(local.address) to \(remote) port \(remotePort)") { message throws(NetlinkError) in
            try putAttribute("MPTCP_PM_ATTR_TOKEN") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_TOKEN), token) }
            try Self.putEndpoint(MPTCPEndpoint(id: local.id, address: local.address, interfaceIndex: local.interfaceIndex, flags: local.flags), into: message)
            try Self.putEndpoint(MPTCPEndpoint(address: remote, port: remotePort, flags: []), into: message, attribute: Int32(MPTCP_PM_ATTR_ADDR_REMOTE),
                                 withFlags: false)
        }
    }

    /// Userspace path manager: closes the subflow of connection `token` between these two
    /// address and port pairs.
    public func destroyMPTCPSubflow(token: UInt32, local: IPAddress, localPort: UInt16, remote: IPAddress, remotePort: UInt16) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_SUBFLOW_DESTROY, "close the MPTCP subflow \(local):\(localPort) -> \(remote):\(remotePort) of \(token)") { message throws(NetlinkError) in
            try putAttribute("MPTCP_PM_ATTR_TOKEN") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_TOKEN), token) }
            try Self.putEndpoint(MPTCPEndpoint(address: local, port: localPort, flags: []), into: message, withFlags: false)
            try Self.putEndpoint(MPTCPEndpoint(address: remote, port: remotePort, flags: []), into: message, attribute: Int32(MPTCP_PM_ATTR_ADDR_REMOTE),
                                 withFlags: false)
        }
    }

    /// Userspace path manager: withdraws the local address with identifier `localID` from
    /// connection `token` (0: the address of its first subflow): the peer is told (REMOVE_ADDR,
    /// over the subflows left, so it stops sending on that address at once) and the subflows
    /// from it are closed.
    public func removeMPTCPAddress(token: UInt32, localID: UInt8) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_REMOVE, "withdraw local address \(localID) from MPTCP connection \(token)") { message throws(NetlinkError) in
            try putAttribute("MPTCP_PM_ATTR_TOKEN") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_TOKEN), token) }
            try putAttribute("MPTCP_PM_ATTR_LOC_ID") { nla_put_u8(message, Int32(MPTCP_PM_ATTR_LOC_ID), localID) }
        }
    }

    /// Userspace path manager: makes the subflow of connection `token` from `local` to
    /// `remote`:`remotePort` a backup or not (the peer is told with MP_PRIO), so that the
    /// kernel's scheduler sends over the others while any is left.
    public func setMPTCPSubflowBackup(token: UInt32, local: IPAddress, remote: IPAddress, remotePort: UInt16, backup: Bool) throws(NetlinkError) {
        try mptcpRequest(MPTCP_PM_CMD_SET_FLAGS, "make the MPTCP subflow \(local) -> \(remote) of \(token) \(backup ? "a backup" : "active")") { message throws(NetlinkError) in
            try putAttribute("MPTCP_PM_ATTR_TOKEN") { nla_put_u32(message, Int32(MPTCP_PM_ATTR_TOKEN), token) }
            try Self.putEndpoint(MPTCPEndpoint(address: local, flags: backup ? .backup : []), into: message)
            try Self.putEndpoint(MPTCPEndpoint(address: remote, port: remotePort, flags: []), into: message, attribute: Int32(MPTCP_PM_ATTR_ADDR_REMOTE),
                                 withFlags: false)
        }
    }

    // MARK: - Messages

    private func mptcpFamily() throws(NetlinkError) -> Int32 {
        try genericFamily(MPTCP_PM_NAME, hint: "this kernel has no MPTCP (CONFIG_MPTCP); connections stay single-path TCP")
    }

    /// Sends one `mptcp_pm` command and collects what the kernel answers.
    @discardableResult
    private func mptcpRequest(_ command: Int, _ operation: @autoclosure () -> String, flags: Int32 = 0,
                              build: (OpaquePointer) throws(NetlinkError) -> Void) throws(NetlinkError) -> [MPTCPReply] {
        try genericRequest(family: try mptcpFamily(), command: command, version: Int(MPTCP_PM_VER), operation(), flags: flags,
                           build: build, parse: MPTCPReply.init)
    }

    private static func putEndpoint(_ endpoint: MPTCPEndpoint, into message: OpaquePointer, identifierOnly: Bool = false,
                                    attribute: Int32 = Int32(MPTCP_PM_ATTR_ADDR), withFlags: Bool = true) throws(NetlinkError) {
        guard let nest = nla_nest_start(message, attribute | NLA_F_NESTED) else {
            throw NetlinkError.libnl(NLE_NOMEM, "encode MPTCP endpoint")
        }
        if endpoint.id != 0 {
            try putAttribute("MPTCP_PM_ADDR_ATTR_ID") { nla_put_u8(message, Int32(MPTCP_PM_ADDR_ATTR_ID), endpoint.id) }
        }
        if !identifierOnly {
            let family = endpoint.address.family == .inet ? AF_INET : AF_INET6
            try putAttribute("MPTCP_PM_ADDR_ATTR_FAMILY") { nla_put_u16(message, Int32(MPTCP_PM_ADDR_ATTR_FAMILY), UInt16(family)) }
            let type = endpoint.address.family == .inet ? MPTCP_PM_ADDR_ATTR_ADDR4 : MPTCP_PM_ADDR_ATTR_ADDR6
            let bytes = endpoint.address.bytes
            try putAttribute("MPTCP_PM_ADDR_ATTR_ADDR") { bytes.withUnsafeBytes { nla_put(message, Int32(type), Int32($0.count), $0.baseAddress) } }
            if let port = endpoint.port {
                try putAttribute("MPTCP_PM_ADDR_ATTR_PORT") { nla_put_u16(message, Int32(MPTCP_PM_ADDR_ATTR_PORT), port) }
            }
            if let index = endpoint.interfaceIndex {
                try putAttribute("MPTCP_PM_ADDR_ATTR_IF_IDX") { nla_put_s32(message, Int32(MPTCP_PM_ADDR_ATTR_IF_IDX), index) }
            }
            if withFlags {
                try putAttribute("MPTCP_PM_ADDR_ATTR_FLAGS") { nla_put_u32(message, Int32(MPTCP_PM_ADDR_ATTR_FLAGS), endpoint.flags.rawValue) }
            }
        }
        nla_nest_end(message, nest)
    }
}

/// One `mptcp_pm` message from the kernel: an endpoint or the limits.
private struct MPTCPReply {
    var endpoint: MPTCPEndpoint?
    var limits: MPTCPLimits?

    init?(_ message: OpaquePointer) {
        let maximum = Int(MPTCP_PM_ATTR_ADDR_REMOTE) // MPTCP_PM_ATTR_MAX in 6.1 headers
        var attributes = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: maximum + 1)
        guard let header = nlmsg_hdr(message), genlmsg_parse(header, 0, &attributes, Int32(maximum), nil) == 0 else { return nil }
        if let subflows = attributes[Int(MPTCP_PM_ATTR_SUBFLOWS)], let accepted = attributes[Int(MPTCP_PM_ATTR_RCV_ADD_ADDRS)] {
            limits = MPTCPLimits(subflows: nla_get_u32(subflows), addAddressAccepted: nla_get_u32(accepted))
        }
        if let nested = attributes[Int(MPTCP_PM_ATTR_ADDR)] {
            let addressMaximum = Int(MPTCP_PM_ADDR_ATTR_IF_IDX)
            var fields = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: addressMaximum + 1)
            guard nla_parse_nested(&fields, Int32(addressMaximum), nested, nil) == 0 else { return nil }
            func bytes(_ type: Int) -> [UInt8]? {
                guard let field = fields[Int(type)] else { return nil }
                return Array(UnsafeRawBufferPointer(start: nla_data(field), count: Int(nla_len(field))))
            }
            guard let raw = bytes(MPTCP_PM_ADDR_ATTR_ADDR4) ?? bytes(MPTCP_PM_ADDR_ATTR_ADDR6), let address = IPAddress(bytes: raw) else { return nil }
            var endpoint = MPTCPEndpoint(address: address, flags: [])
            if let id = fields[Int(MPTCP_PM_ADDR_ATTR_ID)] { endpoint.id = nla_get_u8(id) }
            if let port = fields[Int(MPTCP_PM_ADDR_ATTR_PORT)], nla_get_u16(port) != 0 { endpoint.port = nla_get_u16(port) }
            if let index = fields[Int(MPTCP_PM_ADDR_ATTR_IF_IDX)], nla_get_s32(index) != 0 { endpoint.interfaceIndex = nla_get_s32(index) }
            if let flags = fields[Int(MPTCP_PM_ADDR_ATTR_FLAGS)] { endpoint.flags = MPTCPEndpoint.Flags(rawValue: nla_get_u32(flags)) }
            self.endpoint = endpoint
        }
        if endpoint == nil && limits == nil { return nil }
    }
}
