import Foundation
import PathMonitor
@testable import RoamReport
import Testing

/// The fixture run in `Tests/Fixtures/report`: Wi-Fi blackholed at 2 s and down from 3 s to
/// 7 s, a stream that stalls (once more at the end), a failed request, a mark.
func reportFixture() throws -> RecordedRun {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/report").path
    return try RecordedRun.load(directory: directory)
}

@Suite("JSON parsing")
struct JSONParsingTests {
    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":"x\"y\\z\n\u00e9\ud83d\ude00","d":-2.5e3,"e":{}}"#,
        "[]", "0", #""""#, "[1,[2,[3]]]",
    ])
    func whatItWritesItReads(_ text: String) throws {
        let value = try JSONValue.parse(text)
        #expect(try JSONValue.parse(value.serialized) == value)
    }

    @Test func membersAndNumbers() throws {
        let value = try JSONValue.parse(#"{"n":3,"d":2.5,"s":"é😀","big":12345678901234}"#)
        #expect(value["n"]?.intValue == 3)
        #expect(value["d"]?.doubleValue == 2.5)
        #expect(value["s"]?.stringValue == "é😀")
        #expect(value["big"]?.intValue == 12_345_678_901_234)
        #expect(value["missing"] == nil)
    }

    @Test(arguments: ["{", #"{"a" 1}"#, "[1,]", "tru", #""unterminated"#, "1 2", "\"a\u{1}\""])
    func brokenTextIsRefusedWithItsPlace(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }
}

@Suite("HTML report")
struct HTMLReportTests {
    @Test func theModelHasEverySeriesAndSpan() throws {
        let model = ReportModel(try reportFixture())
        #expect(model.duration == 10)
        #expect(model.links.map(\.name) == ["wifi", "cell"])
        let wifi = try #require(model.links.first)
        #expect(wifi.down.count == 1 && wifi.down[0].start == 3 && wifi.down[0].end == 7)
        #expect(wifi.blackholed["up"]?.first?.start == 2 && wifi.blackholed["up"]?.first?.end == 10, "a blackhole never lifted lasts to the end")
        // Gilbert-Elliott's long-run loss: p / (p + r) with every packet lost in the bad state.
        let geLoss = try #require(wifi.loss["down"]?.points.last?.value)
        #expect(abs(geLoss - 100 * 0.01 / 0.31) < 0.01)
        let video = try #require(model.workloads.first { $0.name == "video" })
        #expect(video.stalls.map(\.start) == [4, 9], "the stall still going at the end comes from the summary")
        #expect(video.connects.count == 2)
        #expect(model.workloads.first { $0.name == "api" }?.failedRequests.count == 1)
        let phone = try #require(model.nodes.first)
        #expect(phone.spans.map(\.type) == ["wifi", "cellular", nil], "the path after the end is dropped")
        #expect(phone.spans[1].expensive && phone.spans[1].constrained)
        #expect(model.marks.first?.text == "phone: sync started")
    }

    @Test func thePageIsSelfContainedAndEscaped() throws {
        let html = HTMLReport.render(try reportFixture())
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        for reference in ["src=", "href=", "@import", "url("] { #expect(!html.contains(reference), "no external reference: \(reference)") }
        #expect(html.contains("fixture &lt;&amp;&gt;"))
        #expect(html.contains("a note with &lt;markup&gt;"))
        #expect(!html.contains("<markup>"))
        // 2 links, 2 workloads, 1 node, 1 row of marks.
        #expect(html.contains("data-charts=\"6\""))
        #expect(html.components(separatedBy: "class=\"band stall\"").count - 1 == 4, "two stalls, on the throughput and the buffer panels")
        #expect(html.contains("class=\"band blackhole\""))
        #expect(html.contains("class=\"band down\""))
        #expect(html.contains("class=\"path cellular\""))
        #expect(html.contains("class=\"flag constrained\""))
        #expect(html.contains("<tr class=fail><td>video</td>"))
        #expect(html.contains("<td class=result>pass</td>"))
    }

    /// A satellite path shows on its own row, and the link quality in the path's label; a
    /// report written before either existed still renders without them.
    @Test func ultraConstrainedPathsAndLinkQualityShow() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/report").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roam-report-ultra-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: source + "/summary.json", toPath: directory + "/summary.json")
        let timeline = try String(contentsOfFile: source + "/timeline.jsonl", encoding: .utf8)
            .replacingOccurrences(of: #""isConstrained":true,"primaryInterface":"cell""#,
                                  with: #""isConstrained":true,"isUltraConstrained":true,"linkQuality":"minimal","primaryInterface":"cell""#)
        try timeline.write(toFile: directory + "/timeline.jsonl", atomically: true, encoding: .utf8)
        let run = try RecordedRun.load(directory: directory)
        let phone = try #require(ReportModel(run).nodes.first)
        #expect(phone.spans[1].ultraConstrained && phone.spans[1].quality == "minimal")
        #expect(!phone.spans[0].ultraConstrained && phone.spans[0].quality == nil)
        let html = HTMLReport.render(run)
        #expect(html.contains("class=\"flag ultra\""))
        #expect(html.contains("cell (cellular, minimal)"))
        #expect(!HTMLReport.render(try reportFixture()).contains("class=\"flag ultra\""))
    }

    /// A captive portal's hold on a phone's access link (from the start, and again from a
    /// session's end) is drawn as an outage of that link until each login.
    @Test func aCaptivePortalsHoldShowsOnTheAccessLink() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/report").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roam-report-portal-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: source + "/summary.json", toPath: directory + "/summary.json")
        var timeline = try String(contentsOfFile: source + "/timeline.jsonl", encoding: .utf8)
        timeline += #"{"t":0.0,"type":"link","link":"cell","action":"portal","network":"held by the captive portal of hotel"}"# + "\n"
        timeline += #"{"t":2.5,"type":"link","link":"cell","action":"login","planned":2.5,"actual":2.5,"network":"login","line":9}"# + "\n"
        timeline += #"{"t":6.0,"type":"link","link":"cell","action":"portal","network":"logout expired"}"# + "\n"
        timeline += #"{"t":8.0,"type":"link","link":"cell","action":"portal","network":"login by a POST from 192.168.0.10"}"# + "\n"
        try timeline.write(toFile: directory + "/timeline.jsonl", atomically: true, encoding: .utf8)
        let model = ReportModel(try RecordedRun.load(directory: directory))
        let cell = try #require(model.links.first { $0.name == "cell" })
        let held = cell.down.filter { $0.label == "captive portal" }
        #expect(held.map(\.start) == [0, 6] && held.map(\.end) == [2.5, 8], "\(cell.down)")
    }

    /// What a link carried (`carried` events) is a series of its own beside the rate it was set
    /// to, each count over the interval before it, drawn thin and dotted on the rate panel's scale.
    @Test func whatALinkCarriedIsDrawnBesideItsRate() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/report").path
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roam-report-carried-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.copyItem(atPath: source + "/summary.json", toPath: directory + "/summary.json")
        var timeline = try String(contentsOfFile: source + "/timeline.jsonl", encoding: .utf8)
        timeline += #"{"t":1.0,"type":"carried","link":"wifi","intervalMs":1000,"upBps":250000,"downBps":7900000}"# + "\n"
        timeline += #"{"t":2.0,"type":"carried","link":"wifi","intervalMs":1000,"upBps":120000,"downBps":4000000}"# + "\n"
        timeline += #"{"t":2.5,"type":"carried","link":"nowhere","intervalMs":500,"downBps":1}"# + "\n"
        try timeline.write(toFile: directory + "/timeline.jsonl", atomically: true, encoding: .utf8)
        let run = try RecordedRun.load(directory: directory)
        let model = ReportModel(run)
        let wifi = try #require(model.links.first { $0.name == "wifi" })
        #expect(wifi.carried["down"]?.points.map(\.t) == [0, 1] && wifi.carried["down"]?.points.map(\.value) == [7.9, 4], "\(wifi.carried)")
        #expect(wifi.carried["up"]?.points.map(\.value) == [0.25, 0.12])
        #expect(!model.links.contains { $0.name == "nowhere" }, "a link the timeline never set is not drawn")
        let html = HTMLReport.render(run)
        #expect(html.contains("<polyline class=\"series carried down\"") && html.contains("<title>carried down</title>"))
        #expect(html.contains("rate: as set, and what the link carried (thin, dotted"))
        #expect(!HTMLReport.render(try reportFixture()).contains("series carried"), "a run without carried events draws none")
    }

    @Test func aComparisonPutsBothRunsOnOneAxisAndTheirFiguresSideBySide() throws {
        let a = try reportFixture()
        var b = a
        b.directory = "/elsewhere"
        b.summary.duration = .seconds(20)
        b.summary.endedAt = .seconds(20)
        let html = HTMLReport.render(comparing: a, b)
        #expect(html.contains("data-duration=\"20.0\""), "the longer run sets the axis")
        #expect(!html.contains("data-duration=\"10.0\""))
        #expect(html.contains("<th>B: /elsewhere</th>"))
        #expect(html.contains("<td>video: stalls (longest)</td><td>2 (2500 ms)</td><td>2 (2500 ms)</td>"))
        #expect(html.contains("[A] workload video") && html.contains("[B] workload video"))
    }

    @Test func aDirectoryWithoutARunSaysWhatIsMissing() throws {
        #expect {
            try RecordedRun.load(directory: "/nonexistent-roam-report")
        } throws: { error in
            (error as? ReportError)?.message == "/nonexistent-roam-report is not a run's report directory: /nonexistent-roam-report: no such directory"
        }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("roam-empty-report-\(getpid())").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect {
            try RecordedRun.load(directory: empty)
        } throws: { error in
            (error as? ReportError)?.message.contains("cannot read summary.json") == true
        }
    }

    @Test func niceSteps() {
        #expect(niceStep(0.7) == 1)
        #expect(niceStep(4) == 5)
        #expect(niceStep(12) == 20)
        #expect(niceStep(0.03) == 0.05)
    }
}
