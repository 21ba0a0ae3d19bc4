import Foundation
import Glibc
import Netlink
import Simulator
import Testing
import TestSupport

/// `roam run` where it must refuse: bad input, no privileges, no netem. Each refusal exits 2
/// with a message that says what to do, and leaves the host exactly as it was.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"), .serialized)
struct RunCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    let walk = NetemHost.root + "/scenarios/walk-out-of-home.yaml"

    func roamNamespaces() -> [String] { NetworkNamespace.list().filter { $0.hasPrefix("roam-") } }

    @Test func aBrokenScenarioIsReportedWithItsPlaceAndNothingIsBuilt() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("roam-run-bad-\(getpid()).yaml").path
        try "name: broken\nduration: 10s\nnodes: { phone: {} }\nlinks:\n  - { name: wifi, between: [phone, server] }\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let before = roamNamespaces()
        let result = try RunningCommand.run(roam, ["run", path])
        #expect(result.status == 2)
        #expect(result.error.contains("\(path):5:"))
        #expect(result.error.contains("no node named 'server'"))
        #expect(roamNamespaces() == before)
    }

    @Test func optionsAreChecked() throws {
        let result = try RunningCommand.run(roam, ["run", walk, "--time-scale", "2"])
        #expect(result.status == 2)
        #expect(result.error.contains("--time-scale 2.0 is not in (0, 1]: it scales the scenario's time, 0.5 plays it in half its duration"))
        // A negative factor is a value, not an option it would be mistaken for.
        let negative = try RunningCommand.run(roam, ["run", walk, "--time-scale", "-1"])
        #expect(negative.status == 2)
        #expect(negative.error.contains("--time-scale -1.0 is not in (0, 1]"))
        for threads in ["0", "65", "-3"] {
            let result = try RunningCommand.run(roam, ["run", walk, "--emulator-threads", threads])
            #expect(result.status == 2)
            #expect(result.error.contains("--emulator-threads") && result.error.contains("1...64"), "\(result.error)")
        }
        let backend = try RunningCommand.run(roam, ["run", walk, "--backend", "ns3"])
        #expect(backend.status == 2)
        #expect(backend.error.contains("auto") && backend.error.contains("userspace"))
        let priority = try RunningCommand.run(roam, ["run", walk, "--emulator-priority", "high"])
        #expect(priority.status == 2)
        #expect(priority.error.contains("realtime") && priority.error.contains("ordinary"), "\(priority.error)")
    }

    /// `--emulator-priority`: as root the emulator's threads are real-time unless asked not to
    /// be, and a run whose threads were ordinary says so in its report.
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root (the real-time class)"))
    func theEmulatorsPriorityIsTheOneAskedFor() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-run-priority")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let scenario = directory + "/one-link.yaml"
        try """
            name: one-link
            duration: 1s
            nodes: {phone: {}, server: {}}
            links:
              - {name: wifi, between: [phone, server], type: wifi, delay: 5ms}
            workloads:
              - {name: api, kind: requests, from: server, to: phone, interval: 100ms, size: 1kb}

            """.write(toFile: scenario, atomically: true, encoding: .utf8)
        for priority in [nil, "realtime", "ordinary"] {
            let report = directory + "/report-\(priority ?? "default")"
            let result = try RunningCommand.run(roam, ["run", scenario, "--backend", "userspace", "--quiet", "--report", report]
                                                + (priority.map { ["--emulator-priority", $0] } ?? []), timeout: 60)
            #expect(result.status == 0, "\(result.error)")
            let summary = try String(contentsOfFile: report + "/summary.json", encoding: .utf8)
            let noted = summary.contains("ran in the ordinary scheduling class, as asked (--emulator-priority ordinary)")
            #expect(noted == (priority == "ordinary"), "\(priority ?? "default"): \(summary)")
            #expect(!summary.contains("may not use the real-time class"), "root may: \(summary)")
        }
    }

    /// Without root the run goes rootless (scripts/rootless-check.sh plays whole scenarios that
    /// way); where the user may not write the report, it says so, exits 2 and leaves nothing.
    @Test(.enabled(if: TestEnvironment.isRoot && access("/usr/bin/setpriv", X_OK) == 0, "needs root and setpriv to drop privileges"))
    func withoutRootItRunsRootlessAndSaysWhatItCannotWrite() throws {
        let before = roamNamespaces()
        let result = try RunningCommand.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", roam, "run", walk,
                                                                 "--backend", "userspace", "--report", "/proc/roam-report"])
        #expect(result.status == 2)
        #expect(result.error.contains("/proc/roam-report"), "\(result.error)")
        #expect(!result.error.contains("needs root"), "\(result.error)")
        #expect(roamNamespaces() == before)
    }

    /// On a kernel without sch_netem (this machine's), `--backend netem` refuses before
    /// building anything, and names the way out.
    @Test(.enabled(if: TestEnvironment.isRoot && !NetemHost.hostHasNetem, "needs root on a kernel without sch_netem"))
    func withoutNetemTheNetemBackendRefusesAndNamesTheAlternative() throws {
        let host = try HostNetworkState.capture()
        let before = roamNamespaces()
        let directory = try TestEnvironment.scratchDirectory("roam-run-refused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = directory + "/report"
        let result = try RunningCommand.run(roam, ["run", walk, "--backend", "netem", "--report", report])
        #expect(result.status == 2)
        #expect(result.error.contains("no sch_netem"), "\(result.error)")
        #expect(result.error.contains("--backend userspace"))
        #expect(access(report, F_OK) != 0, "no report directory for a run that never started")
        #expect(roamNamespaces() == before)
        #expect(try HostNetworkState.capture() == host)
    }

    /// A link that only the userspace emulator can play (a cellular radio's RRC states) is
    /// refused on netem whatever the kernel has, naming the link's line and the way out; nothing
    /// is built or written. (A trace plays on both: netem steps its rate.)
    @Test(.enabled(if: TestEnvironment.isRoot, "needs root (roam run checks that first)"),
          arguments: ["idle-radio"])
    func whatOnlyTheUserspaceEmulatorPlaysIsRefusedOnNetem(_ name: String) throws {
        let before = roamNamespaces()
        let directory = try TestEnvironment.scratchDirectory("roam-run-refused-\(name)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = directory + "/report"
        let result = try RunningCommand.run(roam, ["run", NetemHost.root + "/scenarios/\(name).yaml", "--backend", "netem", "--report", report])
        #expect(result.status == 2)
        #expect(result.error.contains("only the userspace backend plays"), "\(result.error)")
        #expect(result.error.contains("RRC states"), "\(result.error)")
        #expect(result.error.contains("--backend userspace"))
        #expect(access(report, F_OK) != 0, "no report directory for a run that never started")
        #expect(roamNamespaces() == before)
    }
}
