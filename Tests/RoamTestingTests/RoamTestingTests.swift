import Foundation
import Glibc
import LinkEmulation
import Netlink
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import RoamTesting
import ScenarioModel
import Simulator
import SystemPackage
import TestSupport
import Testing

/// A phone with Wi-Fi and cellular to a server, built in Swift; Wi-Fi is blackholed for a while.
private func phoneScenario(duration: Duration = .seconds(6), blackholeAt: Duration = .seconds(1)) -> Scenario {
    Scenario(name: "roamtesting", seed: 11, duration: duration,
             nodes: [ScenarioNode("phone"), ScenarioNode("server")],
             links: [LinkSpec("wifi", between: ("phone", "server"), type: .wifi, both: Impairment(delay: .milliseconds(5), rate: .mbit(20))),
                     LinkSpec("cell", between: ("phone", "server"), profile: "lte")],
             timeline: [TimelineEvent(at: blackholeAt, link: "wifi", .blackhole(true))])
}

@Suite("Scenarios built in Swift")
struct ScenarioBuildingTests {
    @Test func aSoundScenarioHasNoProblems() {
        #expect(phoneScenario().problems == [])
    }

    @Test func unknownReferencesAreNamed() {
        var scenario = phoneScenario()
        scenario.links.append(LinkSpec("bad", between: ("phone", "nowhere")))
        scenario.timeline.append(TimelineEvent(at: .seconds(99), link: "missing", .down))
        scenario.workloads.append(Workload(name: "w", kind: .bulk(size: nil), from: "server", to: "tablet"))
        scenario.expectations.append(Expectation("nothing", .completes(true)))
        let problems = scenario.problems.joined(separator: "\n")
        #expect(problems.contains("unknown node 'nowhere'"))
        #expect(problems.contains("unknown link 'missing'"))
        #expect(problems.contains("outside the scenario"))
        #expect(problems.contains("unknown node 'tablet'"))
        #expect(problems.contains("unknown workload 'nothing'"))
    }

    @Test func aLinkBuiltInSwiftTakesItsProfileAsYAMLDoes() throws {
        let fromYAML = try Scenario.parse(yaml: """
            name: p
            duration: 1s
            nodes: { phone: {}, server: {} }
            links: [{ name: cell, between: [phone, server], profile: lte, delay: 40ms }]
            """)
        let built = LinkSpec("cell", between: ("phone", "server"), profile: "lte", both: Impairment(delay: .milliseconds(40)))
        #expect(fromYAML.links.first == built)
    }

    @Test func aBrokenFileGivesEveryProblemWithItsPlace() throws {
        let error = try #require(throws: RoamTestingError.self) {
            try Scenario.parse(yaml: "name: x\nduration: soon\nnodes: {}\n", name: "broken.yaml")
        }
        #expect(error.message.contains("broken.yaml:2"))
    }

    /// Without a `.build` of its own in the working directory, a test process writes its reports
    /// under a directory it made itself (`mkdtemp`, mode 0700), never under a fixed name in /tmp
    /// that another user could have made first.
    @Test func reportsOutsideABuildDirectoryGoWhereThisProcessMadeThem() throws {
        let directory = try Scenario.temporaryReportsDirectory()
        #expect(directory != "/tmp/roam-reports")
        #expect((directory as NSString).lastPathComponent.hasPrefix("roam-reports-"))
        var status = stat()
        #expect(lstat(directory, &status) == 0)
        #expect(status.st_mode & S_IFMT == S_IFDIR, "a directory, not a link")
        #expect(status.st_uid == geteuid())
        #expect(status.st_mode & 0o777 == 0o700, "private: \(String(status.st_mode & 0o777, radix: 8))")
        #expect(try Scenario.temporaryReportsDirectory() == directory, "made once a process")
        #expect(rmdir(directory) == 0)
        let again = try Scenario.temporaryReportsDirectory()
        #expect(again != directory && access(again, F_OK) == 0, "made again once gone")
        rmdir(again)
    }
}

@Suite("RoamTesting in namespaces", .serialized, .enabled(if: RoamTesting.isAvailable, "needs root and /dev/net/tun"))
struct RoamTestingKernelTests {
    @Test func codeUnderTestRunsInsideItsNodeAndReachesThePeer() async throws {
        let before = try HostNetworkState.capture()
        let processNamespace = try #require(Self.namespaceInode("/proc/self/ns/net"))
        let run = try await phoneScenario().run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let listener = try await server.run { try Self.listen(on: server.address) }
            defer { close(listener) }
            async let served: Int = server.run { try Self.echoOnce(listener) }
            let (namespace, answer) = try await phone.run { () async throws -> (UInt64?, String) in
                let namespace = Self.namespaceInode("/proc/thread-self/ns/net")
                await Task.yield()  // back on the node's thread after a suspension
                #expect(Self.namespaceInode("/proc/thread-self/ns/net") == namespace)
                return (namespace, try Self.exchange("hello", with: server.address))
            }
            #expect(try await served == 5)
            #expect(namespace != processNamespace)
            let interfaces = try await phone.spawn(["cat", "/proc/net/dev"])
            #expect(interfaces.succeeded)
            #expect(interfaces.standardOutput.contains("wifi:") && interfaces.standardOutput.contains("cell:"))
            #expect(phone.path?.status == .satisfied)
            phone.mark("exchanged")
            return answer
        }
        #expect(run.value == "hello")
        #expect(run.seed == 11)
        #expect(run.report.endedAt < .seconds(6), "ends when the code under test returns")
        #expect(run.report.passed)
        run.expect(.pathUpdates(of: "phone", atLeast: 1))
        let marks = try RecordedRun.load(directory: run.report.reportDirectory).events.compactMap { record -> String? in
            if case .mark(let text, _) = record.event { text } else { nil }
        }
        #expect(marks.contains("exchanged"), "\(marks)")
        #expect(try HostNetworkState.capture() == before)
        #expect(Self.leftoverNamespaces(run.report.runID).isEmpty)
    }

    /// The timeline regrades Wi-Fi as its conditions change (5% loss: moderate; 500 kbit/s:
    /// minimal; clean again: good), retags both ends, and the phone's monitor publishes each
    /// grade in turn; a change that keeps the grade retags nothing.
    @Test func theTimelineRetagsLinkQualityAndTheMonitorPublishesIt() async throws {
        let scenario = Scenario(
            name: "quality", seed: 5, duration: .seconds(2), nodes: [ScenarioNode("phone"), ScenarioNode("server")],
            links: [LinkSpec("wifi", between: ("phone", "server"), type: .wifi, both: Impairment(rate: .mbit(50)))],
            timeline: [
                TimelineEvent(at: .milliseconds(300), link: "wifi", .set(Impairment(loss: .random(rate: 0.05, correlation: 0)))),
                TimelineEvent(at: .milliseconds(600), link: "wifi", .set(Impairment(delay: .milliseconds(10)))),
                TimelineEvent(at: .milliseconds(900), link: "wifi", .set(Impairment(rate: .kbit(500)))),
                TimelineEvent(at: .milliseconds(1400), link: "wifi", .set(Impairment(rate: .mbit(50), loss: .random(rate: 0, correlation: 0)))),
            ])
        let run = try await scenario.run(TestRunOptions(end: .atScenarioEnd)) { _ in }
        var grades: [LinkQuality] = []
        for record in run.report.paths where record.node == "phone" && record.path.status == .satisfied {
            if grades.last != record.path.linkQuality { grades.append(record.path.linkQuality) }
        }
        #expect(grades == [.good, .moderate, .minimal, .good])
        #expect(run.expect(.path(of: "phone", reaches: .qualityModerate, within: .seconds(1), after: "wifi", event: "set")))
        let retags = try RecordedRun.load(directory: run.report.reportDirectory).events.compactMap { record -> (quality: String, error: String?)? in
            if case let .quality(_, quality, error) = record.event { (quality, error) } else { nil }
        }
        #expect(retags.map(\.quality) == ["moderate", "minimal", "good"], "\(retags)")
        #expect(retags.allSatisfy { $0.error == nil })
    }

    @Test func aFailedCheckCarriesTheSeedAndTheMeasurement() async throws {
        let run = try await phoneScenario(duration: .seconds(3)).run(TestRunOptions(seed: 4242, end: .atScenarioEnd)) { _ in }
        #expect(run.report.endedAt == .seconds(3))
        #expect(run.seed == 4242)
        let impossible = RunCheck.pathUpdates(of: "phone", atLeast: 1000)
        let outcome = run.check(impossible)
        #expect(!outcome.passed)
        let message = run.report.failureMessage(impossible, outcome)
        #expect(message.contains("ROAM_SEED=4242"))
        #expect(message.contains("path update"))
        #expect(message.contains(run.report.reportDirectory))
        #expect(run.check(.path(of: "phone", reaches: .satisfied, within: .seconds(1), after: "wifi", event: "blackhole")).passed)
    }

    @Test func codeUnderTestThatThrowsEndsTheRunCleanly() async throws {
        struct Boom: Error {}
        let failure = try await #require(throws: ScenarioRunFailure.self) {
            _ = try await phoneScenario().run(TestRunOptions(seed: 77)) { _ in throw Boom() }
        }
        #expect(failure.seed == 77)
        #expect(failure.underlying is Boom)
        #expect(failure.description.contains("ROAM_SEED=77"))
        #expect(Self.leftoverNamespaces(failure.report.runID).isEmpty)
    }

    @Test func anUnknownNodeIsNamedWithTheOnesThereAre() async throws {
        let error = try await #require(throws: ScenarioRunFailure.self) {
            _ = try await phoneScenario().run { network in try network.node("tablet") }
        }
        #expect("\(error.underlying)".contains("no node 'tablet'; nodes: phone, server"))
    }

    @Test func theSameSeedMakesTheSameDecisions() async throws {
        // Loss on Wi-Fi; the same request sequence twice with one seed loses the same packets.
        let scenario = try Scenario.parse(yaml: """
            name: replay
            seed: 3
            duration: 30s
            nodes: { phone: {}, server: {} }
            links: [{ name: wifi, between: [phone, server], type: wifi, delay: 2ms, loss: 20% }]
            """)
        func lostPackets() async throws -> UInt64 {
            let run = try await scenario.run { network in
                let phone = try network.node("phone"), server = try network.node("server")
                let ping = try await phone.spawn(["ping", "-n", "-c", "40", "-i", "0.01", "-W", "0.3", server.address])
                return ping.standardOutput
            }
            return run.report.linkStatistics.reduce(0) { $0 + UInt64($1.counters.lost) }
        }
        let first = try await lostPackets(), second = try await lostPackets()
        #expect(first > 0)
        #expect(first == second)
    }

    static func namespaceInode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    static func leftoverNamespaces(_ runID: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []).filter { $0.contains(runID) }
    }

    static func listen(on address: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = UInt16(7777).bigEndian
        inet_pton(AF_INET, address, &sin.sin_addr)
        let bound = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, Glibc.listen(fd, 4) == 0 else { throw RoamTestingError("listen: \(Errno.current.description)") }
        return fd
    }

    static func echoOnce(_ listener: Int32) throws -> Int {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { throw RoamTestingError("accept: \(Errno.current.description)") }
        defer { close(client) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(client, &buffer, buffer.count)
        guard count > 0 else { return 0 }
        _ = write(client, buffer, count)
        return count
    }

    static func exchange(_ text: String, with address: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = UInt16(7777).bigEndian
        inet_pton(AF_INET, address, &sin.sin_addr)
        let connected = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw RoamTestingError("connect: \(Errno.current.description)") }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &buffer, buffer.count)
        return String(decoding: buffer[0..<max(0, count)], as: UTF8.self)
    }
}

/// A test suite plays many scenarios in one process: each run must give back everything it took.
@Suite("RoamTesting over many runs", .serialized, .enabled(if: RoamTesting.isAvailable, "needs root and /dev/net/tun"))
struct RoamTestingSoakTests {
    static func descriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
    /// Each open descriptor and what it is (`socket:[123]`, `anon_inode:[eventfd]`, a path).
    static func openDescriptors() -> [String: String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Dictionary(uniqueKeysWithValues: names.map { ($0, (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) ?? "?") })
    }
    static func threads() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1 }
    static func residentKilobytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// One run with a TCP exchange between the nodes, a spawned program and a mark.
    static func play() async throws {
        let run = try await phoneScenario(duration: .seconds(3)).run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let listener = try await server.run { try RoamTestingKernelTests.listen(on: server.address) }
            defer { close(listener) }
            async let served: Int = server.run { try RoamTestingKernelTests.echoOnce(listener) }
            do {
                _ = try await phone.run { try RoamTestingKernelTests.exchange("hi", with: server.address) }
            } catch {
                // Wakes the server's accept (closing does not), so that the failure is reported
                // instead of the test waiting for a connection that will never come.
                shutdown(listener, Int32(SHUT_RDWR))
                _ = try? await served
                throw error
            }
            _ = try await served
            _ = try await phone.spawn(["true"])
            phone.mark("done")
        }
        #expect(run.report.passed)
        try? FileManager.default.removeItem(atPath: run.report.reportDirectory)
    }

    @Test func aHundredRunsGiveBackWhatTheyTook() async throws {
        // The first runs set up what the process keeps (the Swift runtime's caches, the
        // executor's threads, the allocator's arenas).
        for _ in 0..<5 { try await Self.play() }
        let before = (descriptors: Self.descriptors(), threads: Self.threads(), pinned: PinnedThread.runningCount, resident: Self.residentKilobytes())
        let openBefore = Self.openDescriptors()
        for _ in 0..<100 { try await Self.play() }
        func sample() -> (descriptors: Int, threads: Int, pinned: Int, resident: Int) {
            (descriptors: Self.descriptors(), threads: Self.threads(), pinned: PinnedThread.runningCount, resident: Self.residentKilobytes())
        }
        // A thread of the last run may still be ending (its sockets and eventfds with it): what
        // it holds is given back within moments, a leak (one per run) never is. Checked again
        // until then, for at most 5 s.
        var after = sample()
        let settled = Date().addingTimeInterval(5)
        while (after.descriptors > before.descriptors + 2 || after.threads > before.threads + 2 || after.pinned > before.pinned + 2),
              Date() < settled {
            usleep(20_000)
            after = sample()
        }
        // What is new, by kind, so that a leak names itself (another suite's thread may open some meanwhile).
        let added = Self.openDescriptors().filter { openBefore[$0.key] != $0.value }.values.map { $0.hasPrefix("socket:") ? "socket" : $0 }.sorted()
        #expect(after.descriptors <= before.descriptors + 2, "descriptors \(before.descriptors) → \(after.descriptors): new \(added.prefix(20))")
        #expect(after.threads <= before.threads + 2, "threads \(before.threads) → \(after.threads)")
        // A thread of the last run may still be ending when a count is taken; a leak is one per run.
        #expect(after.pinned <= before.pinned + 2, "pinned threads \(before.pinned) → \(after.pinned)")
        // A leak of a run's record (a timeline, its paths) would be megabytes over 100 runs.
        #expect(after.resident - before.resident < 8 * 1024, "resident \(before.resident) kB → \(after.resident) kB")
        print("RoamTesting, 100 runs: descriptors \(before.descriptors) → \(after.descriptors), threads \(before.threads) → \(after.threads), "
            + "resident \(before.resident) → \(after.resident) kB")
    }
}
