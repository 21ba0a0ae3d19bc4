import Netlink
import PathMonitor
import ScenarioModel

/// Everything a scenario's network is made of, computed from the scenario alone: namespace
/// names, interfaces, addresses, routes and rules. Pure, so that addressing is tested without
/// root; ``Topology`` makes it real.
///
/// - Each node is a namespace `roam-RUN-NODE`.
/// - Link number `i` (in file order) is a veth pair, its end in each node named after the link,
///   with `198.18.0.0/15` split into /24s (`198.18.0.0/24` for link 0, `198.18.1.0/24` for link 1,
///   ..., 511 links at most): the first node of `between` gets `.1`, the second `.2`. IPv6 the same
///   way under `fd72:6f61:6d00::/48` ("roam"): `fd72:6f61:6d00:i::1/64` and `::2`. A scenario with
///   more links or nodes than that plan holds takes the dense one (``AddressPlan/dense``).
/// - Every node has a default route over each of its links through the peer, metric 100 for its
///   first-listed link, 110 for the next, and so on, so the first-listed link carries traffic
///   while it is up. Forwarding is on, so nodes reach nodes they share no link with.
/// - Source-based policy routing: table `1000 + i` holds the link's subnet and a default route
///   over it, and a rule (priority `1000 + i`) sends traffic from the interface's addresses
///   there, so binding to an interface's address picks its link.
/// - Each interface's alias carries its PathMonitor tags: `roam:type=wifi,expensive=false,...`,
///   with the link quality its conditions grade (``LinkQuality/init(grading:_:)``); the timeline
///   retags both ends as that grade changes.
/// - Each node also has a service address on its loopback, `198.19.255.N/32` and
///   `fd72:6f61:6d00:ffff::N/128` (N = 1 for the first node): the address a server has on the
///   Internet, reachable over whichever link is up. Workloads connect to it, so that a new
///   connection after Wi-Fi goes down takes the cellular link, as on a phone. A phone in
///   networks has none (``Node/hasServiceAddresses``).
/// - A link's own addresses live only on that link, as an access network's addresses do behind
///   its router: the link's policy table ends in an `unreachable` default, so that traffic from
///   a Wi-Fi address does not leak out of the cellular interface when the Wi-Fi has no carrier.
package struct TopologyPlan: Sendable, Hashable {
    package struct Interface: Sendable, Hashable {
        /// The interface name: the link's name.
        package var name: String
        package var link: String
        /// The node at the other end.
        package var peer: String
        package var ipv4: IPPrefix
        package var ipv6: IPPrefix
        package var peerIPv4: IPAddress
        package var peerIPv6: IPAddress
        /// The alias, with PathMonitor tags.
        package var alias: String
        /// Metric of this interface's default route in the main table.
        package var metric: UInt32
        /// The table and rule priority of this interface's policy routing.
        package var table: RouteTable
        package var rulePriority: UInt32
        /// The families the link carries: the interface gets addresses and routes only for
        /// these (an IPv4-only Wi-Fi has only its link-local IPv6 address).
        package var families: Set<IPFamily> = [.ipv4, .ipv6]
        /// How the interface is routed: a direct link's, or its part in a network.
        package var routing: Routing = .direct
        /// Addresses beyond ``ipv4`` and ``ipv6`` (a gateway's link-local `fe80::1`).
        package var extraAddresses: [IPPrefix] = []
        /// Whether the interface is up and addressed when the run starts (a phone that joins
        /// its network later starts with it down).
        package var joinedAtStart = true

        /// Every address the interface gets: its own of each family it carries, then the extra ones.
        package var addresses: [IPPrefix] {
            [address(.ipv4), address(.ipv6)].compactMap { $0 } + extraAddresses
        }

        /// The interface's address of `family`, if the link carries it.
        package func address(_ family: IPFamily) -> IPPrefix? {
            families.contains(family) ? (family == .ipv4 ? ipv4 : ipv6) : nil
        }
    }

    /// How an interface is routed.
    package enum Routing: Sendable, Hashable {
        /// A direct link: a default route over it (by metric), its subnet, a policy table and
        /// a route to the peer's service addresses.
        case direct
        /// A phone's access to a network: a default route through the gateway (by metric) and a
        /// policy table for its addresses.
        case phone
        /// A gateway's side of a phone's access: a host route to the phone's addresses.
        case gatewayAccess
        /// Toward the internet (a gateway's uplink, a server's link): the default route.
        case upstream
        /// The internet's side of an uplink or a server's link: routes to what lies behind it.
        case transit(behind: [IPPrefix])
    }

    package struct Node: Sendable, Hashable {
        package var name: String
        package var role: NodeRole = .host
        package var namespaceName: String
        package var interfaces: [Interface]
        /// The addresses on the node's loopback.
        package var serviceIPv4: IPAddress
        package var serviceIPv6: IPAddress

        /// Whether the node has its service addresses: every node but a network's member whose
        /// every interface is a network's access (a phone in networks). Such a phone's addresses
        /// are the ones its networks give, as a real phone's are: another IPv4 address on its
        /// loopback would make it look IPv4-capable on an IPv6-only network (`getaddrinfo`'s
        /// `AI_ADDRCONFIG` counts every IPv4 address but 127.0.0.1), and nothing could reach it
        /// behind its networks' gateways.
        package var hasServiceAddresses: Bool {
            interfaces.isEmpty || !interfaces.allSatisfy { $0.routing == .phone }
        }
    }

    package struct Link: Sendable, Hashable {
        package var name: String
        /// The nodes in `between` order.
        package var first: String
        package var second: String
        /// The link's interface in the first node and in the second.
        package var firstInterface: String
        package var secondInterface: String
        /// What both interfaces' tags say of the link, but for its quality.
        package var attributes: InterfaceAttributes
        /// The cellular radio's RRC states (userspace backend); the phone is `first`.
        package var radio: RadioStates?

        /// The link's interface in `node`.
        package func interface(in node: String) -> String { node == first ? firstInterface : secondInterface }

        /// The alias both interfaces carry while the link's conditions grade `quality`.
        package func alias(quality: LinkQuality) -> String {
            var attributes = attributes
            attributes.linkQuality = quality
            return InterfaceTag.alias(for: attributes)
        }
    }

    /// How `198.18.0.0/15` is shared between links and nodes' service addresses.
    package enum AddressPlan: Sendable, Hashable {
        /// A /24 a link (`198.18.i.0/24` for link i, 511 at most), the last /24 the nodes'
        /// service addresses (`198.19.255.N`, 254 at most): addresses a reader picks out at a
        /// glance, and every scenario within it has always had them.
        case wide
        /// For a scenario with more links or nodes than ``wide`` holds (a crowd of phones with
        /// two links each): a /28 a link (`198.18.0.0/28` for link 0, `198.18.0.16/28` for link
        /// 1, ..., 8,128 at most, up to `198.19.251.255`), and `198.19.252.0/22` the nodes'
        /// service addresses (`198.19.252.1` for the first node, 1,022 at most). IPv6 is the
        /// same in both: a /64 a link, the node's number in `ffff::N`.
        case dense

        /// The plan for `links` links and `nodes` nodes, within the dense plan's bounds: the wide
        /// one where they fit it.
        package static func holding(links: Int, nodes: Int) -> AddressPlan {
            links <= wide.maximumLinks && nodes <= wide.maximumNodes ? .wide : .dense
        }

        package var maximumLinks: Int { self == .wide ? 511 : 508 * 256 / 16 }
        package var maximumNodes: Int { self == .wide ? 254 : 1022 }

        /// Link `index`'s subnet (the first end is `.1` in it, the second `.2`).
        package func linkSubnet(_ index: Int) -> IPPrefix {
            let size = self == .wide ? 256 : 16
            let offset = UInt32(index * size)
            return IPPrefix(.v4(198, 18 + UInt8(offset >> 16), UInt8((offset >> 8) & 0xff), UInt8(offset & 0xff)), length: self == .wide ? 24 : 28)
        }

        /// The service IPv4 address of the node at `index`.
        package func serviceIPv4(_ index: Int) -> IPAddress {
            switch self {
            case .wide: return .v4(198, 19, 255, UInt8(index + 1))
            case .dense: return .v4(198, 19, 252 + UInt8((index + 1) >> 8), UInt8((index + 1) & 0xff))
            }
        }
    }

    /// The most links and nodes a scenario may have (the dense plan's).
    package static let maximumLinks = AddressPlan.dense.maximumLinks
    package static let maximumNodes = AddressPlan.dense.maximumNodes
    package static let ipv6Prefix = "fd72:6f61:6d00"

    package var runID: String
    /// How links and nodes are addressed: ``AddressPlan/wide`` unless the scenario is larger.
    package var addressing: AddressPlan
    package var nodes: [Node]
    package var links: [Link]
    /// The networks, with the addresses each hands out.
    package var networks: [NetworkPlan] = []

    /// A network's addressing: IPv4 `192.168.K.0/24` (NAT44) or `100.64.K.0/24` (carrier-grade
    /// NAT) and IPv6 `fd72:6f61:6e00:K::/64`, K the network's place in the scenario; the gateway is
    /// `.1` and `::1` (and `fe80::1` on each phone's access), member M gets `.(10+M)` and `::(10+M)`.
    package struct NetworkPlan: Sendable, Hashable {
        package var spec: NetworkSpec
        package var index: Int
        package var gatewayIPv4: IPAddress?
        package var gatewayIPv6: IPAddress?
        package var subnetIPv4: IPPrefix?
        package var prefixIPv6: IPPrefix?

        init(spec: NetworkSpec, index: Int) {
            self.spec = spec
            self.index = index
            let third = UInt8(index)
            switch spec.ipv4 {
            case .nat44:
                gatewayIPv4 = .v4(192, 168, third, 1)
                subnetIPv4 = IPPrefix(.v4(192, 168, third, 0), length: 24)
            case .cgnat:
                gatewayIPv4 = .v4(100, 64, third, 1)
                subnetIPv4 = IPPrefix(.v4(100, 64, third, 0), length: 24)
            case .none:
                break
            }
            if spec.ipv6 {
                let prefix = "\(TopologyPlan.networkIPv6Prefix):\(String(index, radix: 16))"
                gatewayIPv6 = IPAddress("\(prefix)::1")!
                prefixIPv6 = IPPrefix(IPAddress("\(prefix)::")!, length: 64)
            }
        }

        /// The address member `position` gets (nil: the network gives no such family).
        package func memberAddress(_ family: IPFamily, position: Int) -> IPPrefix? {
            switch family {
            case .ipv4:
                guard let subnet = subnetIPv4 else { return nil }
                var bytes = subnet.address.bytes
                bytes[3] = UInt8(10 + position)
                return IPPrefix(IPAddress(bytes: bytes)!, length: 24)
            case .ipv6:
                guard let prefix = prefixIPv6 else { return nil }
                var bytes = prefix.address.bytes
                bytes[15] = UInt8(10 + position)
                return IPPrefix(IPAddress(bytes: bytes)!, length: 64)
            }
        }

        /// Where the network's resolver answers: the gateway's IPv4 address, or its IPv6 one on
        /// an IPv6-only network.
        package var resolver: IPAddress? { gatewayIPv4 ?? gatewayIPv6 }
    }

    /// Networks' IPv6 prefixes: `fd72:6f61:6e00:K::/64` ("ron").
    package static let networkIPv6Prefix = "fd72:6f61:6e00"
    /// The prefix a network's NAT64 translates, and its resolver's DNS64 synthesizes, with
    /// (RFC 6052's network-specific form). Not the well-known `64:ff9b::/96`: every IPv4 address
    /// in Roam's world is in 198.18.0.0/15, which RFC 6052 forbids translating under the
    /// well-known prefix, and tayga refuses to.
    package static let nat64Prefix = IPPrefix(IPAddress("fd72:6f61:6e64::")!, length: 96)
    /// The IPv4 pool a NAT64 gateway maps IPv6 phones into, before NAT44 to its uplink.
    package static let nat64Pool = IPPrefix(.v4(192, 168, 255, 0), length: 24)
    /// The most networks a scenario has (each takes a /24 of 192.168.0.0/16 or 100.64.0.0/16).
    package static let maximumNetworks = 200

    /// The plan for `scenario` in run `runID`.
    package init(scenario: Scenario, runID: String) throws(SimulatorError) {
        guard scenario.links.count <= Self.maximumLinks else {
            throw SimulatorError(.invalidScenario, "a scenario has at most \(Self.maximumLinks) links (198.18.0.0/15 in /28s); this one has \(scenario.links.count)")
        }
        guard scenario.nodes.count <= Self.maximumNodes else {
            throw SimulatorError(.invalidScenario, "a scenario has at most \(Self.maximumNodes) nodes; this one has \(scenario.nodes.count)")
        }
        let addressing = AddressPlan.holding(links: scenario.links.count, nodes: scenario.nodes.count)
        self.addressing = addressing
        guard scenario.networks.count <= Self.maximumNetworks else {
            throw SimulatorError(.invalidScenario, "a scenario has at most \(Self.maximumNetworks) networks; this one has \(scenario.networks.count)")
        }
        self.runID = runID
        let links = scenario.links.map { link in
            Link(name: link.name, first: link.endpoints.0, second: link.endpoints.1, firstInterface: link.interfaceName(0),
                 secondInterface: link.interfaceName(1),
                 attributes: InterfaceAttributes(type: link.type, isExpensive: link.isExpensive, isConstrained: link.isConstrained,
                                                 isUltraConstrained: link.isUltraConstrained),
                 radio: link.radio)
        }
        self.links = links
        let networks = scenario.networks.enumerated().map { NetworkPlan(spec: $0.element, index: $0.offset) }
        self.networks = networks
        let networkIndex = Dictionary(networks.map { ($0.spec.name, $0) }, uniquingKeysWith: { first, _ in first })
        let serviceIndex = Dictionary(scenario.nodes.enumerated().map { ($0.element.name, $0.offset) }, uniquingKeysWith: { first, _ in first })
        var interfaces: [String: [Interface]] = [:]
        for (index, link) in scenario.links.enumerated() {
            let subnet = addressing.linkSubnet(index)
            let v4 = (first: subnet.address.host(1), second: subnet.address.host(2))
            let v6 = (first: IPAddress("\(Self.ipv6Prefix):\(String(index, radix: 16))::1")!,
                      second: IPAddress("\(Self.ipv6Prefix):\(String(index, radix: 16))::2")!)
            let alias = links[index].alias(quality: LinkQuality(grading: LinkConditions(impairment: link.up), LinkConditions(impairment: link.down)))
            var ends: [Interface] = []
            for (end, node, peer, mine, theirs, mine6, theirs6) in [
                (0, link.endpoints.0, link.endpoints.1, v4.first, v4.second, v6.first, v6.second),
                (1, link.endpoints.1, link.endpoints.0, v4.second, v4.first, v6.second, v6.first),
            ] {
                let order = interfaces[node, default: []].count
                ends.append(Interface(
                    name: link.interfaceName(end), link: link.name, peer: peer,
                    ipv4: IPPrefix(mine, length: subnet.length), ipv6: IPPrefix(mine6, length: 64), peerIPv4: theirs, peerIPv6: theirs6,
                    alias: alias, metric: 100 + 10 * UInt32(order), table: RouteTable(1000 + UInt32(index)), rulePriority: 1000 + UInt32(index),
                    families: link.families))
            }
            switch link.role {
            case .direct:
                break
            case let .access(network, _, position):
                guard let plan = networkIndex[network] else { break }
                // The phone: an address from the network, the gateway as its router.
                ends[0].routing = .phone
                ends[0].families = plan.spec.families
                ends[0].joinedAtStart = plan.spec.joinedAtStart.contains(link.endpoints.0)
                if let address = plan.memberAddress(.ipv4, position: position) { ends[0].ipv4 = address }
                if let address = plan.memberAddress(.ipv6, position: position) { ends[0].ipv6 = address }
                ends[0].peerIPv4 = plan.gatewayIPv4 ?? ends[0].peerIPv4
                ends[0].peerIPv6 = Self.gatewayLinkLocal
                // The gateway: its own address on every phone's access, a host route to the phone.
                ends[1].routing = .gatewayAccess
                ends[1].families = plan.spec.families
                ends[1].ipv4 = IPPrefix(plan.gatewayIPv4 ?? v4.second, length: 32)
                ends[1].ipv6 = IPPrefix(plan.gatewayIPv6 ?? v6.second, length: 128)
                ends[1].peerIPv4 = ends[0].ipv4.address
                ends[1].peerIPv6 = ends[0].ipv6.address
                ends[1].extraAddresses = [IPPrefix(Self.gatewayLinkLocal, length: 64)]
            case .uplink(let network):
                ends[0].routing = .upstream
                ends[1].routing = .transit(behind: [networkIndex[network]?.prefixIPv6].compactMap { $0 })
            case .attachment(let server):
                let position = serviceIndex[server] ?? 0
                ends[0].routing = .transit(behind: [IPPrefix(addressing.serviceIPv4(position), length: 32), IPPrefix(Self.serviceIPv6(position), length: 128)])
                ends[1].routing = .upstream
            }
            interfaces[link.endpoints.0, default: []].append(ends[0])
            interfaces[link.endpoints.1, default: []].append(ends[1])
        }
        self.nodes = scenario.nodes.enumerated().map { index, node in
            Node(name: node.name, role: node.role, namespaceName: Self.namespaceName(runID: runID, node: node.name), interfaces: interfaces[node.name] ?? [],
                 serviceIPv4: addressing.serviceIPv4(index), serviceIPv6: Self.serviceIPv6(index))
        }
    }

    /// The link-local address of a network's gateway on each phone's access: the router a
    /// phone's IPv6 default route goes through, as a router advertisement would give it.
    package static let gatewayLinkLocal = IPAddress("fe80::1")!

    /// The IPv6 service address of the node at `index` (its IPv4 one is the plan's).
    static func serviceIPv6(_ index: Int) -> IPAddress { IPAddress("\(ipv6Prefix):ffff::\(String(index + 1, radix: 16))")! }

    /// A phone's address after its network renumbered it `generation` times: IPv4 moves 64
    /// hosts on in its /24 each time (three places, in turn), IPv6 takes the generation into its
    /// interface identifier.
    package static func renumbered(_ address: IPPrefix, generation: Int) -> IPPrefix {
        var bytes = address.address.bytes
        if bytes.count == 4 {
            let host = Int(bytes[3]) - 10
            bytes[3] = UInt8(10 + (host % 64) + 64 * (generation % 3))
        } else {
            bytes[13] = UInt8(generation & 0xff)
            bytes[12] = UInt8((generation >> 8) & 0xff)
        }
        return IPPrefix(IPAddress(bytes: bytes)!, length: address.length)
    }

    /// The network `name`'s plan.
    package func network(_ name: String) -> NetworkPlan? { networks.first { $0.spec.name == name } }

    /// `roam-RUN-NODE`.
    package static func namespaceName(runID: String, node: String) -> String { "roam-\(runID)-\(node)" }

    package func node(_ name: String) -> Node? { nodes.first { $0.name == name } }

    package func link(_ name: String) -> Link? { links.first { $0.name == name } }
}

extension IPAddress {
    /// Host `number` of the IPv4 subnet this address starts (its last byte is 0 and the subnet
    /// holds more than `number` hosts).
    fileprivate func host(_ number: UInt8) -> IPAddress {
        var bytes = self.bytes
        bytes[3] += number
        return IPAddress(bytes: bytes)!
    }
}
