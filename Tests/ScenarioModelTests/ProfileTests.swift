import Foundation
import PathMonitor
@testable import ScenarioModel
import Testing

@Suite("Profiles")
struct ProfileTests {
    @Test(arguments: [("nlc:3G", "nlc-3g"), ("NLC:Very Bad Network", "nlc-very-bad-network"), ("nlc:100% Loss", "nlc-100-loss"),
                      ("nlc:Wi-Fi", "nlc-wi-fi"), ("nlc:LTE", "nlc-lte"), ("nlc-edge", "nlc-edge"), ("nlc:DSL", "nlc-dsl"), ("Home_WiFi", "home-wifi")])
    func networkLinkConditionerNamesResolve(_ name: String, _ expected: String) {
        #expect(LinkProfile.named(name)?.name == expected)
    }

    @Test func networkLinkConditionerFiguresPerDirection() throws {
        let lte = try #require(LinkProfile.named("nlc:LTE"))
        #expect(lte.down.rate == .mbit(50) && lte.down.delay == .milliseconds(50))
        #expect(lte.up.rate == .mbit(10) && lte.up.delay == .milliseconds(65))
        #expect(lte.type == .cellular)
        let bad = try #require(LinkProfile.named("nlc:Very Bad Network"))
        #expect(bad.up.loss?.meanLoss == 0.10 && bad.down.delay == .milliseconds(500))
        #expect(LinkProfile.named("nlc:100% Loss")?.down.loss?.meanLoss == 1)
    }

    @Test func aScenarioDefinesProfilesForItsLinksAndTimeline() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let outcome = ScenarioReader.parse("""
            name: own-profiles
            duration: 10s
            nodes: { phone: {}, server: {} }
            profiles:
              train-lte:
                description: an LTE modem on a train
                type: cellular
                delay: 30ms
                up: { rate: 5mbit }
                down: { trace: traces/commuter-train.trace }
            links:
              - { name: cell, between: [phone, server], profile: train-lte }
              - { name: wifi, between: [phone, server], profile: "nlc:Wi-Fi" }
            timeline:
              - { at: 5s, link: wifi, profile: "nlc:Very Bad Network" }
              - { at: 6s, link: wifi, profile: train-lte }
            """, file: "own.yaml", baseDirectory: directory)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        let scenario = try #require(outcome.scenario)
        let cell = try #require(scenario.links.first)
        #expect(cell.type == .cellular && cell.isExpensive)
        #expect(cell.up.delay == .milliseconds(30) && cell.up.rate == .mbit(5))
        #expect(cell.down.trace?.path == "traces/commuter-train.trace")
        let changes = TimelineSchedule(scenario: scenario).changes
        #expect(changes.contains { change in
            if case .conditions(.down, let conditions) = change.change { return change.at == .seconds(6) && conditions.impairment.trace != nil }
            return false
        }, "the timeline switches to the scenario's own profile")
        #expect(scenario.problems.isEmpty)
    }

    @Test func aProfileNamedLikeABuiltInOneOrMisspeltIsAnError() {
        let outcome = ScenarioReader.parse("""
            name: clash
            duration: 10s
            nodes: { phone: {}, server: {} }
            profiles:
              lte: { delay: 10ms }
              mine: { delay: 10ms, speed: 5mbit }
            links:
              - { name: cell, between: [phone, server], profile: mien }
            """, file: "clash.yaml")
        let messages = outcome.errors.map(\.message).joined(separator: "\n")
        #expect(messages.contains("profile 'lte' is defined already (a built-in profile)"))
        #expect(messages.contains("unknown key 'speed'"))
        #expect(messages.contains("no profile named 'mien' (did you mean 'mine'?)"))
    }

    @Test func aMahimahiTraceIsSummarised() {
        // 3 opportunities in the first second, 1 in the second, none for 1.5 s, 2 at the end.
        let trace = DeliveryTrace(opportunities: [0, 10, 20, 1500, 3000, 4000], period: 4000)
        let summary = MahimahiImport.summarize(trace)
        #expect(summary.opportunities == 6)
        #expect(summary.period == .seconds(4))
        #expect(summary.longestGap == .milliseconds(1500))
        #expect(summary.fastestSecond == Rate(bitsPerSecond: 3 * 12_000))
        #expect(summary.slowestSecond == Rate(bitsPerSecond: 0), "2 s to 3 s has none")
        #expect(summary.meanRate == Rate(bitsPerSecond: 6 * 12_000 / 4))
    }
}
