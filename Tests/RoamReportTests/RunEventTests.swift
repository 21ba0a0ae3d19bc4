import PathMonitor
@testable import RoamReport
import Testing

/// The timeline's one format: what the runner writes reads back as the same event, old reports
/// read as before, and damage is named by line and field.
@Suite struct RunEventTests {
    /// A connection made by name, and a request that had to look the name up.
    static let byName: [RunEvent] = {
        var connect = RunEvent.Connect(workload: "api", local: "fd72:6f61:6e00:1::a", remote: "fd72:6f61:6e64::c613:ff02", interface: "lte")
        connect.lookup = .init(name: "api.example.test", server: "fd72:6f61:6e00:1::1", duration: .microseconds(1428),
                               addresses: ["fd72:6f61:6e64::c613:ff02", "198.19.255.2"])
        var request = RunEvent.Request(workload: "api", number: 5, outcome: .failed(reason: "no connection and answer within 1s (looking up api.example.test: no such name (NXDOMAIN))"))
        request.lookup = .seconds(1)
        return [.connect(connect), .request(request)]
    }()

    static let everyKind: [RunEvent] = byName + [
        .run(.started(scenario: "walk", runID: "r1", seed: .max, backend: "userspace", duration: .seconds(60))),
        .run(.ended(passed: true)),
        .run(.cancelled(passed: false)),
        .link(.init(link: "wifi", action: "initial", kind: .conditions(direction: "up", conditions: .object([("delayMs", .double(5))])))),
        .link(.init(link: "wifi", action: "down", kind: .carrier(up: false), planned: .seconds(10), actual: .milliseconds(10_002),
                    step: "2/5", line: 14, error: "boom")),
        .quality(link: "wifi", quality: "moderate", error: nil),
        .quality(link: "wifi", quality: "good", error: "cannot tag"),
        .carried(.init(link: "wifi", interval: .milliseconds(1000), up: 278_202, down: 16_006_253)),
        .carried(.init(link: "cell", interval: .milliseconds(500), up: nil, down: 0)),
        .path(node: "phone", summary: "satisfied via wifi", path: .object([("status", "satisfied")])),
        .mark(text: "exchanged", node: nil),
        .mark(text: "done", node: "phone"),
        .mptcp(node: "phone", changes: ["removed 198.18.0.1 (wifi)"], error: nil),
        .mptcp(node: "phone", changes: [], error: "no MPTCP"),
        .workload(name: "video", started: true),
        .workload(name: "video", started: false),
        .sample(.init(workload: "video", bytes: 1234, throughputBitsPerSecond: 8_000_000, rtt: .milliseconds(12))),
        .sample(.init(workload: "video", bytes: 1234, throughputBitsPerSecond: 0, rtt: nil, buffered: .milliseconds(4500), stalled: false)),
        .connect(.init(workload: "video", local: "198.18.0.1", remote: "198.18.0.2", interface: "wifi", transport: "tcp",
                       attempts: [.init(interface: "wifi", started: .zero, outcome: "connected")], retryingFor: .milliseconds(300))),
        .connect(.init(workload: "video", local: "198.18.0.2", remote: "198.18.0.1")),
        .connectFailed(workload: "api", reason: "timed out"),
        .disconnect(workload: "api", reason: "wifi left the path"),
        .request(.init(workload: "api", number: 3, outcome: .completed(timeToFirstByte: .milliseconds(40), completion: .milliseconds(55)))),
        .request(.init(workload: "api", number: 4, outcome: .failed(reason: "reset"))),
        .stall(workload: "video", start: .seconds(31), duration: .milliseconds(1600)),
        .complete(workload: "download", bytes: 1 << 30),
        .subflow(.init(workload: "video", event: "added", interface: "cell", subflow: "a:1 -> b:2", token: 77, backup: true)),
        .subflow(.init(workload: "video", error: "cannot follow MPTCP events")),
        .subflowSwitch(workload: "video", to: "cell", reason: "wifi left the path"),
        .pathStalled(.init(workload: "video", interface: "wifi", threshold: .seconds(1), holdDown: .seconds(5), mptcp: ["backup 198.18.0.1"])),
        .pathRestored(workload: "video", interface: "wifi", changes: nil),
        .command(.init(workload: "probe", phase: .started(pid: 42, node: "phone"))),
        .command(.init(workload: "probe", phase: .failed(error: "no such program"))),
        .command(.init(workload: "probe", phase: .exited(code: nil, signal: 9, terminatedByRoam: true))),
        .unknown(type: "from-the-future", fields: .object([("t", .double(1)), ("type", "from-the-future"), ("x", .int(1))])),
    ]

    @Test func everyKindReadsBackAsWritten() throws {
        for (index, event) in Self.everyKind.enumerated() {
            let line = RecordedEvent(time: .milliseconds(index * 250), event: event).json.serialized
            let read = try RecordedEvent(json: try JSONValue.parse(line))
            #expect(read.json.serialized == line, "\(event.type)")
            #expect(read.event.type == event.type)
            #expect(read.time == .milliseconds(index * 250))
        }
    }

    /// The format earlier Roam versions wrote, and reports from them keep, is read unchanged.
    @Test func theOnDiskFormatIsTheOneReportsAlreadyHold() throws {
        let change = RecordedEvent(time: .milliseconds(10_002), event: Self.everyKind[Self.byName.count + 4])
        #expect(change.json.serialized == #"{"t":10.002,"type":"link","link":"wifi","action":"down","planned":10.0,"actual":10.002,"lateMs":2.0,"step":"2/5","carrier":"down","line":14,"error":"boom"}"#)
        let request = #"{"t":4.5,"type":"request","workload":"api","number":3,"ok":true,"ttfbMs":40.0,"completionMs":55.0}"#
        let read = try RecordedEvent(json: try JSONValue.parse(request))
        guard case .request(let parsed) = read.event, case .completed(let ttfb, _) = parsed.outcome else {
            Issue.record("not a completed request: \(read.event)")
            return
        }
        #expect(ttfb == .milliseconds(40) && parsed.number == 3)
    }

    @Test(arguments: [
        (#"{"t":1,"type":"connect","local":"a","remote":"b"}"#, "a 'connect' event with no 'workload'"),
        (#"{"t":1,"type":"request","workload":"api","number":1,"ok":"yes"}"#, "a 'request' event with 'ok' that is not true or false"),
        (#"{"t":1,"type":"link","link":"wifi","action":"set"}"#, "a 'link' event with neither 'carrier' nor a 'conditions' object"),
        (#"{"t":"soon","type":"mark","text":"x"}"#, "a 'mark' event with 't' that is not a number"),
        (#"{"t":1,"type":"complete","workload":"w","bytes":"many"}"#, "a 'complete' event with 'bytes' that is not a number"),
        (#"{"t":1}"#, "a 'event' event with no 'type'"),
        (#"{"t":1,"type":"carried","link":"wifi","intervalMs":0,"downBps":5}"#, "a 'carried' event with 'intervalMs' that is not from 0 to an hour"),
        (#"{"t":1,"type":"carried","link":"wifi","intervalMs":1000,"downBps":-5}"#, "a 'carried' event with 'downBps' that is negative"),
        (#"{"t":1,"type":"run","event":"paused"}"#, "a 'run' event with an unknown run event 'paused'"),
    ])
    func damageIsNamed(line: String, message: String) throws {
        #expect(throws: ReportError.self) { try RecordedEvent(json: try JSONValue.parse(line)) }
        do {
            _ = try RecordedEvent(json: try JSONValue.parse(line))
        } catch let error as ReportError {
            #expect(error.message == message)
        }
    }

    /// A report is outside input: numbers out of any range clamp rather than trap.
    @Test func hugeNumbersAreClamped() throws {
        let line = #"{"t":-1e300,"type":"sample","workload":"w","bytes":1e308,"throughputBps":-1e19,"rttMs":1e300,"bufferedMs":5.5}"#
        let read = try RecordedEvent(json: try JSONValue.parse(line))
        #expect(read.time == .seconds(-1_000_000_000))
        guard case .sample(let sample) = read.event else {
            Issue.record("not a sample: \(read.event)")
            return
        }
        #expect(sample.bytes == .max && sample.throughputBitsPerSecond == .min)
        #expect(sample.rtt == .seconds(1_000_000_000), "\(String(describing: sample.rtt))")
        #expect(sample.buffered == .microseconds(5500), "\(String(describing: sample.buffered))")
    }

    @Test func aRecordedRunNamesTheLineOfADamagedEvent() {
        let summary = #"{"scenario":"s"}"#
        let timeline = #"{"t":0,"type":"mark","text":"ok"}"# + "\n" + #"{"t":1,"type":"stall","workload":"v","start":1}"# + "\n"
        #expect(throws: ReportError.self) { try RecordedRun.parse(directory: "d", summary: summary, timeline: timeline) }
        do {
            _ = try RecordedRun.parse(directory: "d", summary: summary, timeline: timeline)
        } catch {
            #expect(error.message == "d/timeline.jsonl line 2: a 'stall' event with no 'durationMs'")
        }
    }
}
