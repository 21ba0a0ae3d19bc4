import Glibc
import Netlink
@testable import ScenarioModel
import Testing
@testable import Simulator

/// What ``Topology`` and ``NetemBackend`` ask of the kernel, checked against a recording of it:
/// root-free, so that every machine runs them. The kernel suites check the same network works.
@Suite struct TopologyRecordingTests {
    func build(_ network: RecordingNetwork, runID: String = "abc123") throws -> (TopologyPlan, Topology) {
        let plan = try TopologyPlan(scenario: walkOutOfHome(), runID: runID)
        let topology = try Topology.build(plan, backend: NetemBackend(plan: plan, seed: 7), control: network)
        return (plan, topology)
    }

    @Test func buildsEachNodeWithItsLinksAddressesRoutesAndRules() throws {
        let network = RecordingNetwork()
        let (plan, topology) = try build(network)
        #expect(network.registeredRuns == ["abc123"])
        #expect(Set(network.namespaces.keys) == ["roam-abc123-phone", "roam-abc123-server"])
        #expect(network.strayCalls.isEmpty)

        for node in plan.nodes {
            let state = try #require(network.namespace(node.namespaceName))
            #expect(state.sysctls["net.ipv4.ip_forward"] == "1")
            #expect(state.sysctls["net.ipv6.conf.all.accept_dad"] == "0")
            // Loopback up, with the node's service addresses.
            let lo = try #require(state.link("lo"))
            #expect(lo.flags.contains(.up))
            #expect(state.addresses.contains { $0.prefix == IPPrefix(node.serviceIPv4, length: 32) && $0.index == lo.index })
            #expect(state.addresses.contains { $0.prefix == IPPrefix(node.serviceIPv6, length: 128) && $0.index == lo.index })

            for interface in node.interfaces {
                let link = try #require(state.link(interface.name), "\(node.name) has no \(interface.name)")
                #expect(link.flags.contains(.up))
                #expect(link.alias == interface.alias)
                #expect(state.addresses.filter { $0.index == link.index }.map(\.prefix).sorted() == [interface.ipv4, interface.ipv6].sorted())
                for (address, peer) in [(interface.ipv4, interface.peerIPv4), (interface.ipv6, interface.peerIPv6)] {
                    let family = peer.family
                    // The main table: a default route through the peer at the interface's metric,
                    // and the link's subnet unreachable when the interface's direct route is gone.
                    let defaults = state.routes.filter { $0.table == .main && $0.family == family && $0.destination == .any(family) && $0.type == .unicast }
                    #expect(defaults.contains { $0.metric == interface.metric && $0.nextHops.map(\.gateway) == [peer] && $0.nextHops.map(\.interfaceIndex) == [link.index] })
                    let subnet = IPPrefix(address.address.masked(to: address.length), length: address.length)
                    #expect(state.routes.contains { $0.table == .main && $0.destination == subnet && $0.type == .unreachable && $0.metric == UInt32.max })
                    // The policy table: the subnet on the link, a default through the peer, and
                    // nothing else (an unreachable default last), so its addresses never leak.
                    let table = state.routes.filter { $0.table == interface.table && $0.family == family }
                    #expect(table.count == 3)
                    #expect(table.contains { $0.destination == subnet && $0.type == .unicast && $0.nextHops.map(\.interfaceIndex) == [link.index] })
                    #expect(table.contains { $0.destination == .any(family) && $0.type == .unicast && $0.nextHops.map(\.gateway) == [peer] })
                    #expect(table.contains { $0.destination == .any(family) && $0.type == .unreachable && $0.metric == UInt32.max })
                    // A rule sends traffic from the interface's address to that table.
                    #expect(state.rules.contains {
                        $0.table == interface.table && $0.priority == interface.rulePriority
                            && $0.source == IPPrefix(address.address, length: address.address.bitWidth)
                    })
                }
            }
        }
        // The peer's service address is routed over every link at the link's metric.
        let phone = try #require(plan.node("phone")), server = try #require(plan.node("server"))
        let phoneState = try #require(network.namespace(phone.namespaceName))
        let serviceRoutes = phoneState.routes.filter { $0.destination == IPPrefix(server.serviceIPv4, length: 32) }
        #expect(serviceRoutes.map(\.metric).sorted() == phone.interfaces.map(\.metric).sorted())

        topology.teardown()
        #expect(network.namespaces.isEmpty)
        #expect(network.registeredRuns.isEmpty)
        #expect(network.strayCalls.isEmpty)
    }

    @Test(arguments: [("createNamespace", 2), ("createVethPair", 2), ("setLink", 4), ("addAddress", 7), ("addRoute", 9), ("addRule", 3)])
    func aFailureAnywhereRemovesEverythingBuiltAndSaysWhere(operation: String, call: Int) throws {
        let network = RecordingNetwork()
        network.failure = .init(operation: operation, call: call, errno: EEXIST)
        let error = try #require(throws: SimulatorError.self) { try build(network) }
        #expect(error.underlying != nil || "\(error)".contains("injected"), "\(error)")
        #expect("\(error)".contains("'phone'") || "\(error)".contains("'server'") || "\(error)".contains("link '"), "\(error)")
        #expect(network.namespaces.isEmpty, "left behind: \(network.namespaces.keys.sorted())")
        #expect(network.registeredRuns.isEmpty)
        #expect(network.strayCalls.isEmpty)
    }

    /// The walk-out-of-home network on the netem backend, started, over `network`.
    func startedNetem(_ network: RecordingNetwork) throws -> (NetemBackend, Topology) {
        let plan = try TopologyPlan(scenario: walkOutOfHome(), runID: "abc123")
        let backend = NetemBackend(plan: plan, seed: 7)
        let topology = try Topology.build(plan, backend: backend, control: network)
        try backend.start(topology)
        return (backend, topology)
    }

    @Test func netemShapesTheSendingEndAndRemovesTheRateWhenTheTimelineDropsIt() throws {
        let network = RecordingNetwork()
        let (backend, topology) = try startedNetem(network)
        defer { topology.teardown() }
        let phone = try #require(network.namespace("roam-abc123-phone"))
        let server = try #require(network.namespace("roam-abc123-server"))
        let phoneWifi = try #require(phone.link("wifi")).index
        let serverWifi = try #require(server.link("wifi")).index

        var shaped = LinkConditions(impairment: Impairment(delay: .milliseconds(40), rate: .mbit(5), loss: .random(rate: 0.02, correlation: 0)))
        try backend.apply(shaped, link: "wifi", direction: .up)
        // Up is sent by the phone: shaped there, nothing on the server's end.
        #expect(phone.netem[phoneWifi]?.delay == .milliseconds(40))
        #expect(phone.netem[phoneWifi]?.seed == NetemBackend.seed(7, link: 0, direction: .up))
        #expect(phone.tokenBuckets[phoneWifi]?.rate == 5_000_000 / 8)
        #expect(server.netem[serverWifi] == nil)

        try backend.apply(shaped, link: "wifi", direction: .down)
        #expect(server.netem[serverWifi]?.seed == NetemBackend.seed(7, link: 0, direction: .down))
        #expect(server.netem[serverWifi]?.seed != phone.netem[phoneWifi]?.seed)

        shaped.impairment.rate = nil
        try backend.apply(shaped, link: "wifi", direction: .up)
        #expect(phone.tokenBuckets[phoneWifi] == nil)
        #expect(phone.netem[phoneWifi]?.delay == .milliseconds(40))
        // Applying it again asks for no deletion of a tbf that is gone (the recording refuses one).
        try backend.apply(shaped, link: "wifi", direction: .up)

        // Carrier loss is the server's end set down, so the phone's end loses its carrier.
        try backend.setCarrier(false, link: "wifi")
        #expect(server.link("wifi")?.flags.contains(.up) == false)
        #expect(phone.link("wifi")?.flags.contains(.up) == true)
        try backend.setCarrier(true, link: "wifi")
        #expect(server.link("wifi")?.flags.contains(.up) == true)
        #expect(network.strayCalls.isEmpty)
    }

    @Test func aKernelWithoutNetemIsToldHowToGetIt() throws {
        let network = RecordingNetwork()
        let (backend, topology) = try startedNetem(network)
        defer { topology.teardown() }
        network.failure = .init(operation: "replaceNetem", call: 1, errno: ENOENT)
        let error = try #require(throws: SimulatorError.self) {
            try backend.apply(LinkConditions(impairment: Impairment(delay: .milliseconds(10))), link: "cell", direction: .down)
        }
        #expect(error.code == .environment)
        #expect("\(error)".contains("modprobe sch_netem"))
        #expect("\(error)".contains("--backend userspace"))
        #expect("\(error)".contains("link 'cell' (sent by server)"))
    }

    /// `queue: codel` puts codel in tbf's class; fq-codel replaces it; drop-tail puts a byte
    /// FIFO back (never nothing: tbf with no child drops everything); no rate, no tbf, no child.
    /// A kernel without sch_codel is told so, with the way out.
    @Test func aManagedQueueGoesUnderTheRateAndComesOutAgain() throws {
        let network = RecordingNetwork()
        let (backend, topology) = try startedNetem(network)
        defer { topology.teardown() }
        let phone = try #require(network.namespace("roam-abc123-phone"))
        let wifi = try #require(phone.link("wifi")).index
        var impairment = Impairment(rate: .mbit(10), limit: 300)
        impairment.queue = .codel(CoDelParameters(target: .milliseconds(10), interval: .milliseconds(200)))
        try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        #expect(phone.managedQueues[wifi] == .some(CoDelConfiguration(target: .milliseconds(10), interval: .milliseconds(200), limit: 300)))
        impairment.queue = .fqCodel(CoDelParameters(), flows: 1024, quantum: 1514)
        impairment.limit = nil
        impairment.limitBytes = 1 << 20
        try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        #expect(phone.managedQueues[wifi] == .some(CoDelConfiguration(target: .milliseconds(5), interval: .milliseconds(100), limit: 10240,
                                                                      flows: 1024, quantum: 1514, memoryLimit: 1 << 20)))
        impairment.queue = .dropTail
        try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        #expect(phone.managedQueues[wifi] == .some(nil), "a byte FIFO again")
        #expect(phone.tokenBuckets[wifi]?.limit == 1 << 20)
        impairment.queue = .codel(CoDelParameters())
        try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        impairment.rate = nil
        try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        #expect(phone.tokenBuckets[wifi] == nil && phone.managedQueues[wifi] == nil)
        #expect(network.strayCalls.isEmpty)

        impairment.rate = .mbit(10)
        network.failure = .init(operation: "replaceCoDel", call: 4, errno: ENOENT)
        let error = try #require(throws: SimulatorError.self) {
            try backend.apply(LinkConditions(impairment: impairment), link: "wifi", direction: .up)
        }
        #expect(error.code == .environment)
        #expect("\(error)".contains("sch_codel") && "\(error)".contains("--backend userspace"), "\(error)")
    }

    @Test func theTaggerRetagsBothEndsOfALink() throws {
        let network = RecordingNetwork()
        let (plan, topology) = try build(network)
        defer { topology.teardown() }
        let tagger = try topology.makeTagger()
        try tagger.tag("cell", quality: .minimal)
        let expected = try #require(plan.link("cell")).alias(quality: .minimal)
        #expect(expected.contains("quality=minimal"))
        #expect(network.namespace("roam-abc123-phone")?.link("cell")?.alias == expected)
        #expect(network.namespace("roam-abc123-server")?.link("cell")?.alias == expected)
        #expect(network.namespace("roam-abc123-phone")?.link("wifi")?.alias == plan.node("phone")?.interfaces[0].alias)
        #expect(throws: SimulatorError.self) { try tagger.tag("nonexistent", quality: .good) }
    }
}
