import Foundation
import Glibc
import Simulator
import Testing
import TestSupport

/// A short soak: `roam run` of a scenario that gives up, races, probes and supersedes
/// connections all the time (Wi-Fi flapping every 2 s under three workloads), sampled every 2 s.
/// Once warm, what the process and its namespaces hold must stay flat: a leak of one socket per
/// flap (what this found before servers let go of superseded connections) grows past every bound
/// here within the run. `SoakBenchmark` runs the same for an hour.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil,
                "needs root, the built roam, and /dev/net/tun"), .serialized)
struct SoakTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func aFlappingRunHoldsSteady() throws {
        let scratch = try TestEnvironment.scratchDirectory("roam-soak")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let directory = scratch + "/report"
        let existing = ResourceSampler.namespaces()
        let command = try RunningCommand(roam, ["run", NetemHost.root + "/Tests/Fixtures/soak.yaml", "--backend", "userspace", "--quiet",
                                                "--report", directory])
        let pid = command.process.processIdentifier
        let start = Date()
        var samples: [ResourceSample] = []
        // This run's namespaces only: other runs on the machine are not this one's sockets.
        var prefix: String?
        var arenas = 0
        while command.process.isRunning {
            // Waiting for the next sample is the point here, not synchronisation.
            Thread.sleep(forTimeInterval: 2)
            guard command.process.isRunning else { break }
            if prefix == nil { prefix = ResourceSampler.runPrefix(node: "phone", since: existing) }
            let sample = ResourceSampler.sample(pid: pid, namespacePrefix: prefix ?? "roam-none-", since: start)
            if sample.descriptors > 0 { samples.append(sample) }
            arenas = max(arenas, Self.arenaHeaps(pid: pid))
        }
        command.process.waitUntilExit()
        #expect(command.process.terminationStatus == 0, "\(command.errors.values.joined(separator: "\n"))")
        // Warm after 10 s (connections made, the flap going); 40 s in all.
        let warm = samples.filter { $0.time >= 10 && $0.time <= 38 }
        try #require(warm.count >= 8, "\(samples.count) samples")
        let first = warm[0]
        let descriptor = warm.map(\.descriptors).max()!, thread = warm.map(\.threads).max()!
        #expect(descriptor <= first.descriptors + 6, "descriptors \(warm.map(\.descriptors))")
        #expect(thread <= first.threads + 6, "threads \(warm.map(\.threads))")
        // Three workloads: a connection each at both ends, plus one being raced or probed.
        #expect(warm.allSatisfy { $0.established <= 10 }, "established \(warm.map(\.established))")
        // Abandoned connections are reset, not left closing (or in TIME-WAIT) for minutes. One
        // kind of TIME-WAIT is the kernel's, not Roam's: at each carrier loss the phone withdraws
        // the Wi-Fi's address from its two MPTCP connections (REMOVE_ADDR, so that the server
        // resends at once what it held there), the server's kernel closes those subflows with a
        // FIN, and once the Wi-Fi is back the close completes in the server's namespace, where
        // TIME-WAIT lasts 60 s. Those are bounded by the flaps so far (the Wi-Fi goes down at
        // 2 s and every 2 s after), two each; everything else must stay within 6.
        func serverTimeWait(_ sample: ResourceSample) -> Int {
            sample.sockets.filter { $0.key.hasSuffix("-server") }.values.reduce(0) { $0 + ($1["TIME-WAIT"] ?? 0) }
        }
        #expect(warm.allSatisfy { $0.lingering - serverTimeWait($0) <= 6 }, "lingering \(warm.map(\.lingering)): \(warm.last!.sockets)")
        #expect(warm.allSatisfy { serverTimeWait($0) <= 2 * (Int(($0.time - 2) / 2) + 1) + 6 },
                "server TIME-WAIT \(warm.map { ($0.time, serverTimeWait($0)) })")
        // Every thread allocates from the main arena (FreedMemory.useOneArena): a thread's own
        // arena keeps its part-used pages resident for good (8 of them in such a run before).
        #expect(arenas == 0, "\(arenas) arenas besides the main one")
    }

    /// glibc's arenas besides the main one in process `pid`: the heaps it maps for them. A heap
    /// is a reservation of exactly 64 MiB (HEAP_MAX_SIZE on 64-bit machines) at an address
    /// aligned to that size, anonymous, its used part writable and the rest inaccessible: an
    /// anonymous mapping that merely starts at such an address (a large allocation's) is not one.
    static func arenaHeaps(pid: pid_t) -> Int {
        guard let maps = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8) else { return 0 }
        let heapSize: UInt64 = 64 << 20
        // Anonymous mappings: start, end, permissions.
        let anonymous = maps.split(separator: "\n").compactMap { line -> (start: UInt64, end: UInt64, permissions: Substring)? in
            let fields = line.split(separator: " ")
            let range = fields.first?.split(separator: "-") ?? []
            guard fields.count == 5, range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16) else { return nil }
            return (start, end, fields[1])
        }
        return anonymous.indices.filter { index in
            let first = anonymous[index]
            guard first.permissions == "rw-p", first.start % heapSize == 0 else { return false }
            if first.end - first.start == heapSize { return true }
            guard index + 1 < anonymous.count else { return false }
            let rest = anonymous[index + 1]
            return rest.permissions == "---p" && rest.start == first.end && rest.end == first.start + heapSize
        }.count
    }
}
