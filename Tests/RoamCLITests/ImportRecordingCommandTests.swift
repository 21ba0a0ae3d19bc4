import Foundation
import Glibc
import RoamReport
import Testing
import TestSupport

/// `roam import gnettrack` and `roam import mp-traces` through the binary: a real G-NetTrack Pro
/// excerpt becomes a scenario `roam validate` accepts; an MP-Traces pair becomes a scenario in
/// which Roam's handover client moves to the cellular link where the recorded Wi-Fi collapsed;
/// bad input is refused with exit 2 and nothing written.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "needs the built roam"), .serialized)
struct ImportRecordingCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func aGNetTrackLogBecomesAScenarioThatValidates() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-gnettrack")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = NetemHost.root + "/Tests/Fixtures/traces/gnettrack/download-driving-handovers.csv"
        let imported = try RunningCommand.run(roam, ["import", "gnettrack", log, "--name", "drive", "--start", "2s", "--track", directory + "/drive.track",
                                                     "-o", directory + "/drive.yaml"])
        #expect(imported.status == 0, "\(imported.error)")
        #expect(imported.output.contains("drive.yaml: scenario 'drive', 120 windows of 1s on link 'cell'"), "\(imported.output)")
        #expect(imported.error.contains("note: UL_bitrate is not played") && imported.error.contains("of cell or network mode"), "\(imported.error)")
        #expect(imported.output.contains("drive.track: the drive's track, 16 positions"), "\(imported.output)")
        let track = NetemHost.text(directory + "/drive.track").split(separator: "\n")
        #expect(track.count == 17 && track[1] == "0,0,0" && track[2] == "5,-66,-76.9", "\(track.prefix(3))")
        let validated = try RunningCommand.run(roam, ["validate", directory + "/drive.yaml"])
        #expect(validated.status == 0 && validated.output.contains("'drive', 122s, 2 nodes, 1 links"), "\(validated.output)\(validated.error)")
    }

    /// A file of several Lumos5G runs: without --run, the runs listed and exit 2; with a run, a
    /// scenario `roam validate` accepts and a track; a bad row refused with its line and nothing
    /// written.
    @Test func aLumos5GRunBecomesAScenarioThatValidates() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-lumos5g")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = NetemHost.root + "/Tests/Fixtures/traces/lumos5g/loop-excerpt.csv"
        let unchosen = try RunningCommand.run(roam, ["import", "lumos5g", file, "--name", "loop", "-o", directory + "/loop.yaml"])
        #expect(unchosen.status == 2 && unchosen.error.contains("the file has 3 runs: run 3 walking CW (23 rows), run 3 driving CW (8 rows), run 4 walking ACW (5 rows)"), "\(unchosen.error)")
        #expect(access(directory + "/loop.yaml", F_OK) != 0, "nothing written")
        let imported = try RunningCommand.run(roam, ["import", "lumos5g", file, "--run", "3", "--mobility", "walking", "--delay", "12ms", "--name", "loop",
                                                     "--start", "2s", "--track", directory + "/loop.track", "-o", directory + "/loop.yaml"])
        #expect(imported.status == 0, "\(imported.error)")
        #expect(imported.output.contains("loop.yaml: scenario 'loop', run 3 walking CW: 24 windows of 1s on link 'cell'"), "\(imported.output)")
        #expect(imported.output.contains("loop.track: the run's track, 23 positions"), "\(imported.output)")
        #expect(imported.error.contains("note: on 5G (nrStatus CONNECTED) 18 of 23 s; 2 changes between 5G and LTE"), "\(imported.error)")
        let validated = try RunningCommand.run(roam, ["validate", directory + "/loop.yaml"])
        #expect(validated.status == 0 && validated.output.contains("'loop', 26s, 2 nodes, 1 links"), "\(validated.output)\(validated.error)")
        let rows = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        try (rows.prefix(3) + [rows[3].replacingOccurrences(of: ",870,", with: ",870 Mbit,")]).joined(separator: "\n").write(toFile: directory + "/bad.csv", atomically: true, encoding: .utf8)
        let bad = try RunningCommand.run(roam, ["import", "lumos5g", directory + "/bad.csv", "--name", "x", "-o", directory + "/out.yaml"])
        #expect(bad.status == 2 && bad.error.contains("bad.csv: line 4: Throughput '870 Mbit' is not a number"), "\(bad.error)")
        #expect(access(directory + "/out.yaml", F_OK) != 0, "nothing written")
        let delay = try RunningCommand.run(roam, ["import", "lumos5g", file, "--run", "4", "--name", "x", "--delay", "soon"])
        #expect(delay.status == 2 && delay.error.contains("--delay soon: expected a one-way delay"), "\(delay.error)")
        let mode = try RunningCommand.run(roam, ["import", "lumos5g", file, "--run", "4", "--name", "x", "--mobility", "on foot"])
        #expect(mode.status == 2 && mode.error.contains("--mobility on foot: expected a word"), "\(mode.error)")
    }

    @Test func badInputIsRefused() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-recording-bad")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "Timestamp,DL_bitrate,UL_bitrate\n2019.12.16_07.22.43,fast,1\n".write(toFile: directory + "/bad.csv", atomically: true, encoding: .utf8)
        let bad = try RunningCommand.run(roam, ["import", "gnettrack", directory + "/bad.csv", "--name", "x", "-o", directory + "/out.yaml"])
        #expect(bad.status == 2 && bad.error.contains("bad.csv: line 2: DL_bitrate 'fast' is not a number"), "\(bad.error)")
        #expect(access(directory + "/out.yaml", F_OK) != 0, "nothing written")
        let window = try RunningCommand.run(roam, ["import", "gnettrack", directory + "/bad.csv", "--name", "x", "--window", "500ms"])
        #expect(window.status == 2 && window.error.contains("--window 500ms: expected a duration from 1s to 60s"), "\(window.error)")
        let states = try RunningCommand.run(roam, ["import", "gnettrack", directory + "/bad.csv", "--name", "x", "--states", "D;rm"])
        #expect(states.status == 2 && states.error.contains("--states D;rm: expected State values separated by commas"), "\(states.error)")
        try "1,100\n2,lots\n".write(toFile: directory + "/w.csv", atomically: true, encoding: .utf8)
        let pair = try RunningCommand.run(roam, ["import", "mp-traces", "--wifi", directory + "/w.csv", "--cellular", directory + "/w.csv", "--name", "x"])
        #expect(pair.status == 2 && pair.error.contains("w.csv: line 2: '2,lots' is not timeInSeconds,BytesPerSecond"), "\(pair.error)")
        let delay = try RunningCommand.run(roam, ["import", "mp-traces", "--wifi", directory + "/w.csv", "--cellular", directory + "/w.csv", "--name", "x", "--wifi-delay", "2min"])
        #expect(delay.status == 2 && delay.error.contains("--wifi-delay 2min: expected a one-way delay from 0ms to 60s"), "\(delay.error)")
        let link = try RunningCommand.run(roam, ["import", "gnettrack", directory + "/bad.csv", "--name", "x", "--link", "a b"])
        #expect(link.status == 2 && link.error.contains("--link a b:"), "\(link.error)")
    }

    /// A walk in MP-Traces' format: the Wi-Fi carries 4 MB/s, then nothing for 6 s, then 2 MB/s;
    /// the cellular link 1 MB/s throughout. Imported with delays, a handover client's requests
    /// added: it moves to the cellular link inside the recorded collapse, and every request is
    /// answered within its bound.
    @Test func aHandoverClientMovesWhereTheRecordedWiFiCollapsed() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-mp-traces")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try (1...16).map { "\($0),\($0 <= 5 ? 4_000_000 : $0 <= 11 ? 0 : 2_000_000)" }.joined(separator: "\n").write(toFile: directory + "/7_1_wifi.csv", atomically: true, encoding: .utf8)
        try (1...16).map { "\($0),1000000" }.joined(separator: "\n").write(toFile: directory + "/7_1_cellular.csv", atomically: true, encoding: .utf8)
        let imported = try RunningCommand.run(roam, ["import", "mp-traces", "--wifi", directory + "/7_1_wifi.csv", "--cellular", directory + "/7_1_cellular.csv",
                                                     "--name", "walk", "--wifi-delay", "5ms", "--cellular-delay", "30ms", "--start", "2s", "-o", directory + "/walk.yaml"])
        try #require(imported.status == 0, "\(imported.error)")
        let scenario = try String(contentsOfFile: directory + "/walk.yaml", encoding: .utf8)
        // The collapse: the recording's sixth second, 2 s into the scenario.
        #expect(scenario.contains("{at: 7000ms, link: wifi, direction: down, set: {loss: 100%}}"), "\(scenario)")
        #expect(scenario.contains("{at: 13000ms, link: wifi, direction: down, set: {rate: 16000kbit, loss: 0%}}"), "\(scenario)")
        let workloads = """
            workloads:
              - { name: api, kind: requests, from: server, to: phone, size: 20kb, interval: 500ms, mode: handover }
            expect:
              - { workload: api, maxTimeToFirstByte: 2s }
            """
        // The Wi-Fi captured: what its emulator delivered toward the phone, each packet with its time.
        let captured = scenario.replacingOccurrences(of: "{name: wifi, between: [phone, server], type: wifi,",
                                                     with: "{name: wifi, between: [phone, server], type: wifi, capture: true,")
        #expect(captured != scenario)
        try (captured + workloads + "\n").write(toFile: directory + "/walk.yaml", atomically: true, encoding: .utf8)
        let run = try RunningCommand.run(roam, ["run", directory + "/walk.yaml", "--backend", "userspace", "--quiet", "--report", directory + "/run"], timeout: 120)
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let switches = NetemHost.text(directory + "/run/timeline.jsonl").split(separator: "\n").filter { $0.contains("\"type\":\"subflow-switch\"") }
        let toCell = try #require(switches.first { $0.contains("\"to\":\"cell\"") }, "\(switches)")
        let at = try #require(Double(toCell.split(separator: ",").first?.replacingOccurrences(of: "{\"t\":", with: "") ?? ""))
        #expect(at > 7 && at < 9, "moved to cell at \(at) s, the recorded Wi-Fi collapsed at 7 s: \(toCell)")
        // The report shows what was recorded (the rates the links were set to) beside what they
        // carried: toward the phone, the Wi-Fi carried the answers before the collapse and
        // nothing in it; the cellular link carried them in it, after the move.
        let carried = try RecordedRun.load(directory: directory + "/run").events.compactMap { record -> (link: String, from: Double, down: Int64)? in
            guard case .carried(let carried) = record.event, let down = carried.down else { return nil }
            return (carried.link, (record.time - carried.interval).seconds, down)
        }
        func carriedDown(_ link: String, _ seconds: ClosedRange<Double>) -> [Int64] {
            carried.filter { $0.link == link && seconds.contains($0.from) }.map(\.down)
        }
        let before = carriedDown("wifi", 2.9...5.1), collapsed = carriedDown("wifi", 7.9...11.1), moved = carriedDown("cell", 9.9...11.1)
        #expect(before.count == 3 && before.allSatisfy { $0 > 100_000 }, "the Wi-Fi before the collapse: \(before) bit/s")
        // In the collapse (from its second second: what was in flight at 7 s arrives after it)
        // the emulator delivered nothing toward the phone, and the phone's Wi-Fi received
        // nothing: not even the MLD reports both ends' kernels send when the link is retagged
        // with its new quality at 7 s (76 bytes each; they once passed a direction that lost
        // everything, and were counted here). The capture says what any such packet was.
        let summary = try #require(NetemHost.summary(directory + "/run"))
        let delivered = try PcapRecords.read(directory + "/run/capture-wifi-down.pcap", since: summary.started)
        let inCollapse = delivered.filter { (7.05..<13).contains($0.at) }
        #expect(delivered.contains { $0.at < 7 }, "the capture holds the answers before the collapse")
        #expect(inCollapse.isEmpty, "the emulator delivered toward the phone in the collapse: \(inCollapse.prefix(5).map(\.description))")
        #expect(collapsed.count == 4 && collapsed.allSatisfy { $0 == 0 },
                "the Wi-Fi in the collapse: \(collapsed) bit/s; the emulator delivered \(inCollapse.count) packet(s) then: \(inCollapse.prefix(5).map(\.description))")
        #expect(moved.count == 2 && moved.allSatisfy { $0 > 100_000 }, "the cellular link after the move: \(moved) bit/s")
        #expect(NetemHost.text(directory + "/run/report.html").contains("rate: as set, and what the link carried"), "the report draws both")
        print("mp-traces walk: the handover client moved to cell at \(String(format: "%.2f", at)) s (the recorded Wi-Fi passed nothing from 7 s); "
            + "carried toward the phone: wifi \(before) then \(collapsed), cell \(moved) bit/s")
    }
}
