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
///   ..., 512 links at most): the first node of `between` gets `.1`, the second `.2`. IPv6 the same
///   way under `fd72:6f61:6d00::/48` ("roam"): `fd72:6f61:6d00:i::1/64` and `::2`.
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
///   connection after Wi-Fi goes down takes the cellular link, as on a phone.
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

        /// The interface's address of `family`, if the link carries it.
        package func address(_ family: IPFamily) -> IPPrefix? {
            families.contains(family) ? (family == .ipv4 ? ipv4 : ipv6) : nil
        }
    }

    package struct Node: Sendable, Hashable {
        package var name: String
        package var namespaceName: String
        package var interfaces: [Interface]
        /// The addresses on the node's loopback.
        package var serviceIPv4: IPAddress
        package var serviceIPv6: IPAddress
    }

    package struct Link: Sendable, Hashable {
        package var name: String
        /// The nodes in `between` order.
        package var first: String
        package var second: String
        /// What both interfaces' tags say of the link, but for its quality.
        package var attributes: InterfaceAttributes

        /// The alias both interfaces carry while the link's conditions grade `quality`.
        package func alias(quality: LinkQuality) -> String {
            var attributes = attributes
            attributes.linkQuality = quality
            return InterfaceTag.alias(for: attributes)
        }
    }

    /// 198.18.0.0/15 holds 512 /24s; the last one holds the nodes' service addresses.
    package static let maximumLinks = 511
    package static let maximumNodes = 254
    package static let ipv6Prefix = "fd72:6f61:6d00"

    package var runID: String
    package var nodes: [Node]
    package var links: [Link]

    /// The plan for `scenario` in run `runID`.
    package init(scenario: Scenario, runID: String) throws(SimulatorError) {
        guard scenario.links.count <= Self.maximumLinks else {
            throw SimulatorError(.invalidScenario, "a scenario has at most \(Self.maximumLinks) links (198.18.0.0/15 in /24s); this one has \(scenario.links.count)")
        }
        guard scenario.nodes.count <= Self.maximumNodes else {
            throw SimulatorError(.invalidScenario, "a scenario has at most \(Self.maximumNodes) nodes; this one has \(scenario.nodes.count)")
        }
        self.runID = runID
        let links = scenario.links.map { link in
            Link(name: link.name, first: link.endpoints.0, second: link.endpoints.1,
                 attributes: InterfaceAttributes(type: link.type, isExpensive: link.isExpensive, isConstrained: link.isConstrained,
                                                 isUltraConstrained: link.isUltraConstrained))
        }
        self.links = links
        var interfaces: [String: [Interface]] = [:]
        for (index, link) in scenario.links.enumerated() {
            let v4 = (first: IPAddress.v4(198, 18 + UInt8(index / 256), UInt8(index % 256), 1),
                      second: IPAddress.v4(198, 18 + UInt8(index / 256), UInt8(index % 256), 2))
            let v6 = (first: IPAddress("\(Self.ipv6Prefix):\(String(index, radix: 16))::1")!,
                      second: IPAddress("\(Self.ipv6Prefix):\(String(index, radix: 16))::2")!)
            let alias = links[index].alias(quality: LinkQuality(grading: LinkConditions(impairment: link.up), LinkConditions(impairment: link.down)))
            for (node, peer, mine, theirs, mine6, theirs6) in [
                (link.endpoints.0, link.endpoints.1, v4.first, v4.second, v6.first, v6.second),
                (link.endpoints.1, link.endpoints.0, v4.second, v4.first, v6.second, v6.first),
            ] {
                let order = interfaces[node, default: []].count
                interfaces[node, default: []].append(Interface(
                    name: link.name, link: link.name, peer: peer,
                    ipv4: IPPrefix(mine, length: 24), ipv6: IPPrefix(mine6, length: 64), peerIPv4: theirs, peerIPv6: theirs6,
                    alias: alias, metric: 100 + 10 * UInt32(order), table: RouteTable(1000 + UInt32(index)), rulePriority: 1000 + UInt32(index),
                    families: link.families))
            }
        }
        self.nodes = scenario.nodes.enumerated().map { index, node in
            Node(name: node.name, namespaceName: Self.namespaceName(runID: runID, node: node.name), interfaces: interfaces[node.name] ?? [],
                 serviceIPv4: .v4(198, 19, 255, UInt8(index + 1)),
                 serviceIPv6: IPAddress("\(Self.ipv6Prefix):ffff::\(String(index + 1, radix: 16))")!)
        }
    }

    /// `roam-RUN-NODE`.
    package static func namespaceName(runID: String, node: String) -> String { "roam-\(runID)-\(node)" }

    package func node(_ name: String) -> Node? { nodes.first { $0.name == name } }

    package func link(_ name: String) -> Link? { links.first { $0.name == name } }
}
