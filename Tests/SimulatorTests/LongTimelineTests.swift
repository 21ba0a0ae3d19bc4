import Foundation
import Glibc
import ScenarioModel
import Simulator
import RoamReport
import Testing
import TestSupport

/// A run whose timeline is longer than `report.html` is drawn from (a day of busy workloads)
/// keeps its verdict and every event, and says why it has no page, instead of failing at its end.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct LongTimelineTests {
    @Test func aTimelineTooLongToDrawLeavesTheVerdictsAndSaysSo() throws {
        let yaml = """
            name: long
            duration: 1s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server], delay: 2ms}
            workloads:
              - {name: api, kind: requests, from: server, to: phone, interval: 100ms, size: 1kb}
            expect:
              - {workload: api, completes: true}

            """
        let scenario = try #require(ScenarioReader.parse(yaml, file: "long.yaml").scenario)
        let scratch = try TestEnvironment.scratchDirectory("roam-long-timeline")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        for limit in [HTMLReport.maximumTimelineSize, 2048] {
            var options = RunOptions()
            options.backend = .userspace
            options.reportDirectory = scratch + "/\(limit)"
            options.renderedTimelineLimit = limit
            let report = try ScenarioRunner(scenario: scenario, options: options).run()
            let timeline = try #require(FileManager.default.attributesOfItem(atPath: report.reportDirectory + "/timeline.jsonl")[.size] as? Int)
            let drawn = FileManager.default.fileExists(atPath: report.reportDirectory + "/report.html")
            let summary = try String(contentsOfFile: report.reportDirectory + "/summary.json", encoding: .utf8)
            #expect(report.passed, "\(report.expectations)")
            #expect(timeline > 2048, "the run's timeline is longer than the small limit: \(timeline) bytes")
            #expect(drawn == (limit > timeline) && report.wroteHTML == drawn)
            #expect(summary.contains("report.html was not written: timeline.jsonl holds") == !drawn, "\(summary)")
        }
    }
}
