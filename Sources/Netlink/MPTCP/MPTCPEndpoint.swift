import CRoamLinux

/// An MPTCP endpoint of the in-kernel path manager: a local address that MPTCP connections of
/// the namespace may use for extra subflows or announce to their peers (`ip mptcp endpoint`).
public struct MPTCPEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// What the path manager does with an endpoint (`MPTCP_PM_ADDR_FLAG_*`).
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Announce the address to the peer (ADD_ADDR), so that the peer may open subflows to it.
        public static let signal = Flags(rawValue: UInt32(MPTCP_PM_ADDR_FLAG_SIGNAL))
        /// Open a subflow from this address to the peer.
        public static let subflow = Flags(rawValue: UInt32(MPTCP_PM_ADDR_FLAG_SUBFLOW))
        /// Subflows from this address carry data only when no regular subflow can.
        public static let backup = Flags(rawValue: UInt32(MPTCP_PM_ADDR_FLAG_BACKUP))
        /// A subflow to every address the peer announced.
        public static let fullmesh = Flags(rawValue: UInt32(MPTCP_PM_ADDR_FLAG_FULLMESH))
        /// Created by the kernel for a subflow the peer opened; not configured by anyone.
        public static let implicit = Flags(rawValue: UInt32(MPTCP_PM_ADDR_FLAG_IMPLICIT))

        var names: [String] {
            [(Flags.signal, "signal"), (.subflow, "subflow"), (.backup, "backup"), (.fullmesh, "fullmesh"), (.implicit, "implicit")]
                .filter { contains($0.0) }.map(\.1)
        }
    }

    /// The endpoint's identifier, unique in the namespace (1...255); 0 asks the kernel for one.
    public var id: UInt8
    public var address: IPAddress
    /// The port to announce, for `signal` endpoints; nil for any.
    public var port: UInt16?
    /// The interface subflows from this endpoint are bound to; nil for whichever the routes pick.
    public var interfaceIndex: Int32?
    public var flags: Flags

    public init(id: UInt8 = 0, address: IPAddress, port: UInt16? = nil, interfaceIndex: Int32? = nil, flags: Flags) {
        self.id = id
        self.address = address
        self.port = port
        self.interfaceIndex = interfaceIndex
        self.flags = flags
    }

    public var description: String {
        var text = "\(address)"
        if let port { text += " port \(port)" }
        text += " id \(id) " + flags.names.joined(separator: " ")
        if let interfaceIndex { text += " dev #\(interfaceIndex)" }
        return text
    }
}

/// The in-kernel path manager's limits for each MPTCP connection of a namespace
/// (`ip mptcp limits`).
public struct MPTCPLimits: Sendable, Hashable {
    /// How many extra subflows a connection may have (the kernel allows at most 8).
    public var subflows: UInt32
    /// How many addresses announced by the peer a connection accepts (at most 8).
    public var addAddressAccepted: UInt32

    public init(subflows: UInt32, addAddressAccepted: UInt32) {
        self.subflows = subflows
        self.addAddressAccepted = addAddressAccepted
    }

    /// The kernel's ceiling for both (`MPTCP_PM_ADDR_MAX`).
    public static let maximum: UInt32 = 8
}
