import Foundation
import Glibc
import Multipath
import RoamReport
import Simulator
import TestSupport
import Testing

/// `mode: handover` in `roam run`, over the userspace emulator: a stream follows the phone from
/// Wi-Fi to cellular and back, where `mode: none` stays on the dead path until its timeout.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil,
                "needs root, the built roam and /dev/net/tun"), .serialized)
struct HandoverTests {
    /// The scenarios and reports go under a directory this process made (never a name another
    /// user could make first), removed when the tests exit.
    static let scratch = Result { try TestEnvironment.processScratchDirectory("roam-handover") }

    func run(mode: String, multipath: String = "auto") throws -> (summary: RunSummary, events: [RecordedEvent]) {
        let scratch = try Self.scratch.get()
        let file = scratch + "/\(mode)-\(multipath).yaml"
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
        let report = scratch + "/\(mode)-\(multipath)"
        let result = try RunningCommand.run(TestEnvironment.roamExecutable!, ["run", file, "--backend", "userspace", "--quiet", "--report", report,
                                                                              "--multipath", multipath], timeout: 60)
        #expect(result.status == 0, "\(result.output)\(result.error)")
        let run = try RecordedRun.load(directory: report)
        return (run.summary, run.events)
    }

    /// Application-level handover (`auto` goes through the userspace path manager where the
    /// kernel's can: see UserspacePathManagerTests).
    @Test func theStreamFollowsThePhoneToCellularAndBack() throws {
        let (summary, events) = try run(mode: "handover", multipath: "application")
        let video = try #require(summary.workloads.first)
        let interfaces = events.compactMap { record -> String? in if case .connect(let connect) = record.event { connect.interface } else { nil } }
        #expect(interfaces.first == "wifi" && interfaces.contains("cell") && interfaces.last == "wifi", "\(interfaces)")
        let bytes = video.bytesByInterface
        #expect((bytes["cell"] ?? 0) > 0 && (bytes["wifi"] ?? 0) > 0)
        #expect((video.transfer?.handovers ?? 0) >= 2)
        #expect(video.completed, "playing at the end")
        // It left Wi-Fi while Wi-Fi was gone (at 2 s, back at 5 s), not by waiting for it, and so
        // never went without data for the length of the outage. Either the path update or the
        // data gap tells it first: the kernel's linkwatch holds a carrier-down back by up to a
        // second when other links changed just before, machine-wide.
        let left = try #require(events.compactMap { record -> (t: Duration, reason: String)? in
            if case .disconnect(_, let reason) = record.event { (record.time, reason) } else { nil }
        }.first)
        #expect(left.reason.contains("wifi left the path") || left.reason.hasPrefix("no data for"), "\(left)")
        #expect(left.t < .seconds(5), "\(left)")
        let gap = try #require(video.transfer?.longestGap?.length)
        #expect(gap < .milliseconds(2900))
    }

    /// The connection stays on Wi-Fi's addresses: no data for as long as Wi-Fi is gone (3 s),
    /// until TCP's retransmission finds Wi-Fi back.
    @Test func withoutMultipathTheFlowWaitsOutTheOutage() throws {
        let (summary, events) = try run(mode: "none")
        let video = try #require(summary.workloads.first)
        #expect(video.transfer?.handovers == 0)
        let locals = events.compactMap { record -> String? in if case .connect(let connect) = record.event { connect.local } else { nil } }
        #expect(!locals.isEmpty && locals.allSatisfy { $0 == "198.18.0.1" }, "\(locals)")
        let gap = try #require(video.transfer?.longestGap?.length)
        #expect(gap >= .milliseconds(2900), "\(gap)")
    }

    /// Over MPTCP the connection never drops: the path manager removes Wi-Fi's endpoint when its
    /// carrier goes (cellular's subflow stops being a backup) and adds it back when it returns.
    @Test(.enabled(if: MPTCP.availability() == .available, "needs a kernel with MPTCP"))
    func overMPTCPOneConnectionFollowsThePhone() throws {
        let (summary, events) = try run(mode: "handover", multipath: "mptcp")
        let video = try #require(summary.workloads.first)
        #expect(video.transfer?.transport == "mptcp")
        #expect(video.transfer?.connections == 1, "one connection throughout")
        #expect(!events.contains { if case .disconnect = $0.event { true } else { false } })
        let subflows = events.compactMap { record -> String? in
            guard case .subflow(let subflow) = record.event, subflow.event == "added" else { return nil }
            return subflow.interface
        }
        // Wi-Fi and cellular at the start, Wi-Fi again after the outage.
        #expect(subflows.filter { $0 == "wifi" }.count >= 2 && subflows.contains("cell"), "\(subflows)")
        let bytes = video.bytesByInterface
        #expect((bytes["cell"] ?? 0) > 0 && (bytes["wifi"] ?? 0) > 0)
        #expect(events.contains { record in
            guard case .mptcp(_, let changes, _) = record.event else { return false }
            return changes.contains { $0.contains("removed") && $0.contains("(wifi)") }
        })
        #expect(video.completed)
    }
}

/// `mode: aggregate` over MPTCP: one bulk transfer over both links at once.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil
                && MPTCP.availability() == .available, "needs root, the built roam, /dev/net/tun and a kernel with MPTCP"), .serialized)
struct AggregateTests {
    @Test func aBulkTransferUsesBothLinks() throws {
        let scratch = try TestEnvironment.scratchDirectory("roam-aggregate")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let file = scratch + "/aggregate.yaml"
        try """
            name: aggregate
            seed: 1
            duration: 4s
            nodes: { phone: {}, server: {} }
            links:
              - { name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 10mbit }
              - { name: cell, between: [phone, server], type: cellular, delay: 20ms, rate: 10mbit }
            workloads:
              - { name: download, kind: bulk, from: server, to: phone, mode: aggregate }
            """.write(toFile: file, atomically: true, encoding: .utf8)
        defer { unlink(file) }
        let report = scratch + "/report"
        let result = try RunningCommand.run(TestEnvironment.roamExecutable!, ["run", file, "--backend", "userspace", "--quiet", "--report", report], timeout: 60)
        #expect(result.status == 0, "\(result.output)\(result.error)")
        let download = try #require(try RecordedRun.load(directory: report).summary.workloads.first)
        #expect(download.transfer?.transport == "mptcp")
        #expect(download.note == nil, "aggregate really ran as aggregate")
        let bytes = download.bytesByInterface
        // Each link carries at least a quarter of the whole: both paths carry data at once.
        let total = bytes.values.reduce(0, +)
        #expect(bytes.count == 2 && bytes.values.allSatisfy { $0 > total / 4 }, "\(bytes)")
        // More than one link's worth (10 Mbit/s for 4 s is 5 MB).
        #expect((download.transfer?.bytesReceived ?? 0) > 5_000_000, "\(download.transfer?.bytesReceived ?? 0) bytes")
    }
}
