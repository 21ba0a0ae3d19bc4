import Foundation
import Glibc
import Simulator
import Testing
import TestSupport

/// `--multipath mptcp-userspace`: the phone's node runs the kernel's userspace MPTCP path
/// manager and Roam opens each connection's standby subflow and switches the data between
/// subflows as the handover state machine decides, without reconnecting. Through `roam run`
/// on the userspace emulator. Root only, on a kernel with MPTCP.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil
                    && NetemHost.text("/proc/sys/net/mptcp/enabled").hasPrefix("1"),
                "needs root, the built roam, /dev/net/tun and a kernel with MPTCP"), .serialized)
struct UserspacePathManagerTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func aLostWiFiSwitchesTheStreamToItsStandbySubflowOnOneConnection() throws {
        let directory = "/tmp/roam-userspace-pm-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try RunningCommand.run(roam, ["run", NetemHost.root + "/Tests/Fixtures/mptcp-userspace-handover.yaml", "--backend", "userspace",
                                                   "--multipath", "mptcp-userspace", "--quiet", "--report", directory], timeout: 120)
        #expect(result.status == 0, "no stall over 1 s: \(result.output)\(result.error)")
        let events = NetemHost.lines(directory + "/timeline.jsonl")
        let summary = try #require(NetemHost.json(directory + "/summary.json"))
        let video = try #require((summary["workloads"] as? [[String: Any]])?.first)
        #expect(video["transport"] as? String == "mptcp")
        // One connection throughout: its standby subflow over cellular took the data.
        #expect(video["connections"] as? Int == 1, "\(video)")
        #expect((video["subflowsOpened"] as? Int ?? 0) >= 2, "\(video)")
        let bytes = (video["bytesByInterface"] as? [String: Int]) ?? [:]
        #expect((bytes["wifi"] ?? 0) > 0 && (bytes["cell"] ?? 0) > 0, "\(bytes)")
        let switches = events.filter { $0["type"] as? String == "subflow-switch" }
        #expect(switches.contains { $0["to"] as? String == "cell" && $0["reason"] as? String == "wifi left the path" }, "\(switches)")
        // The node ran the userspace path manager: no kernel endpoints were made for it.
        #expect(!events.contains { $0["type"] as? String == "mptcp" && $0["node"] as? String == "phone" })
    }
}
