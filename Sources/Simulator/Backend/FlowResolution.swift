import LinkEmulation
import Netlink
import ScenarioModel

/// Resolves the flows of a link's conditions (`match:`) against a run's plan: a server named
/// by `server:` is every address the run gives its node (its interfaces' and its service
/// addresses, and their NAT64 forms, as an IPv6-only phone reaches them); `dns: true` is the
/// link's network's resolver (its gateway's addresses; any address on a link that is not a
/// network's). Both backends use it, so that they select the same packets.
package struct FlowResolution: Sendable {
    private let addresses: [String: [AddressPrefix]]
    private let resolvers: [String: [AddressPrefix]]

    package init(plan: TopologyPlan) {
        var addresses: [String: [AddressPrefix]] = [:]
        for node in plan.nodes {
            var found: [IPAddress] = node.interfaces.flatMap { $0.addresses.map(\.address) }
            if node.hasServiceAddresses { found += [node.serviceIPv4, node.serviceIPv6] }
            // The NAT64 form of each IPv4 address: what a phone on an IPv6-only network sends to.
            let prefix = TopologyPlan.nat64Prefix.address.bytes.prefix(12)
            found += found.compactMap { if case .v4 = $0 { IPAddress(bytes: Array(prefix) + $0.bytes) } else { nil } }
            addresses[node.name] = Array(Set(found)).sorted().map(Self.prefix)
        }
        var resolvers: [String: [AddressPrefix]] = [:]
        for network in plan.networks {
            let gateway = [network.gatewayIPv4, network.gatewayIPv6].compactMap { $0 }.map(Self.prefix)
            for member in network.spec.members { resolvers[NetworkSpec.accessLinkName(network: network.spec.name, node: member)] = gateway }
            resolvers[NetworkSpec.uplinkName(network: network.spec.name)] = gateway
        }
        self.addresses = addresses
        self.resolvers = resolvers
    }

    static func prefix(_ address: IPAddress) -> AddressPrefix {
        AddressPrefix(family: address.family == .inet ? .ipv4 : .ipv6, bytes: address.bytes, length: address.bitWidth)
    }

    /// `match` on `link`, resolved.
    package func selector(_ match: FlowMatch, link: String) -> FlowSelector {
        FlowSelector(match, addresses: { self.addresses[$0] ?? [] }, resolvers: resolvers[link] ?? [])
    }
}
