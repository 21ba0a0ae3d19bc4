import Foundation
import Glibc
import Netlink
@testable import ScenarioModel
@testable import Simulator
import Testing

/// A scenario's networks as planned, built (against a recording of the kernel) and configured:
/// root-free. `NetworkScenarioRunTests` checks the same against the kernel and real programs.
@Suite struct NetworkPlanTests {
    /// The networks' fixture, the tablet joining later.
    static let text: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/two-networks.yaml").path
        return ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "") + "timeline:\n  - at: 5s\n    network: home\n    join: tablet\n"
    }()

    func plan() throws -> TopologyPlan {
        let outcome = ScenarioReader.parse(Self.text, file: "s.yaml")
        let scenario = try #require(outcome.scenario, "\(outcome.errors)")
        return try TopologyPlan(scenario: scenario, runID: "abc123")
    }

    @Test func phonesGetTheirNetworksAddressesAndGatewaysHostRoutesToThem() throws {
        let plan = try plan()
        let phone = try #require(plan.node("phone"))
        #expect(phone.interfaces.map(\.name) == ["home", "lte"])
        let home = phone.interfaces[0], lte = phone.interfaces[1]
        #expect(home.routing == .phone && home.joinedAtStart)
        #expect(home.addresses == [IPPrefix(.v4(192, 168, 0, 10), length: 24), IPPrefix(IPAddress("fd72:6f61:6e00:0::a")!, length: 64)])
        #expect(home.peerIPv4 == .v4(192, 168, 0, 1) && home.peerIPv6 == IPAddress("fe80::1")!)
        #expect(home.metric < lte.metric)
        // The LTE network is IPv6-only.
        #expect(lte.families == [.ipv6] && lte.addresses == [IPPrefix(IPAddress("fd72:6f61:6e00:1::a")!, length: 64)])
        // The tablet joins later: its interface starts down, unaddressed.
        let tablet = try #require(plan.node("tablet")?.interfaces.first)
        #expect(!tablet.joinedAtStart && tablet.ipv4 == IPPrefix(.v4(192, 168, 0, 11), length: 24))

        let gateway = try #require(plan.node("home-gw"))
        #expect(gateway.role == .gateway(network: "home"))
        #expect(gateway.interfaces.map(\.name) == ["p0", "p1", "uplink"])
        #expect(gateway.interfaces[0].routing == .gatewayAccess)
        #expect(gateway.interfaces[1].addresses == [IPPrefix(.v4(192, 168, 0, 1), length: 32), IPPrefix(IPAddress("fd72:6f61:6e00:0::1")!, length: 128),
                                                    IPPrefix(IPAddress("fe80::1")!, length: 64)])
        #expect(gateway.interfaces[1].peerIPv4 == .v4(192, 168, 0, 11))
        #expect(gateway.interfaces[2].routing == .upstream)

        let internet = try #require(plan.node("internet"))
        #expect(internet.interfaces.map(\.name) == ["gw0", "gw1", "srv0", "srv1"])
        // Behind each gateway its network's IPv6 prefix (IPv4 is translated); behind each
        // server its service addresses.
        #expect(internet.interfaces[0].routing == .transit(behind: [IPPrefix(IPAddress("fd72:6f61:6e00:0::")!, length: 64)]))
        let api = try #require(plan.node("api"))
        #expect(internet.interfaces[2].routing == .transit(behind: [IPPrefix(api.serviceIPv4, length: 32), IPPrefix(api.serviceIPv6, length: 128)]))
        #expect(api.interfaces.map(\.name) == ["internet"] && api.interfaces[0].routing == .upstream && api.interfaces[0].families == [.ipv4])
        #expect(plan.network("lte")?.resolver == IPAddress("fd72:6f61:6e00:1::1")!)
        #expect(plan.network("home")?.resolver == .v4(192, 168, 0, 1))
    }

    @Test func carrierGradeNATIsInTheSharedAddressSpace() throws {
        let outcome = ScenarioReader.parse(Self.text.replacingOccurrences(of: "    ipv4: none\n    nat64: true\n", with: ""), file: "s.yaml")
        let plan = try TopologyPlan(scenario: try #require(outcome.scenario), runID: "abc123")
        #expect(plan.node("phone")?.interfaces[1].ipv4 == IPPrefix(.v4(100, 64, 1, 10), length: 24))
        #expect(plan.network("lte")?.gatewayIPv4 == .v4(100, 64, 1, 1))
    }

    @Test func theProgramsAreConfiguredForTheirNetworks() throws {
        let plan = try plan()
        let authoritative = try #require(NetworkServices.authoritativeConfiguration(plan))
        let api = try #require(plan.node("api")), web = try #require(plan.node("web")), internet = try #require(plan.node("internet"))
        #expect(authoritative.contains("interface: \(internet.serviceIPv4)\n"))
        #expect(authoritative.contains("local-data: \"api.example.test. 60 IN A \(api.serviceIPv4)\""))
        #expect(!authoritative.contains("api.example.test. 60 IN AAAA"), "an IPv4-only server has no AAAA record")
        #expect(authoritative.contains("local-data: \"web.roam.test. 60 IN AAAA \(web.serviceIPv6)\""))
        #expect(authoritative.contains("ipv4only.arpa. 60 IN A 192.0.0.170") && authoritative.contains("local-zone: \".\" static"))

        let lte = try #require(plan.network("lte")), home = try #require(plan.network("home"))
        let resolver = NetworkServices.resolverConfiguration(lte, nameServer: internet.serviceIPv4)
        #expect(resolver.contains("interface: fd72:6f61:6e00:1::1\n") && !resolver.contains("interface: 192.168"))
        #expect(resolver.contains("module-config: \"dns64 iterator\"") && resolver.contains("dns64-prefix: fd72:6f61:6e64::/96"))
        #expect(resolver.contains("forward-addr: \(internet.serviceIPv4)"))
        #expect(!NetworkServices.resolverConfiguration(home, nameServer: internet.serviceIPv4).contains("dns64"))

        #expect(NetworkServices.natRuleset(home)?.contains("oifname \"uplink\" masquerade") == true)
        #expect(NetworkServices.natRuleset(lte) != nil, "NAT64's pool is translated to the uplink too")
        #expect(NetworkServices.taygaConfiguration().contains("prefix fd72:6f61:6e64::/96\n"))
    }

    @Test func aPhonesResolverIsItsPrimaryJoinedNetworks() throws {
        let plan = try plan()
        let phone = try #require(plan.node("phone"))
        #expect(NetworkServices.resolvConf(of: phone, joined: ["home", "lte"], plan: plan).hasSuffix("nameserver 192.168.0.1\n"))
        #expect(NetworkServices.resolvConf(of: phone, joined: ["lte"], plan: plan).hasSuffix("nameserver fd72:6f61:6e00:1::1\n"))
        #expect(!NetworkServices.resolvConf(of: phone, joined: [], plan: plan).contains("nameserver"))
    }

    @Test func aPhoneThatJoinsLaterStartsDownAndComesUpWithItsAddresses() throws {
        let network = RecordingNetwork()
        let plan = try plan()
        let topology = try Topology.build(plan, backend: NetemBackend(plan: plan, seed: 7), control: network)
        defer { topology.teardown() }
        #expect(network.strayCalls.isEmpty)
        let tablet = try #require(network.namespace("roam-abc123-tablet"))
        let home = try #require(tablet.link("home"))
        #expect(!home.flags.contains(.up))
        #expect(tablet.addresses.filter { $0.index == home.index }.isEmpty)

        try topology.setMembership(true, link: "home.tablet")
        #expect(tablet.link("home")?.flags.contains(.up) == true)
        #expect(tablet.addresses.filter { $0.index == home.index }.map(\.prefix) == plan.node("tablet")!.interfaces[0].addresses)
        #expect(tablet.routes.contains { $0.table == .main && $0.destination == .any(.inet) && $0.nextHops.map(\.gateway) == [.v4(192, 168, 0, 1)] })
        #expect(tablet.routes.contains { $0.table == .main && $0.destination == .any(.inet6) && $0.nextHops.map(\.gateway) == [IPAddress("fe80::1")!] })

        try topology.setMembership(false, link: "home.tablet")
        #expect(tablet.link("home")?.flags.contains(.up) == false)
        #expect(tablet.addresses.filter { $0.index == home.index }.isEmpty)
        // Again, as a phone walking back in: no error for what is there already.
        try topology.setMembership(true, link: "home.tablet")
        #expect(tablet.addresses.filter { $0.index == home.index }.count == 2)
        #expect(throws: SimulatorError.self) { try topology.setMembership(true, link: "home.uplink") }
    }

    @Test func aRenumberedPhoneGetsItsNextAddressesAndTheGatewayFollows() throws {
        let network = RecordingNetwork()
        let plan = try plan()
        let topology = try Topology.build(plan, backend: NetemBackend(plan: plan, seed: 7), control: network)
        defer { topology.teardown() }
        let phone = try #require(network.namespace("roam-abc123-phone")), gateway = try #require(network.namespace("roam-abc123-home-gw"))
        let home = try #require(phone.link("home")), p0 = try #require(gateway.link("p0"))
        let first = try topology.renumber(link: "home.phone")
        #expect(first == [IPPrefix(.v4(192, 168, 0, 74), length: 24), IPPrefix(IPAddress("fd72:6f61:6e00:0::1:a")!, length: 64)])
        #expect(phone.addresses.filter { $0.index == home.index }.map(\.prefix) == first)
        #expect(phone.rules.contains { $0.source == IPPrefix(.v4(192, 168, 0, 74), length: 32) })
        #expect(!phone.rules.contains { $0.source == IPPrefix(.v4(192, 168, 0, 10), length: 32) })
        let hostRoutes = gateway.routes.filter { $0.nextHops.map(\.interfaceIndex) == [p0.index] && $0.nextHops.allSatisfy { $0.gateway == nil } }
        #expect(hostRoutes.map(\.destination).contains(IPPrefix(.v4(192, 168, 0, 74), length: 32)))
        #expect(!hostRoutes.map(\.destination).contains(IPPrefix(.v4(192, 168, 0, 10), length: 32)))
        // Three places in the /24, in turn; IPv6 counts on.
        try topology.renumber(link: "home.phone")
        let third = try topology.renumber(link: "home.phone")
        #expect(third == [IPPrefix(.v4(192, 168, 0, 10), length: 24), IPPrefix(IPAddress("fd72:6f61:6e00:0::3:a")!, length: 64)])
        // A phone that leaves and joins again keeps its renumbered addresses.
        try topology.setMembership(false, link: "home.phone")
        try topology.setMembership(true, link: "home.phone")
        #expect(phone.addresses.filter { $0.index == home.index }.map(\.prefix) == third)
        #expect(throws: SimulatorError.self) { try topology.renumber(link: "lte.uplink") }
    }

    @Test func aDNSQueryIsWhatTheWireFormatSays() {
        #expect(DNSProbe.query("ipv4only.arpa", id: 0x1234) == [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
                                                                  8] + Array("ipv4only".utf8) + [4] + Array("arpa".utf8) + [0, 0, 1, 0, 1])
    }
}
