import CNetlink
import CRoamLinux
import Glibc

extension NetlinkSocket {
    /// Every route of `family` (both families by default) in every table of the socket's namespace.
    public func routes(family: AddressFamily = .unspecified) throws(NetlinkError) -> [Route] {
        try dump("dump routes (RTM_GETROUTE)", allocate: { rtnl_route_alloc_cache($0, family.rawValue, 0, $1) }, convert: { Route(libnl: $0) })
    }

    /// Adds a route. With `replace`, an existing route of the same key is replaced.
    public func addRoute(_ route: Route, replace: Bool = false) throws(NetlinkError) {
        let object = try makeRoute(route)
        defer { rtnl_route_put(object) }
        let flags = NLM_F_CREATE | (replace ? NLM_F_REPLACE : NLM_F_EXCL)
        try request("add route \(route.destination) table \(route.table)") { rtnl_route_add($0, object, flags) }
    }

    /// Deletes a route.
    public func deleteRoute(_ route: Route) throws(NetlinkError) {
        let object = try makeRoute(route)
        defer { rtnl_route_put(object) }
        try request("delete route \(route.destination) table \(route.table)") { rtnl_route_delete($0, object, 0) }
    }

    private func makeRoute(_ route: Route) throws(NetlinkError) -> OpaquePointer {
        let object = rtnl_route_alloc()!
        _ = rtnl_route_set_family(object, UInt8(route.family.rawValue))
        let destination = try LibnlAddress.make(route.destination.address, prefixLength: route.destination.length)
        _ = rtnl_route_set_dst(object, destination)
        nl_addr_put(destination)
        if let source = route.preferredSource {
            let address = try LibnlAddress.make(source)
            _ = rtnl_route_set_pref_src(object, address)
            nl_addr_put(address)
        }
        rtnl_route_set_table(object, route.table.rawValue)
        rtnl_route_set_priority(object, route.metric)
        _ = rtnl_route_set_type(object, route.type.rawValue)
        rtnl_route_set_scope(object, route.scope.rawValue)
        rtnl_route_set_protocol(object, route.protocol)
        rtnl_route_set_tos(object, route.tos)
        for hop in route.nextHops {
            let nexthop = rtnl_route_nh_alloc()!
            if let index = hop.interfaceIndex { rtnl_route_nh_set_ifindex(nexthop, index) }
            if let gateway = hop.gateway {
                let address = try LibnlAddress.make(gateway)
                rtnl_route_nh_set_gateway(nexthop, address)
                nl_addr_put(address)
            }
            if hop.weight > 1 { rtnl_route_nh_set_weight(nexthop, hop.weight) }
            rtnl_route_add_nexthop(object, nexthop)
        }
        return object
    }
}

extension Route {
    /// A default route through `gateway` on interface `interfaceIndex`.
    public static func defaultRoute(via gateway: IPAddress, interfaceIndex: Int32, metric: UInt32 = 0, table: RouteTable = .main) -> Route {
        Route(family: gateway.family, table: table, destination: .any(gateway.family), metric: metric,
              nextHops: [NextHop(interfaceIndex: interfaceIndex, gateway: gateway)])
    }

    /// A route to `destination` directly on interface `interfaceIndex` (no gateway, link scope).
    public static func direct(to destination: IPPrefix, interfaceIndex: Int32, metric: UInt32 = 0, table: RouteTable = .main) -> Route {
        Route(family: destination.address.family, table: table, destination: destination, metric: metric,
              scope: destination.address.family == .inet ? .link : .universe,
              nextHops: [NextHop(interfaceIndex: interfaceIndex)])
    }
}
