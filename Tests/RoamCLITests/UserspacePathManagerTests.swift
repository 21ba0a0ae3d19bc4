import Foundation
import Glibc
import RoamReport
import Simulator
import TestSupport
import Testing

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
        let scratch = try TestEnvironment.scratchDirectory("roam-userspace-pm")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let directory = scratch + "/report"
        let result = try RunningCommand.run(roam, ["run", NetemHost.root + "/Tests/Fixtures/mptcp-userspace-handover.yaml", "--backend", "userspace",
                                                   "--multipath", "mptcp-userspace", "--quiet", "--report", directory], timeout: 120)
        #expect(result.status == 0, "no stall over 1 s: \(result.output)\(result.error)")
        let events = NetemHost.timeline(directory)
        let summary = try #require(NetemHost.summary(directory))
        let video = try #require(summary.workloads.first)
        #expect(video.transfer?.transport == "mptcp")
        // One connection throughout: its standby subflow over cellular took the data.
        #expect(video.transfer?.connections == 1, "\(video)")
        #expect((video.subflowsOpened ?? 0) >= 2, "\(video)")
        let bytes = video.bytesByInterface
        #expect((bytes["wifi"] ?? 0) > 0 && (bytes["cell"] ?? 0) > 0, "\(bytes)")
        let switches = events.compactMap { record -> (to: String, reason: String)? in
            if case let .subflowSwitch(_, to, reason) = record.event { (to, reason) } else { nil }
        }
        #expect(switches.contains { $0.to == "cell" && $0.reason == "wifi left the path" }, "\(switches)")
        // The node ran the userspace path manager: no kernel endpoints were made for it.
        #expect(!events.contains { if case .mptcp(node: "phone", _, _) = $0.event { true } else { false } })
    }

    /// `--multipath auto` (the default) hands over through the userspace path manager exactly
    /// where the kernel's can (the same run with `--multipath mptcp-userspace` is not refused),
    /// and at the application level, with a note, where it cannot.
    @Test func autoUsesTheUserspacePathManagerExactlyWhereTheKernelCan() throws {
        let base = try TestEnvironment.scratchDirectory("roam-userspace-pm-auto")
        defer { try? FileManager.default.removeItem(atPath: base) }
        var runs: [String: (status: Int32, output: String, error: String)] = [:]
        for (name, extra) in [("auto", [String]()), ("explicit", ["--multipath", "mptcp-userspace"])] {
            runs[name] = try RunningCommand.run(roam, ["run", NetemHost.root + "/Tests/Fixtures/mptcp-userspace-handover.yaml", "--backend", "userspace",
                                                       "--quiet", "--report", base + "/" + name] + extra, timeout: 120)
        }
        try HandoverTransport.verify(auto: base + "/auto", autoStatus: try #require(runs["auto"]).status,
                                     explicit: base + "/explicit", explicitStatus: try #require(runs["explicit"]).status,
                                     explicitConsole: try #require(runs["explicit"]).error)
    }
}

/// What `--multipath auto` and `--multipath mptcp-userspace` must have done with the
/// `mptcp-userspace-handover` fixture on one kernel, whichever it is: this host's, or the VM's
/// (``NetemBackendTests``).
enum HandoverTransport {
    static func verify(auto: String, autoStatus: Int32, explicit: String, explicitStatus: Int32, explicitConsole: String) throws {
        // Either way, auto's stream crossed the carrier loss without a stall over 1 s.
        #expect(autoStatus == 0, "auto: exit \(autoStatus)")
        let summary = try #require(NetemHost.summary(auto))
        let video = try #require(summary.workloads.first)
        let notes = summary.notes
        let switches = NetemHost.timeline(auto).compactMap { record -> String? in
            if case .subflowSwitch(_, let to, _) = record.event { to } else { nil }
        }
        if explicitStatus == 0 {
            // The kernel can: auto is the userspace path manager, on one connection.
            #expect(summary.multipath == "mptcp-userspace", "\(notes)")
            #expect(video.transfer?.transport == "mptcp")
            #expect(video.transfer?.connections == 1, "\(video)")
            #expect(switches.contains("cell"), "\(switches)")
            #expect(!notes.contains { $0.contains("userspace MPTCP path manager") }, "\(notes)")
        } else {
            // The kernel cannot: mptcp-userspace is refused before time zero with what failed, and
            // auto handed over at the application level, saying why.
            #expect(explicitStatus == 2, "\(explicitConsole)")
            #expect(explicitConsole.contains("cannot move a connection between its subflows"), "\(explicitConsole)")
            #expect(summary.multipath == "auto")
            #expect(notes.contains { $0.contains("handover ran at the application level") }, "\(notes)")
            #expect(switches.isEmpty)
            #expect((video.transfer?.connections ?? 0) >= 2, "a new connection over cellular: \(video)")
        }
    }
}
