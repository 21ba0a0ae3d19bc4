import Foundation
import Glibc
import ScenarioModel
import Testing
import TestSupport

/// `roam record`'s positions: Debian's gpsd, fed NMEA by a fake receiver on a pseudo-terminal
/// (Tests/Fixtures/nmea-feed.py, walking north at 1.4 m/s), in the test's namespace. The
/// recording holds gpsd's fixes interval by interval, and `roam import recording --track` makes
/// them a track that walks as far as the receiver did.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/sbin/gpsd", X_OK) == 0
                && access("/usr/bin/setpriv", X_OK) == 0,
                "needs root, the built roam, gpsd and setpriv (scripts/setup.sh)"), .serialized)
struct RecordPositionTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func recordsGPSDsFixesAndMakesThemATrack() async throws {
        try await TestNamespace.with { test in
            _ = try test.addUplink("eth0", subnet: 0, metric: 100, alias: "roam:type=wired")
            let directory = try TestEnvironment.processScratchDirectory("roam-record-gpsd")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let feed = try RunningCommand("/usr/bin/python3", [NetemHost.root + "/Tests/Fixtures/nmea-feed.py", "48.8583701", "2.2944813", "1.4"])
            defer { _ = feed.stop(with: SIGKILL) }
            let terminal = try #require(feed.lines.wait(timeout: 10, until: { !$0.isEmpty })?.first, "\(feed.errors.values)")
            let gpsd = try RunningCommand("/usr/bin/ip", ["netns", "exec", test.name, "/usr/sbin/gpsd", "-N", "-n", "-S", "2947",
                                                          "-F", directory + "/gpsd.sock", terminal])
            defer { _ = gpsd.stop(with: SIGKILL) }
            // Until gpsd listens and reports a fix (it takes a moment to recognize the receiver).
            let fixed = try RunningCommand.run("/usr/bin/ip", ["netns", "exec", test.name, "/usr/bin/python3", "-c", """
                import json, socket, time
                deadline = time.monotonic() + 15
                while True:
                    try:
                        gpsd = socket.create_connection(("127.0.0.1", 2947), timeout=15)
                        break
                    except OSError:
                        if time.monotonic() > deadline: raise
                        time.sleep(0.05)
                gpsd.sendall(b'?WATCH={"enable":true,"json":true};\\n')
                for line in gpsd.makefile():
                    report = json.loads(line)
                    if report.get("class") == "TPV" and report.get("mode", 0) >= 2:
                        break
                """], timeout: 20)
            try #require(fixed.status == 0, "gpsd reporting a fix within 15 s: \(fixed.error) \(gpsd.errors.values)")

            let output = directory + "/walk.jsonl"
            let record = try RunningCommand.run("/usr/bin/ip", ["netns", "exec", test.name, roam, "record", "--interface", "eth0", "--echoes", "0",
                                                                "--interval", "500ms", "--duration", "4s", "--gpsd", "127.0.0.1:2947", "--output", output],
                                                timeout: 30)
            #expect(record.status == 0, "\(record.output)\(record.error)")
            #expect(record.error.contains("and gpsd's position (127.0.0.1 port 2947)"), "\(record.error)")
            let recording = try DeviceRecording.read(output)
            #expect(recording.samples.count == 8, "\(recording.samples)")
            let fixes = recording.fixes
            // A fix an interval once gpsd's first report came (five a second).
            #expect(fixes.count >= 7, "\(fixes)")
            #expect(zip(fixes, fixes.dropFirst()).allSatisfy { $0.latitude < $1.latitude && $0.at < $1.at }, "walking north: \(fixes)")
            #expect(fixes.allSatisfy { abs($0.longitude - 2.2944813) < 1e-5 && abs(($0.speed ?? 0) - 1.4) < 0.01 }, "\(fixes)")

            // The track: metres north of the first fix, about 1.4 m a second of the recording.
            let imported = try RunningCommand.run(roam, ["import", "recording", output, "--name", "walk", "--track", directory + "/walk.track",
                                                         "-o", directory + "/walk.yaml"])
            #expect(imported.status == 0, "\(imported.output)\(imported.error)")
            #expect(imported.error.contains("fixes from gpsd, 1.399 to 1.399 m/s"), "\(imported.error)")
            let points = try RecordedTrack.parse(Array(NetemHost.text(directory + "/walk.track").utf8)).get()
            let first = try #require(points.first), last = try #require(points.last)
            let seconds = (last.at - first.at).seconds, north = last.position.y - first.position.y
            #expect(points.count >= 7 && abs(last.position.x) < 0.5, "\(points)")
            // NMEA gives minutes to four decimals: 0.19 m of latitude.
            #expect(abs(north - 1.4 * seconds) < 0.6, "\(north) m north in \(seconds) s: \(points)")
        }
    }

    /// Another user listening on gpsd's port first (nobody here, with a server that answers as
    /// gpsd does) is not believed: --gpsd auto records no position and says why, a --gpsd named
    /// is refused with exit 2.
    @Test func aServerAnotherUserPutOnTheGPSDPortIsNotBelieved() async throws {
        try await TestNamespace.with { test in
            _ = try test.addUplink("eth0", subnet: 0, metric: 100, alias: "roam:type=wired")
            let directory = try TestEnvironment.processScratchDirectory("roam-record-gpsd")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let fake = try RunningCommand("/usr/bin/ip", ["netns", "exec", test.name, "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                                          "--clear-groups", "/usr/bin/python3", "-c", """
                import socket
                server = socket.socket()
                server.bind(("127.0.0.1", 2947))
                server.listen()
                print("listening", flush=True)
                while True:
                    client, _ = server.accept()
                    client.sendall(b'{"class":"TPV","mode":3,"lat":51.5,"lon":0.0,"speed":0}\\n')
                """])
            defer { _ = fake.stop(with: SIGKILL) }
            try #require(fake.lines.wait(timeout: 10, until: { !$0.isEmpty }) != nil, "\(fake.errors.values)")
            func record(_ gpsd: String) throws -> (status: Int32, output: String, error: String) {
                try RunningCommand.run("/usr/bin/ip", ["netns", "exec", test.name, roam, "record", "--interface", "eth0", "--echoes", "0",
                                                       "--interval", "500ms", "--duration", "1s", "--gpsd", gpsd, "--output", directory + "/\(gpsd == "auto" ? "auto" : "named").jsonl"],
                                       timeout: 20)
            }
            let auto = try record("auto")
            #expect(auto.status == 0 && auto.error.contains("the server at 127.0.0.1 port 2947 is uid 65534's, not root's, gpsd's or yours"), "\(auto)")
            #expect(try DeviceRecording.read(directory + "/auto.jsonl").fixes.isEmpty)
            let named = try record("127.0.0.1:2947")
            #expect(named.status == 2 && named.error.contains("is uid 65534's"), "\(named)")
            #expect(access(directory + "/named.jsonl", F_OK) != 0, "nothing written")
        }
    }
}
