import Foundation
import Glibc
import Testing
import TestSupport

/// Every command that reads a file or a number from a user, given hostile input: exit 2 with a
/// message that says what to change (FILE:LINE:COL where there is a file), within bounded time
/// and memory, and nothing written where Roam did not say it would write.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct HostileInputCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    /// A fresh directory of this test's own (`mkdtemp`: never one another user made first).
    func temporaryDirectory(_ name: String) throws -> String {
        try TestEnvironment.scratchDirectory("roam-hostile-\(name)")
    }

    @Test func devicesPipesAndDirectoriesAreRefusedAtOnce() throws {
        let directory = try temporaryDirectory("devices")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/fifo.yaml"
        #expect(mkfifo(fifo, 0o600) == 0)
        for (path, what) in [("/dev/zero", "a character device"), (fifo, "a FIFO (named pipe)"), (directory, "a directory")] {
            let result = try RunningCommand.run(roam, ["validate", path], timeout: 20)
            #expect(result.status == 2, "\(path): \(result.error)")
            #expect(result.error == "\(path): error: cannot read the file: \(path) is \(what); only regular files are read")
        }
        let trace = try RunningCommand.run(roam, ["import", "mahimahi", "--up", "/dev/zero", "--down", "/dev/zero", "--name", "z"], timeout: 20)
        #expect(trace.status == 2)
        #expect(trace.error.contains("/dev/zero is a character device"))
    }

    @Test func importRefusesWhatAScenarioWouldRefuse() throws {
        let directory = try temporaryDirectory("import")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let trace = directory + "/t.trace"
        try "1\n2\n3\n".write(toFile: trace, atomically: true, encoding: .utf8)
        let common = ["import", "mahimahi", "--up", trace, "--down", trace]
        for (extra, message) in [
            (["--name", "x", "--delay=-5ms"], "--delay -5ms: expected a one-way delay from 0ms to 60s, such as 20ms"),
            (["--name", "x", "--loss=-5%"], "--loss -5%: expected a percentage from 0% to 100%, such as 0.5%"),
            (["--name", "lte"], "--name lte is a built-in profile; choose another name"),
            (["--name", "x", "--type", "satellite"], "--type satellite: expected wifi, cellular, wiredEthernet (or wired), other"),
        ] {
            let result = try RunningCommand.run(roam, common + extra)
            #expect(result.status == 2, "\(extra)")
            #expect(result.error.contains(message), "\(extra): \(result.error)")
        }
        // The spellings a scenario accepts for a type are accepted, and written as it writes them.
        let spelled = try RunningCommand.run(roam, common + ["--name", "x", "--type", "wi-fi"])
        #expect(spelled.status == 0, "\(spelled.error)")
        #expect(spelled.output.contains("type: wifi"))
        // A timestamp past the longest trace is refused with its line, not allocated for.
        try "1\n99999999999\n".write(toFile: trace, atomically: true, encoding: .utf8)
        let huge = try RunningCommand.run(roam, common + ["--name", "x"], timeout: 20)
        #expect(huge.status == 2)
        #expect(huge.error.contains("\(trace):2: a millisecond past the longest trace"))
        #expect(!huge.error.contains("99999999999"), "nothing of the file is quoted")
    }

    @Test func reportReadsACutRunAndAbsurdFigures() throws {
        let directory = try temporaryDirectory("report")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"{"scenario":"cut","durationSeconds":1e308,"endedAtSeconds":1e19}"#.write(toFile: directory + "/summary.json", atomically: true, encoding: .utf8)
        try "{\"t\":1,\"type\":\"mark\",\"text\":\"x\"}\n{\"t\":2,\"type\":\"ma".write(toFile: directory + "/timeline.jsonl", atomically: true, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["report", directory], timeout: 30)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.contains("the last line (2) is cut short"))
        #expect(FileManager.default.fileExists(atPath: directory + "/report.html"))
        // A summary that is not JSON stays an error with its place.
        try #"{"scenario": 1e"#.write(toFile: directory + "/summary.json", atomically: true, encoding: .utf8)
        let broken = try RunningCommand.run(roam, ["report", directory])
        #expect(broken.status == 2)
        #expect(broken.error.contains("summary.json is not valid JSON"))
    }

    @Test func aScenarioNameNeverBecomesAPathOutside() throws {
        let directory = try temporaryDirectory("name")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "name: ../../escape\nduration: 1s\nnodes: {a: {}}\n".write(toFile: directory + "/s.yaml", atomically: true, encoding: .utf8)
        for command in [["validate"], ["export", "--format", "chaos-mesh"], ["run", "--backend", "userspace"]] {
            let result = try RunningCommand.run(roam, command + [directory + "/s.yaml"], timeout: 30)
            #expect(result.status == 2, "\(command): \(result.error)")
            #expect(result.error.contains("s.yaml:1:7: error: scenario name '../../escape' must start with a letter"), "\(command): \(result.error)")
        }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/escape"))
    }

    @Test func exportRefusesNamesThatWouldBreakItsOutput() throws {
        let scenario = NetemHost.root + "/scenarios/walk-out-of-home.yaml"
        for (flags, message) in [
            (["--select", "phone=app: x=web"], "is not a Kubernetes label"),
            (["--select", "phone=app=web#1"], "is not a Kubernetes label"),
            (["--device", "wifi=net1\nkind: Pod"], "is not an interface name"),
            (["--device", "wifi=a/b"], "is not an interface name"),
            (["--namespace", "Prod NS"], "a Kubernetes namespace is 1 to 63 lower-case letters"),
            (["--resolution", "99999999h"], "--resolution 99999999h"),
        ] {
            let result = try RunningCommand.run(roam, ["export", "--format", "chaos-mesh"] + flags + [scenario])
            #expect(result.status == 2, "\(flags)")
            #expect(result.error.contains(message), "\(flags): \(result.error)")
        }
        let prefixed = try RunningCommand.run(roam, ["export", "--format", "chaos-mesh", "--select", "phone=example.com/app=web", scenario])
        #expect(prefixed.status == 0, "\(prefixed.error)")
    }

    /// `roam validate` on seeded mutations of the bundled scenarios, each in a process of its own
    /// under a 4 GiB address-space limit: exit 0 or 2, never a crash; every error with its place.
    @Test func validateSurvivesMutatedScenarios() throws {
        let directory = try temporaryDirectory("mutations")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let scenarios = try FileManager.default.contentsOfDirectory(atPath: NetemHost.root + "/scenarios").filter { $0.hasSuffix(".yaml") }.sorted()
        try #require(scenarios.count >= 7)
        let texts = try scenarios.map { try String(contentsOfFile: NetemHost.root + "/scenarios/" + $0, encoding: .utf8) }
        let seed = UInt64(ProcessInfo.processInfo.environment["ROAM_FUZZ_SEED"] ?? "") ?? 7
        var mutator = ScenarioMutator(seed: seed)
        let candidates: [String] = ["/usr/bin/prlimit", "/bin/prlimit"]
        let prlimit = try #require(candidates.first { access($0, X_OK) == 0 }, "prlimit (util-linux) is missing")
        for index in 0..<200 {
            let path = "\(directory)/m\(index).yaml"
            try mutator.mutate(texts[index % texts.count]).write(toFile: path, atomically: true, encoding: .utf8)
            let result = try RunningCommand.run(prlimit, ["--as=4294967296", "--", roam, "validate", path], timeout: 30)
            #expect(result.status == 0 || result.status == 2, "round \(index) (ROAM_FUZZ_SEED=\(seed)): status \(result.status)\n\(result.error)")
            for line in result.error.split(separator: "\n") where line.contains(": error: ") || line.contains(": warning: ") {
                let placed = line.hasPrefix(path + ":") && line.dropFirst(path.count + 1).prefix { $0 != " " }.split(separator: ":").count == 2
                #expect(placed, "round \(index) (ROAM_FUZZ_SEED=\(seed)): no FILE:LINE:COL in \(line)")
            }
        }
    }
    /// The two mobility files that hung every reader: a random-waypoint phone in an area 1e-100 m
    /// wide (nine lines), and 11 phones for a day at 100 ms among 20,000 obstacles (1.4 MB).
    /// `roam validate` answers the first and refuses the second, each within 20 s (measured: 0.07
    /// and 1.4 s in a debug build) and 100 MB, measured by a parent of its own (Python's
    /// `RUSAGE_CHILDREN`, which sees only that one child).
    @Test func mobilityThatWouldNotEndIsAnsweredInBoundedTimeAndMemory() throws {
        let directory = try temporaryDirectory("mobility")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tiny = """
            name: tiny
            duration: 60s
            nodes: {phone: {}}
            networks: [{name: office, type: wifi, members: [phone]}]
            mobility:
              accessPoints: [{name: ap, network: office, at: [0, 0]}]
              phones:
                phone:
                  randomWaypoint: {area: [[0, 0], [1e-100, 1e-100]], speed: 1}

            """
        let names = (0..<11).map { "p\($0)" }
        let obstacles = """
            name: crowd
            duration: 24h
            nodes:
            \(names.map { "  \($0): {}" }.joined(separator: "\n"))
            networks:
              - {name: office, type: wifi, members: [\(names.joined(separator: ", "))]}
            mobility:
              step: 100ms
              accessPoints: [{name: ap1, network: office, at: [0, 3]}]
              obstacles:
            \((0..<20_000).map { "    - {name: o\($0), from: [\($0), 0], to: [\($0 + 1), 5], attenuation: 3dB}" }.joined(separator: "\n"))
              phones:
            \(names.map { "    \($0): {start: [0, 0], path: []}" }.joined(separator: "\n"))

            """
        let script = """
            import resource, subprocess, sys, time
            began = time.monotonic()
            result = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=20)
            print(result.returncode, round(time.monotonic() - began, 2), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            sys.stderr.write(result.stdout + result.stderr)
            """
        for (name, text, status, message) in [("tiny", tiny, 0, "valid: 'tiny'"), ("obstacles", obstacles, 2, "mobility may place at most 1000 obstacles, not 20000")] {
            let path = "\(directory)/\(name).yaml"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try RunningCommand.run("/usr/bin/env", ["python3", "-c", script, roam, "validate", path], timeout: 40)
            let figures = result.output.split(separator: " ").map(String.init)
            try #require(figures.count == 3, "\(name): \(result.output) \(result.error)")
            #expect(Int(figures[0]) == status, "\(name): \(result.error)")
            #expect((result.output + result.error).contains(message), "\(name): \(result.output) \(result.error)")
            let kilobytes = try #require(Int(figures[2].trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(kilobytes < 100 * 1024, "\(name): \(kilobytes) KB at most")
            print("mobility \(name): exit \(figures[0]) in \(figures[1]) s, \(kilobytes / 1024) MB")
        }
    }
}
