import Foundation
import ScenarioModel
@testable import Simulator
import Testing

/// Which schedule each backend plays for a scenario with a trace (pure: no kernel).
@Suite("Trace playback per backend")
struct TracePlaybackTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test func netemStepsATraceAndSaysSoAndTheUserspaceEmulatorPlaysItAsWritten() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: Self.root + "/scenarios/commuter-train.yaml").scenario)
        #expect(scenario.firstTracedLink?.name == "cell")
        #expect(scenario.userspaceOnly == nil, "a trace no longer needs the userspace emulator")
        let schedule = TimelineSchedule(scenario: scenario)
        let userspace = schedule.played(on: .userspace, scenario: scenario)
        #expect(userspace.schedule == schedule && userspace.note == nil)
        let netem = schedule.played(on: .netem, scenario: scenario)
        #expect(netem.schedule.changes.count > 100 && netem.schedule.changes.allSatisfy { $0.action == "trace" })
        #expect(netem.schedule.initial.allSatisfy { $0.conditions.impairment.rate != nil && $0.conditions.impairment.trace != nil })
        let note = try #require(netem.note)
        #expect(note.hasPrefix("trace capacity on link 'cell' played by netem as a rate stepped every 100ms"), "\(note)")
        #expect(note.contains("121.12kbit") || note.contains("121kbit"), "\(note)")
        // A scenario without a trace: the same schedule, no note, on either.
        let walk = try #require(ScenarioReader.read(contentsOf: Self.root + "/scenarios/walk-out-of-home.yaml").scenario)
        let plain = TimelineSchedule(scenario: walk).played(on: .netem, scenario: walk)
        #expect(plain.schedule == TimelineSchedule(scenario: walk) && plain.note == nil)
        #expect(walk.firstTracedLink == nil)
    }

    /// A flow's trace is a trace too: auto picks the emulator for it, and netem steps it, saying so.
    @Test func aFlowsTraceIsSteppedAndNamed() throws {
        let outcome = ScenarioReader.parse("""
            name: flow-trace
            duration: 2s
            nodes: {phone: {}, server: {}}
            links:
              - name: cell
                between: [phone, server]
                rate: 20mbit
                flows:
                  - {match: {protocol: tcp, port: 443}, direction: down, trace: Verizon-LTE-short-60s.down}

            """, file: "flow-trace.yaml", baseDirectory: Self.root + "/Tests/Fixtures/traces/mahimahi")
        let scenario = try #require(outcome.scenario, "\(outcome.errors.map(\.message))")
        #expect(scenario.firstTracedLink?.name == "cell")
        let netem = TimelineSchedule(scenario: scenario).played(on: .netem, scenario: scenario)
        #expect(netem.note?.hasPrefix("trace capacity on link 'cell' played by netem") == true, "\(String(describing: netem.note))")
        let down = try #require(netem.schedule.initial.first { $0.direction == .down }?.conditions)
        #expect(down.impairment.rate == .mbit(20) && down.flows.first?.impairment.rate != nil && down.flows.first?.impairment.trace != nil)
        #expect(!netem.schedule.changes.isEmpty && netem.schedule.changes.allSatisfy { $0.action == "trace" })
    }
}
