import Foundation
import Glibc
import RoamReport
import Simulator
import TestSupport
import Testing

/// Unmodified programs as `command` workloads in a multipath mode: the node the program runs in
/// gets the path manager, so an MPTCP socket the program opens itself (or one `mptcpize` makes
/// of a TCP socket) gets a subflow over each link. Over two equal 10 Mbit/s links played by the
/// userspace emulator, through `roam run`. Root only, on a kernel with MPTCP.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil
                    && NetemHost.text("/proc/sys/net/mptcp/enabled").hasPrefix("1"),
                "needs root, the built roam, /dev/net/tun and a kernel with MPTCP"), .serialized)
struct CommandMultipathTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    static let fixture = NetemHost.root + "/Tests/Fixtures/mptcp-command.yaml"

    struct Outcome {
        var directory: String
        var summary: RunSummary
        /// Bytes each of the phone's links carried while the upload ran.
        var carried: [String: Int]
        /// What the upload program says it sent.
        var sent: Int
        var share: (wifi: Double, cell: Double) {
            let total = Double(max(1, carried.values.reduce(0, +)))
            return (Double(carried["wifi"] ?? 0) / total, Double(carried["cell"] ?? 0) / total)
        }
    }

    /// Runs the fixture (or `yaml`, a variant of it) with the userspace backend.
    func run(_ yaml: String? = nil, _ options: [String] = []) throws -> Outcome {
        // A directory of this process's own, removed when the tests exit (the outcome's report is
        // read after this returns).
        let base = try TestEnvironment.processScratchDirectory("roam-command-mptcp")
        var file = Self.fixture
        if let yaml {
            file = base + "/scenario.yaml"
            try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        }
        let directory = base + "/report"
        let result = try RunningCommand.run(roam, ["run", file, "--backend", "userspace", "--quiet", "--report", directory] + options, timeout: 120)
        #expect(result.status == 0, "\(result.output)\(result.error)")
        let summary = try #require(NetemHost.summary(directory), "\(result.output)\(result.error)")
        let upload = try #require(summary.workloads.first { $0.name == "upload" })
        #expect(upload.completed, "the upload exited by itself: \(NetemHost.text(directory + "/upload.stderr"))")
        let carried = upload.bytesByInterface.mapValues { Int($0) }
        let sent = Int(NetemHost.text(directory + "/upload.stdout").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(sent > 0, "the upload sent data: \(NetemHost.text(directory + "/upload.stderr"))")
        return Outcome(directory: directory, summary: summary, carried: carried, sent: sent)
    }

    @Test func anMPTCPProgramOnThePhoneUsesBothLinks() throws {
        let aggregate = try run()
        // The path manager worked on the phone's node, where the program ran.
        let events = NetemHost.timeline(aggregate.directory)
        let managed = events.compactMap { record -> String? in if case .mptcp(let node, _, _) = record.event { node } else { nil } }
        #expect(!managed.isEmpty && managed.allSatisfy { $0 == "phone" }, "\(managed)")
        let share = aggregate.share
        #expect(share.wifi >= 0.3 && share.cell >= 0.3, "both links carried the upload: \(aggregate.carried)")
        // The report counts the program's subflows, from the node's MPTCP events: one per link.
        let upload = aggregate.summary.workloads.first { $0.name == "upload" }
        #expect((upload?.subflowsOpened ?? 0) >= 2, "\(String(describing: upload))")
        let added = events.compactMap { record -> String? in
            guard case .subflow(let subflow) = record.event, subflow.event == "added" else { return nil }
            return subflow.interface
        }
        #expect(Set(added).isSuperset(of: ["wifi", "cell"]), "subflows over both links: \(added)")

        // The same program without multipath (Roam tells it nothing, so it opens plain TCP):
        // one link carries it.
        let single = try run(nil, ["--multipath", "application"])
        let notes = single.summary.notes
        #expect(notes.contains { $0.contains("upload") && $0.contains("without multipath") }, "\(notes)")
        #expect(max(single.share.wifi, single.share.cell) >= 0.9, "one link carried it: \(single.carried)")
        print("command upload over two 10 Mbit/s links: aggregate \(aggregate.sent) bytes in 5 s (\(aggregate.carried)), "
            + "without multipath \(single.sent) bytes (\(single.carried)): \(String(format: "%.2f", Double(aggregate.sent) / Double(max(1, single.sent))))x")
    }

    @Test func aTCPOnlyProgramUsesBothLinksUnderMptcpize() throws {
        let text = NetemHost.text(Self.fixture)
        let tcpOnly = "262 if os.environ.get(\"ROAM_MULTIPATH\") else 0"
        try #require(text.contains(tcpOnly) && text.contains("    mode: aggregate\n"))
        let variant = text.replacingOccurrences(of: tcpOnly, with: "0")
            .replacingOccurrences(of: "    mode: aggregate\n", with: "    mode: aggregate\n    mptcpize: true\n")
        let outcome = try run(variant)
        let share = outcome.share
        #expect(share.wifi >= 0.3 && share.cell >= 0.3, "both links carried the upload: \(outcome.carried)")
    }
}
