import Foundation
import Glibc
import Simulator
import Testing
import TestSupport

/// `mode: handover` in `roam run`, over the userspace emulator: a stream follows the phone from
/// Wi-Fi to cellular and back, where `mode: none` stays on the dead path until its timeout.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil,
                "needs root, the built roam and /dev/net/tun"), .serialized)
struct HandoverTests {
    func run(mode: String) throws -> (summary: [String: Any], events: [[String: Any]]) {
        let file = "/tmp/roam-handover-\(getpid())-\(mode).yaml"
        try """
            name: handover-\(mode)
            seed: 1
            duration: 8s
            nodes: { phone: {}, server: {} }
            links:
              - { name: wifi, between: [phone, server], type: wifi, delay: 5ms, rate: 50mbit }
              - { name: cell, between: [phone, server], type: cellular, expensive: true, delay: 30ms, rate: 20mbit }
            timeline:
              - { at: 2s, link: wifi, down: true }
              - { at: 5s, link: wifi, up: true }
            workloads:
              - { name: video, kind: stream, from: server, to: phone, bitrate: 2mbit, mode: \(mode) }
            """.write(toFile: file, atomically: true, encoding: .utf8)
        defer { unlink(file) }
        let report = "/tmp/roam-handover-\(getpid())/\(mode)"
        let result = try RunningCommand.run(TestEnvironment.roamExecutable!, ["run", file, "--backend", "userspace", "--quiet", "--report", report], timeout: 60)
        #expect(result.status == 0, "\(result.output)\(result.error)")
        let summary = try #require((try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report + "/summary.json")))) as? [String: Any])
        let text = (try? String(contentsOfFile: report + "/timeline.jsonl", encoding: .utf8)) ?? ""
        let events = text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        return (summary, events)
    }

    @Test func theStreamFollowsThePhoneToCellularAndBack() throws {
        let (summary, events) = try run(mode: "handover")
        let video = try #require((summary["workloads"] as? [[String: Any]])?.first)
        let interfaces = events.filter { $0["type"] as? String == "connect" }.compactMap { $0["interface"] as? String }
        #expect(interfaces.first == "wifi" && interfaces.contains("cell") && interfaces.last == "wifi", "\(interfaces)")
        let bytes = try #require(video["bytesByInterface"] as? [String: Int])
        #expect((bytes["cell"] ?? 0) > 0 && (bytes["wifi"] ?? 0) > 0)
        #expect((video["handovers"] as? Int ?? 0) >= 2)
        #expect(video["completed"] as? Bool == true, "playing at the end")
        // It left Wi-Fi because Wi-Fi left the path, not by waiting for a timeout, and so never
        // went without data for the length of the outage.
        #expect(events.contains { $0["type"] as? String == "disconnect" && ($0["reason"] as? String)?.contains("wifi left the path") == true })
        let gap = try #require((video["longestGap"] as? [String: Any])?["ms"] as? Double)
        #expect(gap < 2900)
    }

    /// The connection stays on Wi-Fi's addresses: no data for as long as Wi-Fi is gone (3 s),
    /// until TCP's retransmission finds Wi-Fi back.
    @Test func withoutMultipathTheFlowWaitsOutTheOutage() throws {
        let (summary, events) = try run(mode: "none")
        let video = try #require((summary["workloads"] as? [[String: Any]])?.first)
        #expect(video["handovers"] as? Int == 0)
        #expect(events.filter { $0["type"] as? String == "connect" }.allSatisfy { $0["local"] as? String == "198.18.0.1" })
        let gap = try #require((video["longestGap"] as? [String: Any])?["ms"] as? Double)
        #expect(gap >= 2900, "\(gap) ms")
    }
}
