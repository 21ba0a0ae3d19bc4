import Multipath
import Netlink
import PathMonitor
@testable import ScenarioModel
import Testing
@testable import Simulator

/// How a link's conditions grade its quality, how the simulator tags links with it, and the
/// scenario keys for ultra-constrained links, path restrictions and bytes per link.
@Suite("Link quality and ultra-constrained links")
struct LinkQualityTests {
    @Test(arguments: [
        (Impairment(), LinkQuality.good),
        (Impairment(delay: .milliseconds(49), rate: .mbit(10), loss: .random(rate: 0.019, correlation: 0)), .good),
        (Impairment(rate: .kbit(9_999)), .moderate),
        (Impairment(delay: .milliseconds(50)), .moderate),
        (Impairment(loss: .random(rate: 0.02, correlation: 0)), .moderate),
        (Impairment(rate: .kbit(999)), .minimal),
        (Impairment(delay: .milliseconds(250)), .minimal),
        (Impairment(loss: .random(rate: 0.10, correlation: 0)), .minimal),
        // Gilbert-Elliott grades by its long-run loss: p 2%, r 18%, all lost in bad = 10%.
        (Impairment(loss: .gilbertElliott(p: 0.02, r: 0.18, lossInBad: 1, lossInGood: 0)), .minimal),
        // A trace grades by its mean rate: one 1500-byte opportunity a millisecond is 12 Mbit/s.
        (Impairment(trace: LinkTrace(path: "t", trace: DeliveryTrace(opportunities: [0], period: 1))), .good),
        (Impairment(trace: LinkTrace(path: "t", trace: DeliveryTrace(opportunities: [0], period: 2))), .moderate),
    ])
    func aDirectionGradesAsItsWorstMeasure(_ impairment: Impairment, _ expected: LinkQuality) {
        #expect(LinkQuality(grading: impairment) == expected)
    }

    @Test func aLinkGradesAsItsWorseDirectionAndABlackholeDoesNotCount() {
        let good = LinkConditions(impairment: Impairment(rate: .mbit(50)))
        let slowUp = LinkConditions(impairment: Impairment(rate: .kbit(64)))
        #expect(LinkQuality(grading: good, good) == .good)
        #expect(LinkQuality(grading: slowUp, good) == .minimal)
        #expect(LinkQuality(grading: good, slowUp) == .minimal)
        #expect(LinkQuality(grading: LinkConditions(impairment: Impairment(rate: .mbit(50)), isBlackholed: true), good) == .good)
    }

    @Test func bundledProfilesGradeAsTheNetworksTheyStandFor() throws {
        func grade(_ name: String) throws -> LinkQuality {
            let profile = try #require(LinkProfile.named(name))
            return LinkQuality(grading: LinkConditions(impairment: profile.up), LinkConditions(impairment: profile.down))
        }
        #expect(try grade("home-wifi") == .good)
        #expect(try grade("lte") == .good)
        #expect(try grade("nlc:Wi-Fi") == .good)
        #expect(try grade("3g") == .minimal)
        #expect(try grade("airplane-wifi") == .minimal)
        #expect(try grade("satellite") == .minimal)
        #expect(try grade("very-bad-network") == .minimal)
    }

    @Test func theSatelliteProfileIsUltraConstrainedAndSoConstrained() throws {
        let outcome = ScenarioReader.parse("""
            name: sat
            duration: 10s
            nodes: { phone: {}, server: {} }
            links:
              - { name: sat, between: [phone, server], profile: satellite }
              - { name: lowdata, between: [phone, server], type: wifi, ultraConstrained: true, constrained: false }
            """, file: "sat.yaml")
        let scenario = try #require(outcome.scenario, "\(outcome.diagnostics)")
        let sat = scenario.links[0], lowdata = scenario.links[1]
        #expect(sat.isUltraConstrained && sat.isConstrained && sat.isExpensive && sat.type == .cellular)
        #expect(lowdata.isUltraConstrained && !lowdata.isConstrained)
        #expect(LinkSpec("sat", between: ("phone", "server"), profile: "satellite") == sat)
    }

    @Test func theTopologyTagsEachLinkWithItsKindAndStartingQuality() throws {
        let scenario = Scenario(name: "tags", duration: .seconds(1), nodes: [ScenarioNode("phone"), ScenarioNode("server")],
                                links: [LinkSpec("sat", between: ("phone", "server"), profile: "satellite"),
                                        LinkSpec("wifi", between: ("phone", "server"), profile: "home-wifi")])
        let plan = try TopologyPlan(scenario: scenario, runID: "t")
        let phone = try #require(plan.node("phone"))
        let aliases = Dictionary(uniqueKeysWithValues: phone.interfaces.map { ($0.name, $0.alias) })
        #expect(aliases["sat"] == "roam:type=cellular,expensive,constrained,ultraConstrained,quality=minimal")
        #expect(aliases["wifi"] == "roam:type=wifi,expensive=false,constrained=false,ultraConstrained=false,quality=good")
        // What the monitor reads back from the tag.
        let attributes = InterfaceTag.attributes(fromAlias: aliases["sat"])
        #expect(attributes.isUltraConstrained == true && attributes.linkQuality == .minimal)
        #expect(try #require(plan.link("wifi")).alias(quality: .moderate).hasSuffix("quality=moderate"))
    }

    @Test func theTimelineStartsFromTheGradeTheTopologyTagged() throws {
        for path in bundledScenarios {
            let scenario = try #require(ScenarioReader.read(contentsOf: path).scenario)
            let plan = try TopologyPlan(scenario: scenario, runID: "t")
            let states = TimelinePlayer.initialStates(of: TimelineSchedule(scenario: scenario))
            for link in plan.links {
                let node = try #require(plan.node(link.first))
                let alias = try #require(node.interfaces.first { $0.link == link.name }?.alias)
                #expect(InterfaceTag.attributes(fromAlias: alias).linkQuality == states[link.name]?.quality, "\(path): \(link.name)")
            }
        }
    }

    @Test func pathConditionsNameUltraConstrainedAndQuality() {
        let sat = NetworkInterface(name: "sat", index: 2, type: .cellular, isExpensive: true, isConstrained: true, isUltraConstrained: true,
                                   linkQuality: .minimal)
        let path = NetworkPath(status: .satisfied, unsatisfiedReason: nil, availableInterfaces: [sat], primaryInterface: sat, isExpensive: true,
                               isConstrained: true, isUltraConstrained: true, linkQuality: .minimal, supportsIPv4: true, supportsIPv6: false,
                               supportsDNS: false, gateways: [])
        #expect(PathCondition.ultraConstrained.holds(for: path))
        #expect(!PathCondition.notUltraConstrained.holds(for: path))
        #expect(PathCondition.qualityMinimal.holds(for: path))
        #expect(!PathCondition.qualityGood.holds(for: path) && !PathCondition.qualityModerate.holds(for: path))
        var down = path
        down.status = .unsatisfied
        #expect(!PathCondition.ultraConstrained.holds(for: down) && !PathCondition.qualityMinimal.holds(for: down))
    }

    /// A scenario `defer.yaml` with a satellite link between a phone and a server, then `rest`
    /// (from its fifth line).
    static func satelliteScenario(_ rest: String) -> ScenarioReader.Outcome {
        ScenarioReader.parse("""
            name: defer
            duration: 10s
            nodes: { phone: {}, server: {} }
            links: [{ name: sat, between: [phone, server], profile: satellite }]
            """ + "\n" + rest, file: "defer.yaml")
    }

    @Test func aWorkloadProhibitsKindsOfPathAndAnExpectationCountsBytesPerLink() throws {
        let outcome = Self.satelliteScenario("""
            workloads:
              - { name: backup, kind: bulk, from: server, to: phone, prohibit: [ultraConstrained, expensive] }
            expect:
              - { workload: backup, maxBytesOver: { link: sat, bytes: 1kb } }
            """)
        let scenario = try #require(outcome.scenario, "\(outcome.diagnostics)")
        #expect(scenario.workloads[0].prohibits == [.ultraConstrained, .expensive])
        #expect(scenario.expectations[0].check == .maxBytesOver(link: "sat", bytes: 1000))

        var result = WorkloadResult(scenario.workloads[0])
        result.bytesByInterface = ["sat": 1000, "cell": 5]
        var over = result
        over.bytesByInterface["sat"] = 1001
        let check = Expectation(subject: "backup", check: .maxBytesOver(link: "sat", bytes: 1000), line: 1)
        #expect(ExpectationEvaluator.evaluate([check], workloads: [result], changes: [], paths: [])[0].passed)
        let failed = ExpectationEvaluator.evaluate([check], workloads: [over], changes: [], paths: [])[0]
        #expect(!failed.passed && failed.measured == "1001 bytes")
    }

    @Test(arguments: [
        ("prohibit: [satellite]", "prohibit must be one of expensive, constrained, ultraConstrained"),
        ("prohibit: ultraConstrained", "prohibit must be a list"),
    ])
    func badRestrictionsAreRefusedWithTheirPlace(_ line: String, _ message: String) {
        let outcome = Self.satelliteScenario("""
            workloads:
              - name: backup
                kind: bulk
                from: server
                to: phone
                \(line)
            """)
        #expect(outcome.scenario == nil)
        let text = outcome.diagnostics.map(\.description).joined(separator: "\n")
        #expect(text.contains("defer.yaml:10:") && text.contains(message), "\(text)")
    }

    @Test func aCommandCannotProhibitPathsNorCountBytesPerLink() {
        let outcome = Self.satelliteScenario("""
            workloads:
              - { name: c, kind: command, from: phone, run: "true", prohibit: [expensive] }
            expect:
              - { workload: c, maxBytesOver: { link: nowhere, bytes: 0b } }
            """)
        let text = outcome.diagnostics.map(\.description).joined(separator: "\n")
        #expect(text.contains("a command chooses its own paths"), "\(text)")
        #expect(text.contains("no link named 'nowhere'"), "\(text)")
    }

    @Test func theRacerRefusesOnlyUltraConstrainedPathsWhenToldTo() {
        let sat = NetworkInterface(name: "sat", index: 2, type: .cellular, isExpensive: true, isConstrained: true, isUltraConstrained: true,
                                   addresses: [IPPrefix(.v4(198, 18, 1, 1), length: 24)])
        let path = NetworkPath(status: .satisfied, unsatisfiedReason: nil, availableInterfaces: [sat], primaryInterface: sat, isExpensive: true,
                               isConstrained: true, isUltraConstrained: true, supportsIPv4: true, supportsIPv6: false, supportsDNS: false, gateways: [])
        #expect((try? PathPolicy().permittedInterfaces(of: path).get())?.map(\.name) == ["sat"])
        guard case .failure(let refusal) = PathPolicy(allowsUltraConstrained: false).permittedInterfaces(of: path) else {
            Issue.record("an ultra-constrained path was permitted")
            return
        }
        #expect(refusal.onlyUltraConstrained)
        #expect(refusal.description.contains("ultra-constrained"))
    }
}
