import CNetlink

/// A route, as in an `RTM_NEWROUTE` message.
public struct Route: Sendable, Hashable {
    /// One next hop of a route.
    public struct NextHop: Sendable, Hashable {
        /// The output interface, if the route names one.
        public var interfaceIndex: Int32?
        /// The gateway, if the route goes through one.
        public var gateway: IPAddress?
        /// Next-hop flags (`RTNH_F_*`): dead, link down, onlink.
        public var flags: UInt32
        /// The weight of the next hop within a multipath route.
        public var weight: UInt8

        public init(interfaceIndex: Int32?, gateway: IPAddress? = nil, flags: UInt32 = 0, weight: UInt8 = 1) {
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.flags = flags
            self.weight = weight
        }

        /// `RTNH_F_LINKDOWN`: the output interface has no carrier.
        public var isLinkDown: Bool { flags & UInt32(RTNH_F_LINKDOWN) != 0 }
        /// `RTNH_F_DEAD`.
        public var isDead: Bool { flags & UInt32(RTNH_F_DEAD) != 0 }
    }

    /// The address family.
    public var family: AddressFamily
    /// The routing table.
    public var table: RouteTable
    /// The destination; length 0 for a default route.
    public var destination: IPPrefix
    /// The source prefix of an IPv6 source-specific route, if any.
    public var source: IPPrefix?
    /// The preferred source address (`RTA_PREFSRC`).
    public var preferredSource: IPAddress?
    /// The metric (`RTA_PRIORITY`); lower is preferred.
    public var metric: UInt32
    /// The route type.
    public var type: RouteType
    /// The scope.
    public var scope: Scope
    /// The routing protocol that installed the route (`RTPROT_*`).
    public var `protocol`: UInt8
    /// The type of service (IPv4 only).
    public var tos: UInt8
    /// The next hops; one for an ordinary route.
    public var nextHops: [NextHop]

    public init(
        family: AddressFamily, table: RouteTable = .main, destination: IPPrefix, source: IPPrefix? = nil,
        preferredSource: IPAddress? = nil, metric: UInt32 = 0, type: RouteType = .unicast, scope: Scope = .universe,
        protocol: UInt8 = UInt8(RTPROT_BOOT), tos: UInt8 = 0, nextHops: [NextHop]
    ) {
        self.family = family
        self.table = table
        self.destination = destination
        self.source = source
        self.preferredSource = preferredSource
        self.metric = metric
        self.type = type
        self.scope = scope
        self.protocol = `protocol`
        self.tos = tos
        self.nextHops = nextHops
    }

    /// True for a unicast route to every address of its family.
    public var isDefault: Bool { destination.length == 0 && type == .unicast }

    /// The gateway of the first next hop.
    public var gateway: IPAddress? { nextHops.first?.gateway }

    /// The output interfaces of all next hops.
    public var interfaceIndices: [Int32] { nextHops.compactMap(\.interfaceIndex) }

    /// The identity the kernel keys routes by: an `RTM_NEWROUTE` with the same key replaces it.
    public struct Key: Hashable, Sendable {
        var family: AddressFamily
        var table: RouteTable
        var destination: IPPrefix
        var source: IPPrefix?
        var tos: UInt8
        var metric: UInt32
        // IPv6 keeps one route per next hop of equal metric.
        var ipv6NextHop: NextHop?
    }

    /// The identity of this route.
    public var key: Key {
        Key(family: family, table: table, destination: destination, source: source, tos: tos, metric: metric,
            ipv6NextHop: family == .inet6 ? nextHops.first.map { NextHop(interfaceIndex: $0.interfaceIndex, gateway: $0.gateway) } : nil)
    }

    /// Reads a libnl `struct rtnl_route`.
    init?(libnl route: OpaquePointer) {
        let family = AddressFamily(rawValue: Int32(rtnl_route_get_family(route)))
        guard family == .inet || family == .inet6 else { return nil }
        let destination = LibnlAddress.prefix(rtnl_route_get_dst(route)) ?? .any(family)
        var source = LibnlAddress.prefix(rtnl_route_get_src(route))
        if source?.length == 0 { source = nil }
        var hops: [NextHop] = []
        let count = rtnl_route_get_nnexthops(route)
        for n in 0..<max(0, count) {
            guard let hop = rtnl_route_nexthop_n(route, n) else { continue }
            let index = rtnl_route_nh_get_ifindex(hop)
            hops.append(NextHop(
                interfaceIndex: index > 0 ? index : nil,
                gateway: LibnlAddress.ipAddress(rtnl_route_nh_get_gateway(hop)),
                flags: rtnl_route_nh_get_flags(hop),
                weight: rtnl_route_nh_get_weight(hop)
            ))
        }
        self.init(
            family: family,
            table: RouteTable(rawValue: rtnl_route_get_table(route)),
            destination: destination,
            source: source,
            preferredSource: LibnlAddress.ipAddress(rtnl_route_get_pref_src(route)),
            metric: rtnl_route_get_priority(route),
            type: RouteType(rawValue: rtnl_route_get_type(route)),
            scope: Scope(rawValue: rtnl_route_get_scope(route)),
            protocol: rtnl_route_get_protocol(route),
            tos: rtnl_route_get_tos(route),
            nextHops: hops
        )
    }
}
