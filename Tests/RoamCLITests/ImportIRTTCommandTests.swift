import Foundation
import Glibc
import ScenarioModel
import Testing
import TestSupport

/// `roam import irtt` end to end, with Debian's irtt as the measuring tool: a link whose delays
/// and losses are known is measured (Tests/Fixtures/irtt-record.yaml), the recording imported
/// into a scenario, and the scenario replayed and measured again by the same client. The
/// recording must hold what the link was set to, and the replay what the recording held.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil && access("/usr/bin/irtt", X_OK) == 0,
                "needs the built roam and irtt (scripts/setup.sh installs it)"), .serialized)
struct ImportIRTTCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    /// The fixture's IRTT server and client, as a scenario's workloads.
    static let workloads = """
        workloads:
          - name: irtt-server
            kind: command
            from: server
            run: [sh, -c, 'exec irtt server -b "$ROAM_SERVER_ADDR"']
          - name: irtt-client
            kind: command
            from: phone
            to: server
            start: 1s
            run: [sh, -c, 'exec irtt client -Q -i 50ms -d 12s -o "$ROAM_REPORT_DIR/irtt.json" "$ROAM_PEER_ADDR"']
        expect:
          - { workload: irtt-client, exitCode: 0 }
        """

    func windows(_ path: String) throws -> [IRTTImport.Window] {
        let recording = try IRTTImport.read(path)
        return IRTTImport.windows(recording, width: .seconds(1)).windows
    }

    func milliseconds(_ value: Duration?) -> Double { value.map { Double($0.components.attoseconds) / 1e15 + Double($0.components.seconds) * 1000 } ?? .nan }

    /// Lost each way over `range` of windows, as a share of what was sent.
    func lost(_ windows: [IRTTImport.Window], _ range: Range<Int>) -> (up: Double, down: Double) {
        let chosen = windows[range]
        let sent = Double(chosen.reduce(0) { $0 + $1.sent })
        let up = chosen.reduce(0.0) { $0 + $1.upLoss * Double($1.sent) }
        let down = chosen.reduce(0.0) { $0 + $1.downLoss * Double($1.sent) * (1 - $1.upLoss) }
        return (up / sent, down / max(1, sent - up))
    }

    @Test func aRecordingImportedReplaysWhatWasRecorded() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-irtt")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let record = try RunningCommand.run(roam, ["run", NetemHost.root + "/Tests/Fixtures/irtt-record.yaml", "--backend", "userspace",
                                                   "--quiet", "--report", directory + "/record"], timeout: 120)
        try #require(record.status == 0, "\(record.output)\(record.error)")
        let imported = try RunningCommand.run(roam, ["import", "irtt", directory + "/record/irtt.json", "--name", "replay", "--start", "1s",
                                                     "-o", directory + "/replay.yaml"])
        try #require(imported.status == 0, "\(imported.error)")
        #expect(imported.error.contains("note: not carried over: the delay's variation within a window"), "\(imported.error)")
        let scenario = try String(contentsOfFile: directory + "/replay.yaml", encoding: .utf8)
        // The link holds the last window's conditions past the recording's end, for the client's
        // last replies (IRTT waits for them) and its report.
        let lengthened = scenario.split(separator: "\n").map { $0.hasPrefix("duration: ") ? "duration: 16s" : String($0) }.joined(separator: "\n")
        try (lengthened + "\n" + Self.workloads + "\n").write(toFile: directory + "/replay.yaml", atomically: true, encoding: .utf8)
        let replay = try RunningCommand.run(roam, ["run", directory + "/replay.yaml", "--backend", "userspace", "--quiet",
                                                   "--report", directory + "/replay"], timeout: 120)
        try #require(replay.status == 0, "\(replay.output)\(replay.error)\n\(scenario)")

        let recorded = try windows(directory + "/record/irtt.json"), replayed = try windows(directory + "/replay/irtt.json")
        try #require(recorded.count >= 12 && replayed.count >= 12, "\(recorded.count) and \(replayed.count) windows")
        // Windows 1 to 4 before the change (at 6 s of the recording), 7 to 10 after: the windows
        // at the edges and around the change mix two settings.
        let before = 1..<5, after = 7..<11
        var rows: [String] = []
        for index in Array(before) + Array(after) {
            let (set, was, again) = (index < 6 ? (20.0, 35.0) : (10.0, 60.0), recorded[index], replayed[index])
            rows.append(String(format: "%2d s: link %.0f/%.0f ms, recorded %.1f/%.1f, replayed %.1f/%.1f", index, set.0, set.1,
                               milliseconds(was.upDelay), milliseconds(was.downDelay), milliseconds(again.upDelay), milliseconds(again.downDelay)))
            // The recording holds the link's delays (the emulator adds well under a millisecond);
            // the replay holds the recording's (the medians, to a tenth of a millisecond, plus the same).
            #expect(abs(milliseconds(was.upDelay) - set.0) < 3 && abs(milliseconds(was.downDelay) - set.1) < 3, "\(rows.last!)")
            #expect(abs(milliseconds(again.upDelay) - milliseconds(was.upDelay)) < 3 && abs(milliseconds(again.downDelay) - milliseconds(was.downDelay)) < 3,
                    "\(rows.last!)")
        }
        // Losses: 80 round trips each side of the change; the link's shares, then the recording's,
        // within what 80 draws allow (about three standard deviations).
        for (range, set) in [(before, (0.02, 0.05)), (after, (0.10, 0.01))] {
            let was = lost(recorded, range), again = lost(replayed, range)
            rows.append(String(format: "windows %d-%d: link lost %.0f%%/%.0f%%, recorded %.1f%%/%.1f%%, replayed %.1f%%/%.1f%%", range.lowerBound, range.upperBound - 1,
                               set.0 * 100, set.1 * 100, was.up * 100, was.down * 100, again.up * 100, again.down * 100))
            #expect(abs(was.up - set.0) < 0.11 && abs(was.down - set.1) < 0.11, "\(rows.last!)")
            #expect(abs(again.up - was.up) < 0.15 && abs(again.down - was.down) < 0.15, "\(rows.last!)")
        }
        print("irtt record and replay (up/down):\n" + rows.joined(separator: "\n"))
    }

    /// Bad input: exit 2 with what is wrong, and nothing written.
    @Test func aBadRecordingOrOptionIsRefused() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-irtt-bad")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "{\"round_trips\": [{\"lost\": \"sometimes\"}]}".write(toFile: directory + "/bad.json", atomically: true, encoding: .utf8)
        let bad = try RunningCommand.run(roam, ["import", "irtt", directory + "/bad.json", "--name", "x", "-o", directory + "/out.yaml"])
        #expect(bad.status == 2 && bad.error.contains("bad.json: round_trips[0]: lost is not false, true, true_up or true_down"), "\(bad.error)")
        #expect(access(directory + "/out.yaml", F_OK) != 0)
        let gzip = try RunningCommand.run("/bin/sh", ["-c", "printf '\\037\\213\\010\\000' > '\(directory)/r.json.gz' && '\(roam)' import irtt '\(directory)/r.json.gz' --name x"])
        #expect(gzip.status == 2 && gzip.error.contains("gunzip it first"), "\(gzip.error)")
        let window = try RunningCommand.run(roam, ["import", "irtt", directory + "/bad.json", "--name", "x", "--window", "10ms"])
        #expect(window.status == 2 && window.error.contains("--window 10ms: expected a duration from 100ms to 60s"), "\(window.error)")
        let fifo = directory + "/fifo"
        mkfifo(fifo, 0o600)
        let pipe = try RunningCommand.run(roam, ["import", "irtt", fifo, "--name", "x"], timeout: 20)
        #expect(pipe.status == 2 && pipe.error.contains("cannot read the IRTT recording"), "\(pipe.error)")
    }
}
