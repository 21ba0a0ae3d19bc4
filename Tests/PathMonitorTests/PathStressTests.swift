import Foundation
import Glibc
import Netlink
import Testing
import TestSupport
@testable import PathMonitor

/// The differential stress test: random sequences of path-changing kernel operations at full
/// speed, after each of which every monitor's last path must equal a fresh dump's. The seed is
/// random per run and printed on failure; `ROAM_STRESS_SEED` and `ROAM_STRESS_SEQUENCES` replay
/// or lengthen a run. `PathMonitorBenchmark` plays ten thousand sequences.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct PathStressTests {
    @Test func everyMonitorEndsOnTheKernelsPathAfterEverySequence() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["ROAM_STRESS_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let sequences = environment["ROAM_STRESS_SEQUENCES"].flatMap { Int($0) } ?? 300
        let before = try HostNetworkState.capture()
        let stress = try PathStress(options: .init(seed: seed, sequences: sequences))
        let names = stress.namespaceNames
        // The monitors block their own threads, and the harness blocks this one: keep it off the
        // cooperative pool, where the `paths` consumers run.
        let report = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: stress.run()) }
        }
        stress.stop()
        for mismatch in report.mismatches.prefix(5) {
            Issue.record("the monitor is stale after \(mismatch)")
        }
        #expect(report.mismatches.isEmpty, "seed \(seed): \(report.mismatches.count) mismatches in \(report.sequences) sequences")
        #expect(report.sequences == sequences)
        // The run exercised what it is meant to: paths that end satisfied and unsatisfied, and
        // the small buffer overflowing.
        #expect(report.finalStatuses["satisfied", default: 0] > 0 && report.finalStatuses["unsatisfied", default: 0] > 0,
                "seed \(seed): final statuses \(report.finalStatuses)")
        #expect(report.statistics["4 KiB buffer"].map { $0.overruns > 0 } == true, "seed \(seed): the 4 KiB monitor never overflowed")
        let settle = report.settleNanoseconds.values.flatMap { $0 }.max() ?? 0
        print("PathStress: seed \(seed), \(report.sequences) sequences, \(report.operations) operations (\(report.refused) refused), "
              + "\(report.mismatches.count) mismatches (\(report.comparisonsRepeated) comparisons made again), worst settle \(settle / 1_000_000) ms, \(String(format: "%.1f", report.seconds)) s")
        #expect(NetworkNamespace.list().filter(names.contains).isEmpty, "the stress test's namespaces are gone")
        let after = try HostNetworkState.capture()
        #expect(after.links == before.links)
        #expect(after.addresses == before.addresses)
        #expect(after.routes == before.routes)
        #expect(after.rules == before.rules)
        #expect(after.qdiscs == before.qdiscs)
    }
}
