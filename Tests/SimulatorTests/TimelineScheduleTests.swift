import Foundation
@testable import ScenarioModel
@testable import Simulator
import Testing

func scenario(_ yaml: String) throws -> Scenario {
    let outcome = ScenarioReader.parse(yaml, file: "test.yaml")
    return try #require(outcome.scenario, "\(outcome.diagnostics.map(\.description).joined(separator: "\n"))")
}

let twoLinks = """
    name: t
    duration: 30s
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 10mbit }
      - { name: cell, between: [phone, server], type: cellular, delay: 50ms }

    """

@Suite struct TimelineScheduleTests {
    @Test func startsFromEachLinksConditionsPerDirection() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + "timeline: []\n"))
        #expect(schedule.initial.map { "\($0.link) \($0.direction)" } == ["wifi up", "wifi down", "cell up", "cell down"])
        #expect(schedule.initial[0].conditions.impairment == Impairment(delay: .milliseconds(10), rate: .mbit(10)))
        #expect(schedule.changes.isEmpty)
    }

    @Test func rampsMoveInStepsOfAtMostAHundredMilliseconds() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 5s, link: wifi, ramp: { to: { delay: 110ms, rate: 1mbit }, over: 1s } }
            """))
        let up = schedule.changes.filter { if case .conditions(.up, _) = $0.change { true } else { false } }
        #expect(up.count == 10)
        #expect(up.first?.at == .milliseconds(5100) && up.last?.at == .seconds(6))
        #expect(zip(up, up.dropFirst()).allSatisfy { $1.at - $0.at <= TimelineSchedule.maximumRampStep })
        guard up.count == 10, case .conditions(_, let first) = up[0].change, case .conditions(_, let last) = up[9].change else {
            Issue.record("the ramp's steps are not the ten conditions expected: \(up.map(\.change))")
            return
        }
        #expect(first.impairment.delay == .milliseconds(20))
        #expect(abs(first.impairment.rate!.bitsPerSecond - 9.1e6) < 1)
        #expect(last.impairment.delay == .milliseconds(110) && last.impairment.rate == .mbit(1))
        #expect(up.map(\.step) == Array(1...10))
    }

    @Test func aSetDuringARampLastsUntilTheNextStepAndLaterSettingsKeep() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 1s, link: wifi, ramp: { to: { delay: 30ms }, over: 200ms } }
              - { at: 1050ms, link: wifi, set: { loss: 5% } }
            """))
        let conditions = schedule.changes.compactMap { change -> (Duration, LinkConditions)? in
            if case .conditions(.up, let conditions) = change.change { return (change.at, conditions) } else { return nil }
        }
        #expect(conditions.map(\.0) == [.milliseconds(1050), .milliseconds(1100), .milliseconds(1200)])
        #expect(conditions[0].1.impairment.loss == .random(rate: 0.05, correlation: 0))
        #expect(conditions[1].1.impairment.delay == .milliseconds(20))
        #expect(conditions[2].1.impairment.loss == .random(rate: 0.05, correlation: 0), "the ramp changes only what it names")
    }

    @Test func flapsBecomeCarrierCutsAndRestorations() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 2s, link: wifi, flap: { period: 4s, duty: 75%, until: 10s } }
            """))
        let carrier = schedule.changes.map { change -> String in
            guard case .carrier(let up) = change.change else { return "?" }
            return "\(change.at.roamDescription) \(up ? "up" : "down")"
        }
        #expect(carrier == ["2s down", "3s up", "6s down", "7s up"])
        #expect(schedule.changes.allSatisfy { $0.action == "flap" })
    }

    /// A day of flapping every 2 s is 86,400 changes held for the whole run: each must stay a
    /// few words, its conditions boxed, not the 400 bytes of conditions held inline.
    @Test func aChangeIsSmallWhateverConditionsItCarries() throws {
        #expect(MemoryLayout<ScheduledChange>.stride <= 128, "\(MemoryLayout<ScheduledChange>.stride) bytes")
        #expect(MemoryLayout<LinkConditions>.stride > 128, "conditions are large: the box is what keeps a change small")
        // The boxed cases still hold and compare their conditions.
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 1s, link: wifi, set: { delay: 40ms, loss: 2% } }
            """))
        guard case .conditions(let direction, let conditions)? = schedule.changes.first?.change else {
            Issue.record("no conditions: \(schedule.changes)")
            return
        }
        #expect(direction == .up && conditions.impairment.delay == .milliseconds(40) && conditions.impairment.rate?.bitsPerSecond == 10e6)
        #expect(schedule.changes.count == 2 && schedule.changes[0] != schedule.changes[1])
    }

    @Test func blackholeAndProfileAndDirections() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 1s, link: cell, blackhole: true }
              - { at: 2s, link: cell, direction: down, set: { delay: 80ms } }
              - { at: 3s, link: wifi, profile: edge }
            """))
        let cell = schedule.changes.filter { $0.link == "cell" }
        #expect(cell.count == 3)
        guard case .conditions(.down, let down) = cell[2].change else { Issue.record("expected the down direction"); return }
        #expect(down.isBlackholed && down.impairment.delay == .milliseconds(80))
        let wifi = schedule.changes.filter { $0.link == "wifi" }
        let edge = try #require(LinkProfile.named("edge"))
        #expect(wifi.count == 2)
        guard case .conditions(.up, let up) = wifi[0].change else { Issue.record("expected the up direction"); return }
        #expect(up.impairment == edge.up)
    }

    @Test func eventsAtTheSameTimeApplyInFileOrder() throws {
        let schedule = TimelineSchedule(scenario: try scenario(twoLinks + """
            timeline:
              - { at: 4s, link: wifi, down: true }
              - { at: 4s, link: cell, set: { delay: 70ms } }
              - { at: 3s, link: cell, set: { delay: 60ms } }
            """))
        #expect(schedule.changes.map { "\($0.at.roamDescription) \($0.link) \($0.action)" }
            == ["3s cell set", "3s cell set", "4s wifi down", "4s cell set", "4s cell set"])
    }

    @Test func timeScalingShortensTheStoryNotWhatUsersPerceive() throws {
        let original = try scenario(twoLinks + """
            timeline:
              - { at: 10s, link: wifi, ramp: { to: { loss: 40% }, over: 4s } }
              - { at: 20s, link: wifi, flap: { period: 2s, duty: 50%, until: 28s } }
            workloads:
              - { name: api, kind: requests, from: server, to: phone, interval: 1s, start: 2s, stop: 20s, timeout: 3s }
            """)
        let scaled = original.timeScaled(by: 0.25)
        #expect(scaled.duration == .milliseconds(7500))
        #expect(scaled.timeline.map(\.at) == [.milliseconds(2500), .seconds(5)])
        #expect(scaled.timeline[0].action == .ramp(to: Impairment(loss: .random(rate: 0.4, correlation: 0)), over: .seconds(1)))
        #expect(scaled.timeline[1].action == .flap(period: .milliseconds(500), duty: 0.5, until: .seconds(7)))
        let workload = scaled.workloads[0]
        #expect(workload.start == .milliseconds(500) && workload.stop == .seconds(5) && workload.timeout == .seconds(3))
        if case .requests(_, _, let interval, _) = workload.kind { #expect(interval == .milliseconds(250)) }
        #expect(scaled.links == original.links)
        #expect(original.timeScaled(by: 1) == original)
    }

    /// The bundled hotel-wifi, time-scaled as the test suites play it: its portal's session and
    /// the time its connectivity expectations name shrink with the story; `within` does not.
    @Test func timeScalingShortensAPortalsSessionAndTheTimesExpectationsName() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scenarios/hotel-wifi.yaml").path
        let original = try #require(ScenarioReader.read(contentsOf: path).scenario)
        let scaled = original.timeScaled(by: 0.25)
        #expect(scaled.networks.first { $0.name == "hotel" }?.portal?.expires == .milliseconds(7500))
        let times = scaled.expectations.compactMap { expectation -> Duration? in
            if case .connectivity(let wanted) = expectation.check, case .at(let time) = wanted.timing { time } else { nil }
        }
        #expect(times == [.milliseconds(2500), .milliseconds(13750)])
        let withins = scaled.expectations.compactMap { expectation -> Duration? in
            if case .connectivity(let wanted) = expectation.check, case .after(_, _, let within) = wanted.timing { within } else { nil }
        }
        #expect(withins == [.seconds(2)])
        #expect(scaled.problems.isEmpty, "\(scaled.problems)")
    }
}

@Suite struct NetemConfigurationTests {
    @Test func blackholeIsTotalLossWhateverTheImpairment() {
        let (netem, _) = LinkConditions(impairment: Impairment(delay: .milliseconds(5)), isBlackholed: true).qdiscConfiguration(seed: 1)
        #expect(netem.loss == .random(probability: 1, correlation: 0))
        #expect(netem.delay == .milliseconds(5))
    }

    @Test func rateAddsATokenBucketSizedForTheRate() throws {
        let (netem, bucket) = LinkConditions(impairment: Impairment(delay: .milliseconds(100), rate: .mbit(80))).qdiscConfiguration(seed: 1)
        let tbf = try #require(bucket)
        #expect(tbf.rate == 10_000_000)
        #expect(tbf.bucket == 40_000, "4 ms at the rate")
        #expect(tbf.limit == 1_000_000, "100 ms at the rate")
        // 200 ms in flight at 10 MB/s is 1321.003 packets of 1514 bytes, rounded up: more than netem's default.
        #expect(netem.limit == 1322)
    }

    @Test func aQueueLimitBoundsTheBottleneck() throws {
        let (netem, bucket) = LinkConditions(impairment: Impairment(rate: .mbit(1), limit: 20)).qdiscConfiguration(seed: 1)
        #expect(try #require(bucket).limit == 20 * 1514)
        #expect(netem.limit == 1000)
        let (unshaped, none) = LinkConditions(impairment: Impairment(limit: 20)).qdiscConfiguration(seed: 1)
        #expect(none == nil && unshaped.limit == 20)
    }

    @Test func seedsDifferPerLinkAndDirectionAndRepeat() {
        let seeds = [NetemBackend.seed(42, link: 0, direction: .up), NetemBackend.seed(42, link: 0, direction: .down),
                     NetemBackend.seed(42, link: 1, direction: .up), NetemBackend.seed(43, link: 0, direction: .up)]
        #expect(Set(seeds).count == 4)
        #expect(NetemBackend.seed(42, link: 0, direction: .up) == seeds[0])
    }
}

@Suite struct BackendChoiceTests {
    let missing = { NetemAvailability.missing("no sch_netem module") }

    @Test func netemNeedsNetemAndSaysSoNamingTheAlternative() {
        let error = #expect(throws: SimulatorError.self) { try BackendChoice.netem.resolve(netemProbe: missing, userspaceProbe: { nil }) }
        #expect(error?.code == .environment)
        #expect(error?.message.contains("no sch_netem") == true)
        #expect(error?.message.contains("--backend userspace") == true)
        let denied = #expect(throws: SimulatorError.self) { try BackendChoice.netem.resolve(netemProbe: { .notPermitted("EPERM") }) }
        #expect(denied?.message.contains("root") == true)
    }

    @Test func autoPrefersNetemAndFallsBackToTheEmulator() throws {
        #expect(try BackendChoice.auto.resolve(netemProbe: { .available }, userspaceProbe: { nil }).kind == .netem)
        let fallback = try BackendChoice.auto.resolve(netemProbe: missing, userspaceProbe: { nil })
        #expect(fallback.kind == .userspace && fallback.reason.contains("no sch_netem"))
        let neither = #expect(throws: SimulatorError.self) { try BackendChoice.auto.resolve(netemProbe: missing, userspaceProbe: { "no /dev/net/tun" }) }
        #expect(neither?.message.contains("no /dev/net/tun") == true)
    }

    @Test func userspaceNeedsTun() throws {
        #expect(try BackendChoice.userspace.resolve(netemProbe: { .available }, userspaceProbe: { nil }).kind == .userspace)
        let error = #expect(throws: SimulatorError.self) { try BackendChoice.userspace.resolve(userspaceProbe: { "/dev/net/tun is missing" }) }
        #expect(error?.message.contains("/dev/net/tun") == true)
    }
}
