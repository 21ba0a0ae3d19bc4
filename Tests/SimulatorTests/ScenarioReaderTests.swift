import Foundation
import PathMonitor
@testable import ScenarioModel
@testable import Simulator
import Testing

/// The scenarios shipped in scenarios/, found from this file's place in the repository.
let bundledScenarios: [String] = {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let directory = root.appendingPathComponent("scenarios")
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return names.filter { $0.hasSuffix(".yaml") }.sorted().map { directory.appendingPathComponent($0).path }
}()

@Suite struct BundledScenarioTests {
    @Test func theSevenDocumentedScenariosShip() {
        let names = Set(bundledScenarios.map { URL(fileURLWithPath: $0).deletingPathExtension().lastPathComponent })
        #expect(names.isSuperset(of: ["walk-out-of-home", "spotty-wifi", "elevator", "blackholed-wifi", "airplane-wifi", "tethered-hotspot", "low-data-mode"]))
    }

    @Test(arguments: bundledScenarios)
    func validates(_ path: String) {
        let outcome = ScenarioReader.read(contentsOf: path)
        #expect(outcome.diagnostics.isEmpty, "\(outcome.diagnostics.map(\.description).joined(separator: "\n"))")
        #expect(outcome.scenario != nil)
    }

    @Test func readsWalkOutOfHomeAsWritten() throws {
        let path = try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") })
        let scenario = try #require(ScenarioReader.read(contentsOf: path).scenario)
        #expect(scenario.name == "walk-out-of-home")
        #expect(scenario.seed == 42)
        #expect(scenario.duration == .seconds(40))
        #expect(scenario.nodes.map(\.name) == ["phone", "server"])
        let wifi = scenario.links[0], cell = scenario.links[1]
        #expect(wifi.endpoints == ("phone", "server"))
        #expect(wifi.type == .wifi && !wifi.isExpensive)
        #expect(wifi.up == Impairment(delay: .milliseconds(8), jitter: .milliseconds(2), rate: .mbit(50), loss: .random(rate: 0.001, correlation: 0)))
        #expect(wifi.down == wifi.up)
        #expect(cell.type == .cellular && cell.isExpensive)
        #expect(cell.up.delay == .milliseconds(45))
        #expect(scenario.timeline.map(\.at) == [.seconds(5), .seconds(10), .seconds(15), .seconds(30)])
        #expect(scenario.timeline[0].action == .set(Impairment(delay: .milliseconds(60), loss: .random(rate: 0.05, correlation: 0))))
        #expect(scenario.timeline[1].action == .ramp(to: Impairment(rate: .mbit(1), loss: .random(rate: 0.4, correlation: 0)), over: .seconds(5)))
        #expect(scenario.timeline[2].action == .down)
        #expect(scenario.timeline[3].action == .up)
        #expect(scenario.workloads == [Workload(name: "video", kind: .stream(bitrate: .mbit(4), buffer: .seconds(2)), from: "server", to: "phone",
                                                mode: .handover, start: .zero, stop: nil)])
        #expect(scenario.expectations.map(\.check) == [.maxStall(.seconds(2))])
    }

    @Test func profilesFillLinksAndExplicitKeysWin() throws {
        let outcome = ScenarioReader.parse("""
            name: p
            duration: 10s
            nodes: { phone: {}, server: {} }
            links:
              - name: cell
                between: [phone, server]
                profile: 3g
                delay: 150ms
                down: { rate: 1mbit }
            """, file: "p.yaml")
        let link = try #require(outcome.scenario?.links.first)
        #expect(link.type == .cellular && link.isExpensive)
        #expect(link.up == Impairment(delay: .milliseconds(150), rate: .kbit(330)))
        #expect(link.down == Impairment(delay: .milliseconds(150), rate: .mbit(1)))
    }
}

@Suite struct ScenarioDiagnosticsTests {
    static let valid = """
        name: t
        duration: 20s
        nodes:
          phone: {}
          server: {}
        links:
          - name: wifi
            between: [phone, server]
        """

    /// Parses `valid` with `extra` appended and returns the errors as `LINE:COL: MESSAGE`.
    func errors(_ extra: String, base: String = valid) -> [String] {
        ScenarioReader.parse(base + "\n" + extra, file: "t.yaml").errors.map { "\($0.line):\($0.column): \($0.message)" }
    }

    @Test(arguments: [
        ("    dealy: 8ms", "9:5: unknown key 'dealy' in link 'wifi' (did you mean 'delay'?)"),
        ("    loss: 140%", "9:11: loss must be between 0% and 100%, not 140%"),
        ("    delay: -5ms", "9:12: delay must be zero or more, not -5ms"),
        ("    rate: fast", "9:11: rate: 'fast' is not a rate; write a number with bit, kbit, mbit or gbit: 512kbit, 10mbit"),
        ("    jitter: 5", "9:13: jitter: '5' is not a duration; write a number with a unit: 250ms, 30s, 2m"),
        ("    type: satellite", "9:11: type must be one of wifi, cellular, wiredEthernet (or wired), other, not 'satellite'"),
        ("    expensive: maybe", "9:16: expensive must be true or false, not 'maybe'"),
        ("    limit: many", "9:12: limit must be packets (a whole number: 500) or bytes (a size: 256kb), not 'many'"),
        ("    loss: { model: gilbert, p: 1% }", "9:11: loss model must be random or gilbert-elliott, not 'gilbert' (did you mean 'gilbert-elliott'?)"),
        ("    up: [1, 2]", "9:9: the up direction of link 'wifi' must be a mapping of keys to values, not a list"),
    ])
    func reportsLinkMistakes(_ line: String, _ expected: String) {
        #expect(errors(line) == [expected])
    }

    @Test(arguments: [
        ("timeline:\n  - at: 25s\n    link: wifi\n    down: true", "10:9: this event is at 25s, after the scenario ends (duration 20s)"),
        ("timeline:\n  - at: 5s\n    link: wlan0\n    down: true", "11:11: no link named 'wlan0' is defined in links"),
        ("timeline:\n  - at: 5s\n    link: wifi", "10:5: a timeline event needs one action: set, ramp, down, up, blackhole, flap, profile, reset"),
        ("timeline:\n  - at: 5s\n    link: wifi\n    down: true\n    up: true", "10:5: a timeline event takes one action, not down and up"),
        ("timeline:\n  - at: 5s\n    link: wifi\n    ramp: { to: { loss: 5% } }", "12:11: ramp needs 'over'"),
        ("timeline:\n  - at: 5s\n    link: wifi\n    flap: { period: 2s, until: 4s }", "12:11: until (4s) must come after the event's at (5s)"),
        ("timeline:\n  - at: 5s\n    link: wifi\n    flap: { period: 2s, duty: 100% }", "12:31: duty is the share of each period the link is up: more than 0% and less than 100%"),
        ("timeline:\n  - at: 5s\n    link: wifi\n    direction: sideways\n    down: true", "12:16: direction must be one of up, down, both, not 'sideways'"),
        ("workloads:\n  - name: w\n    kind: stream\n    from: server\n    to: phone", "10:5: a workload needs 'bitrate'"),
        ("workloads:\n  - name: w\n    kind: bulk\n    from: server\n    to: tablet", "13:9: no node named 'tablet' is defined in nodes"),
        ("workloads:\n  - name: w\n    kind: bulk\n    from: server\n    to: phone\n    mode: turbo", "14:11: mode must be one of none, handover, interactive, aggregate, not 'turbo'"),
        ("workloads:\n  - name: w\n    kind: bulk\n    from: server\n    to: phone\nexpect:\n  - workload: w\n    maxStall: 1s", "16:5: maxStall does not apply to workload 'w': stalls are measured for stream workloads"),
        ("expect:\n  - workload: nothing\n    completes: true", "10:15: no workload named 'nothing' is defined in workloads"),
        ("expect:\n  - node: phone\n    path: expensive\n    within: 1s\n    after: { link: wifi, event: vanish }", "13:33: event must be one of down, up, blackhole, set, ramp, flap, profile, join, leave, renumber, rebind, dns, dns-ok, login, logout"),
        ("colour: blue", "9:1: unknown key 'colour' in the scenario; known keys: name, description, seed, duration, nodes, profiles, links, networks, mobility, timeline, proxies, workloads, expect"),
    ])
    func reportsOtherMistakes(_ extra: String, _ expected: String) {
        #expect(errors(extra) == [expected])
    }

    @Test func reportsEverythingInOnePassInFileOrder() {
        let found = errors("""
                dealy: 8ms
                loss: 140%
            timeline:
              - at: 30s
                link: wlan
                down: true
            """)
        #expect(found == [
            "9:5: unknown key 'dealy' in link 'wifi' (did you mean 'delay'?)",
            "10:11: loss must be between 0% and 100%, not 140%",
            "12:9: this event is at 30s, after the scenario ends (duration 20s)",
            "13:11: no link named 'wlan' is defined in links",
        ])
    }

    @Test func reportsMissingTopLevelKeysAndBadReferences() {
        let found = ScenarioReader.parse("nodes:\n  phone: {}\nlinks:\n  - name: l\n    between: [phone, phone]\n", file: "x.yaml").errors
        #expect(found.map(\.message) == ["the scenario needs 'name'", "the scenario needs 'duration'", "a link joins two different nodes; both ends are 'phone'"])
    }

    @Test func reportsYAMLSyntaxWithItsPlace() {
        let outcome = ScenarioReader.parse("name: x\nduration: 10s\nnodes: [phone\n", file: "s.yaml")
        let error = outcome.errors.first
        #expect(outcome.errors.count == 1)
        #expect(error?.message.hasPrefix("YAML syntax:") == true)
        #expect(error?.line == 4)
    }

    @Test func reportsDuplicateKeys() {
        let outcome = ScenarioReader.parse("name: x\nname: y\nduration: 10s\nnodes: { a: {} }\n", file: "d.yaml")
        #expect(outcome.errors.map(\.message) == ["duplicate key 'name' in one mapping"])
    }

    @Test func rendersLikeACompiler() {
        let diagnostic = ScenarioReader.parse(Self.valid + "\n    dealy: 8ms", file: "walk.yaml").errors[0]
        #expect(diagnostic.description == """
            walk.yaml:9:5: error: unknown key 'dealy' in link 'wifi' (did you mean 'delay'?)
                dealy: 8ms
                ^
            """)
    }

    @Test func warnsAboutSettingsThatDoNothing() {
        let outcome = ScenarioReader.parse(Self.valid + "\n    reorder: 5%", file: "w.yaml")
        #expect(outcome.errors.isEmpty)
        #expect(outcome.scenario != nil)
        #expect(outcome.diagnostics.map(\.severity) == [.warning])
    }

    @Test func reportsAnUnreadableFile() {
        let outcome = ScenarioReader.read(contentsOf: "/nonexistent/scenario.yaml")
        #expect(outcome.errors.map(\.description) == ["/nonexistent/scenario.yaml: error: cannot read the file: No such file or directory"])
    }

    @Test func mptcpizeIsACommandSetting() throws {
        let header = "name: m\nduration: 5s\nnodes: { a: {}, b: {} }\nlinks: [{ name: l, between: [a, b] }]\nworkloads:\n"
        let parsed = ScenarioReader.parse(header + "  - { name: c, kind: command, from: a, to: b, mode: aggregate, mptcpize: true, run: \"true\" }\n", file: "m.yaml")
        let scenario = try #require(parsed.scenario, "\(parsed.diagnostics)")
        #expect(scenario.workloads[0].mptcpize && scenario.workloads[0].mode == .aggregate)
        let onBulk = ScenarioReader.parse(header + "  - { name: c, kind: bulk, from: a, to: b, mptcpize: true }\n", file: "m.yaml")
        #expect(onBulk.scenario == nil && onBulk.errors.contains { $0.message.hasPrefix("unknown key 'mptcpize'") }, "\(onBulk.errors)")
        let notBool = ScenarioReader.parse(header + "  - { name: c, kind: command, from: a, mptcpize: yes please, run: \"true\" }\n", file: "m.yaml")
        #expect(notBool.scenario == nil && notBool.errors.contains { $0.message.contains("mptcpize") }, "\(notBool.errors)")
    }

    @Test func linksCarryTheFamiliesTheySayAndWorkloadsPickOne() throws {
        let header = "name: f\nduration: 5s\nnodes: { a: {}, b: {} }\nlinks:\n"
            + "  - { name: wifi, between: [a, b], families: [ipv4] }\n  - { name: cell, between: [a, b], families: [ipv6] }\nworkloads:\n"
        let parsed = ScenarioReader.parse(header + "  - { name: s, kind: stream, from: a, to: b, bitrate: 1mbit, family: any }\n", file: "f.yaml")
        let scenario = try #require(parsed.scenario, "\(parsed.diagnostics)")
        #expect(scenario.links.map(\.families) == [[.ipv4], [.ipv6]])
        #expect(scenario.workloads[0].family == .any && scenario.workloads[0].family.families == [.ipv6, .ipv4])
        let byDefault = try #require(ScenarioReader.parse("name: f\nduration: 5s\nnodes: { a: {}, b: {} }\nlinks: [{ name: l, between: [a, b] }]\n",
                                                          file: "f.yaml").scenario)
        #expect(byDefault.links[0].families == [.ipv4, .ipv6])

        /// The first error `text` gives.
        func error(_ text: String) -> String { ScenarioReader.parse(text, file: "f.yaml").errors.first?.message ?? "none" }
        #expect(error(header + "  - { name: s, kind: bulk, from: a, to: b, family: ipv5 }\n")
                == "family must be one of ipv4, ipv6, any, not 'ipv5' (did you mean 'ipv4'?)")
        #expect(error(header.replacingOccurrences(of: "[ipv4]", with: "[]")) == "families names at least one address family: [ipv4], [ipv6] or [ipv4, ipv6]")
        #expect(error(header.replacingOccurrences(of: "[ipv4]", with: "[ipv4, ipv4]")) == "families names each address family once")
        #expect(error(header.replacingOccurrences(of: "[ipv4]", with: "[ipx]")).hasPrefix("families must be one of ipv4, ipv6"))
        // Only cellular carries IPv6, only Wi-Fi IPv4: each single family is served; a link
        // missing for the family is said.
        #expect(ScenarioReader.parse(header + "  - { name: s, kind: bulk, from: a, to: b, family: ipv6 }\n", file: "f.yaml").scenario != nil)
        let v4Only = header.replacingOccurrences(of: "[ipv6]", with: "[ipv4]")
        #expect(error(v4Only + "  - { name: s, kind: bulk, from: a, to: b, family: ipv6 }\n")
                == "no IPv6 link joins 'a' and 'b' (see the links' families); set family: ipv4 or any on the workload")
        let v6Only = header.replacingOccurrences(of: "[ipv4]", with: "[ipv6]")
        #expect(error(v6Only + "  - { name: s, kind: bulk, from: a, to: b }\n")
                == "no IPv4 link joins 'a' and 'b' (see the links' families); set family: ipv6 or any on the workload")
        #expect(error(header + "  - { name: c, kind: command, from: a, family: ipv6, run: \"true\" }\n").hasPrefix("family applies to the bulk"))
    }
}
