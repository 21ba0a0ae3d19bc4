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
}
