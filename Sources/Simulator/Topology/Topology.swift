import Glibc
import Netlink
import ScenarioModel

/// A scenario's network, built in the kernel from a ``TopologyPlan``: namespaces, veth pairs,
/// addresses, routes, rules and alias tags. ``teardown()`` removes all of it; nothing is ever
/// created in the caller's own namespace.
package final class Topology {
    package let plan: TopologyPlan
    package let control: any NetworkControl
    private var namespaces: [String: NetworkNamespace] = [:]
    private var sockets: [String: any RouteSocket] = [:]
    private var isTornDown = false

    /// The sysctls every node gets: forwarding (so nodes reach nodes they share no link with),
    /// routes over interfaces without carrier ignored (as a connection manager would drop them,
    /// so traffic moves to the next link at once), no duplicate address detection (addresses
    /// are Roam's own and usable at once), and an IPv4 address that goes leaving the others of
    /// its subnet in place (a renumbered phone's new one is added before its old one goes).
    package static let nodeSysctls: KeyValuePairs<String, String> = [
        "net.ipv4.ip_forward": "1",
        "net.ipv6.conf.all.forwarding": "1",
        "net.ipv4.conf.all.ignore_routes_with_linkdown": "1",
        "net.ipv4.conf.default.ignore_routes_with_linkdown": "1",
        "net.ipv6.conf.all.ignore_routes_with_linkdown": "1",
        "net.ipv6.conf.default.ignore_routes_with_linkdown": "1",
        "net.ipv6.conf.all.accept_dad": "0",
        "net.ipv6.conf.default.accept_dad": "0",
        "net.ipv4.conf.all.promote_secondaries": "1",
        "net.ipv4.conf.default.promote_secondaries": "1",
    ]

    private init(plan: TopologyPlan, control: any NetworkControl) {
        self.plan = plan
        self.control = control
    }

    /// Builds `plan`, with each link's interfaces made by `backend` (veth pairs for netem, when
    /// none is given). On failure, whatever was built is removed before the error is thrown.
    package static func build(_ plan: TopologyPlan, backend: (any LinkBackend)? = nil) throws(SimulatorError) -> Topology {
        try build(plan, backend: backend, control: KernelNetworkControl())
    }

    /// Builds `plan` through `control`: the kernel, or a recording of what would be asked of it.
    package static func build(_ plan: TopologyPlan, backend: (any LinkBackend)?, control: any NetworkControl) throws(SimulatorError) -> Topology {
        let topology = Topology(plan: plan, control: control)
        do throws(SimulatorError) {
            try control.register(run: plan.runID)
            try topology.createNodes()
            let backend = backend ?? NetemBackend(plan: plan, seed: 0)
            for link in plan.links {
                try backend.createInterfaces(for: link, in: topology)
            }
            try topology.configureInterfaces()
            return topology
        } catch {
            topology.teardown()
            throw error
        }
    }

    /// The namespace of `node`.
    package func namespace(of node: String) -> NetworkNamespace? { namespaces[node] }

    /// A netlink socket inside `node`'s namespace.
    package func socket(of node: String) -> NetlinkSocket? { sockets[node] as? NetlinkSocket }

    /// The route socket inside `node`'s namespace, real or recording.
    package func routeSocket(of node: String) -> (any RouteSocket)? { sockets[node] }

    /// Removes every namespace of the run (and with them their interfaces) and its registration.
    /// Safe to call more than once.
    package func teardown() {
        guard !isTornDown else { return }
        isTornDown = true
        sockets = [:]
        for node in plan.nodes {
            control.deleteNamespace(named: node.namespaceName)
        }
        namespaces = [:]
        control.unregister(run: plan.runID)
    }

    deinit {
        teardown()
    }

    private func createNodes() throws(SimulatorError) {
        for node in plan.nodes {
            do throws(NetlinkError) {
                let namespace = try control.createNamespace(named: node.namespaceName)
                namespaces[node.name] = namespace
                let socket = try control.routeSocket(in: namespace)
                sockets[node.name] = socket
                if let lo = try socket.link(named: "lo") {
                    try socket.setLink(index: lo.index, up: true, alias: nil, mtu: nil, name: nil)
                    if node.hasServiceAddresses {
                        try socket.addAddress(IPPrefix(node.serviceIPv4, length: 32), interfaceIndex: lo.index, skipDAD: true)
                        try socket.addAddress(IPPrefix(node.serviceIPv6, length: 128), interfaceIndex: lo.index, skipDAD: true)
                    }
                }
                try control.setSysctls(Self.nodeSysctls, in: namespace)
            } catch {
                throw SimulatorError("create node '\(node.name)' (namespace \(node.namespaceName))", error)
            }
        }
    }

    private func configureInterfaces() throws(SimulatorError) {
        // Everything up first: a gateway route needs its subnet reachable, and with
        // ignore_routes_with_linkdown that means the peer's end must be up too. A phone that
        // joins its network later starts with its interface down.
        for node in plan.nodes {
            guard let socket = sockets[node.name] else { continue }
            for interface in node.interfaces {
                do throws(NetlinkError) {
                    guard let link = try socket.link(named: interface.name) else {
                        throw NetlinkError(.errno(ENODEV), operation: "find \(interface.name) in \(node.namespaceName)")
                    }
                    indices[node.name, default: [:]][interface.name] = link.index
                    try socket.setLink(index: link.index, up: interface.joinedAtStart, alias: interface.alias, mtu: nil, name: nil)
                } catch {
                    throw SimulatorError("bring up \(interface.name) in node '\(node.name)'", error)
                }
            }
        }
        for node in plan.nodes {
            for interface in node.interfaces where interface.joinedAtStart {
                try address(interface, of: node)
            }
        }
        for node in plan.nodes {
            for interface in node.interfaces where interface.joinedAtStart {
                try route(interface, of: node)
            }
        }
    }

    /// The index of each node's interfaces, by name.
    private var indices: [String: [String: Int32]] = [:]

    private func address(_ interface: TopologyPlan.Interface, of node: TopologyPlan.Node) throws(SimulatorError) {
        guard let socket = sockets[node.name], let index = indices[node.name]?[interface.name] else { return }
        do throws(NetlinkError) {
            for prefix in interface.addresses { try socket.addAddress(prefix, interfaceIndex: index, skipDAD: true) }
        } catch {
            throw SimulatorError("address \(interface.name) in node '\(node.name)'", error)
        }
    }

    private func route(_ interface: TopologyPlan.Interface, of node: TopologyPlan.Node, again forced: Bool = false) throws(SimulatorError) {
        guard let socket = sockets[node.name], let index = indices[node.name]?[interface.name] else { return }
        // A direct link's routes are added once; a network's may be added again when a phone
        // rejoins, and any may be after the netem backend's carrier loss (below).
        let again = forced || interface.routing != .direct
        do throws(NetlinkError) {
            for (address, peer) in [(interface.ipv4, interface.peerIPv4), (interface.ipv6, interface.peerIPv6)]
            where interface.families.contains(address.address.family == .inet ? .ipv4 : .ipv6) {
                let family = address.address.family
                let subnet = IPPrefix(address.address.masked(to: address.length), length: address.length)
                switch interface.routing {
                case .direct, .phone:
                    try socket.addRoute(.defaultRoute(via: peer, interfaceIndex: index, metric: interface.metric), replace: again)
                    if interface.routing == .direct {
                        // Each link is a network of its own: when it loses carrier, its subnet
                        // is unreachable rather than routed over another link (a cellular network
                        // never delivers to a Wi-Fi address).
                        try socket.addRoute(Route(family: family, destination: subnet, metric: UInt32.max, type: .unreachable, nextHops: []), replace: again)
                    }
                    try socket.addRoute(.direct(to: subnet, interfaceIndex: index, table: interface.table), replace: again)
                    try socket.addRoute(.defaultRoute(via: peer, interfaceIndex: index, table: interface.table), replace: again)
                    try socket.addRoute(Route(family: family, table: interface.table, destination: .any(family),
                                              metric: UInt32.max, type: .unreachable, nextHops: []), replace: again)
                    if interface.routing == .direct, let peerNode = plan.node(interface.peer) {
                        let service = family == .inet ? peerNode.serviceIPv4 : peerNode.serviceIPv6
                        try socket.addRoute(Route(family: family, destination: IPPrefix(service, length: service.bitWidth),
                                                  metric: interface.metric, nextHops: [.init(interfaceIndex: index, gateway: peer)]), replace: again)
                    }
                    let rule = RoutingRule(family: family, priority: interface.rulePriority,
                                           source: IPPrefix(address.address, length: address.address.bitWidth), table: interface.table)
                    do throws(NetlinkError) {
                        try socket.addRule(rule)
                    } catch where again && error.isAlreadyExists {
                        // A phone that joins again keeps the rule of its address.
                    }
                case .gatewayAccess:
                    try socket.addRoute(.direct(to: IPPrefix(peer, length: peer.bitWidth), interfaceIndex: index), replace: again)
                case .upstream:
                    try socket.addRoute(.defaultRoute(via: peer, interfaceIndex: index, metric: interface.metric), replace: again)
                case .transit(let behind):
                    for prefix in behind where prefix.address.family == family {
                        try socket.addRoute(Route(family: family, destination: prefix, metric: interface.metric,
                                                  nextHops: [.init(interfaceIndex: index, gateway: peer)]), replace: again)
                    }
                }
            }
        } catch {
            throw SimulatorError("route \(interface.name) in node '\(node.name)'", error)
        }
    }

    /// How many times each access link was renumbered.
    private var generations: [String: Int] = [:]
    /// Each phone interface's addresses now, where a renumbering changed them.
    private var renumbered: [String: TopologyPlan.Interface] = [:]

    /// The phone's interface on access link `name` as it is now.
    private func current(_ interface: TopologyPlan.Interface) -> TopologyPlan.Interface { renumbered[interface.link] ?? interface }

    /// The network of access link `name` hands its phone new addresses (the next of its pool):
    /// the new ones come with their routes, then the old ones go (connections bound to them
    /// break), and the gateway routes to the new ones instead. The interface is never without an
    /// address or a default route in between (as a connection manager applying a new lease
    /// adds before it removes), so the phone's path only loses the old addresses. Returns the
    /// new addresses.
    @discardableResult
    package func renumber(link name: String) throws(SimulatorError) -> [IPPrefix] {
        guard let link = plan.link(name), let node = plan.node(link.first), let gatewayNode = plan.node(link.second),
              let planned = node.interfaces.first(where: { $0.link == name }), planned.routing == .phone,
              let gatewaySide = gatewayNode.interfaces.first(where: { $0.link == name }),
              let socket = sockets[node.name], let index = indices[node.name]?[planned.name],
              let gatewaySocket = sockets[gatewayNode.name], let gatewayIndex = indices[gatewayNode.name]?[gatewaySide.name] else {
            throw SimulatorError(.invalidScenario, "'\(name)' is not a phone's access to a network")
        }
        let old = current(planned)
        let generation = (generations[name] ?? 0) + 1
        generations[name] = generation
        var next = old
        next.ipv4 = TopologyPlan.renumbered(planned.ipv4, generation: generation)
        next.ipv6 = TopologyPlan.renumbered(planned.ipv6, generation: generation)
        renumbered[name] = next
        let joined = (try? socket.link(named: planned.name))??.flags.contains(.up) ?? true
        let families = [IPFamily.ipv4, .ipv6].compactMap { family in old.address(family).flatMap { before in next.address(family).map { (before, $0) } } }
        do throws(NetlinkError) {
            for (before, after) in families {
                // The gateway: a host route to the new address, none to the old.
                try gatewaySocket.addRoute(.direct(to: IPPrefix(after.address, length: after.address.bitWidth), interfaceIndex: gatewayIndex), replace: true)
                try? gatewaySocket.deleteRoute(.direct(to: IPPrefix(before.address, length: before.address.bitWidth), interfaceIndex: gatewayIndex))
                if joined { try socket.addAddress(after, interfaceIndex: index, skipDAD: true) }
            }
        } catch {
            throw SimulatorError("renumber \(planned.name) in node '\(node.name)'", error)
        }
        guard joined else { return next.addresses }
        try route(next, of: node)
        do throws(NetlinkError) {
            for (before, _) in families {
                // The new IPv4 address is promoted in the old one's place (promote_secondaries).
                do throws(NetlinkError) {
                    try socket.deleteAddress(before, interfaceIndex: index)
                } catch where error.errno == EADDRNOTAVAIL {}
                try? socket.deleteRule(RoutingRule(family: before.address.family, priority: planned.rulePriority,
                                                   source: IPPrefix(before.address, length: before.address.bitWidth), table: planned.table))
            }
        } catch {
            throw SimulatorError("renumber \(planned.name) in node '\(node.name)'", error)
        }
        return next.addresses
    }

    /// The second end of link `name` is up again after the netem backend took it down to cut the
    /// first end's carrier: the kernel flushed its IPv6 addresses and every route through it
    /// (a gateway's host routes to its phone, a server's routes back), which come back as they
    /// were, a gateway's to its phone's addresses of the moment (after a renumbering too).
    /// Without this a roam (a short carrier loss on an access link) left the gateway unable to
    /// reach its phone at all.
    package func restoreSecondEnd(link name: String) throws(SimulatorError) {
        guard let link = plan.link(name), let node = plan.node(link.second),
              var interface = node.interfaces.first(where: { $0.link == name }),
              let socket = sockets[node.name], let index = indices[node.name]?[interface.name] else { return }
        if let phone = renumbered[name] {
            interface.peerIPv4 = phone.ipv4.address
            interface.peerIPv6 = phone.ipv6.address
        }
        do throws(NetlinkError) {
            for prefix in interface.addresses {
                do throws(NetlinkError) {
                    try socket.addAddress(prefix, interfaceIndex: index, skipDAD: true)
                } catch where error.isAlreadyExists {}
            }
        } catch {
            throw SimulatorError("address \(interface.name) in node '\(node.name)' again", error)
        }
        try route(interface, of: node, again: true)
    }

    /// A phone joins (`true`) or leaves (`false`) the network of its access link `link`: its
    /// interface comes up with the network's addresses and routes, or goes down with its
    /// addresses removed (the kernel drops the routes through it).
    package func setMembership(_ joined: Bool, link name: String) throws(SimulatorError) {
        guard let link = plan.link(name), let node = plan.node(link.first),
              let planned = node.interfaces.first(where: { $0.link == name }), planned.routing == .phone,
              let socket = sockets[node.name], let index = indices[node.name]?[planned.name] else {
            throw SimulatorError(.invalidScenario, "'\(name)' is not a phone's access to a network")
        }
        let interface = current(planned)
        do throws(NetlinkError) {
            if joined {
                try socket.setLink(index: index, up: true, alias: nil, mtu: nil, name: nil)
                for prefix in interface.addresses {
                    do throws(NetlinkError) {
                        try socket.addAddress(prefix, interfaceIndex: index, skipDAD: true)
                    } catch where error.isAlreadyExists {}
                }
            } else {
                for prefix in interface.addresses {
                    do throws(NetlinkError) {
                        try socket.deleteAddress(prefix, interfaceIndex: index)
                    } catch where error.errno == EADDRNOTAVAIL {}
                    // The rule of the address goes with it: kept, it would send what the phone
                    // sends from the address when it joins again to a table whose routes are not
                    // back yet (its unreachable default), where the main table already reaches
                    // the network (a connectivity probe's first lookup was lost to that).
                    if !prefix.address.isLinkLocal {
                        try? socket.deleteRule(RoutingRule(family: prefix.address.family, priority: interface.rulePriority,
                                                           source: IPPrefix(prefix.address, length: prefix.address.bitWidth), table: interface.table))
                    }
                }
                try socket.setLink(index: index, up: false, alias: nil, mtu: nil, name: nil)
            }
        } catch {
            throw SimulatorError("\(joined ? "join" : "leave") network over \(interface.name) in node '\(node.name)'", error)
        }
        if joined { try route(interface, of: node) }
    }
}

extension IPAddress {
    /// The address with every bit past `length` cleared: the network of a prefix.
    package func masked(to length: Int) -> IPAddress {
        var bytes = self.bytes
        for index in bytes.indices {
            let bitsHere = max(0, min(8, length - index * 8))
            bytes[index] &= bitsHere == 0 ? 0 : UInt8(0xff) << (8 - bitsHere)
        }
        return IPAddress(bytes: bytes)!
    }
}
