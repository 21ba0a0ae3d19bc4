import Foundation
import PathMonitor
import RoamCore
@testable import ScenarioModel
import Testing

/// How the netem backend plays a trace: its rate stepped every 100 ms (pure, no kernel).
@Suite("Trace stepping")
struct TraceSteppingTests {
    /// A trace of period 300 ms: 10 opportunities at 50 ms, 20 at 250 ms, one at 300 ms. In
    /// 100 ms windows from the start: 10, 0, 20, then 11 (300 of this period, 350 of the next),
    /// 0, 20, 11, 0, 20, 11...
    static let varied = Array(repeating: "50", count: 10) + Array(repeating: "250", count: 20) + ["300"]

    /// A scenario (`body` after its nodes) in a directory of its own holding `trace.trace`.
    func read(_ body: String, trace: [String] = varied, duration: String = "1s") throws -> Scenario {
        let directory = NSTemporaryDirectory() + "roam-trace-stepping-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try (trace.joined(separator: "\n") + "\n").write(toFile: directory + "/trace.trace", atomically: true, encoding: .utf8)
        let outcome = ScenarioReader.parse("name: stepping\nduration: \(duration)\nnodes: {phone: {}, server: {}}\n" + body,
                                           file: "stepping.yaml", baseDirectory: directory)
        return try #require(outcome.scenario, "\(outcome.errors.map(\.message))")
    }

    static func rate(_ conditions: LinkConditions?) -> Double? { conditions?.impairment.rate?.bitsPerSecond }

    func conditions(_ change: ScheduledChange) -> (TrafficDirection, LinkConditions)? {
        if case let .conditions(direction, conditions) = change.change { (direction, conditions) } else { nil }
    }

    @Test func eachWindowPlaysTheOpportunitiesInIt() throws {
        let scenario = try read("links:\n  - {name: cell, between: [phone, server], delay: 20ms, up: {rate: 1mbit}, down: {trace: trace.trace}}\n")
        let (schedule, window) = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration)
        #expect(window == .milliseconds(100))
        let down = try #require(schedule.initial.first { $0.direction == .down }?.conditions)
        // 10 opportunities of 1500 bytes in 100 ms: 1.2 Mbit/s; the trace kept beside it, and the
        // emulator's queue.
        #expect(Self.rate(down) == 1_200_000)
        #expect(down.impairment.trace?.path == "trace.trace" && down.impairment.limit == 1000 && down.impairment.delay == .milliseconds(20))
        #expect(Self.rate(schedule.initial.first { $0.direction == .up }?.conditions) == 1_000_000, "the up direction as written")
        let steps = schedule.changes.compactMap { change in conditions(change).map { (change, $0.0, $0.1) } }
        #expect(steps.allSatisfy { $0.1 == .down && $0.0.action == "trace" && $0.0.stepCount == 10 })
        #expect(steps.map(\.0.at) == (1...9).map { .milliseconds(100 * $0) })
        #expect(steps.map(\.0.step) == (2...10).map { $0 })
        #expect(steps.map { Self.rate($0.2) } == [121_120, 2_400_000, 1_320_000, 121_120, 2_400_000, 1_320_000, 121_120, 2_400_000, 1_320_000])
        // The grade is the trace's mean (31 opportunities in 300 ms), not each window's.
        let grades = Set(steps.map { LinkQuality(grading: $0.2.impairment) } + [LinkQuality(grading: down.impairment)])
        #expect(grades == [LinkQuality(grading: Impairment(rate: Rate(bitsPerSecond: 31 * 12_000 / 0.3)))])
    }

    @Test func equalWindowsAreOneChange() throws {
        // One opportunity a millisecond, 1 to 100: 99 in the first window, then 100 in every one
        // (the 100th of each period beside the next period's 1 to 99).
        let scenario = try read("links:\n  - {name: cell, between: [phone, server], trace: trace.trace}\n", trace: (1...100).map(String.init))
        let (schedule, window) = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration)
        #expect(window == .milliseconds(100))
        #expect(schedule.initial.map { Self.rate($0.conditions) } == [11_880_000, 11_880_000])
        #expect(schedule.changes.map(\.at) == [.milliseconds(100), .milliseconds(100)])
        #expect(schedule.changes.map { conditions($0)?.0 } == [.up, .down])
        #expect(schedule.changes.map { Self.rate(conditions($0)?.1) } == [12_000_000, 12_000_000])
    }

    @Test func theTimelineStartsAndEndsATrace() throws {
        let scenario = try read("""
            links:
              - {name: cell, between: [phone, server], rate: 5mbit}
            timeline:
              - {at: 250ms, link: cell, direction: down, set: {trace: trace.trace}}
              - {at: 450ms, link: cell, direction: down, set: {delay: 30ms}}
              - {at: 650ms, link: cell, profile: "nlc:LTE"}

            """)
        let (schedule, _) = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration)
        #expect(schedule.initial.allSatisfy { Self.rate($0.conditions) == 5_000_000 && $0.conditions.impairment.trace == nil })
        let down = schedule.changes.filter { conditions($0)?.0 == .down }
        #expect(down.map(\.at) == [250, 300, 400, 450, 500, 600, 650].map { .milliseconds($0) })
        #expect(down.map(\.action) == ["set", "trace", "trace", "set", "trace", "trace", "profile"])
        #expect(down.map { Self.rate(conditions($0)?.1) } == [2_400_000, 1_320_000, 121_120, 121_120, 2_400_000, 1_320_000, 50_000_000])
        // The delay set while the trace plays stays in the steps after it.
        #expect(down.map { conditions($0)?.1.impairment.delay } == [nil, nil, nil, .milliseconds(30), .milliseconds(30), .milliseconds(30), .milliseconds(50)])
        #expect(conditions(down[6])?.1.impairment.trace == nil, "the profile has no trace: stepping ends")
        // The up direction: the profile's change alone.
        #expect(schedule.changes.filter { conditions($0)?.0 == .up }.map(\.action) == ["profile"])
    }

    @Test func aQueueTheScenarioSetsIsKept() throws {
        let scenario = try read("links:\n  - {name: cell, between: [phone, server], down: {trace: trace.trace, limit: 64kb}, up: {trace: trace.trace, limit: 20}}\n")
        let down = try #require(TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration).schedule.initial.first { $0.direction == .down })
        #expect(down.conditions.impairment.limitBytes == 64_000, "\(down.conditions.impairment)")
        #expect(down.conditions.impairment.limit == nil)
        let up = try #require(TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration).schedule.initial.first { $0.direction == .up })
        #expect(up.conditions.impairment.limit == 20 && up.conditions.impairment.limitBytes == nil)
    }

    @Test func aLongRunTakesLongerWindows() throws {
        let scenario = try read("links:\n  - {name: cell, between: [phone, server], trace: trace.trace}\n", duration: "24h")
        let (schedule, window) = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration)
        // 2 × 864,000 windows of 100 ms: 35 times as long keeps them under 50,000.
        #expect(window == .milliseconds(3500))
        #expect(schedule.changes.count <= TimelineSchedule.maximumTraceSteps && schedule.changes.count > 1000)
        #expect(schedule.changes.allSatisfy { $0.at < .seconds(86_400) && $0.at.components.attoseconds % 100_000_000_000_000_000 == 0 })
    }

    @Test func aScheduleWithoutTracesIsUnchanged() throws {
        let scenario = try read("""
            links:
              - {name: cell, between: [phone, server], rate: 5mbit}
            timeline:
              - {at: 250ms, link: cell, ramp: {to: {rate: 1mbit}, over: 500ms}}

            """)
        let schedule = TimelineSchedule(scenario: scenario)
        let (stepped, window) = schedule.steppingTraces(until: scenario.duration)
        #expect(window == nil && stepped == schedule)
    }
}

/// mahimahi's own Verizon LTE trace (its first minute, vendored), stepped.
@Suite("Trace stepping, a real trace")
struct RealTraceSteppingTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path + "/Fixtures/traces/mahimahi"

    /// Every window's rate carries exactly the trace's opportunities in it: the bytes of the
    /// steps add up to the trace's, window by window, over its minute.
    @Test func theStepsCarryWhatTheTraceCarries() throws {
        let outcome = ScenarioReader.parse("""
            name: verizon
            duration: 60s
            nodes: {phone: {}, server: {}}
            links:
              - {name: cell, between: [phone, server], up: {trace: Verizon-LTE-short-60s.up}, down: {trace: Verizon-LTE-short-60s.down}}

            """, file: "verizon.yaml", baseDirectory: Self.fixtures)
        let scenario = try #require(outcome.scenario, "\(outcome.errors.map(\.message))")
        let trace = try #require(scenario.links[0].down.trace?.trace)
        #expect(trace.opportunities.count == 23_787 && trace.period == 59_999)
        let (schedule, window) = TimelineSchedule(scenario: scenario).steppingTraces(until: scenario.duration)
        #expect(window == .milliseconds(100))
        // The rate in force in each of the 600 windows.
        var rates = [Double](repeating: -1, count: 600)
        rates[0] = try #require(schedule.initial.first { $0.direction == .down }?.conditions.impairment.rate?.bitsPerSecond)
        for change in schedule.changes {
            guard case let .conditions(.down, conditions) = change.change else { continue }
            rates[Int(change.at.components.attoseconds / 100_000_000_000_000_000) + Int(change.at.components.seconds) * 10] =
                try #require(conditions.impairment.rate?.bitsPerSecond)
        }
        for index in rates.indices where rates[index] < 0 { rates[index] = rates[index - 1] }
        var silent = 0, mismatched = 0
        for index in rates.indices {
            // The trace repeats from its last millisecond (59,999): the last window holds the
            // first of the next period's too.
            let inWindow = [0, trace.period].map { start in
                trace.opportunities.filter { start + $0 >= Int64(index) * 100 && start + $0 < Int64(index + 1) * 100 }.count
            }.reduce(0, +)
            if inWindow == 0 {
                silent += 1
                if rates[index] != TimelineSchedule.silentTraceRate(window: .milliseconds(100)).bitsPerSecond { mismatched += 1 }
            } else if abs(rates[index] * 0.1 / 8 - Double(inWindow * 1500)) > 0.01 {
                mismatched += 1
            }
        }
        #expect(mismatched == 0)
        #expect(silent > 0, "the minute has windows without an opportunity")
        // Fewer changes than windows: equal neighbours are one change.
        #expect(schedule.changes.count < 1200 && schedule.changes.count > 500)
    }
}
