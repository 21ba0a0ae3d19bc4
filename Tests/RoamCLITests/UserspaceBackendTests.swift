import Foundation
import Glibc
import RoamReport
import Simulator
import TestSupport
import Testing

/// The userspace link emulator over real TUN interfaces in real namespaces, through `roam run`:
/// what it was told is what it does, the same seed makes the same decisions, and every bundled
/// scenario runs on it. Root only; runs on any kernel with /dev/net/tun.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && UserspaceBackend.probe() == nil,
                "needs root, the built roam, and /dev/net/tun"), .serialized)
final class UserspaceBackendTests: @unchecked Sendable {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    /// This test's reports, in a directory of its own (`mkdtemp`: never one another user made
    /// first), removed after it.
    let base: String

    init() throws { base = try TestEnvironment.scratchDirectory("roam-userspace") }

    deinit { try? FileManager.default.removeItem(atPath: base) }

    /// Runs `file` with the userspace backend into a fresh report directory; returns it and the status.
    func run(_ file: String, _ options: [String] = [], timeout: TimeInterval = 120) throws -> (directory: String, status: Int32, output: String) {
        let name = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
        let directory = "\(base)/\(name)-\(UUID().uuidString.prefix(8))"
        let result = try RunningCommand.run(roam, ["run", file, "--backend", "userspace", "--quiet", "--report", directory] + options, timeout: timeout)
        return (directory, result.status, result.output + result.error)
    }

    func fixture(_ name: String) -> String { NetemHost.root + "/Tests/Fixtures/\(name).yaml" }

    static let scenarios: [String] = {
        let directory = NetemHost.root + "/scenarios"
        // office-walk and crowd run in NetworkScenarioTests, every expectation and derived change
        // checked; idle-radio below, each request's wait checked; laptop-daemon in DaemonBusTests, at
        // full length (its programs keep the scenario's clock).
        let elsewhere: Set = ["office-walk.yaml", "idle-radio.yaml", "crowd.yaml", "laptop-daemon.yaml"]
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".yaml") && !elsewhere.contains($0) }.sorted()
    }()

    @Test(arguments: scenarios) func bundledScenarioRuns(_ file: String) throws {
        let before = NetworkNamespaceList.roam()
        let (directory, status, output) = try run(NetemHost.root + "/scenarios/" + file, ["--time-scale", "0.25"])
        #expect(status == 0 || status == 1, "\(output)")
        let summary = try #require(NetemHost.summary(directory))
        #expect(summary.backend == "userspace")
        #expect(summary.timeline.failed.isEmpty)
        #expect(summary.pathUpdates.count == 2 && summary.pathUpdates.values.allSatisfy { $0 >= 1 })
        for workload in summary.workloads where workload.kind != "command" {
            #expect((workload.transfer?.bytesReceived ?? 0) > 0, "\(workload.name) moved data")
        }
        #expect(!summary.links.isEmpty && summary.links.contains { $0.delivered > 0 })
        #expect(NetworkNamespaceList.roam() == before, "the run removed its namespaces")
    }

    /// idle-radio at half speed (the radio's tail is scaled with the clock, its 260 ms promotion
    /// is not): the app on the phone whose radio sleeps between its requests waits for the
    /// promotion before every first byte; the same app beside a heartbeat never does. The run's
    /// counters say who woke each radio.
    @Test func aRadioLeftIdlePaysThePromotionBeforeEveryRequest() throws {
        let (directory, status, output) = try run(NetemHost.root + "/scenarios/idle-radio.yaml", ["--time-scale", "0.5"])
        #expect(status == 0, "\(output)")
        let requests = NetemHost.lines(directory + "/timeline.jsonl").filter { $0["type"] as? String == "request" }
        func firstBytes(_ workload: String) -> [Double] {
            requests.filter { $0["workload"] as? String == workload }.compactMap { $0["ttfbMs"] as? Double }
        }
        // Requests at 0.5, 8, 15.5 and 23 s of 25.
        let sleepy = firstBytes("headlines-sleepy"), warm = firstBytes("headlines-warm")
        #expect(sleepy.count == 4 && warm.count == 4, "\(requests)")
        // The promotion and the shortest round trip the links allow (25 + 20 ms): at least 305 ms.
        #expect(sleepy.allSatisfy { $0 >= 305 }, "sleepy: \(sleepy)")
        #expect(warm.allSatisfy { $0 < 260 }, "warm: \(warm)")
        let summary = try #require(NetemHost.summary(directory))
        func promotions(_ link: String, _ direction: String) -> Int64? {
            summary.links.first { $0.link == link && $0.direction == direction }?.promotions
        }
        // Each of the sleepy app's requests woke its radio (the phone sent first); the warm
        // phone's radio was woken once, by the heartbeat at the start, and never slept again.
        #expect(promotions("sleepy-lte", "up") == 4 && promotions("sleepy-lte", "down") == 0)
        #expect(promotions("warm-lte", "up") == 1 && promotions("warm-lte", "down") == 0)
        #expect(NetemHost.text(directory + "/report.html").contains("radio promotions"))
    }

    /// Round trip over 20 ms each way: no echo back in under 40 ms (the emulator never delivers
    /// early) nor, typically, after twice that (the delay is applied once per direction). Random
    /// loss of 10% over 10,000 echoes, drawn from the seeded generator: within the 99% binomial
    /// interval (9.23% to 10.77%). A bulk transfer through 10 Mbit/s: never above the rate, and
    /// above half of it (a rate read in the wrong unit would be off by 8 or 1000). How close the
    /// delay and the rate come is measured by `EmulatorBenchmark`, not asserted here.
    @Test func delayLossAndRateAreWhatTheScenarioSays() throws {
        let (directory, status, output) = try run(fixture("userspace-accuracy"))
        #expect(status == 0, "\(output)")
        let echoes = NetemHost.text(directory + "/ping-delayed.stdout")
        let times = echoes.split(separator: "\n").compactMap { line -> Double? in
            guard let range = line.range(of: "time=") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 == "." || $0.isNumber })
        }.sorted()
        try #require(times.count >= 450, "\(echoes)")
        let median = times[times.count / 2]
        #expect(times[0] >= 40, "fastest round trip \(times[0]) ms")
        #expect(median < 80, "median round trip \(median) ms")

        let flood = NetemHost.text(directory + "/ping-lossy.stdout")
        let counts = flood.split(separator: "\n").first { $0.contains("packets transmitted") }?
            .split(separator: " ").compactMap { Double($0) } ?? []
        try #require(counts.count >= 2, "\(flood)")
        #expect(counts[0] == 10_000)
        let loss = 1 - counts[1] / counts[0]
        #expect(loss >= 0.0923 && loss <= 0.1077, "loss \(loss)")

        let summary = try #require(NetemHost.summary(directory))
        let transfer = try #require(summary.workloads.first { $0.name == "transfer" })
        let throughput = Double(transfer.transfer?.throughput ?? 0)
        #expect(throughput > 5e6 && throughput <= 10e6, "\(throughput) bit/s")
    }

    @Test func theSameSeedMakesTheSameDecisions() throws {
        let first = try run(fixture("userspace-determinism"), ["--decision-log"])
        let second = try run(fixture("userspace-determinism"), ["--decision-log"])
        let third = try run(fixture("userspace-determinism"), ["--decision-log", "--seed", "6"])
        for direction in ["up", "down"] {
            let a = NetemHost.text(first.directory + "/decisions-lossy-\(direction).log")
            #expect(!a.isEmpty)
            #expect(a == NetemHost.text(second.directory + "/decisions-lossy-\(direction).log"), "\(direction): same seed, same log")
        }
        // Another seed draws differently.
        #expect(NetemHost.text(first.directory + "/decisions-lossy-up.log") != NetemHost.text(third.directory + "/decisions-lossy-up.log"))
        let log = NetemHost.text(first.directory + "/decisions-lossy-up.log").split(separator: "\n")
        #expect(log.count == 200, "one decision per echo request")
        #expect(log.contains { $0.hasSuffix(" loss") } && log.contains { $0.contains(" deliver ") })
    }

    /// `capture: true` writes a pcap per direction (raw IP, nanosecond timestamps) holding
    /// every packet the direction delivered.
    @Test func captureWritesAPcapPerDirection() throws {
        let (directory, status, output) = try run(fixture("userspace-determinism"))
        #expect(status == 0, "\(output)")
        let summary = try #require(NetemHost.summary(directory))
        for direction in ["up", "down"] {
            // PcapRecords checks the header (nanosecond magic, LINKTYPE_RAW) and that the file
            // ends on a record boundary.
            let records = try PcapRecords.read(directory + "/capture-lossy-\(direction).pcap", since: summary.started)
            #expect(records.allSatisfy { $0.bytes.first.map { $0 >> 4 == 4 || $0 >> 4 == 6 } == true })
            #expect(records.allSatisfy { (0...summary.duration.seconds + 1).contains($0.at) }, "timed within the run")
            let delivered = summary.links.first { $0.direction == direction }.map { Int($0.delivered) }
            #expect(records.count == delivered, "\(direction): one record per delivered packet")
            #expect(records.filter { $0.bytes.count > 20 && $0.bytes[9] == 1 }.count > 100)   // ICMP echoes
        }
    }

    /// After SIGKILL the emulator's TUN interfaces go with the process; the namespaces stay until
    /// `roam cleanup` removes them.
    @Test func cleanupRemovesWhatAKilledRunLeft() throws {
        let before = NetworkNamespaceList.roam()
        let command = try RunningCommand(roam, ["run", NetemHost.root + "/scenarios/elevator.yaml", "--backend", "userspace", "--quiet",
                                                "--report", "\(base)/killed"])
        let deadline = Date().addingTimeInterval(30)
        while NetworkNamespaceList.roam().count < before.count + 2, Date() < deadline { usleep(20_000) }
        let left = Set(NetworkNamespaceList.roam()).subtracting(before)
        #expect(left.count == 2, "the run made its two namespaces")
        #expect(command.stop(with: SIGKILL) != 0)
        #expect(Set(NetworkNamespaceList.roam()).isSuperset(of: left), "a killed run leaves its namespaces")
        let cleanup = try RunningCommand.run(roam, ["cleanup"])
        #expect(cleanup.status == 0)
        #expect(Set(NetworkNamespaceList.roam()).isDisjoint(with: left))
    }

    @Test func blackholePassesNothingWhileTheInterfaceStaysUpAndDownIsSeen() throws {
        let (directory, status, output) = try run(fixture("userspace-blackhole"))
        #expect(status == 0, "\(output)")
        let summary = try #require(NetemHost.summary(directory))
        let wifiUp = try #require(summary.links.first { $0.link == "wifi" && $0.direction == "up" })
        // 2 s of blackhole at one echo every 50 ms.
        let blackholed = wifiUp.blackholed
        #expect(blackholed >= 35 && blackholed <= 41, "\(blackholed)")
        // Nothing told the phone: its path stayed on Wi-Fi through the blackhole...
        let events = NetemHost.timeline(directory)
        let blackholes = events.compactMap { record -> Duration? in
            guard case .link(let change) = record.event, case .conditions(_, let conditions) = change.kind,
                  conditions["blackhole"]?.boolValue == true else { return nil }
            return change.actual
        }
        let blackhole = try #require(blackholes.first)
        let start = blackhole.seconds, end = start + 2
        let paths = events.filter { if case .path(node: "phone", _, _) = $0.event { true } else { false } }.map(\.time.seconds)
        #expect(paths.filter { $0 > start && $0 < end }.isEmpty)
        // ...while carrier loss was seen at once (both path expectations held: exit 0).
        #expect(summary.expectations.count == 2 && summary.expectations.allSatisfy(\.passed))
        let echoes = NetemHost.text(directory + "/probe.stdout")
        #expect(echoes.contains("packets transmitted"), "ping ran to its deadline: \(echoes.suffix(300))")
    }
}

/// The namespaces of roam runs now on the machine.
enum NetworkNamespaceList {
    static func roam() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []).filter { $0.hasPrefix("roam-") && !$0.hasPrefix("roam-test-") }.sorted()
    }
}
