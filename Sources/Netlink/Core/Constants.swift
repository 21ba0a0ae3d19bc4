import CNetlink
import CRoamLinux
import Glibc

/// Interface flags from `SIOCGIFFLAGS` / `ifi_flags`. The corresponding C constants are `IFF_*`.
public struct InterfaceFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `IFF_UP`: administratively up.
    public static let up = InterfaceFlags(rawValue: UInt32(IFF_UP.rawValue))
    /// `IFF_BROADCAST`.
    public static let broadcast = InterfaceFlags(rawValue: UInt32(IFF_BROADCAST.rawValue))
    /// `IFF_LOOPBACK`.
    public static let loopback = InterfaceFlags(rawValue: UInt32(IFF_LOOPBACK.rawValue))
    /// `IFF_POINTOPOINT`.
    public static let pointToPoint = InterfaceFlags(rawValue: UInt32(IFF_POINTOPOINT.rawValue))
    /// `IFF_RUNNING`: operationally up (RFC 2863 state up or unknown).
    public static let running = InterfaceFlags(rawValue: UInt32(IFF_RUNNING.rawValue))
    /// `IFF_NOARP`.
    public static let noARP = InterfaceFlags(rawValue: UInt32(IFF_NOARP.rawValue))
    /// `IFF_MULTICAST`.
    public static let multicast = InterfaceFlags(rawValue: UInt32(IFF_MULTICAST.rawValue))
    /// `IFF_LOWER_UP`: the driver reports carrier.
    public static let lowerUp = InterfaceFlags(rawValue: 0x10000)
    /// `IFF_DORMANT`: the driver is waiting for an external event (802.1X, for example).
    public static let dormant = InterfaceFlags(rawValue: 0x20000)
}

/// The link-layer type of an interface (`ifi_type`). The corresponding C constants are `ARPHRD_*`.
public struct HardwareType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// `ARPHRD_ETHER`: Ethernet, and everything that looks like it (veth, bridges, most Wi-Fi).
    public static let ethernet = HardwareType(rawValue: UInt16(ARPHRD_ETHER))
    /// `ARPHRD_LOOPBACK`.
    public static let loopback = HardwareType(rawValue: UInt16(ARPHRD_LOOPBACK))
    /// `ARPHRD_NONE`: no link layer (TUN devices, some modems).
    public static let none = HardwareType(rawValue: UInt16(ARPHRD_NONE))
    /// `ARPHRD_RAWIP`: raw IP, as cellular modems (qmi_wwan, mhi_net, rmnet) present themselves.
    public static let rawIP = HardwareType(rawValue: UInt16(ARPHRD_RAWIP))
    /// `ARPHRD_PPP`.
    public static let ppp = HardwareType(rawValue: UInt16(ARPHRD_PPP))
    /// `ARPHRD_IEEE80211`: 802.11 frames (monitor interfaces).
    public static let ieee80211 = HardwareType(rawValue: UInt16(ARPHRD_IEEE80211))
    /// `ARPHRD_IEEE80211_RADIOTAP`.
    public static let ieee80211Radiotap = HardwareType(rawValue: UInt16(ARPHRD_IEEE80211_RADIOTAP))

    public var description: String {
        switch self {
        case .ethernet: "ether"
        case .loopback: "loopback"
        case .none: "none"
        case .rawIP: "rawip"
        case .ppp: "ppp"
        default: "arphrd\(rawValue)"
        }
    }
}

/// The scope of an address or route. The corresponding C constants are `RT_SCOPE_*`.
public struct Scope: RawRepresentable, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `RT_SCOPE_UNIVERSE`: global.
    public static let universe = Scope(rawValue: 0)
    /// `RT_SCOPE_SITE`.
    public static let site = Scope(rawValue: 200)
    /// `RT_SCOPE_LINK`.
    public static let link = Scope(rawValue: 253)
    /// `RT_SCOPE_HOST`.
    public static let host = Scope(rawValue: 254)
    /// `RT_SCOPE_NOWHERE`.
    public static let nowhere = Scope(rawValue: 255)
}

/// Flags of an interface address. The corresponding C constants are `IFA_F_*`.
public struct AddressFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `IFA_F_SECONDARY`.
    public static let secondary = AddressFlags(rawValue: UInt32(IFA_F_SECONDARY))
    /// `IFA_F_NODAD`: skip duplicate address detection.
    public static let noDAD = AddressFlags(rawValue: UInt32(IFA_F_NODAD))
    /// `IFA_F_OPTIMISTIC`.
    public static let optimistic = AddressFlags(rawValue: UInt32(IFA_F_OPTIMISTIC))
    /// `IFA_F_DADFAILED`: duplicate address detection failed; the address is unusable.
    public static let dadFailed = AddressFlags(rawValue: UInt32(IFA_F_DADFAILED))
    /// `IFA_F_DEPRECATED`.
    public static let deprecated = AddressFlags(rawValue: UInt32(IFA_F_DEPRECATED))
    /// `IFA_F_TENTATIVE`: duplicate address detection is still running; not yet usable.
    public static let tentative = AddressFlags(rawValue: UInt32(IFA_F_TENTATIVE))
    /// `IFA_F_PERMANENT`.
    public static let permanent = AddressFlags(rawValue: UInt32(IFA_F_PERMANENT))
}

/// A routing table id. The corresponding C constants are `RT_TABLE_*`.
public struct RouteTable: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }
    /// `RT_TABLE_MAIN` (254): the table unbound sockets use.
    public static let main = RouteTable(rawValue: 254)
    /// `RT_TABLE_LOCAL` (255): local and broadcast addresses.
    public static let local = RouteTable(rawValue: 255)
    /// `RT_TABLE_DEFAULT` (253).
    public static let `default` = RouteTable(rawValue: 253)

    public var description: String {
        switch self {
        case .main: "main"
        case .local: "local"
        case .default: "default"
        default: "\(rawValue)"
        }
    }
}

/// The type of a route. The corresponding C constants are `RTN_*`.
public struct RouteType: RawRepresentable, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `RTN_UNICAST`: a gateway or direct route.
    public static let unicast = RouteType(rawValue: UInt8(RTN_UNICAST))
    /// `RTN_LOCAL`.
    public static let local = RouteType(rawValue: UInt8(RTN_LOCAL))
    /// `RTN_BROADCAST`.
    public static let broadcast = RouteType(rawValue: UInt8(RTN_BROADCAST))
    /// `RTN_MULTICAST`.
    public static let multicast = RouteType(rawValue: UInt8(RTN_MULTICAST))
    /// `RTN_BLACKHOLE`.
    public static let blackhole = RouteType(rawValue: UInt8(RTN_BLACKHOLE))
    /// `RTN_UNREACHABLE`.
    public static let unreachable = RouteType(rawValue: UInt8(RTN_UNREACHABLE))
    /// `RTN_PROHIBIT`.
    public static let prohibit = RouteType(rawValue: UInt8(RTN_PROHIBIT))
}

/// An rtnetlink multicast group. The corresponding C constants are `RTNLGRP_*`.
public struct MulticastGroup: RawRepresentable, Sendable, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    /// `RTNLGRP_LINK`: interfaces appear, change and go.
    public static let link = MulticastGroup(rawValue: Int32(RTNLGRP_LINK.rawValue))
    /// `RTNLGRP_IPV4_IFADDR`.
    public static let ipv4Address = MulticastGroup(rawValue: Int32(RTNLGRP_IPV4_IFADDR.rawValue))
    /// `RTNLGRP_IPV6_IFADDR`.
    public static let ipv6Address = MulticastGroup(rawValue: Int32(RTNLGRP_IPV6_IFADDR.rawValue))
    /// `RTNLGRP_IPV4_ROUTE`.
    public static let ipv4Route = MulticastGroup(rawValue: Int32(RTNLGRP_IPV4_ROUTE.rawValue))
    /// `RTNLGRP_IPV6_ROUTE`.
    public static let ipv6Route = MulticastGroup(rawValue: Int32(RTNLGRP_IPV6_ROUTE.rawValue))
    /// `RTNLGRP_IPV4_RULE`.
    public static let ipv4Rule = MulticastGroup(rawValue: Int32(RTNLGRP_IPV4_RULE.rawValue))
    /// `RTNLGRP_IPV6_RULE`.
    public static let ipv6Rule = MulticastGroup(rawValue: Int32(RTNLGRP_IPV6_RULE.rawValue))
}
