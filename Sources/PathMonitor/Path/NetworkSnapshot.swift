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
        /// The snapshot changed, and the kernel may have removed routes without notifying
        /// (it flushes IPv4 routes silently when an interface goes down or away): dump routes again.
        case routesNeedResync
    }

    /// Applies one rtnetlink notification.
    public mutating func apply(_ notification: NetlinkNotification) -> Effect {
        switch notification {
        case .newLink(let link):
            let old = links.updateValue(link, forKey: link.index)
            if old == link { return .unchanged }
            if let old, old.isUp && !link.isUp { return .routesNeedResync }
            return .changed
        case .deletedLink(let link):
            guard links.removeValue(forKey: link.index) != nil else { return .unchanged }
            addresses = addresses.filter { $0.key.interfaceIndex != link.index }
            return .routesNeedResync
        case .newAddress(let address):
            return addresses.updateValue(address, forKey: address.key) == address ? .unchanged : .changed
        case .deletedAddress(let address):
            return addresses.removeValue(forKey: address.key) == nil ? .unchanged : .changed
        case .newRoute(let route):
            guard isTracked(route) else { return .unchanged }
            return routes.updateValue(route, forKey: route.key) == route ? .unchanged : .changed
        case .deletedRoute(let route):
            return routes.removeValue(forKey: route.key) == nil ? .unchanged : .changed
        }
    }

    /// Replaces all links and addresses with a fresh dump.
    public mutating func replaceLinksAndAddresses(links: [Link], addresses: [InterfaceAddress]) {
        self.links = Dictionary(links.map { ($0.index, $0) }, uniquingKeysWith: { $1 })
        self.addresses = Dictionary(addresses.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
    }

    /// Replaces all routes with a fresh dump, keeping those a path depends on.
    public mutating func replaceRoutes(_ routes: [Route]) {
        var kept: [Route.Key: Route] = [:]
        for route in routes where isTracked(route) { kept[route.key] = route }
        self.routes = kept
    }

    /// Changes the resolver addresses whose routes are kept. Routes must then be dumped again.
    public mutating func setTrackedDestinations(_ destinations: [IPAddress]) {
        trackedDestinations = destinations
    }

    private func isTracked(_ route: Route) -> Bool {
        if route.table == .local { return false }
        if route.isDefault { return true }
        return trackedDestinations.contains { route.destination.contains($0) }
    }
}
