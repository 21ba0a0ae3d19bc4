import Foundation
import Glibc
import Testing
import TestSupport

/// `roam daemon` in flag checks that need no root.
struct DaemonCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test(.enabled(if: TestEnvironment.roamExecutable != nil, "needs the built roam executable"), arguments: [
        (["daemon", "--socket", "relative.sock"], "is not an absolute path of a file"),
        (["daemon", "--socket", "/"], "is not an absolute path of a file"),
        (["daemon", "--validate-interval", "10"], "--validate-interval needs --validate URL"),
        (["daemon", "--netns", "a/b"], "--netns 'a/b' is not a network namespace name"),
        (["daemon", "--mptcp", "none"], "--mptcp 'none' is not a multipath service type"),
        (["daemon", "--mptcp", "fast"], "--mptcp 'fast' is not a multipath service type"),
        (["monitor", "--socket", "/run/roam/path.sock"], "--socket names the socket of roam daemon: give it with --daemon"),
        (["monitor", "--daemon", "--prohibit-expensive"], "--prohibit-expensive applies to a monitor of this process"),
        (["monitor", "--daemon", "--validate", "http://x.test/"], "--validate applies to a monitor of this process"),
    ])
    func rejectsBadInputWithExitCode2(_ arguments: [String], _ message: String) throws {
        let result = try RunningCommand.run(roam, arguments)
        #expect(result.status == 2)
        #expect(result.error.contains(message), "stderr: \(result.error)")
        #expect(result.output.isEmpty)
    }

    /// `roam monitor --daemon` with no daemon there: a clear error and exit 2, not a trap (a
    /// failed connection once left a promise unanswered, which a debug build traps on).
    @Test(.enabled(if: TestEnvironment.roamExecutable != nil, "needs the built roam executable"))
    func monitorWithNoDaemonSaysSo() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-no-daemon")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try RunningCommand.run(roam, ["monitor", "--daemon", "--socket", directory + "/path.sock"], timeout: 30)
        #expect(result.status == 2, "\(result.status): \(result.error)")
        #expect(result.error.contains("cannot read roam daemon's path at") && result.error.contains("is roam daemon running?"), "\(result.error)")
        #expect(!result.error.contains("Fatal error"), "\(result.error)")
    }
}

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`.
final class NotifySocket {
    let path: String
    private let descriptor: Int32

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path.utf8)
            buffer[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard descriptor >= 0, bound == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
    }

    deinit {
        close(descriptor)
        unlink(path)
    }

    /// The next notification, waiting at most `timeout` seconds.
    func receive(timeout: Int32 = 30) -> String? {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, timeout * 1000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }
}

/// `roam daemon` on a namespace of the test's: its readers are curl (as root and as another
/// user), `roam monitor --daemon` and the service manager's notify socket; it refuses a second
/// daemon and places another user could hold, and leaves nothing behind.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/bin/curl", X_OK) == 0
                && access("/usr/bin/setpriv", X_OK) == 0, "needs root, the built roam, curl and setpriv"), .serialized)
struct DaemonKernelTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    /// A directory every user may enter (the socket's), root's.
    func sharedDirectory() throws -> String {
        let directory = try TestEnvironment.processScratchDirectory("roam-daemon")
        chmod(directory, 0o755)
        return directory
    }

    func curl(_ socket: String, _ arguments: [String], as user: uid_t? = nil) throws -> (status: Int32, output: String, error: String) {
        let command = ["/usr/bin/curl", "-s", "--max-time", "10", "--unix-socket", socket] + arguments
        if let user {
            return try RunningCommand.run("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--clear-groups"] + command)
        }
        return try RunningCommand.run(command[0], Array(command.dropFirst()))
    }

    /// `roam daemon` on `namespace` with `arguments`, started as systemd starts a notify service
    /// (`NOTIFY_SOCKET`); expects its READY=1, and returns it with what it said.
    func startDaemon(_ namespace: String, _ arguments: [String], notify: NotifySocket,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> (daemon: RunningCommand, ready: String?) {
        let daemon = try RunningCommand("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", roam, "daemon", "--netns", namespace] + arguments)
        let ready = notify.receive()
        #expect(ready?.contains("READY=1") == true, "READY=1 within 30 s: \(daemon.errors.values)", sourceLocation: sourceLocation)
        return (daemon, ready)
    }

    func json(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    @Test func servesThePathToEveryLocalUserAndEachChangeToItsReaders() async throws {
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = directory + "/path.sock"
            let notify = try NotifySocket(path: directory + "/notify")
            // systemd's readiness: once the first path is known and the socket served.
            let (daemon, ready) = try startDaemon(test.name, ["--socket", socket], notify: notify)
            #expect(ready?.contains("MAINPID=\(daemon.process.processIdentifier)") == true, "\(ready ?? "")")
            var status = stat()
            #expect(stat(socket, &status) == 0 && status.st_mode & 0o777 == 0o666, "every local user may connect")

            // Root and another user read the same path.
            let asRoot = try curl(socket, ["http://roam/v1/path"])
            let path = try #require(json(asRoot.output), "\(asRoot)")
            #expect(path["sequence"] as? Int == 0 && path["status"] as? String == "satisfied" && path["primaryInterface"] as? String == "wl0", "\(path)")
            let asNobody = try curl(socket, ["http://roam/v1/path"], as: 65534)
            #expect(json(asNobody.output)?["primaryInterface"] as? String == "wl0", "\(asNobody)")
            // Changing anything is the daemon's user's and root's: another user is refused.
            let refused = try curl(socket, ["-X", "POST", "-o", "/dev/null", "-w", "%{http_code}", "http://roam/v1/revalidate"], as: 65534)
            #expect(refused.output == "403", "\(refused)")
            let notValidating = try curl(socket, ["-X", "POST", "-o", "/dev/null", "-w", "%{http_code}", "http://roam/v1/revalidate"])
            #expect(notValidating.output == "409", "\(notValidating)")

            // Readers of the changes: roam monitor --daemon as another user (JSON) and as root
            // (readable), curl's raw event stream.
            let reader = try RunningCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", roam, "monitor", "--daemon", "--socket", socket, "--json"])
            let readable = try RunningCommand(roam, ["monitor", "--daemon", "--socket", socket])
            let stream = try RunningCommand("/usr/bin/curl", ["-sN", "--unix-socket", socket, "http://roam/v1/path/events"])
            let first = try #require(reader.lines.wait { !$0.isEmpty }?.first, "\(reader.errors.values)")
            #expect(json(first)?["sequence"] as? Int == 0)
            #expect(readable.lines.wait { $0.contains { $0.contains(" satisfied via wl0 (wifi)") } } != nil, "\(readable.lines.values)")
            #expect(stream.lines.wait { $0.contains("event: path") } != nil)

            // The Wi-Fi goes: each reader sees cellular become primary.
            try test.socket.setLink(index: wifiPeer, up: false)
            let moved = reader.lines.wait { lines in lines.contains { json($0)?["primaryInterface"] as? String == "ce0" } }
            #expect(moved != nil, "\(reader.lines.values) \(reader.errors.values)")
            #expect(readable.lines.wait { $0.contains { $0.contains(" satisfied via ce0 (cellular) expensive") } } != nil, "\(readable.lines.values)")
            #expect(stream.lines.wait { $0.contains { $0.hasPrefix("data: ") && $0.contains(#""primaryInterface":"ce0""#) } } != nil)
            let now = try #require(json(try curl(socket, ["http://roam/v1/path"]).output))
            #expect(now["primaryInterface"] as? String == "ce0" && (now["sequence"] as? Int ?? 0) >= 1)

            // A reader whose output is closed ends at the next path it prints, 141 as monitor does.
            let script = "\"$0\" monitor --daemon --socket \"$1\" | head -1; echo \"exit ${PIPESTATUS[0]}\""
            let piped = try RunningCommand("/bin/bash", ["-c", script, roam, socket])
            #expect(piped.lines.waitForLast(timeout: 30) { $0.contains("satisfied") } != nil)
            try test.socket.setLink(index: wifiPeer, up: true)
            #expect(piped.lines.waitForLast(timeout: 30) { $0.hasPrefix("exit ") } == "exit 141", "\(piped.lines.values)")
            #expect(piped.waitForExit(timeout: 30) == 0)
            // Ctrl-C ends a reader at once, 0.
            let interrupted = try RunningCommand(roam, ["monitor", "--daemon", "--socket", socket])
            #expect(interrupted.lines.wait { !$0.isEmpty } != nil)
            #expect(interrupted.stop(with: SIGINT) == 0)

            // SIGTERM: it says it stops, removes its socket, exits 0; its readers learn it stopped.
            #expect(daemon.stop(with: SIGTERM) == 0, "\(daemon.errors.values)")
            #expect(notify.receive()?.contains("STOPPING=1") == true)
            #expect(access(socket, F_OK) != 0, "the socket is gone")
            #expect(reader.waitForExit(timeout: 30) == 2)
            #expect(reader.errors.values.contains { $0.contains("stopped") }, "\(reader.errors.values)")
            #expect(readable.waitForExit(timeout: 30) == 2)
            #expect(stream.waitForExit(timeout: 30) == 0)
            #expect(daemon.errors.values.contains { $0.contains("serving the path of") }, "\(daemon.errors.values)")
        }
    }

    @Test func refusesASecondDaemonAndPlacesAnotherUserCouldHoldAndReplacesADeadOnesSocket() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = directory + "/path.sock"
            let notify = try NotifySocket(path: directory + "/notify")
            let first = try startDaemon(test.name, ["--socket", socket, "--private"], notify: notify).daemon
            var status = stat()
            #expect(stat(socket, &status) == 0 && status.st_mode & 0o777 == 0o600, "--private: the daemon's user and root only")
            let second = try RunningCommand.run(roam, ["daemon", "--netns", test.name, "--socket", socket])
            #expect(second.status == 2 && second.error.contains("another daemon serves \(socket)"), "\(second)")
            // A daemon killed where it stands leaves its socket; the next replaces it.
            kill(first.process.processIdentifier, SIGKILL)
            _ = first.waitForExit()
            #expect(access(socket, F_OK) == 0)
            let next = try startDaemon(test.name, ["--socket", socket], notify: notify).daemon
            #expect(json(try curl(socket, ["http://roam/v1/path"]).output)?["primaryInterface"] as? String == "ce0")
            #expect(next.stop(with: SIGTERM) == 0)

            // Not a socket of this user's: left alone.
            #expect(FileManager.default.createFile(atPath: socket, contents: Data("mine".utf8)))
            let file = try RunningCommand.run(roam, ["daemon", "--netns", test.name, "--socket", socket])
            #expect(file.status == 2 && file.error.contains("is not a socket of this user's"), "\(file)")
            #expect((try? String(contentsOfFile: socket, encoding: .utf8)) == "mine")
            // A directory others may write (as /tmp): refused.
            let shared = directory + "/shared"
            mkdir(shared, 0o777)
            chmod(shared, 0o1777)
            let open = try RunningCommand.run(roam, ["daemon", "--netns", test.name, "--socket", shared + "/path.sock"])
            #expect(open.status == 2 && open.error.contains("cannot use \(shared) for the daemon's socket"), "\(open)")
        }
    }

    /// Any local user may read, but no user may take every place: another user holds at most
    /// eight connections (the ninth is closed unanswered), and the daemon's user and root always
    /// get one.
    @Test func noUserCanTakeEveryPlace() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = directory + "/path.sock"
            let notify = try NotifySocket(path: directory + "/notify")
            let daemon = try startDaemon(test.name, ["--socket", socket], notify: notify).daemon
            // As nobody: twelve event streams held open; count those answered, then wait for a line on stdin.
            let script = """
                import socket, sys
                held, answered = [], 0
                for _ in range(12):
                    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
                    s.sendall(b"GET /v1/path/events HTTP/1.1\\r\\nHost: roam\\r\\n\\r\\n")
                    try:
                        answered += s.recv(64).startswith(b"HTTP/1.1 200")
                    except OSError:
                        pass
                    held.append(s)
                print(answered, flush=True)
                sys.stdin.readline()
                """
            let hog = try RunningCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, socket])
            let answered = try #require(hog.lines.wait { !$0.isEmpty }?.first, "\(hog.errors.values)")
            #expect(answered == "8", "one user's share: \(answered)")
            // While it holds them: root, and another user, are answered.
            #expect(json(try curl(socket, ["http://roam/v1/path"]).output)?["primaryInterface"] as? String == "ce0")
            #expect(json(try curl(socket, ["http://roam/v1/path"], as: 65533).output)?["primaryInterface"] as? String == "ce0")
            kill(hog.process.processIdentifier, SIGTERM)
            _ = hog.waitForExit()
            #expect(daemon.stop(with: SIGTERM) == 0)
        }
    }

    /// `--mptcp handover`: the kernel's endpoints follow the path for every MPTCP program (the
    /// Wi-Fi's address carries, the cellular one is a backup; when the Wi-Fi goes, the cellular
    /// one carries), and stopping the daemon removes what it added.
    @Test(.enabled(if: access("/proc/sys/net/mptcp/enabled", F_OK) == 0, "needs MPTCP"))
    func keepsTheKernelsMPTCPEndpointsInStepWithThePath() async throws {
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let notify = try NotifySocket(path: directory + "/notify")
            let daemon = try startDaemon(test.name, ["--socket", directory + "/path.sock", "--mptcp", "handover"], notify: notify).daemon
            func endpoints() throws -> [String] {
                try RunningCommand.run("/usr/sbin/ip", ["-n", test.name, "mptcp", "endpoint", "show"]).output.split(separator: "\n").map(String.init)
            }
            #expect(daemon.errors.wait { $0.contains { $0.contains("mptcp: added") } } != nil, "\(daemon.errors.values)")
            let first = try endpoints()
            #expect(first.contains { $0.contains("dev wl0") && $0.contains("subflow") && !$0.contains("backup") }, "\(first)")
            #expect(first.contains { $0.contains("dev ce0") && $0.contains("subflow backup") }, "\(first)")
            try test.socket.setLink(index: wifiPeer, up: false)
            #expect(daemon.errors.wait { $0.contains { $0.contains("mptcp: removed") && $0.contains("(wl0)") } } != nil, "\(daemon.errors.values)")
            let after = try endpoints()
            #expect(!after.contains { $0.contains("dev wl0") } && after.contains { $0.contains("dev ce0") && !$0.contains("backup") }, "\(after)")
            #expect(daemon.stop(with: SIGTERM) == 0)
            #expect(try endpoints().isEmpty, "what the daemon added is gone")
        }
    }

    /// `--state-directory`: a daemon started again goes on from the sequence the last one
    /// reached, so a client that resumes with Last-Event-ID gets the next path; a state file
    /// that is not a sequence is said and left; a link planted in its place is refused.
    @Test func theSequenceGoesOnAcrossARestart() async throws {
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = directory + "/path.sock", state = directory + "/state"
            let notify = try NotifySocket(path: directory + "/notify")
            let first = try startDaemon(test.name, ["--socket", socket, "--state-directory", state], notify: notify).daemon
            let reader = try RunningCommand(roam, ["monitor", "--daemon", "--socket", socket, "--json"])
            #expect(reader.lines.wait(timeout: 20, until: { $0.count >= 1 }) != nil)
            try test.socket.setLink(index: wifiPeer, up: false)
            #expect(reader.lines.wait(timeout: 20, until: { $0.count >= 2 }) != nil, "\(reader.lines.values)")
            _ = reader.stop(with: SIGTERM)
            #expect(first.stop(with: SIGTERM) == 0)
            var status = stat()
            #expect(stat(state, &status) == 0 && status.st_mode & 0o777 == 0o700, "the state directory is the daemon's alone")
            let saved = (try? String(contentsOfFile: state + "/sequence", encoding: .utf8)) ?? ""
            #expect(saved == "2\n", "the next sequence: \(saved)")

            // Started again: it goes on at 2, and a client that saw 1 is given it.
            // (Each daemon its own notify socket: the last one's STOPPING=1 waits in the first.)
            let second = try startDaemon(test.name, ["--socket", socket, "--state-directory", state], notify: try NotifySocket(path: directory + "/notify2")).daemon
            #expect(json(try curl(socket, ["http://roam/v1/path"]).output)?["sequence"] as? Int == 2)
            let resumed = try curl(socket, ["-N", "--max-time", "2", "-H", "Last-Event-ID: 1", "http://roam/v1/path/events"])
            #expect(resumed.output.hasPrefix("id: 2\n"), "\(resumed.output.prefix(200))")
            #expect(second.stop(with: SIGTERM) == 0)

            // A file that holds no sequence: said, and the daemon starts from 0.
            try "garbage".write(toFile: state + "/sequence", atomically: false, encoding: .utf8)
            let third = try startDaemon(test.name, ["--socket", socket, "--state-directory", state], notify: try NotifySocket(path: directory + "/notify3")).daemon
            #expect(json(try curl(socket, ["http://roam/v1/path"]).output)?["sequence"] as? Int == 0)
            #expect(third.errors.values.contains { $0.contains("holds no sequence ('garbage'): starting from 0") }, "\(third.errors.values)")
            #expect(third.stop(with: SIGTERM) == 0)
            // A link in its place: refused, exit 2, nothing followed.
            unlink(state + "/sequence")
            symlink("/etc/shadow", state + "/sequence")
            let refused = try RunningCommand.run(roam, ["daemon", "--netns", test.name, "--socket", socket, "--state-directory", state])
            #expect(refused.status == 2 && refused.error.contains("--state-directory"), "\(refused)")
            #expect(access(socket, F_OK) != 0, "no socket left")
        }
    }

    /// The unit `make install` installs is one systemd accepts, and `make install` stages it,
    /// the D-Bus policy and the user's line where DESTDIR says.
    @Test(.enabled(if: access("/usr/bin/systemd-analyze", X_OK) == 0, "needs systemd-analyze"))
    func theSystemdUnitIsOneSystemdAccepts() throws {
        let directory = try TestEnvironment.processScratchDirectory("roam-unit")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let unit = try String(contentsOfFile: NetemHost.root + "/systemd/roam.service", encoding: .utf8)
        #expect(unit.contains("Type=notify") && unit.contains("ExecStart=/usr/local/bin/roam daemon --socket /run/roam/path.sock"))
        // systemd-analyze verify wants the command to exist: the built roam's place.
        let staged = directory + "/roam.service"
        try unit.replacingOccurrences(of: "/usr/local/bin/roam", with: roam).write(toFile: staged, atomically: true, encoding: .utf8)
        let verified = try RunningCommand.run("/usr/bin/systemd-analyze", ["verify", staged], timeout: 60)
        #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        #expect(!verified.error.contains("roam.service:"), "no warning about the unit: \(verified.error)")
        let security = try RunningCommand.run("/usr/bin/systemd-analyze", ["security", "--offline=yes", staged], timeout: 60)
        let score = security.output.split(separator: "\n").last { $0.contains("Overall exposure level") }
        print("systemd-analyze security: \(score ?? "?")")
        #expect(score != nil, "\(security.output)\(security.error)")

        // make install, staged: the binary, the unit pointing at it, the page, the D-Bus policy
        // (which DaemonBusTests' bus loads) and the user's sysusers.d line; no user made. The
        // built roam is given (BINARY): `swift test` holds the build directory, and a `swift
        // build` inside it would wait for it to the end.
        let stage = directory + "/stage"
        let installed = try RunningCommand.run("/usr/bin/make", ["-C", NetemHost.root, "--no-print-directory", "install", "DESTDIR=\(stage)",
                                                                 "PREFIX=/opt/roam", "BINARY=\(roam)"], timeout: 120)
        #expect(installed.status == 0, "\(installed.output)\(installed.error)")
        for file in ["bin/roam", "lib/systemd/system/roam.service", "share/doc/roam/daemon.md",
                     "share/dbus-1/system.d/org.roam.PathMonitor1.conf", "lib/sysusers.d/roam.conf"] {
            #expect(access("\(stage)/opt/roam/\(file)", F_OK) == 0, "\(file) staged: \(installed.output)")
        }
        let stagedUnit = (try? String(contentsOfFile: stage + "/opt/roam/lib/systemd/system/roam.service", encoding: .utf8)) ?? ""
        #expect(stagedUnit.contains("ExecStart=/opt/roam/bin/roam daemon --socket /run/roam/path.sock --dbus system --state-directory /var/lib/roam") && stagedUnit.contains("User=roam"), "\(stagedUnit)")
        #expect(installed.output.contains("staged into \(stage)"), "no user is made when staging: \(installed.output)")
    }
}
