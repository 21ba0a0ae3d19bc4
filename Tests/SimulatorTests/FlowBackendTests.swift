import LinkEmulation
import Netlink
import ScenarioModel
@testable import Simulator
import Testing

/// Flows on the netem backend: the `u32` filters a selector becomes, and the qdiscs and filters
/// the backend asks the kernel for (on a recording; the VM's netem check runs them for real).
@Suite struct FlowBackendTests {
    @Test func aSelectorBecomesOneFilterPerFamilyAndBlock() throws {
        let dns = FlowSelector(FlowMatch(protocols: [.udp], ports: [PortRange(53)]), addresses: { _ in [] }, resolvers: [])
        let up = try dns.u32Filters(uplink: true, priority: 1, classID: QdiscHandle(major: 1, minor: 2), limit: 256)
        #expect(up.map(\.description) == [
            "prio 1 ip flowid 1:2 match 45000000/ff000000 at 0 match 00000000/00001fff at 4 match 00110000/00ff0000 at 8 match 00000035/0000ffff at 20",
            "prio 2 ipv6 flowid 1:2 match 00001100/0000ff00 at 4 match 00000035/0000ffff at 40",
        ])
        // Coming down, the far end's port is the source.
        let down = try dns.u32Filters(uplink: false, priority: 1, classID: QdiscHandle(major: 1, minor: 2), limit: 256)
        #expect(down.allSatisfy { $0.keys.last?.description.hasPrefix("match 00350000/ffff0000") == true })

        let server = try #require(AddressPrefix(parsing: "198.18.1.0/24"))
        let web = FlowSelector(FlowMatch(servers: ["web"]), addresses: { _ in [server] }, resolvers: [])
        let toWeb = try web.u32Filters(uplink: true, priority: 3, classID: QdiscHandle(major: 1, minor: 4), limit: 256)
        #expect(toWeb.map(\.description) == ["prio 3 ip flowid 1:4 match c6120100/ffffff00 at 16"])
        #expect(try web.u32Filters(uplink: false, priority: 3, classID: QdiscHandle(major: 1, minor: 4), limit: 256)[0].keys[0].offset == 12)

        #expect(FlowSelector.blocks(PortRange(8000, 8100)).map { "\($0.0)/\(String($0.1, radix: 16))" }
            == ["8000/ffc0", "8064/ffe0", "8096/fffc", "8100/ffff"])
        #expect(FlowSelector.blocks(PortRange(1, 65535)).count == 16)
        let wide = FlowSelector(FlowMatch(ports: [PortRange(1, 65535)], localPorts: [PortRange(1, 65535)]), addresses: { _ in [] }, resolvers: [])
        #expect(throws: SimulatorError.self) { try wide.u32Filters(uplink: true, priority: 1, classID: QdiscHandle(major: 1, minor: 2), limit: 256) }
    }

    /// A phone and a server on `link` (and `timeline`), built on a recording with the netem backend.
    struct Built {
        let scenario: Scenario
        let network = RecordingNetwork()
        let plan: TopologyPlan
        let backend: NetemBackend
        let topology: Topology

        init(link: String, timeline: String = "", runID: String) throws {
            scenario = try #require(ScenarioReader.parse("""
                name: flows
                duration: 10s
                nodes: {phone: {}, web: {}}
                links:
                  - {name: wifi, between: [phone, web], \(link)}
                \(timeline)
                """, file: "s.yaml").scenario)
            plan = try TopologyPlan(scenario: scenario, runID: runID)
            backend = NetemBackend(plan: plan, seed: scenario.seed)
            topology = try Topology.build(plan, backend: backend, control: network)
            try backend.start(topology)
        }
    }

    @Test func theBackendPutsEachFlowInABandOfItsOwn() throws {
        let built = try Built(link: "delay: 10ms, rate: 10mbit, flows: [{match: {protocol: udp, port: 53}, delay: 1s}]", runID: "flows1")
        let (scenario, network, plan, backend) = (built.scenario, built.network, built.plan, built.backend)
        defer { built.topology.teardown() }
        let phone = try #require(network.namespace(plan.nodes[0].namespaceName))
        let before = phone.shaping.count
        let schedule = TimelineSchedule(scenario: scenario)
        let up = try #require(schedule.initial.first { $0.direction == .up })
        try backend.apply(up.conditions, link: "wifi", direction: .up)
        let asked = Array(phone.shaping.dropFirst(before))
        // prio at the root, the link's own netem and tbf in band 0, the flow's in band 1, one filter per family.
        #expect(asked.first == "wifi prio 1: root bands 9")
        #expect(asked.contains { $0.hasPrefix("wifi netem 10: 1:1 ") && $0.contains("delay: 0.01 seconds") }, "\(asked)")
        #expect(asked.contains { $0.hasPrefix("wifi tbf 20: 10:1 ") }, "\(asked)")
        #expect(asked.contains { $0.hasPrefix("wifi netem 11: 1:2 ") && $0.contains("delay: 1.0 seconds") }, "\(asked)")
        #expect(asked.contains { $0.hasPrefix("wifi tbf 21: 11:1 ") }, "the flow keeps the link's rate: \(asked)")
        let index = try #require(phone.link("wifi")).index
        #expect(phone.filters[index]?.map(\.classID) == [QdiscHandle(major: 1, minor: 2), QdiscHandle(major: 1, minor: 2)])

        // Only settings change: no filter is rewritten. The flow goes: the root stays prio, the filters go.
        let settled = phone.shaping.count
        var slower = up.conditions
        slower.flows[0].impairment.delay = .seconds(2)
        try backend.apply(slower, link: "wifi", direction: .up)
        #expect(!phone.shaping.dropFirst(settled).contains { $0.contains("filter") })
        var without = up.conditions
        without.flows = []
        try backend.apply(without, link: "wifi", direction: .up)
        #expect(phone.prio.contains(index) && (phone.filters[index] ?? []).isEmpty)
        #expect(phone.shaping.suffix(2) == ["wifi delete filters 1: prio 1", "wifi delete filters 1: prio 2"])
    }

    /// A change of a direction's flows replaces its filters make-before-break: a flow that
    /// stays is matched at every moment, and one that goes is matched until the new set is in.
    @Test func aFlowThatStaysIsMatchedWhileAnotherGoes() throws {
        let built = try Built(link: """
            delay: 10ms, flows: [{match: {protocol: udp, port: 53}, delay: 200ms}, {match: {protocol: tcp, port: 443}, loss: 100%}]
            """, runID: "flows3")
        let (scenario, network, plan, backend) = (built.scenario, built.network, built.plan, built.backend)
        defer { built.topology.teardown() }
        let phone = try #require(network.namespace(plan.nodes[0].namespaceName))
        let index = try #require(phone.link("wifi")).index
        let up = try #require(TimelineSchedule(scenario: scenario).initial.first { $0.direction == .up })
        try backend.apply(up.conditions, link: "wifi", direction: .up)
        let udpBand = QdiscHandle(major: 1, minor: 2), tcpBand = QdiscHandle(major: 1, minor: 3)
        #expect(Set((phone.filters[index] ?? []).map(\.classID)) == [udpBand, tcpBand])
        let settled = phone.filterHistory[index]?.count ?? 0

        // The 443 flow is reset away, then comes back, then both go: three replacements.
        var onlyUDP = up.conditions
        onlyUDP.flows.removeLast()
        for conditions in [onlyUDP, up.conditions, onlyUDP] {
            try backend.apply(conditions, link: "wifi", direction: .up)
        }
        let during = Array((phone.filterHistory[index] ?? []).dropFirst(settled))
        #expect(during.count >= 6, "each replacement adds, then deletes: \(during.count) changes")
        for (step, filters) in during.enumerated() {
            #expect(filters.filter { $0.classID == udpBand }.count >= 2, "the UDP flow unmatched after change \(step + 1): \(filters)")
        }
        // 443's filters stayed until the set without them was in, and none is left.
        #expect((phone.filters[index] ?? []).map(\.classID) == [udpBand, udpBand])
        #expect(Set((phone.filters[index] ?? []).map(\.priority)).count == 2)
        let lastAdd = try #require(phone.shaping.lastIndex { $0.hasPrefix("wifi filter 1: ") })
        let lastDelete = try #require(phone.shaping.lastIndex { $0.hasPrefix("wifi delete filters 1: prio") })
        #expect(lastAdd < lastDelete, "the new filters go in before the old go")
    }

    /// A direction the timeline gives its first flow later starts with the prio root, so that
    /// the flow's coming does not replace the root under the link's queued packets.
    @Test func aDirectionWhoseFlowComesLaterStartsWithThePrioRoot() throws {
        let built = try Built(link: "delay: 10ms", timeline: """
            timeline:
              - {at: 5s, link: wifi, direction: down, match: {port: 443}, set: {loss: 50%}}
            """, runID: "flows2")
        let (scenario, network, plan, backend) = (built.scenario, built.network, built.plan, built.backend)
        defer { built.topology.teardown() }
        let schedule = TimelineSchedule(scenario: scenario)
        backend.expectFlows(schedule)
        for initial in schedule.initial { try backend.apply(initial.conditions, link: initial.link, direction: initial.direction) }
        let phone = try #require(network.namespace(plan.nodes[0].namespaceName)), web = try #require(network.namespace(plan.nodes[1].namespaceName))
        // Down is sent by web: its end has the prio root from the start; the phone's (up) has netem at the root.
        #expect(web.shaping.contains("wifi prio 1: root bands 9") && !phone.shaping.contains { $0.contains("prio") })
        let before = web.shaping.count
        for change in schedule.changes { if case let .conditions(direction, conditions) = change.change {
            try backend.apply(conditions, link: change.link, direction: direction)
        } }
        let later = Array(web.shaping.dropFirst(before))
        #expect(!later.contains { $0.contains("prio 1: root") || $0.contains("delete 1: root") }, "\(later)")
        #expect(later.contains { $0.hasPrefix("wifi netem 11: 1:2 ") } && later.contains { $0.hasPrefix("wifi filter 1: prio 1 ip flowid 1:2") }, "\(later)")
    }
}
