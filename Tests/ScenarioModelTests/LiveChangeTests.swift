import ScenarioModel
import Testing

/// Live changes (`roam run --control`): read by the timeline's own reader, refused with its
/// messages, and resolved from the links' state at the time they are sent.
struct LiveChangeTests {
    let scenario: Scenario = {
        let text = """
            name: live
            duration: 30s
            nodes: {phone: {}, server: {}}
            profiles:
              slow: {delay: 300ms, rate: 256kbit}
            links:
              - {name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 50mbit}
              - {name: cell, between: [phone, server], type: cellular, delay: 40ms}
            """
        return ScenarioReader.parse(text, file: "live.yaml").scenario!
    }()

    func read(_ body: String, link: String = "wifi", at: Duration = .seconds(5), open: Bool = false) -> LiveChange.Outcome {
        LiveChange.read(body, target: .link(link), scenario: scenario, at: at, open: open)
    }

    func messages(_ outcome: LiveChange.Outcome) -> [String] { outcome.errors.map(\.message) }

    @Test func everyLinkActionIsReadAtTheTimeItIsSent() throws {
        let set = try #require(read(#"{"set": {"delay": "80ms", "loss": "5%"}, "direction": "down"}"#).events)
        #expect(set.count == 1 && set[0].at == .seconds(5) && set[0].link == "wifi" && set[0].direction == .down)
        #expect(read(#"{"down": true}"#).events?.first?.action == .down)
        #expect(read(#"{"up": true}"#).events?.first?.action == .up)
        #expect(read(#"{"blackhole": false}"#).events?.first?.action == .blackhole(false))
        #expect(read(#"{"profile": "slow"}"#).events?.first?.action == .profile("slow"))
        // YAML is read too: JSON is YAML.
        #expect(read("ramp: {to: {delay: 200ms}, over: 2s}").events?.count == 1)
        // A flap ends after `for`, or at `until`, or at the scenario's end.
        let flap = try #require(read(#"{"flap": {"period": "1s", "for": "4s"}}"#).events?.first)
        #expect(flap.action == .flap(period: .seconds(1), duty: 0.5, until: .seconds(9)))
        #expect(read(#"{"flap": {"period": "1s"}}"#).events?.first?.action == .flap(period: .seconds(1), duty: 0.5, until: .seconds(30)))
    }

    @Test func mistakesAreRefusedWithTheReadersMessagesPlacedInTheBody() {
        // The same message as the same mistake in a file's timeline.
        let file = ScenarioReader.parse("""
            name: live
            duration: 30s
            nodes: {phone: {}, server: {}}
            links: [{name: wifi, between: [phone, server]}]
            timeline: [{at: 1s, link: wifi, set: {delay: soon}}]
            """, file: "f.yaml")
        let live = read(#"{"set": {"delay": "soon"}}"#)
        #expect(live.events == nil)
        #expect(messages(live) == file.errors.map(\.message))
        #expect(live.errors.first?.line == 1 && live.errors.first?.column == 19)
        #expect(messages(read(#"{"down": true, "blackhole": true}"#)).first?.contains("one action, not down and blackhole") == true)
        #expect(messages(read(#"{}"#)).first?.contains("needs one action") == true)
        #expect(messages(read(#"{"at": "1s", "down": true}"#)) == ["a live change happens when it is sent: remove at"])
        #expect(messages(read(#"{"link": "cell", "down": true}"#)).first?.contains("remove link from the body") == true)
        #expect(messages(read(#"{"set": {"trace": "/etc/shadow"}}"#)).first?.contains("cannot name a trace") == true)
        #expect(messages(read(#"{"ramp": {"to": {"trace": "t.txt"}, "over": "1s"}}"#)).first?.contains("cannot name a trace") == true)
        #expect(messages(read(#"{"down": true}"#, link: "wlan0")).first == "no link named 'wlan0'; links: wifi, cell")
        #expect(messages(read("[1, 2]")).first?.contains("not a list") == true)
        #expect(messages(read("")).first?.contains("the change is empty") == true)
        #expect(messages(read("{\"down\": tru\u{0}e}")).first?.contains("NUL") == true)
        #expect(messages(read(String(repeating: " ", count: LiveChange.maximumSize + 1))).first?.contains("at most") == true)
        #expect(messages(read(#"{"profile": "nope"}"#)).first?.contains("no profile named 'nope'") == true)
        // An open-ended run (--hold): a flap must say when it ends.
        #expect(messages(read(#"{"flap": {"period": "1s"}}"#, open: true)).first?.contains("has no end") == true)
        #expect(read(#"{"flap": {"period": "1s", "for": "2s"}}"#, open: true).events != nil)
        #expect(messages(read(#"{"flap": {"period": "1s", "for": "2s", "until": "9s"}}"#)).first?.contains("not both") == true)
        // Past the expansion bound: refused, not expanded.
        let tooMany = messages(read(#"{"flap": {"period": "10ms", "for": "10000s"}}"#, open: true))
        #expect(tooMany.first?.contains("more than") == true, "\(tooMany)")
        // Aliases that expand past the budget.
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]"
        #expect(messages(read(bomb)).first?.contains("aliases") == true)
    }

    @Test func aChangeIsResolvedFromWhereTheLinkIsNow() throws {
        // The link was blackholed and slowed by earlier changes: a set keeps the blackhole and
        // the rest, a ramp starts from the delay the link has now.
        var state: [String: [TrafficDirection: LinkConditions]] = [:]
        var slowed = LinkConditions(impairment: Impairment(delay: .milliseconds(100), rate: Rate(bitsPerSecond: 1e6)))
        slowed.isBlackholed = true
        state["wifi"] = [.up: slowed, .down: slowed]
        let set = try #require(read(#"{"set": {"loss": "2%"}}"#).events)
        let changes = TimelineSchedule.liveChanges(set, scenario: scenario, from: state)
        #expect(changes.count == 2 && changes.allSatisfy { $0.live && $0.at == .seconds(5) })
        guard case .conditions(_, let conditions) = changes[0].change else { Issue.record("not conditions"); return }
        #expect(conditions.isBlackholed && conditions.impairment.delay == .milliseconds(100) && conditions.impairment.loss == .random(rate: 0.02, correlation: 0))
        let ramp = try #require(read(#"{"ramp": {"to": {"delay": "300ms"}, "over": "1s"}}"#).events)
        let steps = TimelineSchedule.liveChanges(ramp, scenario: scenario, from: state).filter { $0.change.direction == .up }
        #expect(steps.count == 10)
        guard case .conditions(_, let first) = steps[0].change, case .conditions(_, let last) = steps[9].change else { Issue.record("not conditions"); return }
        #expect(first.impairment.delay == .milliseconds(120))
        #expect(last.impairment.delay == .milliseconds(300) && steps[9].at == .seconds(6))
    }
}

extension ScheduledChange.Change {
    var direction: TrafficDirection? {
        if case .conditions(let direction, _) = self { return direction }
        return nil
    }
}
