import Netlink

/// Derives a `NetworkPath` from kernel state under a policy. Pure: the same inputs give the
/// same path, so every rule here is tested from fixtures without root.
public struct PathEvaluator: Sendable {
    public var policy: PathPolicy
    public var classifier: InterfaceClassifier

    /// An evaluator.
    ///
    /// - Parameters:
    ///   - policy: What the path may use.
    ///   - classifier: How interfaces get their type and cost.
    public init(policy: PathPolicy = PathPolicy(validation: .ignore), classifier: InterfaceClassifier = InterfaceClassifier()) {
        self.policy = policy
        self.classifier = classifier
    }

    /// A default route as seen from one interface.
    fileprivate struct DefaultRoute: Equatable {
        var family: AddressFamily
        var isMainTable: Bool
        var metric: UInt32
        var gateway: IPAddress?
    }

    fileprivate struct Candidate {
        var link: Link
        var interface: NetworkInterface
        var isUsable: Bool
        var defaults: [DefaultRoute]
        var prohibition: UnsatisfiedReason?
        /// The default route the interface would be chosen by: main table first, then metric.
        let best: DefaultRoute?
        var hasRoute: Bool { !defaults.isEmpty }

        init(link: Link, interface: NetworkInterface, isUsable: Bool, defaults: [DefaultRoute], prohibition: UnsatisfiedReason?) {
            self.link = link
            self.interface = interface
            self.isUsable = isUsable
            self.defaults = defaults
            self.prohibition = prohibition
            best = defaults.min { ($0.isMainTable ? 0 : 1, $0.metric) < ($1.isMainTable ? 0 : 1, $1.metric) }
        }
    }

    /// The path of `snapshot`.
    ///
    /// - Parameters:
    ///   - snapshot: the namespace's interfaces, addresses and routes.
    ///   - facts: sysfs facts per interface index; missing entries count as none.
    ///   - resolvers: the namespace's resolvers, for `NetworkPath.supportsDNS`.
    /// - Returns: The path: its status, interfaces in preference order, primary, cost and
    ///   families.
    public func path(for snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts] = [:], resolvers: ResolverConfiguration = .init()) -> NetworkPath {
        path(for: snapshot, facts: facts, resolvers: resolvers) { classifier.classify($0, facts: $1) }
    }

    /// The path of `snapshot`, with interfaces classified by `classify` (the classifier's
    /// answer, which a monitor remembers per interface between evaluations).
    func path(for snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts], resolvers: ResolverConfiguration,
              classify: (Link, DeviceFacts) -> InterfaceClassifier.Classification) -> NetworkPath {
        evaluate(snapshot, facts: facts, resolvers: resolvers, connectivity: [:], classify: classify).path
    }

    /// What changed in a snapshot since the evaluation a ``CandidateCache`` holds, as a monitor
    /// knows from the notifications it applied: either some interfaces (their links or
    /// addresses), or anything at all.
    struct Changes: Sendable {
        /// Interfaces whose link or addresses may differ from the cache's.
        private(set) var interfaces: [Int32] = []
        /// Routes, a dump, device facts or anything else: every interface is compared with what
        /// the cache holds.
        private(set) var isEverything: Bool

        /// Nothing known: compare every interface.
        static var everything: Changes { Changes(isEverything: true) }
        /// Nothing changed yet.
        static var none: Changes { Changes(isEverything: false) }

        /// Beyond this many interfaces, comparing them all costs no more than finding them.
        private static let maximumInterfaces = 8

        /// Notes that `index`'s link or addresses may have changed.
        mutating func markChanged(interface index: Int32) {
            guard !isEverything, !interfaces.contains(index) else { return }
            if interfaces.count == Self.maximumInterfaces { markEverythingChanged() } else { interfaces.append(index) }
        }

        /// Notes a change that may concern any interface.
        mutating func markEverythingChanged() {
            isEverything = true
            interfaces = []
        }

        /// Notes what applying `notification` to a snapshot changed (when it changed anything).
        mutating func record(_ notification: NetlinkNotification) {
            switch notification {
            case .newLink(let link), .deletedLink(let link): markChanged(interface: link.index)
            case .newAddress(let address), .deletedAddress(let address): markChanged(interface: address.interfaceIndex)
            case .newRoute, .deletedRoute: markEverythingChanged()
            }
        }
    }

    /// What an evaluation derived for each interface, and from what, so that the next one reuses
    /// every interface whose link, addresses, default routes, classification and connectivity
    /// did not change (a monitor keeps one between evaluations: a change to one interface
    /// derives that interface again, not all of them).
    struct CandidateCache {
        fileprivate struct Inputs: Equatable {
            var link: Link
            var kind: InterfaceClassifier.Classification
            var connectivity: InterfaceConnectivity?
            var addresses: [InterfaceAddress]
            var defaults: [DefaultRoute]
        }
        /// What each candidate was derived from, in the order of `candidates`: by link index.
        fileprivate var inputs: [Inputs] = []
        fileprivate var candidates: [Candidate] = []
        fileprivate var policy: PathPolicy?
        /// Interfaces derived again by the last evaluation (the others were reused).
        fileprivate(set) var derived = 0

        /// The position of `index` in `inputs`, or where it would go.
        fileprivate func position(of index: Int32) -> (at: Int, found: Bool) {
            var low = 0, high = inputs.count
            while low < high {
                let middle = (low + high) / 2
                if inputs[middle].link.index < index { low = middle + 1 } else { high = middle }
            }
            return (low, low < inputs.count && inputs[low].link.index == index)
        }
    }

    /// ``evaluate(_:facts:resolvers:connectivity:cache:changes:classify:)`` from nothing.
    func evaluate(_ snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts], resolvers: ResolverConfiguration,
                  connectivity: [Int32: InterfaceConnectivity],
                  classify: (Link, DeviceFacts) -> InterfaceClassifier.Classification) -> (path: NetworkPath, probeable: [NetworkInterface]) {
        var cache = CandidateCache()
        return evaluate(snapshot, facts: facts, resolvers: resolvers, connectivity: connectivity, cache: &cache, classify: classify)
    }

    /// The path of `snapshot` with each interface's `connectivity`, and the interfaces a
    /// connectivity probe can go out of (up with an address, not loopback, whatever the policy).
    ///
    /// Interfaces that `cache` holds unchanged are reused; the cache is left holding this
    /// evaluation's. `changes` says what changed since the cache's evaluation: the interfaces it
    /// does not name are reused without comparing their links, addresses or routes (their
    /// connectivity is compared); `facts` must then be as the cache's evaluation had them.
    func evaluate(_ snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts], resolvers: ResolverConfiguration,
                  connectivity: [Int32: InterfaceConnectivity], cache: inout CandidateCache, changes: Changes = .everything,
                  classify: (Link, DeviceFacts) -> InterfaceClassifier.Classification) -> (path: NetworkPath, probeable: [NetworkInterface]) {
        var changes = changes
        if cache.policy != policy {
            cache = CandidateCache()
            cache.policy = policy
            changes.markEverythingChanged()
        }
        if changes.isEverything {
            deriveEverything(snapshot, facts: facts, connectivity: connectivity, cache: &cache, classify: classify)
        } else {
            deriveChanged(snapshot, facts: facts, connectivity: connectivity, cache: &cache, changes: changes, classify: classify)
        }
        return select(cache.candidates, snapshot: snapshot, resolvers: resolvers)
    }

    /// Derives every interface of `snapshot`, reusing those whose inputs equal the cache's.
    private func deriveEverything(_ snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts], connectivity: [Int32: InterfaceConnectivity],
                                  cache: inout CandidateCache, classify: (Link, DeviceFacts) -> InterfaceClassifier.Classification) {
        var byInterface: [Int32: [InterfaceAddress]] = [:]
        for address in snapshot.addresses.values where address.isUsable {
            byInterface[address.interfaceIndex, default: []].append(address)
        }
        let defaults = Self.defaultsByInterface(snapshot.routes.values)
        // Both in link index order: the previous evaluation's inputs are walked alongside.
        let previous = cache.inputs, previousCandidates = cache.candidates
        var next = 0
        var inputs: [CandidateCache.Inputs] = [], candidates: [Candidate] = []
        inputs.reserveCapacity(snapshot.links.count)
        candidates.reserveCapacity(snapshot.links.count)
        var derived = 0
        for link in snapshot.links.values.sorted(by: { $0.index < $1.index }) {
            let current = CandidateCache.Inputs(
                link: link, kind: classify(link, facts[link.index] ?? DeviceFacts()), connectivity: connectivity[link.index],
                addresses: (byInterface[link.index] ?? []).sorted(by: Self.addressOrder), defaults: defaults[link.index] ?? [])
            while next < previous.count, previous[next].link.index < link.index { next += 1 }
            if next < previous.count, previous[next].link.index == link.index, previous[next] == current {
                candidates.append(previousCandidates[next])
            } else {
                derived += 1
                candidates.append(derive(current))
            }
            inputs.append(current)
        }
        cache.inputs = inputs
        cache.candidates = candidates
        cache.derived = derived
    }

    /// Derives the interfaces `changes` names, and those whose connectivity changed; reuses the rest.
    private func deriveChanged(_ snapshot: NetworkSnapshot, facts: [Int32: DeviceFacts], connectivity: [Int32: InterfaceConnectivity],
                               cache: inout CandidateCache, changes: Changes,
                               classify: (Link, DeviceFacts) -> InterfaceClassifier.Classification) {
        var derived = 0
        for index in changes.interfaces {
            let (position, found) = cache.position(of: index)
            guard let link = snapshot.links[index] else {
                if found {
                    cache.inputs.remove(at: position)
                    cache.candidates.remove(at: position)
                }
                continue
            }
            var addresses: [InterfaceAddress] = []
            for address in snapshot.addresses.values where address.interfaceIndex == index && address.isUsable { addresses.append(address) }
            addresses.sort(by: Self.addressOrder)
            // Routes did not change (a change of routes is a change of everything): an interface
            // known before keeps its default routes, a new one has those the snapshot holds for it.
            let defaults = found ? cache.inputs[position].defaults : Self.defaultsByInterface(snapshot.routes.values)[index] ?? []
            let current = CandidateCache.Inputs(link: link, kind: classify(link, facts[index] ?? DeviceFacts()), connectivity: connectivity[index],
                                                addresses: addresses, defaults: defaults)
            if found {
                guard cache.inputs[position] != current else { continue }
                cache.inputs[position] = current
                cache.candidates[position] = derive(current)
            } else {
                cache.inputs.insert(current, at: position)
                cache.candidates.insert(derive(current), at: position)
            }
            derived += 1
        }
        // Connectivity is the validator's, not the snapshot's: compared for every interface.
        for position in cache.inputs.indices {
            let index = cache.inputs[position].link.index
            let known = connectivity.isEmpty ? nil : connectivity[index]
            guard known != cache.inputs[position].connectivity else { continue }
            cache.inputs[position].connectivity = known
            cache.candidates[position] = derive(cache.inputs[position])
            derived += 1
        }
        cache.derived = derived
    }

    /// The candidate an interface's inputs make under the policy.
    private func derive(_ inputs: CandidateCache.Inputs) -> Candidate {
        let link = inputs.link, kind = inputs.kind, addresses = inputs.addresses
        var interface = NetworkInterface(
            name: link.name, index: link.index, type: kind.type, isExpensive: kind.isExpensive,
            isConstrained: kind.isConstrained, isUltraConstrained: kind.isUltraConstrained, linkQuality: kind.linkQuality,
            state: link.operationalState, mtu: link.mtu,
            addresses: addresses.map(\.prefix))
        if let known = inputs.connectivity { interface.connectivity = known }
        let hasIPv4 = addresses.contains { $0.family == .inet }
        let hasRoutableIPv6 = addresses.contains { $0.family == .inet6 && !$0.address.isLinkLocal }
        let isUsable = link.isRunning && (link.isLoopback ? !addresses.isEmpty : hasIPv4 || hasRoutableIPv6)
        // A default route helps only with a source address of its family.
        let usableDefaults = link.isLoopback || !isUsable ? [] : inputs.defaults.filter {
            $0.family == .inet ? hasIPv4 : $0.family == .inet6 && hasRoutableIPv6
        }
        return Candidate(link: link, interface: interface, isUsable: isUsable, defaults: usableDefaults,
                         prohibition: policy.prohibition(of: interface))
    }

    /// Each interface's default routes, in key order, so that routes tied on table and metric
    /// come out in the same order whatever order the snapshot learnt them in.
    private static func defaultsByInterface(_ routes: some Collection<Route>) -> [Int32: [DefaultRoute]] {
        var defaults: [Int32: [DefaultRoute]] = [:]
        for route in sortedDefaults(routes) {
            for hop in route.nextHops where !hop.isDead {
                guard let index = hop.interfaceIndex else { continue }
                defaults[index, default: []].append(DefaultRoute(
                    family: route.family, isMainTable: route.table == .main, metric: route.metric, gateway: hop.gateway))
            }
        }
        return defaults
    }

    /// The path the candidates make, and the interfaces a probe can go out of.
    private func select(_ candidates: [Candidate], snapshot: NetworkSnapshot, resolvers: ResolverConfiguration) -> (path: NetworkPath, probeable: [NetworkInterface]) {
        var candidates = candidates
        if policy.validation == .prefer {
            // The connectivity rule depends on the other interfaces: those two ranks below the
            // best permitted one (a portal's while another is validated) are left out.
            let best = ValidationRule.bestRank(among: candidates.lazy.filter { $0.isUsable && $0.prohibition == nil }.map(\.interface))
            for index in candidates.indices where candidates[index].isUsable && candidates[index].prohibition == nil
                && policy.validation.role(of: candidates[index].interface, bestRank: best) == .leftOut {
                candidates[index].prohibition = candidates[index].interface.connectivity.state == .portal ? .portal : .noInternet
            }
        }
        // Indices into `candidates` from here on: a candidate is a link, an interface and their
        // arrays, and copying one costs a retain and a release of each.
        let routed = candidates.indices.filter { candidates[$0].hasRoute }
        let permittedRouted = routed.filter { candidates[$0].prohibition == nil }
        // With connectivity validation, a validated interface is primary before one not checked
        // yet, and both before one behind a portal or without internet, whatever the routes
        // say: Android's default network, iOS's primary while a hotel's Wi-Fi holds it.
        let primaryOrder: (Int, Int) -> Bool = { lhs, rhs in
            let left = candidates[lhs], right = candidates[rhs]
            let l = left.best!, r = right.best!
            return (Self.connectivityRank(left.interface), l.isMainTable ? 0 : 1, l.metric, left.link.index)
                < (Self.connectivityRank(right.interface), r.isMainTable ? 0 : 1, r.metric, right.link.index)
        }
        var primary = permittedRouted.min(by: primaryOrder)

        let loopback = candidates.indices.first { candidates[$0].link.isLoopback && candidates[$0].isUsable && candidates[$0].prohibition == nil }
        var status: PathStatus = .satisfied
        var reason: UnsatisfiedReason?
        if primary == nil {
            if policy.requiredInterfaceType == .loopback, let loopback {
                primary = loopback
            } else {
                if let blocked = routed.min(by: primaryOrder) {
                    reason = candidates[blocked].prohibition
                } else if candidates.contains(where: { $0.isUsable && !$0.link.isLoopback }) {
                    reason = .noRoute
                } else {
                    reason = .noUsableInterface
                }
                let waiting = candidates.contains {
                    !$0.link.isLoopback && $0.link.isUp && $0.link.operationalState == .dormant && $0.prohibition == nil
                }
                status = waiting ? .requiresConnection : .unsatisfied
            }
        }
        let primaryInterface = primary.map { candidates[$0].interface }

        // Sort keys are computed once per element, not once per comparison.
        let primaryIndex = primaryInterface?.index
        var keyed: [(key: (UInt64, UInt64), candidate: Int)] = []
        keyed.reserveCapacity(candidates.count)
        for index in candidates.indices where candidates[index].isUsable && candidates[index].prohibition == nil {
            keyed.append((Self.preference(candidates[index], primaryIndex: primaryIndex), index))
        }
        keyed.sort { $0.key < $1.key }
        let available = keyed.map(\.candidate)
        let satisfied = status == .satisfied
        typealias GatewayKey = (table: Int, metric: UInt32, family: Int, gateway: IPAddress)
        func gatewayOrder(_ lhs: GatewayKey, _ rhs: GatewayKey) -> Bool {
            if (lhs.table, lhs.metric, lhs.family) != (rhs.table, rhs.metric, rhs.family) {
                return (lhs.table, lhs.metric, lhs.family) < (rhs.table, rhs.metric, rhs.family)
            }
            return lhs.gateway < rhs.gateway
        }
        var gateways: [IPAddress] = []
        if satisfied {
            // The permitted interfaces with a route, in preference order (each has an address).
            for index in available where candidates[index].hasRoute {
                let keys = candidates[index].defaults.compactMap { route -> GatewayKey? in
                    route.gateway.map { (route.isMainTable ? 0 : 1, route.metric, route.family == .inet ? 0 : 1, $0) }
                }
                for key in keys.sorted(by: gatewayOrder) where !gateways.contains(key.gateway) { gateways.append(key.gateway) }
            }
        }
        let routesFamily = { (family: AddressFamily) in
            satisfied && permittedRouted.contains { candidates[$0].defaults.contains { $0.family == family } }
        }

        var path = NetworkPath(
            status: status,
            unsatisfiedReason: satisfied ? nil : reason,
            availableInterfaces: available.map { candidates[$0].interface },
            primaryInterface: primaryInterface,
            isExpensive: primaryInterface?.isExpensive ?? false,
            isConstrained: primaryInterface?.isConstrained ?? false,
            isUltraConstrained: primaryInterface?.isUltraConstrained ?? false,
            linkQuality: primaryInterface?.linkQuality ?? .unknown,
            supportsIPv4: routesFamily(.inet),
            supportsIPv6: routesFamily(.inet6),
            supportsDNS: satisfied && Self.reachesResolver(resolvers, snapshot: snapshot, candidates: candidates, permitted: available,
                                                           loopbackUsable: loopback != nil),
            gateways: gateways
        )
        path.connectivity = primaryInterface?.connectivity.state ?? .unknown
        let probeable = candidates.filter { $0.isUsable && !$0.link.isLoopback }.map(\.interface)
        return (path, probeable)
    }

    /// 0 for a validated interface, 1 for one not checked (every interface, without
    /// validation), 2 for one behind a portal or without internet.
    private static func connectivityRank(_ interface: NetworkInterface) -> UInt64 {
        UInt64(ValidationRule.rank(interface.connectivity.state))
    }

    /// The sort key of the preference order: primary first, loopback last, then (with
    /// validation) validated, unchecked, then portal or limited, then free before
    /// costly, then wired, Wi-Fi, cellular, other, then by route metric and index. Packed into
    /// two integers compared in order (no allocation per element).
    private static func preference(_ candidate: Candidate, primaryIndex: Int32?) -> (UInt64, UInt64) {
        let interface = candidate.interface
        let best = candidate.best
        func bit(_ condition: Bool) -> UInt64 { condition ? 1 : 0 }
        var high = bit(candidate.link.index != primaryIndex)
        high = high << 1 | bit(interface.type == .loopback)
        high = high << 1 | bit(!candidate.hasRoute)
        high = high << 2 | connectivityRank(interface)
        high = high << 1 | bit(interface.isExpensive)
        high = high << 1 | bit(interface.isConstrained)
        high = high << 1 | bit(interface.isUltraConstrained)
        high = high << 8 | UInt64(interface.type.preferenceRank)
        high = high << 2 | UInt64(best.map { $0.isMainTable ? 0 : 1 } ?? 2)
        let low = UInt64(best?.metric ?? UInt32.max) << 32 | UInt64(UInt32(bitPattern: candidate.link.index))
        return (high, low)
    }

    /// The default routes of `routes` in key order (family, metric, table, gateway, interface),
    /// so that routes tied on table and metric come out in the same order whatever order they
    /// were learnt in.
    private static func sortedDefaults(_ routes: some Collection<Route>) -> [Route] {
        routes.filter(\.isDefault)
            .map { (key: ($0.family == .inet ? 0 : 1, $0.metric, $0.table.rawValue), gateway: $0.gateway, interface: $0.nextHops.first?.interfaceIndex ?? 0, route: $0) }
            .sorted { lhs, rhs in
                if lhs.key != rhs.key { return lhs.key < rhs.key }
                if lhs.gateway != rhs.gateway {
                    guard let left = lhs.gateway else { return true }
                    guard let right = rhs.gateway else { return false }
                    return left < right
                }
                return lhs.interface < rhs.interface
            }.map(\.route)
    }

    private static func addressOrder(_ lhs: InterfaceAddress, _ rhs: InterfaceAddress) -> Bool {
        (lhs.family == .inet ? 0 : 1, lhs.address.isLinkLocal ? 1 : 0, lhs.prefix) <
            (rhs.family == .inet ? 0 : 1, rhs.address.isLinkLocal ? 1 : 0, rhs.prefix)
    }

    /// True when some resolver is reachable: a local stub through a usable loopback, a scoped
    /// link-local server through its permitted interface, any other through the longest-prefix
    /// main-table route over a running interface, if that interface is permitted. (Routes over
    /// interfaces without carrier are passed over, as the kernel does with
    /// `ignore_routes_with_linkdown`, which is what a connection manager gives you.)
    private static func reachesResolver(_ resolvers: ResolverConfiguration, snapshot: NetworkSnapshot, candidates: [Candidate],
                                        permitted: [Int], loopbackUsable: Bool) -> Bool {
        guard !resolvers.nameservers.isEmpty else { return false }
        // Arrays, not sets: a namespace has a handful of interfaces, and a set costs a hash table.
        let permittedIndices = permitted.map { candidates[$0].link.index }
        let usable = candidates.filter(\.isUsable).map(\.link.index)
        return resolvers.nameservers.contains { server in
            if server.address.isLoopback { return loopbackUsable }
            if let interfaceName = server.interfaceName {
                return permitted.contains { candidates[$0].link.name == interfaceName }
            }
            let covering = snapshot.routes.values
                .filter { $0.table == .main && $0.type == .unicast && $0.destination.contains(server.address)
                    && $0.interfaceIndices.contains(where: usable.contains) }
            guard let best = covering.min(by: { ($1.destination.length, $0.metric) < ($0.destination.length, $1.metric) }) else { return false }
            // Routes tied on prefix and metric share the traffic (IPv6 keeps equal-cost siblings
            // as separate routes): the resolver is reachable if any of them is permitted.
            return covering.contains { route in
                route.destination.length == best.destination.length && route.metric == best.metric
                    && route.interfaceIndices.contains(where: permittedIndices.contains)
            }
        }
    }
}

extension Array where Element == Int {
    fileprivate static func < (lhs: [Int], rhs: [Int]) -> Bool { lhs.lexicographicallyPrecedes(rhs) }
}
