import LinkEmulation
import ScenarioModel
import Testing

/// Which packets a flow's selector takes (both families, both directions, past IPv6's
/// extension headers, not fragments' tails), and a direction's flows as pipelines of their own.
@Suite struct FlowClassesTests {
    static let phone4: [UInt8] = [198, 18, 0, 2], server4: [UInt8] = [198, 18, 1, 2]
    static let phone6: [UInt8] = [0xfd, 0x72] + [UInt8](repeating: 0, count: 13) + [2]
    static let server6: [UInt8] = [0xfd, 0x72] + [UInt8](repeating: 0, count: 13) + [9]

    /// An IPv4 packet of `protocolNumber` from `source`:`sourcePort` to `destination`:`destinationPort`.
    static func ipv4(_ protocolNumber: UInt8, from source: [UInt8], _ sourcePort: UInt16, to destination: [UInt8], _ destinationPort: UInt16,
                     fragmentOffset: UInt16 = 0, options: Int = 0) -> [UInt8] {
        let header = 20 + options
        var packet = [UInt8](repeating: 0, count: header + 8 + 16)
        packet[0] = 0x40 | UInt8(header / 4)
        packet[6] = UInt8(fragmentOffset >> 8)
        packet[7] = UInt8(fragmentOffset & 0xff)
        packet[8] = 64
        packet[9] = protocolNumber
        packet.replaceSubrange(12..<16, with: source)
        packet.replaceSubrange(16..<20, with: destination)
        packet[header] = UInt8(sourcePort >> 8)
        packet[header + 1] = UInt8(sourcePort & 0xff)
        packet[header + 2] = UInt8(destinationPort >> 8)
        packet[header + 3] = UInt8(destinationPort & 0xff)
        return packet
    }

    /// An IPv6 packet, with a hop-by-hop options header first when asked.
    static func ipv6(_ protocolNumber: UInt8, from source: [UInt8], _ sourcePort: UInt16, to destination: [UInt8], _ destinationPort: UInt16,
                     hopByHop: Bool = false) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: 40)
        packet[0] = 0x60
        packet[6] = hopByHop ? 0 : protocolNumber
        packet[7] = 64
        packet.replaceSubrange(8..<24, with: source)
        packet.replaceSubrange(24..<40, with: destination)
        if hopByHop { packet += [protocolNumber, 0, 1, 4, 0, 0, 0, 0] }
        packet += [UInt8(sourcePort >> 8), UInt8(sourcePort & 0xff), UInt8(destinationPort >> 8), UInt8(destinationPort & 0xff)]
        packet += [UInt8](repeating: 0, count: 16)
        return packet
    }

    func matches(_ selector: FlowSelector, _ packet: [UInt8], uplink: Bool) -> Bool {
        packet.withUnsafeBytes { selector.matches($0, uplink: uplink) }
    }

    @Test func aSelectorTakesItsFlowBothWaysAndNothingElse() throws {
        let server = try #require(AddressPrefix(parsing: "198.18.1.2"))
        let dns = FlowSelector(FlowMatch(protocols: [.udp], ports: [PortRange(53)], servers: ["web"]),
                               addresses: { $0 == "web" ? [server] : [] }, resolvers: [])
        #expect(dns.protocols == [17] && dns.remotePrefixes == [server])
        // A query up, its answer down.
        #expect(matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53), uplink: true))
        #expect(matches(dns, Self.ipv4(17, from: Self.server4, 53, to: Self.phone4, 40000), uplink: false))
        // The same packet read the other way round is not the flow: the far end's port is 40000.
        #expect(!matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53), uplink: false))
        // TCP to the same port, UDP to another port or another server.
        #expect(!matches(dns, Self.ipv4(6, from: Self.phone4, 40000, to: Self.server4, 53), uplink: true))
        #expect(!matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 54), uplink: true))
        #expect(!matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: [198, 18, 1, 3], 53), uplink: true))
        // Options move the ports; a fragment past the first has none.
        #expect(matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53, options: 8), uplink: true))
        #expect(!matches(dns, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53, fragmentOffset: 185), uplink: true))

        let https = FlowSelector(FlowMatch(ports: [PortRange(443), PortRange(8000, 8100)]), addresses: { _ in [] }, resolvers: [])
        #expect(https.protocols == [6, 17], "ports alone are TCP's and UDP's")
        #expect(matches(https, Self.ipv6(6, from: Self.phone6, 50000, to: Self.server6, 443), uplink: true))
        #expect(matches(https, Self.ipv6(17, from: Self.server6, 8050, to: Self.phone6, 50000, hopByHop: true), uplink: false))
        #expect(!matches(https, Self.ipv6(6, from: Self.phone6, 50000, to: Self.server6, 80), uplink: true))
        #expect(!matches(https, Self.ipv6(58, from: Self.phone6, 0, to: Self.server6, 0), uplink: true))

        let local = FlowSelector(FlowMatch(localPorts: [PortRange(5000)]), addresses: { _ in [] }, resolvers: [])
        #expect(matches(local, Self.ipv4(6, from: Self.phone4, 5000, to: Self.server4, 80), uplink: true))
        #expect(matches(local, Self.ipv4(6, from: Self.server4, 80, to: Self.phone4, 5000), uplink: false))

        let icmp = FlowSelector(FlowMatch(protocols: [.icmp]), addresses: { _ in [] }, resolvers: [])
        #expect(matches(icmp, Self.ipv4(1, from: Self.phone4, 0, to: Self.server4, 0), uplink: true))
        #expect(matches(icmp, Self.ipv6(58, from: Self.server6, 0, to: Self.phone6, 0), uplink: false))
        #expect(!matches(icmp, Self.ipv4(17, from: Self.phone4, 1, to: Self.server4, 1), uplink: true))

        // DNS: the network's resolver, TCP and UDP.
        let resolver = try #require(AddressPrefix(parsing: "198.18.0.1"))
        let resolving = FlowSelector(FlowMatch(dns: true), addresses: { _ in [] }, resolvers: [resolver])
        #expect(matches(resolving, Self.ipv4(6, from: Self.phone4, 40000, to: [198, 18, 0, 1], 53), uplink: true))
        #expect(!matches(resolving, Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53), uplink: true))

        // A server the run gives no address selects nothing, not everything.
        let nowhere = FlowSelector(FlowMatch(servers: ["gone"]), addresses: { _ in [] }, resolvers: [])
        #expect(nowhere.selectsNothing && !matches(nowhere, Self.ipv4(17, from: Self.phone4, 1, to: Self.server4, 53), uplink: true))
        // Short and foreign packets match nothing that reads past them.
        for packet: [UInt8] in [[], [0x45], [0x60, 0, 0], Array(Self.ipv4(17, from: Self.phone4, 1, to: Self.server4, 53).prefix(22)), [0x50] + [UInt8](repeating: 0, count: 40)] {
            #expect(!matches(dns, packet, uplink: true))
        }
    }

    @Test func eachFlowIsAPipelineOfItsOwnThatKeepsItsQueueAcrossChanges() throws {
        var flows = FlowClasses(seed: 7, logsDecisions: true)
        let dns = FlowSelector(FlowMatch(protocols: [.udp], ports: [PortRange(53)]), addresses: { _ in [] }, resolvers: [])
        let slow = LinkConditions(impairment: Impairment(delay: .milliseconds(500)))
        flows.update([FlowSetup(selector: dns, conditions: slow, capacity: .unlimited, distribution: nil)])
        let query = Self.ipv4(17, from: Self.phone4, 40000, to: Self.server4, 53)
        let index = try #require(query.withUnsafeBytes { flows.classify($0, uplink: true) })
        #expect(Self.ipv4(6, from: Self.phone4, 40000, to: Self.server4, 80).withUnsafeBytes { flows.classify($0, uplink: true) } == nil)
        flows.arrive(query, class: index, at: 0, enteringAt: nil)
        #expect(flows.nextEvent() == 500_000_000)
        // Settings change: the same flow, its packet still due at 500 ms.
        flows.update([FlowSetup(selector: dns, conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(100))),
                                capacity: .unlimited, distribution: nil)])
        #expect(flows.nextEvent() == 500_000_000)
        // The flow goes (reset): what it holds is still delivered, and counted.
        flows.update([])
        #expect(flows.classes.isEmpty && !flows.isEmpty)
        var output: [[UInt8]] = []
        var times: [Int64] = []
        flows.release(upTo: 499_000_000, into: &output, times: &times)
        #expect(output.isEmpty)
        flows.release(upTo: 500_000_000, into: &output, times: &times)
        #expect(output == [query] && flows.isEmpty)
        #expect(flows.statistics.arrived == 1 && flows.statistics.delivered == 1)
        // Its decisions reach the log though it went, led by its flow.
        #expect(flows.takeDecisions() == ["flow1 1 44 deliver 500000"])
    }
}
