import ScenarioModel
import Testing

/// Flow-scoped impairments (`match:`, `flows:`): read from a file, expanded by the timeline
/// schedule, and every mistake a placed error.
@Suite struct FlowMatchTests {
    func read(link: String = "", timeline: String = "", extra: String = "") -> ScenarioReader.Outcome {
        ScenarioReader.parse("""
            name: flows
            duration: 30s
            nodes: {phone: {}, web: {}}
            links:
              - {name: wifi, between: [phone, web], delay: 10ms\(link)}
            \(extra)timeline:
            \(timeline.isEmpty ? "  []" : timeline)

            """, file: "s.yaml")
    }

    @Test func matchesAreRead() throws {
        let outcome = read(link: ", flows: [{match: {protocol: udp, port: 53}, delay: 2s}, {match: {port: [80, 8000-8100], server: web}, loss: 30%, direction: up}, {match: {dns: true}, blackhole: true}, {match: {to: [198.18.5.0/24, 'fd00::/8'], protocol: icmp}, rate: 1mbit}]")
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        let flows = try #require(outcome.scenario?.links.first?.flows)
        #expect(flows.count == 4)
        #expect(flows[0].match == FlowMatch(protocols: [.udp], ports: [PortRange(53)]))
        #expect(flows[0].impairment.delay == .seconds(2) && flows[0].direction == .both)
        #expect(flows[1].match.ports == [PortRange(80), PortRange(8000, 8100)] && flows[1].match.servers == ["web"])
        #expect(flows[1].direction == .up && flows[1].impairment.loss == .random(rate: 0.3, correlation: 0))
        #expect(flows[2].match.dns && flows[2].isBlackholed)
        #expect(flows[3].match.prefixes.map(\.description) == ["198.18.5.0/24", "fd00::/8"])
        #expect(flows[3].match.description == "{protocol: icmp, to: [198.18.5.0/24, fd00::/8]}")

        // The schedule starts each direction with the flows that act on it.
        let schedule = TimelineSchedule(scenario: try #require(outcome.scenario))
        let up = try #require(schedule.initial.first { $0.direction == .up }).conditions
        let down = try #require(schedule.initial.first { $0.direction == .down }).conditions
        #expect(up.flows.count == 4 && down.flows.count == 3)
        #expect(up.flows[0].effective(on: up).impairment.delay == .seconds(2))
        #expect(up.flows[1].effective(on: up).impairment.delay == .milliseconds(10), "what a flow leaves is the link's")
    }

    @Test func theTimelineChangesAFlowAndTheLinkUnderIt() throws {
        let outcome = read(timeline: """
              - {at: 1s, link: wifi, match: {protocol: udp, port: 53}, set: {delay: 500ms}}
              - {at: 2s, link: wifi, set: {delay: 50ms, loss: 1%}}
              - {at: 3s, link: wifi, match: {protocol: udp, port: 53}, ramp: {to: {delay: 1500ms}, over: 1s}}
              - {at: 5s, link: wifi, match: {port: 443}, direction: down, blackhole: true}
              - {at: 6s, link: wifi, match: {port: 443}, direction: down, blackhole: false}
              - {at: 7s, link: wifi, match: {protocol: udp, port: 53}, reset: true}
            """)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        let scenario = try #require(outcome.scenario)
        #expect(scenario.timeline[0].match == FlowMatch(protocols: [.udp], ports: [PortRange(53)]))
        #expect(scenario.timeline[1].match == nil)
        let changes = TimelineSchedule(scenario: scenario).changes
        func up(at seconds: Double) -> LinkConditions? {
            changes.last { change in
                guard case .conditions(.up, _) = change.change else { return false }
                return change.at <= .milliseconds(Int64(seconds * 1000))
            }.flatMap { if case .conditions(_, let conditions) = $0.change { conditions } else { nil } }
        }
        let dns = FlowMatch(protocols: [.udp], ports: [PortRange(53)])
        // The flow's own delay; the link's loss, set after it, reaches it.
        let afterLinkSet = try #require(up(at: 2))
        #expect(afterLinkSet.impairment.delay == .milliseconds(50))
        #expect(afterLinkSet.effectiveImpairment(dns).delay == .milliseconds(500))
        #expect(afterLinkSet.effectiveImpairment(dns).loss == .random(rate: 0.01, correlation: 0))
        // The ramp goes from the flow's 500ms, not the link's 50ms.
        let halfway = try #require(up(at: 3.55))
        #expect(halfway.effectiveImpairment(dns).delay == .milliseconds(1000))
        // A blackhole down only, with its own match, lifted later.
        let blackholed = try #require(changes.last { change in
            guard case .conditions(.down, let conditions) = change.change else { return false }
            return change.at == .seconds(5) && conditions.flow(FlowMatch(ports: [PortRange(443)]))?.isBlackholed == true
        })
        #expect(blackholed.action == "blackhole")
        #expect(up(at: 5.5)?.flow(FlowMatch(ports: [PortRange(443)])) == nil, "the blackhole was down only")
        // Reset: the flow goes, the link's own settings stay.
        let reset = try #require(up(at: 7))
        #expect(reset.flows.isEmpty && reset.impairment.delay == .milliseconds(50))
    }

    @Test(arguments: [
        ("flows: [{match: {}, delay: 1s}]", "", "match names no packets"),
        ("flows: [{match: {protocol: sctp}, delay: 1s}]", "", "protocol must be one of tcp, udp, icmp, not 'sctp'"),
        ("flows: [{match: {port: 0}, delay: 1s}]", "", "port must be a port (1 to 65535) or a range of them (8000-8100), not '0'"),
        ("flows: [{match: {port: 90-80}, delay: 1s}]", "", "not '90-80'"),
        ("flows: [{match: {protocol: icmp, port: 1}, delay: 1s}]", "", "ICMP has no ports"),
        ("flows: [{match: {server: wbe}, delay: 1s}]", "", "no node is named 'wbe' (did you mean 'web'?)"),
        ("flows: [{match: {dns: true, port: 53}, delay: 1s}]", "", "dns: true is TCP and UDP to port 53"),
        ("flows: [{match: {to: 300.1.1.1}, delay: 1s}]", "", "to must be an address or a prefix"),
        ("flows: [{match: {to: 10.0.0.0/33}, delay: 1s}]", "", "not '10.0.0.0/33'"),
        ("flows: [{match: {port: 53}}]", "", "this flow changes nothing"),
        ("flows: [{match: {port: 53}, blackhole: false}]", "", "remove blackhole: false"),
        ("flows: [{match: {port: 53}, delay: 1s}, {match: {port: 53}, loss: 1%}]", "", "has a flow with this match already"),
        ("flows: [{match: {port: 53}, dealy: 1s}]", "", "(did you mean 'delay'?)"),
        ("", "  - {at: 1s, link: wifi, match: {port: 53}, down: true}", "match acts on set, ramp, blackhole and reset; down acts on the whole link"),
        ("", "  - {at: 1s, link: wifi, reset: true}", "reset gives the packets a match selects the link's own conditions again: add match"),
        ("", "  - {at: 1s, link: wifi, match: {port: 53}, blackhole: false}", "no blackhole is on for {port: 53} for link 'wifi'"),
        ("", "  - {at: 1s, link: wifi, match: {port: 53}, profile: lte}", "match acts on set, ramp, blackhole and reset; profile"),
    ])
    func mistakesAreErrors(link: String, timeline: String, message: String) {
        let errors = read(link: link.isEmpty ? "" : ", " + link, timeline: timeline).errors.map(\.message)
        #expect(errors.count == 1 && errors.allSatisfy { $0.contains(message) }, "\(errors)")
    }

    @Test func aLinkDirectionHoldsAtMostTheBoundOfFlows() {
        let limit = ScenarioLimits.maximumFlows
        let many = (1...(limit + 1)).map { "{match: {port: \($0)}, delay: 1s}" }.joined(separator: ", ")
        let errors = read(link: ", flows: [\(many)]").errors.map(\.message)
        #expect(errors.count == 1 && errors[0].contains("more than \(limit) flows up"), "\(errors)")
        // On the timeline, a reset frees a place.
        let events = (1...limit).map { "  - {at: \($0)s, link: wifi, match: {port: \($0)}, set: {delay: 1s}}" }
        let fits = read(timeline: (events + ["  - {at: 20s, link: wifi, match: {port: 1}, reset: true}",
                                               "  - {at: 21s, link: wifi, match: {port: 99}, set: {delay: 1s}}"]).joined(separator: "\n"))
        #expect(fits.errors.isEmpty, "\(fits.errors)")
        let over = read(timeline: (events + ["  - {at: 21s, link: wifi, match: {port: 99}, set: {delay: 1s}}"]).joined(separator: "\n"))
        #expect(over.errors.map(\.message).contains { $0.contains("would have more than \(limit) flows") }, "\(over.errors)")
    }

    /// Chaos Mesh selects pods and addresses, not ports: flows are left out of an export, each
    /// with a note, and the link's own conditions are exported as they are.
    @Test func anExportLeavesFlowsOutAndSaysSo() throws {
        let scenario = try #require(read(link: ", flows: [{match: {port: 53}, delay: 1s}]",
                                         timeline: "  - {at: 1s, link: wifi, match: {port: 443}, set: {loss: 10%}}").scenario)
        let result = try ChaosMeshExport.export(scenario)
        #expect(result.notes.contains { $0.hasPrefix("the flows of wifi (flows:) are not exported") }, "\(result.notes)")
        #expect(result.notes.contains { $0.hasPrefix("the change to {port: 443} on wifi at 1s is not exported") }, "\(result.notes)")
        // Past its notes (comments), nothing of the flows: no 10% loss, no one-second latency.
        let objects = result.yaml.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n")
        #expect(!objects.contains("loss: \"10\"") && !objects.contains("latency: \"1s\"") && !objects.contains("latency: \"1000ms\""), "\(objects)")
        #expect(objects.contains("latency: \"10ms\""), "the link's own delay is exported: \(objects)")
    }

    @Test func aLiveChangeCarriesAMatch() throws {
        let scenario = try #require(read().scenario)
        let outcome = LiveChange.read(#"{"match": {"protocol": "udp", "port": 53, "server": "web"}, "set": {"delay": "1s"}}"#,
                                      target: .link("wifi"), scenario: scenario, at: .seconds(1), open: false)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        #expect(outcome.events?.first?.match == FlowMatch(protocols: [.udp], ports: [PortRange(53)], servers: ["web"]))
        let unknown = LiveChange.read(#"{"match": {"server": "nobody"}, "set": {"delay": "1s"}}"#,
                                      target: .link("wifi"), scenario: scenario, at: .seconds(1), open: false)
        #expect(unknown.errors.map(\.message).contains { $0.contains("no node is named 'nobody'") })
    }

    @Test func prefixesAndPortsParseAndContain() throws {
        let prefix = try #require(AddressPrefix(parsing: "198.18.5.77/24"))
        #expect(prefix.description == "198.18.5.0/24")
        #expect(prefix.contains([198, 18, 5, 1]) && !prefix.contains([198, 18, 6, 1]) && !prefix.contains([UInt8](repeating: 0, count: 16)))
        let six = try #require(AddressPrefix(parsing: "fd00::/8"))
        #expect(six.contains([0xfd] + [UInt8](repeating: 1, count: 15)) && !six.contains([0xfe] + [UInt8](repeating: 0, count: 15)))
        #expect(AddressPrefix(parsing: "198.18.5.1")?.length == 32)
        for bad in ["", "1.2.3", "1.2.3.4/", "1.2.3.4/-1", "::1/129", "x::/8", "1.2.3.4/8/8", "1.2.3.4\u{0}/8", "1.2.3.4\u{0}junk", " 1.2.3.4"] { #expect(AddressPrefix(parsing: bad) == nil, "\(bad)") }
        #expect(PortRange(parsing: "8000-8100") == PortRange(8000, 8100))
        for bad in ["", "-", "0", "65536", "5-", "-5", "1-2-3", "+5", "99999999999999999999"] { #expect(PortRange(parsing: bad) == nil, "\(bad)") }
    }
}
