import Foundation
import RoamCore
@testable import ScenarioModel
import Testing

/// `networks:` read into the scenario: the gateways, the internet and their links added with
/// their roles, network events expanded to each member's access link, and every mistake refused
/// where it stands.
@Suite struct NetworkScenarioTests {
    /// Tests/Fixtures/two-networks.yaml: two networks (a Wi-Fi with two members, an IPv6-only
    /// LTE with NAT64) and two servers; tests add timelines and expectations to it.
    static let base: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/two-networks.yaml").path
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }()

    func read(_ text: String) -> ScenarioReader.Outcome { ScenarioReader.parse(text, file: "s.yaml") }

    func errors(_ text: String) -> [String] { read(text).errors.map { "\($0.line):\($0.message)" } }

    @Test func networksAddGatewaysTheInternetAndTheirLinks() throws {
        let scenario = try #require(read(Self.base + "timeline:\n  - at: 5s\n    network: home\n    join: tablet\n").scenario,
                                    "\(errors(Self.base))")
        #expect(scenario.nodes.map(\.name) == ["phone", "tablet", "api", "web", "internet", "home-gw", "lte-gw"])
        #expect(scenario.nodes[2].role == .server(names: ["api.example.test"], families: [.ipv4]))
        #expect(scenario.nodes[3].role == .server(names: ["web.roam.test"], families: [.ipv4, .ipv6]))
        #expect(scenario.nodes[5].role == .gateway(network: "home"))
        #expect(scenario.links.map(\.name) == ["home.phone", "home.tablet", "home.uplink", "lte.phone", "lte.uplink", "api.internet", "web.internet"])
        let access = scenario.links[1]
        #expect(access.endpoints == ("tablet", "home-gw"))
        #expect(access.interfaceNames == ["home", "p1"])
        #expect(access.role == .access(network: "home", node: "tablet", index: 1))
        #expect(access.type == .wifi && access.up.delay == .milliseconds(5) && access.families == [.ipv4, .ipv6])
        #expect(scenario.links[3].type == .cellular && scenario.links[3].isExpensive && scenario.links[3].families == [.ipv6])
        #expect(scenario.links[2].interfaceNames == ["uplink", "gw0"])
        #expect(scenario.links[5].interfaceNames == ["srv0", "internet"] && scenario.links[5].families == [.ipv4])
        #expect(scenario.networks.map(\.name) == ["home", "lte"])
        #expect(scenario.networks[0].ipv4 == .nat44 && scenario.networks[1].ipv4 == .none && scenario.networks[1].nat64)
        // The tablet's first membership event is a join: it starts outside.
        #expect(scenario.networks[0].joinedAtStart == ["phone"])
        #expect(scenario.networks[1].joinedAtStart == ["phone"])
        #expect(scenario.timeline.map(\.link) == ["home.tablet"])
        #expect(scenario.problems.isEmpty, "\(scenario.problems)")
    }

    @Test func cellularDefaultsToCarrierGradeNAT() throws {
        let scenario = try #require(read(Self.base.replacingOccurrences(of: "    ipv4: none\n    nat64: true\n", with: "")).scenario)
        #expect(scenario.networks[1].ipv4 == .cgnat && scenario.networks[1].ipv6 && !scenario.networks[1].nat64)
    }

    @Test func aNetworkEventActsOnEveryMemberOrOne() throws {
        let text = Self.base + """
            timeline:
              - at: 2s
                network: home
                set: { loss: 5% }
              - at: 3s
                network: home
                node: phone
                down: true
              - at: 4s
                network: home
                node: phone
                up: true
              - at: 6s
                network: home
                leave: phone
              - at: 9s
                network: home
                join: phone
            expect:
              - node: phone
                path: cellular
                within: 2s
                after: { link: home.phone, event: leave }

            """
        let scenario = try #require(read(text).scenario, "\(errors(text))")
        #expect(scenario.timeline.map(\.link) == ["home.phone", "home.tablet", "home.phone", "home.phone", "home.phone", "home.phone"])
        #expect(scenario.timeline[4].action == .membership(false) && scenario.timeline[5].action == .membership(true))
        let schedule = TimelineSchedule(scenario: scenario)
        let membership = schedule.changes.filter { if case .membership = $0.change { true } else { false } }
        #expect(membership.map(\.action) == ["leave", "join"] && membership.map(\.at) == [.seconds(6), .seconds(9)])
    }

    @Test func networksRenumberRebindAndFailTheirResolvers() throws {
        let text = Self.base.replacingOccurrences(of: "    ipv4: none\n    nat64: true\n", with: "") + """
            timeline:
              - at: 2s
                network: home
                renumber: tablet
              - at: 3s
                network: lte
                rebind: true
              - at: 4s
                network: home
                dns: { fail: timeout, for: 5s }
              - at: 12s
                network: lte
                dns: { fail: nxdomain }
              - at: 14s
                network: lte
                dns: ok
              - at: 15s
                network: lte
                dns: { delay: 1500ms }
              - at: 16s
                network: lte
                dns: { fail: servfail, for: 1s }
              - at: 18s
                network: home
                dns: { fail: refused, for: 10s }
            expect:
              - node: phone
                path: satisfied
                within: 1s
                after: { link: lte.uplink, event: rebind }

            """
        let scenario = try #require(read(text).scenario, "\(errors(text))")
        #expect(scenario.timeline.map(\.link) == ["home.tablet", "lte.uplink", "home.uplink", "home.uplink", "lte.uplink", "lte.uplink", "lte.uplink",
                                                   "lte.uplink", "lte.uplink", "home.uplink"])
        // A fault replaces the one on (the delay, by the servfail), and its span's end ends it.
        #expect(scenario.timeline.map(\.action) == [.renumber, .rebind, .dns(.timeout), .dns(nil), .dns(.nxdomain), .dns(nil), .dnsDelay(.milliseconds(1500)),
                                                    .dns(.servfail), .dns(nil), .dns(.refused)])
        // A span that outlasts the scenario ends with it.
        #expect(scenario.timeline.map(\.at) == [2, 3, 4, 9, 12, 14, 15, 16, 17, 18].map { Duration.seconds($0) })
        let schedule = TimelineSchedule(scenario: scenario)
        #expect(schedule.changes.map(\.action) == ["renumber", "rebind", "dns", "dns-ok", "dns", "dns-ok", "dns", "dns", "dns-ok", "dns"])
        #expect(scenario.problems.isEmpty, "\(scenario.problems)")
    }

    @Test(arguments: [
        ("timeline:\n  - at: 1s\n    network: home\n    rebind: false\n", "write rebind: true"),
        ("timeline:\n  - at: 1s\n    network: home\n    node: phone\n    rebind: true\n", "rebind acts on the whole network; remove node"),
        ("timeline:\n  - at: 1s\n    link: home.uplink\n    rebind: true\n", "rebind is what a network does: write network: NAME with it"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: ok\n", "is not failing at 1s; dns: ok ends a dns: {fail: ...} or {delay: ...}"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: down\n",
         "dns is {fail: timeout|nxdomain|refused|servfail, for: DURATION}, {delay: DURATION, for: DURATION} or ok, not 'down'"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: { fail: slow }\n", "fail must be one of"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: { for: 2s }\n", ": one of fail and delay"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: { fail: timeout, delay: 2s }\n", ": one of fail and delay"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: { delay: 0s }\n", "delay"),
        ("timeline:\n  - at: 1s\n    network: home\n    dns: { delay: 2m }\n", "delay"),
        ("timeline:\n  - at: 1s\n    network: home\n    renumber: api\n", "node 'api' is not a member of network 'home'"),
        ("timeline:\n  - at: 1s\n    network: home\n    direction: down\n    renumber: phone\n", "direction does not apply to renumber"),
        ("timeline:\n  - at: 1s\n    network: hom\n    leave: phone\n", "no network named 'hom' is defined in networks (did you mean 'home'?)"),
        ("timeline:\n  - at: 1s\n    link: home.phone\n    leave: phone\n", "leave is what a phone does to a network: write network: NAME with it"),
        ("timeline:\n  - at: 1s\n    network: lte\n    leave: tablet\n", "node 'tablet' is not a member of network 'lte'"),
        ("timeline:\n  - at: 1s\n    network: home\n    node: api\n    down: true\n", "node 'api' is not a member of network 'home'"),
        ("timeline:\n  - at: 1s\n    network: home\n    leave: phone\n  - at: 2s\n    network: home\n    leave: phone\n", "has left already"),
        ("timeline:\n  - at: 1s\n    network: home\n    direction: up\n    leave: phone\n", "direction does not apply to leave"),
        ("timeline:\n  - at: 1s\n    network: home\n    link: home.phone\n    leave: phone\n", "names a link or a network, not both"),
        ("timeline:\n  - at: 1s\n    network: home\n    node: phone\n    leave: phone\n", "leave names its node itself; remove node"),
        ("timeline:\n  - at: 1s\n    link: home.phone\n    node: phone\n    down: true\n", "node names a member of a network: write network: NAME with it"),
    ])
    func networkEventMistakesAreRefusedWhereTheyStand(_ timeline: String, _ message: String) {
        let found = errors(Self.base + timeline)
        #expect(found.contains { $0.contains(message) }, "\(found)")
        #expect(read(Self.base + timeline).scenario == nil)
    }

    @Test(arguments: [
        ("    nat64: true\n", "    ipv6: false\n    nat64: true\n", "nat64: true) but gives no IPv6 (ipv6: false)"),
        ("members: [phone, tablet]", "members: [phone, api]", "node 'api' is on the internet (internet: true); a network's members are phones"),
        ("members: [phone, tablet]", "members: [phone, phone]", "'phone' is a member already"),
        ("members: [phone, tablet]", "members: [phone, nobody]", "no node named 'nobody' is defined in nodes"),
        ("members: [phone, tablet]", "members: []", "members names the nodes that join the network"),
        ("  - name: home\n", "  - name: uplink\n", "network name 'uplink' is taken"),
        ("  - name: home\n", "  - name: a-very-long-name\n", "at most 12 characters"),
        ("    type: wifi\n", "    type: wifi\n    ipv4: nat46\n", "ipv4 must be one of"),
        ("    type: wifi\n", "    type: wifi\n    ipv4: none\n    ipv6: false\n", "gives no address family"),
        ("    type: wifi\n", "    type: wifi\n    dns: true\n", "unknown key 'dns'"),
        ("  tablet: {}\n", "  tablet: {}\n  home-gw: {}\n", "a scenario with networks names its gateway of 'home' so"),
        ("  tablet: {}\n", "  tablet: {}\n  internet: {}\n", "a scenario with networks names its internet so"),
        ("[api.example.test]", "[api..test]", "'api..test' is not a host name"),
        ("[api.example.test]", "[\"api.exa mple.test\"]", "is not a host name"),
        ("families: [ipv4]", "families: [ipv5]", "families must be one of"),
    ])
    func networkMistakesAreRefusedWhereTheyStand(_ original: String, _ replacement: String, _ message: String) {
        let text = Self.base.replacingOccurrences(of: original, with: replacement)
        #expect(text != Self.base)
        let found = errors(text)
        #expect(found.contains { $0.contains(message) }, "\(found)")
        #expect(read(text).scenario == nil)
    }

    @Test func aNetworkWithoutNATHasNothingToRebind() {
        let text = Self.base.replacingOccurrences(of: "    nat64: true\n", with: "") + "timeline:\n  - at: 1s\n    network: lte\n    rebind: true\n"
        let found = errors(text)
        #expect(found.contains { $0.contains("network 'lte' translates no IPv4 (ipv4: none, no nat64): it has no NAT to rebind") }, "\(found)")
    }

    @Test func aServerWithoutNetworksIsRefused() {
        let found = errors("name: s\nduration: 5s\nnodes:\n  phone: {}\n  api: { internet: true }\n")
        #expect(found.contains { $0.contains("node 'api' is on the internet, but the scenario has no networks to reach it from") }, "\(found)")
    }

    @Test func aMemberWhoseLinkTakesTheNetworksNameIsRefused() {
        let text = Self.base + "links:\n  - name: home\n    between: [phone, tablet]\n"
        let found = errors(text)
        #expect(found.contains { $0.contains("node 'phone' has a link named 'home' already") }, "\(found)")
    }

    /// A client of a server on the internet connects by name: `host`, or the server's first name,
    /// over whatever families the lookup gives unless `family` says otherwise.
    @Test func workloadsReachInternetServersByName() throws {
        let text = Self.base + """
            workloads:
              - { name: a, kind: requests, from: api, to: phone }
              - { name: b, kind: bulk, from: web, to: phone, host: WEB.roam.test, family: ipv6 }
              - { name: c, kind: command, from: phone, run: [true] }

            """
        let scenario = try #require(read(text).scenario, "\(errors(text))")
        #expect(scenario.workloads.map(\.host) == ["api.example.test", "web.roam.test", nil])
        #expect(scenario.workloads.map(\.family) == [.any, .ipv6, .ipv4])
    }

    /// A scenario built in Swift gets what the reader makes of the same file: the same nodes,
    /// links (roles, interface names, radios) and networks.
    @Test func aNetworkBuiltInSwiftIsTheOneTheReaderMakes() throws {
        let read = try #require(read(Self.base).scenario, "\(errors(Self.base))")
        var built = Scenario(name: "networks", duration: .seconds(20), nodes: [
            ScenarioNode(name: "phone"), ScenarioNode(name: "tablet"),
            ScenarioNode(name: "api", role: .server(names: ["api.example.test"], families: [.ipv4])),
            ScenarioNode(name: "web", role: .server(names: ["web.roam.test"], families: [.ipv4, .ipv6])),
        ])
        #expect(built.problems.contains("server node 'api' has no link to the internet: add it before the networks (addNetwork(_:radio:))"))
        built.addNetwork(NetworkSpec(name: "home", type: .wifi, ipv4: .nat44, members: ["phone", "tablet"]),
                         radio: LinkSpec("home", between: ("", ""), type: .wifi, both: Impairment(delay: .milliseconds(5))))
        built.addNetwork(NetworkSpec(name: "lte", type: .cellular, ipv4: .none, nat64: true, members: ["phone"]))
        #expect(built.problems.isEmpty, "\(built.problems)")
        #expect(built.nodes.map(\.name) == read.nodes.map(\.name) && built.nodes.map(\.role) == read.nodes.map(\.role))
        #expect(built.links.map(\.name) == read.links.map(\.name))
        for (mine, theirs) in zip(built.links, read.links) {
            #expect(mine.endpoints == theirs.endpoints && mine.interfaceNames == theirs.interfaceNames && mine.role == theirs.role
                && mine.type == theirs.type && mine.isExpensive == theirs.isExpensive && mine.families == theirs.families
                && mine.up == theirs.up && mine.down == theirs.down, "\(mine.name)")
        }
        var networks = read.networks
        for index in networks.indices { networks[index].line = 0 }
        #expect(built.networks == networks)
    }

    /// A span's end (`for:`) is not an event listed in the file: an event listed after the span's
    /// start, before its end, is in order.
    @Test func anEventWithinASpanIsInFileOrder() throws {
        let text = Self.base + "timeline:\n  - at: 2s\n    network: lte\n    dns: { fail: nxdomain, for: 5s }\n  - at: 3s\n    network: lte\n    renumber: phone\n"
        let outcome = read(text)
        #expect(outcome.scenario?.timeline.map(\.at) == [.seconds(2), .seconds(3), .seconds(7)])
        #expect(outcome.diagnostics.isEmpty, "\(outcome.diagnostics)")
    }

    @Test(arguments: [
        ("{ name: a, kind: requests, from: api, to: phone, host: www.example.test }",
         "'www.example.test' is not a name of node 'api'; its names are api.example.test"),
        ("{ name: a, kind: requests, from: phone, to: tablet, host: api.example.test }",
         "host names a server on the internet by one of its names, and node 'phone' is not on the internet"),
        ("{ name: a, kind: command, from: api, run: [true], host: api.example.test }",
         "host applies to the bulk, requests and stream workloads Roam runs; a command looks names up itself"),
        ("{ name: a, kind: requests, from: api, to: phone, host: [api.example.test] }", "host must be"),
    ])
    func hostMistakesAreRefused(_ workload: String, _ message: String) {
        let found = errors(Self.base + "workloads:\n  - \(workload)\n")
        #expect(found.contains { $0.hasPrefix("21:") && $0.contains(message) }, "\(found)")
    }

    // MARK: - Captive portals

    /// `base` with a portal on the home network.
    func withPortal(_ portal: String = "true") -> String {
        Self.base.replacingOccurrences(of: "    delay: 5ms\n", with: "    delay: 5ms\n    portal: \(portal)\n")
    }

    @Test func aPortalIsReadWithItsDefaultsOrAsWritten() throws {
        let plain = try #require(read(withPortal()).scenario, "\(errors(withPortal()))")
        #expect(plain.networks[0].portal == CaptivePortal())
        #expect(plain.networks[0].portal?.dns == .through && plain.networks[0].portal?.others == .drop && plain.networks[0].portal?.announcesAPI == true)
        #expect(plain.networks[1].portal == nil)
        let text = withPortal("{ dns: hijack, others: reset, expires: 10m, api: false }")
        let written = try #require(read(text).scenario, "\(errors(text))")
        #expect(written.networks[0].portal == CaptivePortal(dns: .hijack, others: .reset, expires: .seconds(600), announcesAPI: false))
        #expect(try #require(read(withPortal("false")).scenario).networks[0].portal == nil)
    }

    @Test func portalLoginsAndExpectationsAreReadForEachMember() throws {
        let text = withPortal("{ expires: 30s }") + """
            timeline:
              - at: 5s
                network: home
                node: phone
                portal: login
              - at: 8s
                network: home
                portal: logout
            workloads:
              - name: app
                kind: requests
                from: api
                to: phone
            expect:
              - node: phone
                path: { connectivity: portal, interface: home }
                at: 2s
              - node: phone
                path: { connectivity: validated }
                within: 1s
                after: { link: home.phone, event: login }
              - workload: app
                maxBytesWhilePortal: { network: home, bytes: 0b }

            """
        let scenario = try #require(read(text).scenario, "\(errors(text))")
        #expect(scenario.timeline.map(\.link) == ["home.phone", "home.phone", "home.tablet"])
        #expect(scenario.timeline.map(\.action) == [.portal(login: true), .portal(login: false), .portal(login: false)])
        #expect(scenario.expectations.map(\.check) == [
            .connectivity(ConnectivityExpectation(state: .portal, interface: "home", timing: .at(.seconds(2)))),
            .connectivity(ConnectivityExpectation(state: .validated, timing: .after(link: "home.phone", event: "login", within: .seconds(1)))),
            .maxBytesWhilePortal(network: "home", bytes: 0),
        ])
        #expect(scenario.problems.isEmpty, "\(scenario.problems)")
        let schedule = TimelineSchedule(scenario: scenario)
        #expect(schedule.changes.map(\.action) == ["login", "logout", "logout"])
    }

    @Test(arguments: [
        ("portal: maybe", "portal must be true or false"),
        ("portal: { dns: block }", "dns must be one of"),
        ("portal: { others: ignore }", "others must be one of"),
        ("portal: { expires: 0s }", "expires"),
        ("portal: { expires: 500ms }", "must be at least 1s"),
        ("portal: { login: post }", "unknown key 'login'"),
    ])
    func portalMistakesAreRefusedWhereTheyStand(_ portal: String, _ message: String) {
        let text = Self.base.replacingOccurrences(of: "    delay: 5ms\n", with: "    delay: 5ms\n    \(portal)\n")
        let found = errors(text)
        #expect(found.contains { $0.contains(message) }, "\(found)")
        #expect(read(text).scenario == nil)
    }

    @Test(arguments: [
        ("timeline:\n  - at: 1s\n    network: lte\n    portal: login\n", "network 'lte' has no captive portal; give it one (portal: true)"),
        ("timeline:\n  - at: 1s\n    network: home\n    portal: accept\n", "portal must be login or logout"),
        ("timeline:\n  - at: 1s\n    link: home.phone\n    portal: login\n", "portal is what a phone does at a network's captive portal"),
        ("timeline:\n  - at: 1s\n    network: home\n    direction: up\n    portal: login\n", "direction does not apply to portal"),
        ("expect:\n  - node: phone\n    path: { connectivity: open }\n    at: 1s\n", "connectivity must be one of"),
        ("expect:\n  - node: phone\n    path: { interface: home }\n    at: 1s\n", "needs 'connectivity'"),
        ("expect:\n  - node: phone\n    path: satisfied\n    at: 1s\n", "at: applies to path: {connectivity: ...}"),
        ("expect:\n  - node: phone\n    path: { connectivity: portal }\n    at: 1s\n    within: 1s\n", "at a time (at) or within a time after an event"),
        ("expect:\n  - node: phone\n    path: { connectivity: portal }\n    within: 1s\n    after: { link: home.phone, event: login }\n",
         "the timeline has no login event on link 'home.phone'"),
        ("workloads:\n  - name: app\n    kind: requests\n    from: api\n    to: phone\nexpect:\n  - workload: app\n    maxBytesWhilePortal: { network: lte, bytes: 0b }\n",
         "network 'lte' has no captive portal (portal: true)"),
        ("workloads:\n  - name: app\n    kind: requests\n    from: api\n    to: phone\nexpect:\n  - workload: app\n    maxBytesWhilePortal: { network: hom, bytes: 0b }\n",
         "no network named 'hom' is defined in networks (did you mean 'home'?)"),
        ("workloads:\n  - name: app\n    kind: requests\n    from: api\n    to: web\nexpect:\n  - workload: app\n    maxBytesWhilePortal: { network: home, bytes: 0b }\n",
         "runs its client in node 'web', which is not a member of network 'home'"),
        ("workloads:\n  - name: app\n    kind: command\n    from: phone\n    run: [true]\nexpect:\n  - workload: app\n    maxBytesWhilePortal: { network: home, bytes: 0b }\n",
         "a portal counts the bytes of bulk, requests and stream workloads"),
    ])
    func portalEventAndExpectationMistakesAreRefused(_ tail: String, _ message: String) {
        let text = withPortal() + tail
        let found = errors(text)
        #expect(found.contains { $0.contains(message) }, "\(found)")
        #expect(read(text).scenario == nil)
    }
}
