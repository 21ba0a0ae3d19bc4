import Foundation
import PathMonitor
@testable import RoamReport
import Testing

/// The report of an hour-long run stays a page a browser opens at once: every chart keeps about
/// one point, band, span or marker per pixel, chosen to keep what matters, while a short run is
/// drawn exactly as recorded.
@Suite struct LongRunReportTests {
    /// An hour of Wi-Fi going down for 1 s every 2 s, a workload sampled every 200 ms with a
    /// connection after each outage, and the phone's path following the carrier.
    static func hourOfFlaps() throws -> RecordedRun {
        let (summary, timeline) = try hourOfFlapsTexts()
        return try RecordedRun.parse(directory: "hour", summary: summary, timeline: timeline)
    }

    /// The summary and timeline of ``hourOfFlaps()``.
    static func hourOfFlapsTexts() throws -> (summary: String, timeline: String) {
        var lines: [String] = []
        let wifi = #"{"name":"wifi","type":"wifi","isExpensive":false,"isConstrained":false}"#
        let cell = #"{"name":"cell","type":"cellular","isExpensive":true,"isConstrained":false}"#
        for flap in 0..<1800 {
            let t = Double(flap) * 2
            lines.append(#"{"t":\#(t),"type":"link","link":"wifi","action":"flap","carrier":"down"}"#)
            lines.append(#"{"t":\#(t + 1),"type":"link","link":"wifi","action":"flap","carrier":"up"}"#)
            lines.append(#"{"t":\#(t),"type":"path","node":"phone","summary":"cell","path":{"status":"satisfied","primaryInterface":"cell","isExpensive":true,"interfaces":[\#(cell)]}}"#)
            lines.append(#"{"t":\#(t + 1),"type":"path","node":"phone","summary":"wifi","path":{"status":"satisfied","primaryInterface":"wifi","isExpensive":false,"interfaces":[\#(wifi),\#(cell)]}}"#)
            lines.append(#"{"t":\#(t + 1.1),"type":"connect","workload":"video","interface":"wifi","local":"198.18.0.1","remote":"198.18.0.2"}"#)
        }
        for sample in 0..<18_000 {
            let t = Double(sample) * 0.2
            lines.append(#"{"t":\#(t),"type":"sample","workload":"video","bytes":0,"throughputBps":\#(sample % 10 == 0 ? 0 : 4_000_000),"bufferedMs":\#(2000 - sample % 10 * 100)}"#)
        }
        let summary = #"{"scenario":"hour","durationSeconds":3600,"workloads":[{"name":"video","kind":"stream","mode":"handover"}]}"#
        return (summary, lines.joined(separator: "\n"))
    }

    @Test func anHourOfFlapsDrawsAboutOneThingPerPixel() throws {
        let run = try Self.hourOfFlaps()
        let model = ReportModel(run)
        let columns = ReportModel.columns
        #expect(model.links[0].down.count <= columns)
        #expect(model.links[0].down.first?.label.hasPrefix("1800 × carrier down") == true, "\(model.links[0].down.first?.label ?? "-")")
        #expect(model.workloads[0].throughput.count <= columns + 1)
        #expect(model.workloads[0].buffered.count <= columns + 1)
        #expect(model.workloads[0].connects.count <= columns + 1)
        #expect(model.nodes[0].spans.count <= columns + 1)
        // The mean throughput over the hour is what was recorded (0 one sample in ten): 3.6 Mbit/s.
        let mean = model.workloads[0].throughput.map(\.mbit).reduce(0, +) / Double(model.workloads[0].throughput.count)
        #expect(abs(mean - 3.6) < 0.05, "\(mean)")
        // The lowest buffer survives thinning: 1.1 s.
        #expect(model.workloads[0].buffered.map(\.seconds).min() == 1.1)
        // Both interfaces still show on the path: the phone spends as long on each.
        #expect(Set(model.nodes[0].spans.compactMap(\.interface)) == ["wifi", "cell"])
        let html = HTMLReport.render(run)
        #expect(html.utf8.count < 1_500_000, "\(html.utf8.count) bytes")
    }

    @Test func aShortRunIsDrawnAsRecorded() throws {
        let fixture = try reportFixture()
        let model = ReportModel(fixture)
        var thinned = model
        thinned.downsample(columns: 100_000)
        #expect(thinned.links.map(\.down.count) == model.links.map(\.down.count))
        #expect(thinned.workloads.map(\.throughput.count) == model.workloads.map(\.throughput.count))
    }
}
