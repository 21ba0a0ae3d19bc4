import Foundation
import Glibc
import Netlink
import Testing
import TestSupport

@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct MonitorCommandInputTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test(arguments: [
        (["monitor", "--require", "satellite"], "unknown interface type 'satellite' for --require"),
        (["monitor", "--prohibit", "wifi", "--prohibit", "fiber"], "unknown interface type 'fiber' for --prohibit"),
        (["monitor", "--interfaces", "/nonexistent/ifaces"], "cannot read interfaces file /nonexistent/ifaces: No such file or directory"),
        (["monitor", "--netns", "a/b"], "--netns 'a/b' is not a network namespace name"),
        (["monitor", "--require", "wifi", "--prohibit", "wifi"], "--require wifi and --prohibit wifi contradict"),
        (["monitor", "--bogus"], "Unknown option '--bogus'"),
        (["monitor", "--validate", "https://connectivity.roam.test/"], "--validate: connectivity probe URL 'https://connectivity.roam.test/': only http:// is probed"),
        (["monitor", "--validate", "http://a b/"], "spaces and control or non-ASCII characters are not allowed"),
        (["monitor", "--validate", "http://x.test/", "--validate-interval", "0"], "--validate-interval must be 1 to 86400 seconds, not 0"),
        (["monitor", "--require-validated"], "--validate-interval, --require-validated and --prefer-validated need --validate URL"),
        (["monitor", "--prefer-validated"], "--validate-interval, --require-validated and --prefer-validated need --validate URL"),
        (["monitor", "--validate", "http://x.test/", "--require-validated", "--prefer-validated"], "--require-validated and --prefer-validated are two rules for the same thing"),
    ])
    func rejectsBadInputWithExitCode2(_ arguments: [String], _ message: String) throws {
        let result = try RunningCommand.run(roam, arguments)
        #expect(result.status == 2)
        #expect(result.error.contains(message), "stderr: \(result.error)")
        #expect(result.output.isEmpty)
    }

    @Test func reportsParseErrorsOfTheInterfacesFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("roam-ifaces-\(getpid())").path
        try "wl* type=wifi\nwwan* type=satellite\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let result = try RunningCommand.run(roam, ["monitor", "--interfaces", path])
        #expect(result.status == 2)
        #expect(result.error.contains("\(path):2: error: 'type=satellite'"), "stderr: \(result.error)")
    }

    @Test func helpExitsZero() throws {
        let result = try RunningCommand.run(roam, ["monitor", "--help"])
        #expect(result.status == 0)
        #expect(result.output.contains("--prohibit-expensive"))
    }
}

@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil, "needs root and the built roam executable"), .serialized)
struct MonitorCommandKernelTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func printsJSONLinesUntilInterrupted() async throws {
        try await TestNamespace.with { test in
            let (_, peer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let command = try RunningCommand(roam, ["monitor", "--netns", test.name, "--json"])
            let first = try #require(command.lines.wait { !$0.isEmpty }?.first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
            #expect(Set(object.keys) == ["time", "status", "unsatisfiedReason", "isExpensive", "isConstrained", "supportsIPv4",
                                         "supportsIPv6", "supportsDNS", "primaryInterface", "gateways", "interfaces", "isUltraConstrained", "linkQuality",
                                         "connectivity"])
            #expect(object["status"] as? String == "satisfied")
            #expect(object["primaryInterface"] as? String == "wl0")
            #expect(object["unsatisfiedReason"] is NSNull)
            let time = try #require(object["time"] as? String)
            #expect(time.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"#, options: .regularExpression) != nil)
            let interfaces = try #require(object["interfaces"] as? [[String: Any]])
            #expect(interfaces.first.map { Set($0.keys) } == ["name", "index", "type", "isExpensive", "isConstrained", "state", "mtu", "addresses", "isUltraConstrained", "linkQuality",
                                                          "connectivity"])

            try test.socket.setLink(index: peer, up: false)
            let expensive = command.lines.wait { lines in lines.contains { $0.contains(#""primaryInterface":"ce0""#) && $0.contains(#""isExpensive":true"#) } }
            #expect(expensive != nil)
            #expect(command.stop(with: SIGINT) == 0)
            #expect(command.errors.values.isEmpty)
        }
    }

    @Test func printsReadableLinesAndStopsOnSIGTERM() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let command = try RunningCommand(roam, ["monitor", "--netns", test.name, "--prohibit-expensive"])
            let line = try #require(command.lines.wait { !$0.isEmpty }?.first)
            #expect(line.contains(" unsatisfied (prohibitedExpensive) | lo loopback"), "\(line)")
            #expect(command.stop(with: SIGTERM) == 0)
        }
    }

    /// SIGHUP (a closed terminal) ends the monitor as Ctrl-C does, whatever mask its parent left
    /// blocked; a closed output ends it at the next line it prints, 141 as a SIGPIPE would.
    @Test func stopsOnSIGHUPAndWhenItsOutputIsClosed() async throws {
        try await TestNamespace.with { test in
            let (_, peer) = try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let command = try RunningCommand(roam, ["monitor", "--netns", test.name])
            #expect(command.lines.wait { !$0.isEmpty } != nil)
            #expect(command.stop(with: SIGHUP) == 0)
            let script = "\"$0\" monitor --netns \"$1\" | head -1; echo \"exit ${PIPESTATUS[0]}\""
            let piped = try RunningCommand("/bin/bash", ["-c", script, roam, test.name])
            #expect(piped.lines.waitForLast(timeout: 30) { $0.contains("satisfied") } != nil)
            // The next change makes it print again: the write fails, and it ends.
            try test.socket.setLink(index: peer, up: false)
            #expect(piped.lines.waitForLast(timeout: 30) { $0.hasPrefix("exit ") } == "exit 141", "\(piped.lines.values)")
            #expect(piped.waitForExit(timeout: 30) == 0)
        }
    }

    @Test func appliesAnInterfacesFile() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: nil)
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("roam-ifaces-\(getpid())-kernel").path
            try "# test\nwl* type=wifi constrained\n".write(toFile: path, atomically: true, encoding: .utf8)
            defer { unlink(path) }
            let command = try RunningCommand(roam, ["monitor", "--netns", test.name, "--json", "--interfaces", path])
            let first = try #require(command.lines.wait { !$0.isEmpty }?.first)
            #expect(first.contains(#""isConstrained":true"#))
            #expect(first.contains(#"{"name":"wl0","index":"#) && first.contains(#""type":"wifi""#))
            #expect(command.stop() == 0)
        }
    }

    @Test func namesAMissingNamespace() throws {
        let result = try RunningCommand.run(roam, ["monitor", "--netns", "roam-test-missing-\(getpid())"])
        #expect(result.status == 2)
        #expect(result.error.contains("no network namespace named 'roam-test-missing-\(getpid())'"), "\(result.error)")
    }

    @Test(.enabled(if: access("/usr/bin/setpriv", X_OK) == 0, "needs setpriv (util-linux) to drop privileges"))
    func explainsMissingPrivileges() async throws {
        try await TestNamespace.with { test in
            let result = try RunningCommand.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", roam, "monitor", "--netns", test.name])
            #expect(result.status == 2)
            #expect(result.error.contains("requires root"), "\(result.error)")
        }
    }
}
