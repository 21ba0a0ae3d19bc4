import Netlink

/// The kernel state a path is derived from: links, addresses and the routes that matter.
///
/// A monitor builds it from a full dump and keeps it current from notifications. Only the
/// routes a path depends on are kept (default routes, and routes that cover a resolver),
/// so that a namespace with a full routing table costs no more memory than a laptop's.
public struct NetworkSnapshot: Sendable, Hashable {
    public private(set) var links: [Int32: Link] = [:]
    public private(set) var addresses: [InterfaceAddress.Key: InterfaceAddress] = [:]
    public private(set) var routes: [Route.Key: Route] = [:]
    /// Addresses whose covering routes are kept: the resolvers.
    public private(set) var trackedDestinations: [IPAddress]

    /// A snapshot of the given state (only the routes a path depends on are kept).
    ///
    /// - Parameters:
    ///   - links: The interfaces.
    ///   - addresses: Their addresses.
    ///   - routes: Routes as dumped; default routes and those covering a tracked destination are kept.
    ///   - trackedDestinations: The resolvers' addresses.
    public init(links: [Link] = [], addresses: [InterfaceAddress] = [], routes: [Route] = [], trackedDestinations: [IPAddress] = []) {
        self.trackedDestinations = trackedDestinations
        for link in links { self.links[link.index] = link }
        for address in addresses { self.addresses[address.key] = address }
        replaceRoutes(routes)
    }

    /// What applying a notification did.
    public enum Effect: Sendable, Equatable {
        /// Nothing a path depends on changed.
        case unchanged
        /// The snapshot changed.
        case changed
        /// The snapshot changed, and the kernel may have changed routes without notifying: dump
        /// routes again. It flushes IPv4 routes silently when an interface goes down (asked for
        /// only when the snapshot holds a route through it) or away, and when an IPv4 address goes (the routes that used it as source, and every IPv4
        /// route of an interface left without IPv4 addresses); it marks next hops of multipath
        /// routes dead as their interfaces go down or lose their last IPv4 address, and alive
        /// again as they come up or get one.
        case routesNeedResync
    }

    /// Applies one rtnetlink notification.
    ///
    /// - Parameter notification: A link, address or route added, changed or deleted.
    /// - Returns: Whether anything a path depends on changed, and whether routes must be dumped
    ///   again.
    public mutating func apply(_ notification: NetlinkNotification) -> Effect {
        switch notification {
        case .newLink(let link):
            let old = links.updateValue(link, forKey: link.index)
            if old == link { return .unchanged }
            guard let old else { return .changed }
            // The kernel flushes the routes through an interface that goes down: only those
            // the snapshot holds matter (an interface without any, a veth's far end say, costs no dump).
            if old.isUp && !link.isUp { return hasRoute(through: link.index) ? .routesNeedResync : .changed }
            // Coming back revives dead next hops without a word; only those the snapshot holds matter.
            if (!old.isRunning && link.isRunning) || (!old.isUp && link.isUp), hasDeadNextHop(on: link.index) {
                return .routesNeedResync
            }
            return .changed
        case .deletedLink(let link):
            guard links.removeValue(forKey: link.index) != nil else { return .unchanged }
            addresses = addresses.filter { $0.key.interfaceIndex != link.index }
            return .routesNeedResync
        case .newAddress(let address):
            guard addresses.updateValue(address, forKey: address.key) != address else { return .unchanged }
            // An IPv4 address revives the dead next hops of its interface, silently too.
            return address.family == .inet && hasDeadNextHop(on: address.interfaceIndex) ? .routesNeedResync : .changed
        case .deletedAddress(let address):
            guard addresses.removeValue(forKey: address.key) != nil else { return .unchanged }
            return address.family == .inet ? .routesNeedResync : .changed
        case .newRoute(let route):
            guard isTracked(route) else { return .unchanged }
            let isNew = routes[route.key] == nil
            guard routes.updateValue(route, forKey: route.key) != route else { return .unchanged }
            // IPv6 keeps a route per next hop, and a replace (NLM_F_REPLACE) announces only the
            // new route: the one it replaced, of the same destination and metric, goes silently.
            if isNew, route.family == .inet6, routes.values.contains(where: { other in
                other.key != route.key && other.family == .inet6 && other.table == route.table
                    && other.destination == route.destination && other.source == route.source && other.metric == route.metric
            }) {
                return .routesNeedResync
            }
            return .changed
        case .deletedRoute(let route):
            return routes.removeValue(forKey: route.key) == nil ? .unchanged : .changed
        }
    }

    /// Replaces all links and addresses with a fresh dump.
    ///
    /// - Parameters:
    ///   - links: The interfaces, as dumped.
    ///   - addresses: Their addresses, as dumped.
    public mutating func replaceLinksAndAddresses(links: [Link], addresses: [InterfaceAddress]) {
        self.links = Dictionary(links.map { ($0.index, $0) }, uniquingKeysWith: { $1 })
        self.addresses = Dictionary(addresses.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
    }

    /// Replaces all routes with a fresh dump, keeping those a path depends on.
    ///
    /// - Parameter routes: The routes, as dumped.
    public mutating func replaceRoutes(_ routes: [Route]) {
        var kept: [Route.Key: Route] = [:]
        for route in routes where isTracked(route) { kept[route.key] = route }
        self.routes = kept
    }

    /// Changes the resolver addresses whose routes are kept. Routes must then be dumped again.
    ///
    /// - Parameter destinations: The resolvers' addresses.
    public mutating func setTrackedDestinations(_ destinations: [IPAddress]) {
        trackedDestinations = destinations
    }

    private func hasRoute(through interfaceIndex: Int32) -> Bool {
        routes.values.contains { $0.nextHops.contains { $0.interfaceIndex == interfaceIndex } }
    }

    private func hasDeadNextHop(on interfaceIndex: Int32) -> Bool {
        routes.values.contains { $0.nextHops.contains { $0.interfaceIndex == interfaceIndex && $0.isDead } }
    }

    private func isTracked(_ route: Route) -> Bool {
        if route.table == .local { return false }
        if route.isDefault { return true }
        return trackedDestinations.contains { route.destination.contains($0) }
    }
}
