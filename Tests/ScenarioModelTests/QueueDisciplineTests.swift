import ScenarioModel
import Testing

/// `queue:` and a `limit` in packets or bytes: read, merged with profiles and the timeline, and
/// every mistake a clear error.
@Suite struct QueueDisciplineTests {
    func read(_ keys: String) -> ScenarioReader.Outcome {
        ScenarioReader.parse("""
            name: q
            duration: 10s
            nodes: {phone: {}, server: {}}
            links:
              - {name: lte, between: [phone, server], \(keys)}
            timeline:
              - {at: 5s, link: lte, set: {queue: drop-tail, limit: 200}}

            """, file: "s.yaml")
    }

    @Test func disciplinesAndLimitsAreRead() throws {
        let codel = try #require(read("rate: 10mbit, queue: codel").scenario?.links.first?.up)
        #expect(codel.queue == .codel(CoDelParameters()))
        let tuned = try #require(read("rate: 10mbit, queue: {discipline: codel, target: 10ms, interval: 200ms}, limit: 256kb").scenario)
        #expect(tuned.links[0].up.queue == .codel(CoDelParameters(target: .milliseconds(10), interval: .milliseconds(200))))
        #expect(tuned.links[0].up.limitBytes == 256_000 && tuned.links[0].up.limit == nil)
        let fq = try #require(read("rate: 10mbit, queue: {discipline: fq-codel, flows: 64, quantum: 300}").scenario?.links.first?.up)
        #expect(fq.queue == .fqCodel(CoDelParameters(), flows: 64, quantum: 300))
        // The timeline's packet limit replaces the link's byte limit.
        let scenario = try #require(read("rate: 10mbit, queue: codel, limit: 1mb").scenario)
        let step = scenario.timeline[0]
        guard case .set(let change) = step.action else { Issue.record("not a set: \(step.action)"); return }
        let after = scenario.links[0].up.overridden(by: change)
        #expect(after.limit == 200 && after.limitBytes == nil && after.queue == .dropTail)
        // A direction block's byte limit replaces the link's packet limit.
        let directed = try #require(read("rate: 10mbit, limit: 50, down: {limit: 64kb}").scenario?.links.first)
        #expect(directed.up.limit == 50 && directed.down.limit == nil && directed.down.limitBytes == 64_000)
    }

    @Test(arguments: [
        ("queue: codel", "manages the queue behind a bottleneck, and there is none: give a rate"),
        ("rate: 1mbit, queue: codl", "(did you mean 'codel'?)"),
        ("rate: 1mbit, queue: {discipline: codel, flows: 8}", "codel has one queue; flows is fq-codel's"),
        ("rate: 1mbit, queue: {discipline: drop-tail, target: 5ms}", "drop-tail has no target"),
        ("rate: 1mbit, queue: {discipline: codel, target: 50ms, interval: 10ms}", "interval (10ms) must be at least target (50ms)"),
        ("rate: 1mbit, queue: {discipline: codel, target: 2s}", "target must be at most"),
        ("rate: 1mbit, queue: {discipline: fq-codel, flows: 0}", "flows must be between 1 and 65536"),
        ("rate: 1mbit, queue: {target: 5ms}", "discipline"),
        ("rate: 1mbit, limit: 10b", "limit (bytes) must be between"),
        ("rate: 1mbit, limit: 0", "limit (packets) must be between 1 and 1000000"),
        ("rate: 1mbit, limit: lots", "limit must be packets (a whole number: 500) or bytes (a size: 256kb), not 'lots'"),
        ("rate: 1mbit, limit: 12parsecs", "limit (bytes)"),
    ])
    func mistakesAreErrors(keys: String, message: String) {
        let errors = read(keys).errors.map(\.message)
        #expect(errors.count == 1 && errors.allSatisfy { $0.contains(message) }, "\(errors)")
    }
}
