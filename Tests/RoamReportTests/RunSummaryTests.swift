import RoamCore
import RoamReport
import Testing

/// `summary.json` through its one description: what is written reads back the same, an older
/// summary reads, a newer or damaged one is refused with the field named.
@Suite struct RunSummaryTests {
    /// A summary with every section filled, in values JSON carries exactly (whole milliseconds).
    static func full() -> RunSummary {
        var summary = RunSummary(scenario: "walk", description: "a walk", runID: "abc123", started: "2026-11-25T10:00:00Z", seed: 42,
                                 backend: "userspace", backendReason: "no sch_netem", multipath: "auto", duration: .seconds(40),
                                 endedAt: .milliseconds(39_500), cancelled: true, passed: false)
        summary.timeScale = 0.5
        summary.expectations = [.init(subject: "video", check: "maxStall", requirement: "longest stall ≤ 2s", measured: "0ms", passed: true, line: 12),
                                .init(subject: "phone", check: "path", requirement: "unsatisfied within 1s", measured: "3s", passed: false, line: 14,
                                      detail: "wifi down at 15s")]
        var video = RunSummary.Workload(name: "video", kind: "stream", mode: "handover", completed: true)
        video.transfer = .init(bytesReceived: 1_000_000, activeTime: .seconds(30), throughput: 266_667, connections: 2, connectFailures: 1,
                               localAddresses: ["198.18.0.1", "198.18.1.1"], handovers: 1, transport: "tcp",
                               longestGap: .init(start: .milliseconds(15_250), length: .milliseconds(125)))
        video.bytesByInterface = ["cell": 400_000, "wifi": 600_000]
        video.subflowsOpened = 0
        video.stream = .init(startupDelay: .milliseconds(243), totalStall: .milliseconds(500), longestStall: .milliseconds(500),
                             stalls: [.init(start: .seconds(16), duration: .milliseconds(500), ongoing: false)])
        var api = RunSummary.Workload(name: "api", kind: "requests", mode: "none", completed: false)
        api.transfer = .init(bytesReceived: 2048, activeTime: .seconds(10), throughput: nil, connections: 1, connectFailures: 0, localAddresses: [],
                             handovers: 0, transport: "tcp", longestGap: nil)
        api.subflowsOpened = 0
        api.incompleteReason = "2 requests failed"
        api.requests = .init(sent: 4, succeeded: 2, failed: 2, unfinished: 0,
                             timeToFirstByte: .init(p50: .milliseconds(61), p95: .milliseconds(90), max: .milliseconds(90)),
                             completion: .init(p50: nil, p95: nil, max: nil))
        api.lookups = .init(name: "api.example.test", succeeded: 3, failed: 7,
                            duration: .init(p50: .microseconds(1428), p95: .microseconds(1518), max: .microseconds(1518)))
        var tests = RunSummary.Workload(name: "tests", kind: "command", mode: "aggregate", completed: true)
        tests.subflowsOpened = 2
        tests.completionTime = .seconds(8)
        tests.command = .init(arguments: ["pytest", "-x"], exitCode: 0, signal: nil, terminatedByRoam: false, runTime: .seconds(8),
                              stdout: "tests.stdout", stderr: "tests.stderr")
        summary.workloads = [video, api, tests]
        summary.timeline.changes = 12
        summary.timeline.failed = [.init(link: "wifi", action: "set", error: "EPERM")]
        summary.timeline.latenessP50 = .milliseconds(1)
        summary.timeline.latenessP99 = .milliseconds(3)
        summary.timeline.latenessMax = .milliseconds(4)
        summary.pathUpdates = ["phone": 5, "server": 1]
        summary.events = 321
        summary.notes = ["a note"]
        summary.links = [.init(link: "wifi", direction: "up", arrived: 10, delivered: 9, lost: 1, blackholed: 0, overflowed: 0, corrupted: 0,
                               duplicated: 0, reordered: 0)]
        return summary
    }

    @Test func whatIsWrittenReadsBackTheSame() throws {
        let summary = Self.full()
        let read = try RunSummary(json: try JSONValue.parse(summary.json.serialized))
        #expect(read == summary)
        #expect(read.json.serialized == summary.json.serialized)
        #expect(summary.json["format"]?.intValue == Int64(RunSummary.currentFormat))
    }

    /// The recorded fixture predates the format number: it reads as format 0, with its figures.
    @Test func aSummaryWithoutAFormatIsFormatZero() throws {
        let run = try reportFixture()
        #expect(run.summary.format == 0)
        #expect(run.summary.scenario == run.scenario && !run.summary.workloads.isEmpty)
    }

    @Test func aNewerFormatIsRefusedSayingSo() throws {
        var json = Self.full().json
        guard case .object(var members) = json else { throw RunSummaryTestError.notAnObject }
        members[0] = ("format", .int(Int64(RunSummary.currentFormat + 1)))
        json = .object(members)
        let error = #expect(throws: ReportError.self) { try RunSummary(json: json) }
        #expect(error?.message.contains("newer than this Roam reads") == true)
    }

    @Test(arguments: [
        (#"{"scenario":"s","workloads":[{"name":"w","kind":"bulk","bytesReceived":"many"}]}"#, "'bytesReceived' that is not a number"),
        (#"{"scenario":"s","expectations":[{"subject":"w","check":"maxStall"}]}"#, "'expectations': no 'passed'"),
        (#"{"scenario":"s","pathUpdates":[1]}"#, "'pathUpdates' that is not an object"),
        (#"{"scenario":"s","timeScale":"fast"}"#, "'timeScale' that is not a finite number"),
    ])
    func aDamagedFieldIsNamed(_ text: String, _ message: String) throws {
        let json = try JSONValue.parse(text)
        let error = #expect(throws: ReportError.self) { try RunSummary(json: json) }
        #expect(error?.message.contains(message) == true, "\(String(describing: error))")
    }
}

enum RunSummaryTestError: Error { case notAnObject }

/// The fidelity section (issue 57): judged against its bounds, and read back as written.
@Suite struct FidelityTests {
    @Test func aRunWithinItsBoundsIsFaithfulAndEachExcessIsNamed() throws {
        var fidelity = Fidelity()
        fidelity.deliveryP99 = .microseconds(300)
        fidelity.timelineP99 = .microseconds(800)
        fidelity.judge()
        #expect(fidelity.faithful && fidelity.problems.isEmpty)

        fidelity.deliveryP99 = .milliseconds(12)
        fidelity.deliveryMax = .milliseconds(40)
        fidelity.refused = 17
        fidelity.timelineP99 = .milliseconds(3)
        fidelity.judge()
        #expect(!fidelity.faithful)
        #expect(fidelity.problems.count == 3)
        #expect(fidelity.problems[0].contains("p99 12 ms") && fidelity.problems[0].contains("bound 1 ms") && fidelity.problems[0].contains("max 40 ms"),
                "\(fidelity.problems[0])")
        #expect(fidelity.problems[1].hasPrefix("17 packets were lost because the emulator fell behind"))
        #expect(fidelity.problems[2].contains("p99 3 ms") && fidelity.problems[2].contains("bound 2 ms"), "\(fidelity.problems[2])")

        // Looser bounds, as `roam run --fidelity-delivery 20ms --fidelity-timeline 5ms` give.
        fidelity.bounds = Fidelity.Bounds(deliveryP99: .milliseconds(20), timelineP99: .milliseconds(5))
        fidelity.refused = 0
        fidelity.judge()
        #expect(fidelity.faithful, "\(fidelity.problems)")
    }

    @Test func theSectionReadsBackAsWritten() throws {
        var summary = RunSummary(scenario: "s", runID: "abcdef", started: "now", seed: 1, backend: "userspace", backendReason: "",
                                 multipath: "auto", duration: .seconds(4), endedAt: .seconds(4), cancelled: false, passed: true)
        var fidelity = Fidelity(bounds: Fidelity.Bounds(deliveryP99: .milliseconds(3), timelineP99: .milliseconds(4)))
        // Whole milliseconds, which JSON carries exactly.
        fidelity.deliveryP50 = .milliseconds(1)
        fidelity.deliveryP99 = .milliseconds(7)
        fidelity.deliveryMax = .milliseconds(9)
        fidelity.packets = 1234
        fidelity.timelineP99 = .milliseconds(2)
        fidelity.judge()
        summary.fidelity = fidelity
        let read = try RunSummary(json: try JSONValue.parse(summary.json.serialized))
        #expect(read.fidelity == fidelity)
        #expect(read.fidelity?.faithful == false)
        // A summary written before Roam measured it has none.
        summary.fidelity = nil
        #expect(try RunSummary(json: try JSONValue.parse(summary.json.serialized)).fidelity == nil)
    }
}
