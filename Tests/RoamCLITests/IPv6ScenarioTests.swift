import Foundation
import Glibc
import RoamReport
import Simulator
import TestSupport
import Testing

/// The bundled `ipv6-cellular` scenario through `roam run` on the userspace emulator: an
/// IPv4-only Wi-Fi and an IPv6-only cellular network. Workloads with `family: any` race both
/// families across both interfaces (RFC 8305), start on Wi-Fi over IPv4, move to cellular over
/// IPv6 when Wi-Fi goes, and come back over IPv4. Root only.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil,
                "needs root, the built roam, and /dev/net/tun"), .serialized)
struct IPv6ScenarioTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func theFlowsFollowThePhoneAcrossFamilies() throws {
        let scratch = try TestEnvironment.scratchDirectory("roam-ipv6")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let directory = scratch + "/report"
        let result = try RunningCommand.run(roam, ["run", NetemHost.root + "/scenarios/ipv6-cellular.yaml", "--backend", "userspace",
                                                   "--quiet", "--report", directory], timeout: 120)
        #expect(result.status == 0, "the scenario's expectations hold: \(result.output)\(result.error)")
        let events = NetemHost.timeline(directory)
        let summary = try #require(NetemHost.summary(directory))
        let workloads = summary.workloads
        for name in ["video", "api"] {
            let connects = events.compactMap { record -> RunEvent.Connect? in
                guard case .connect(let connect) = record.event, connect.workload == name else { return nil }
                return connect
            }
            let hops = connects.map { "\($0.interface ?? "?") \($0.local)" }
            // Wi-Fi over IPv4, cellular over IPv6, Wi-Fi over IPv4 again.
            let sequence = hops.reduce(into: [String]()) { sequence, hop in if sequence.last != hop { sequence.append(hop) } }
            #expect(sequence.count >= 3, "\(name): \(hops)")
            #expect(sequence.first?.hasPrefix("wifi 198.18.") == true, "\(name) starts on Wi-Fi over IPv4: \(hops)")
            #expect(sequence.contains { $0.hasPrefix("cell fd72:") }, "\(name) moves to cellular over IPv6: \(hops)")
            #expect(sequence.last?.hasPrefix("wifi 198.18.") == true, "\(name) ends back on Wi-Fi: \(hops)")
            // The race said how it got there: no attempt of a family an interface lacks.
            for connect in connects {
                for attempt in connect.attempts {
                    #expect(["wifi", "cell"].contains(attempt.interface))
                }
            }
            let workload = try #require(workloads.first { $0.name == name })
            let bytes = workload.bytesByInterface
            #expect((bytes["wifi"] ?? 0) > 0 && (bytes["cell"] ?? 0) > 0, "\(name): \(bytes)")
        }
        // The phone's path said IPv6 only while Wi-Fi was gone.
        let expectations = summary.expectations
        #expect(expectations.count == 4 && expectations.allSatisfy(\.passed), "\(expectations)")
    }
}
