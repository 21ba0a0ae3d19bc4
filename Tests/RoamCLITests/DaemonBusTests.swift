import Foundation
import Glibc
import Testing
import TestSupport

/// A private bus with the system bus's policy (Debian's default context) and Roam's installed
/// policy file (systemd/org.roam.PathMonitor1.conf), on a socket in a scratch directory.
final class PrivateSystemBus {
    let directory: String
    let address: String
    private let daemon: RunningCommand

    /// `extraPolicy`: XML put before Roam's policy (a test's own mocks' names).
    init(directory: String, extraPolicy: String = "") throws {
        self.directory = directory
        let socket = directory + "/system_bus_socket"
        address = "unix:path=" + socket
        let configuration = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <deny own="*"/>
                <deny send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_requested_reply="true" send_type="method_return"/>
                <allow send_requested_reply="true" send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow receive_type="signal"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
              </policy>
              \(extraPolicy)
              <include>\(NetemHost.root)/systemd/org.roam.PathMonitor1.conf</include>
            </busconfig>
            """
        try configuration.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        daemon = try RunningCommand("/usr/bin/dbus-daemon", ["--config-file=" + directory + "/bus.conf", "--nofork", "--print-address=1"])
        guard daemon.lines.wait(timeout: 20, until: { !$0.isEmpty }) != nil else {
            throw POSIXError(.ECONNREFUSED)
        }
        chmod(socket, 0o666)
    }

    // SIGKILL: started from the test process, dbus-daemon (and busctl monitor, and Python) did
    // not end on SIGTERM: each stop waited out its 60 s.
    deinit {
        _ = daemon.stop(with: SIGKILL)
    }

    /// Ends the bus at once, as a crashed or restarted dbus-daemon would.
    func kill() {
        _ = daemon.stop(with: SIGKILL)
    }

    /// `busctl --address=… ARGUMENTS`, as `user` when given.
    func busctl(_ arguments: [String], as user: uid_t? = nil) throws -> (status: Int32, output: String, error: String) {
        let command = ["/usr/bin/busctl", "--address=" + address] + arguments
        if let user {
            return try RunningCommand.run("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--clear-groups"] + command)
        }
        return try RunningCommand.run(command[0], Array(command.dropFirst()))
    }
}

/// `roam daemon --dbus`: the path as org.roam.PathMonitor1 on a private system bus with the
/// installed policy, read by busctl (root and another user), the C example on sd-bus, the
/// Python example on dbus-next and `roam monitor --daemon`, all seeing each change; the name
/// and Revalidate kept from other users; NetworkManager's Metered followed.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/bin/dbus-daemon", X_OK) == 0
                && access("/usr/bin/busctl", X_OK) == 0 && access("/usr/bin/setpriv", X_OK) == 0,
                "needs root, the built roam, dbus-daemon, busctl and setpriv (scripts/setup.sh --dbus)"), .serialized)
struct DaemonBusTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    func sharedDirectory() throws -> String {
        let directory = try TestEnvironment.processScratchDirectory("roam-bus")
        chmod(directory, 0o755)
        return directory
    }

    func startDaemon(_ namespace: String, bus: PrivateSystemBus, _ arguments: [String], notify: NotifySocket,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> RunningCommand {
        let daemon = try RunningCommand("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)",
                                                         roam, "daemon", "--netns", namespace, "--dbus", "system"] + arguments)
        let ready = notify.receive()
        #expect(ready?.contains("READY=1") == true && ready?.contains("org.roam.PathMonitor1 on the system bus") == true,
                "READY=1 within 30 s: \(ready ?? "") \(daemon.errors.values)", sourceLocation: sourceLocation)
        return daemon
    }

    static func json(_ text: some StringProtocol) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    /// Seconds since the epoch of the daemon's RFC 3339 `time` (UTC, microseconds).
    static func epochSeconds(_ time: String) -> Double? {
        // 2026-12-05T10:12:01.204512Z
        let fields = time.split(whereSeparator: { "-T:Z".contains($0) })
        guard time.hasSuffix("Z"), fields.count == 6, let year = Int32(fields[0]), let month = Int32(fields[1]), let day = Int32(fields[2]),
              let hour = Int32(fields[3]), let minute = Int32(fields[4]), let seconds = Double(fields[5]) else { return nil }
        var moment = tm()
        moment.tm_year = year - 1900
        moment.tm_mon = month - 1
        moment.tm_mday = day
        moment.tm_hour = hour
        moment.tm_min = minute
        return Double(timegm(&moment)) + seconds
    }

    @Test func servesThePathOnTheBusToEveryReaderAndEachChangeWithinMilliseconds() async throws {
        let pkgConfig = try RunningCommand.run("/usr/bin/pkg-config", ["--cflags", "--libs", "libsystemd"])
        try #require(pkgConfig.status == 0 && access("/usr/bin/cc", X_OK) == 0, "the C example needs cc and libsystemd-dev (scripts/setup.sh --dbus)")
        let dbusNext = try RunningCommand.run("/usr/bin/python3", ["-c", "import dbus_next"])
        try #require(dbusNext.status == 0, "the Python example needs python3-dbus-next (scripts/setup.sh --dbus): \(dbusNext.error)")
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let bus = try PrivateSystemBus(directory: directory)
            let notify = try NotifySocket(path: directory + "/notify")
            let socket = directory + "/path.sock"
            let daemon = try startDaemon(test.name, bus: bus, ["--socket", socket], notify: notify)

            // Root and another user read the same properties.
            let service = ["org.roam.PathMonitor1", "/org/roam/PathMonitor1", "org.roam.PathMonitor1"]
            #expect(try bus.busctl(["get-property"] + service + ["PrimaryInterface"]).output == "s \"wl0\"")
            let asNobody = try bus.busctl(["get-property"] + service + ["PrimaryInterface", "IsExpensive", "Status"], as: 65534)
            #expect(asNobody.output == "s \"wl0\"\nb false\ns \"satisfied\"", "\(asNobody)")
            // Each interface is an object of its own, in the path's order.
            let interfaces = try bus.busctl(["get-property"] + service + ["Interfaces"]).output
            let objects = interfaces.split(separator: " ").dropFirst(2).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            #expect(objects.count == 3 && objects.allSatisfy { $0.hasPrefix("/org/roam/PathMonitor1/Interface/") }, "wl0, ce0, lo: \(interfaces)")
            for (object, expected) in zip(objects, ["s \"wl0\"\ns \"wifi\"\nb false", "s \"ce0\"\ns \"cellular\"\nb true", "s \"lo\"\ns \"loopback\"\nb false"]) {
                let properties = try bus.busctl(["get-property", "org.roam.PathMonitor1", object, "org.roam.PathMonitor1.Interface", "Name", "Type", "IsExpensive"])
                #expect(properties.output == expected, "\(object): \(properties)")
            }
            let unknown = try bus.busctl(["get-property", "org.roam.PathMonitor1", "/org/roam/PathMonitor1/Interface/999", "org.roam.PathMonitor1.Interface", "Name"])
            #expect(unknown.status != 0 && unknown.error.contains("no object"), "\(unknown)")
            let introspection = try bus.busctl(["introspect", "org.roam.PathMonitor1", "/org/roam/PathMonitor1"]).output
            for member in [".PathChanged", ".Revalidate", ".Sequence", ".Path ", ".Interfaces", "emits-change"] {
                #expect(introspection.contains(member), "\(member) in \(introspection)")
            }
            // The JSON property is GET /v1/path's object.
            let pathProperty = try bus.busctl(["--json=short", "get-property"] + service + ["Path"]).output
            let fromBus = (Self.json(pathProperty)?["data"] as? String).flatMap { Self.json($0) }
            #expect(fromBus?["sequence"] as? Int == 0 && fromBus?["primaryInterface"] as? String == "wl0", "\(pathProperty)")
            // Changes: the daemon's user and root only, and only with --validate.
            // (dbus-next, which shows the error's message; busctl says only "Access denied".)
            let call = """
                import asyncio, sys
                from dbus_next import Message
                from dbus_next.aio import MessageBus
                async def main():
                    bus = await MessageBus(bus_address=sys.argv[1]).connect()
                    reply = await bus.call(Message(destination="org.roam.PathMonitor1", path="/org/roam/PathMonitor1",
                                                   interface="org.roam.PathMonitor1", member="Revalidate", signature="s", body=[sys.argv[2]]))
                    print(reply.error_name, reply.body)
                asyncio.run(main())
                """
            let denied = try RunningCommand.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", call, bus.address, ""])
            #expect(denied.output.hasPrefix("org.freedesktop.DBus.Error.AccessDenied") && denied.output.contains("only the daemon's user and root"), "\(denied)")
            let unvalidated = try RunningCommand.run("/usr/bin/python3", ["-c", call, bus.address, "wl0"])
            #expect(unvalidated.output.hasPrefix("org.roam.PathMonitor1.Error.NotValidating") && unvalidated.output.contains("validates nothing"), "\(unvalidated)")
            let readOnly = try bus.busctl(["set-property"] + service + ["Status", "s", "unsatisfied"])
            #expect(readOnly.status != 0, "\(readOnly)")

            // Four readers: busctl monitor, the C example, the Python example, roam monitor --daemon.
            let binary = directory + "/roam-path"
            let source = NetemHost.root + "/Examples/PathBus/roam-path.c"
            let compiled = try RunningCommand.run("/bin/sh", ["-c", "cc -Wall -Werror -o '\(binary)' '\(source)' $(pkg-config --cflags --libs libsystemd)"], timeout: 120)
            try #require(compiled.status == 0, "\(compiled.error)")
            let environment = ["/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)"]
            let monitor = try RunningCommand("/usr/bin/stdbuf", ["-oL", "/usr/bin/busctl", "--address=" + bus.address, "monitor", "--json=short",
                                                                 "--match", "type='signal',interface='org.roam.PathMonitor1',member='PathChanged'"])
            let c = try RunningCommand(environment[0], Array(environment.dropFirst()) + [binary])
            let python = try RunningCommand(environment[0], Array(environment.dropFirst()) + ["/usr/bin/python3", "-u", NetemHost.root + "/Examples/PathBus/roam_path.py"])
            let roamMonitor = try RunningCommand(roam, ["monitor", "--daemon", "--socket", socket, "--json"])
            defer {
                for reader in [monitor, c, python, roamMonitor] { _ = reader.stop(with: SIGKILL) }
            }
            // Each has read the current path (busctl monitor: it says it is monitoring).
            #expect(c.lines.wait(timeout: 20, until: { $0.contains { $0.hasPrefix("current 0 ") } }) != nil, "\(c.errors.values)")
            #expect(python.lines.wait(timeout: 20, until: { $0.contains { $0.hasPrefix("current 0 ") } }) != nil, "\(python.errors.values)")
            #expect(roamMonitor.lines.wait(timeout: 20, until: { !$0.isEmpty }) != nil, "\(roamMonitor.errors.values)")
            #expect(monitor.errors.wait(timeout: 20, until: { $0.contains { $0.contains("Monitoring") } }) != nil || monitor.lines.values.isEmpty,
                    "\(monitor.errors.values)")

            // Six changes: Wi-Fi down, up, down, …
            var sequence = 0
            for change in 1...6 {
                try test.socket.setLink(index: wifiPeer, up: change % 2 == 0)
                sequence = change
                let primary = change % 2 == 0 ? "wl0" : "ce0"
                let seen = c.lines.wait(timeout: 20) { $0.contains { $0.hasPrefix("path \(change) ") } }
                #expect(seen?.last?.split(separator: " ").dropFirst(4).first.map(String.init) == primary, "\(c.lines.values)")
            }
            // Every reader saw every change; how long after the daemon's own update (its `time`).
            func latencies(_ name: String, _ reader: RunningCommand, _ parse: (String) -> (sequence: Int, time: String, received: Double?)?) -> [Double] {
                let lines = reader.lines.wait(timeout: 20) { lines in Set(lines.compactMap { parse($0)?.sequence }).isSuperset(of: 1...sequence) } ?? reader.lines.values
                let arrivals = reader.arrivals.values
                var result: [Double] = []
                for (index, line) in lines.enumerated() {
                    guard let parsed = parse(line), parsed.sequence >= 1, let updated = Self.epochSeconds(parsed.time) else { continue }
                    let received = parsed.received ?? (index < arrivals.count ? arrivals[index] : .nan)
                    result.append(received - updated)
                }
                #expect(result.count == sequence, "\(name) saw each of the \(sequence) changes once: \(lines.suffix(8)) \(reader.errors.values.suffix(5))")
                return result
            }
            func fromExample(_ line: String) -> (sequence: Int, time: String, received: Double?)? {
                let words = line.split(separator: " ", maxSplits: 6)
                guard words.count == 7, words[0] == "path", let sequence = Int(words[1]), let received = Double(words[2]),
                      let time = Self.json(words[6])?["time"] as? String else { return nil }
                return (sequence, time, received)
            }
            let readers: [(String, [Double])] = [
                ("busctl monitor", latencies("busctl monitor", monitor) { line in
                    guard let message = Self.json(line), let payload = message["payload"] as? [String: Any], let data = payload["data"] as? [Any],
                          data.count == 2, let sequence = data[0] as? Int, let path = data[1] as? String,
                          let time = Self.json(path)?["time"] as? String else { return nil }
                    return (sequence, time, nil)
                }),
                ("C (sd-bus)", latencies("C (sd-bus)", c, fromExample)),
                ("Python (dbus-next)", latencies("Python (dbus-next)", python, fromExample)),
                ("roam monitor --daemon", latencies("roam monitor --daemon", roamMonitor) { line in
                    guard let path = Self.json(line), let sequence = path["sequence"] as? Int, let time = path["time"] as? String else { return nil }
                    return (sequence, time, nil)
                }),
            ]
            for (name, values) in readers {
                let sorted = values.sorted()
                print("daemon → \(name): \(values.count) changes, median \(String(format: "%.2f", (sorted.isEmpty ? .nan : sorted[sorted.count / 2]) * 1000)) ms, max \(String(format: "%.2f", (sorted.last ?? .nan) * 1000)) ms")
                #expect(values.allSatisfy { $0 >= -0.001 }, "\(name) cannot see a path before the daemon made it: \(values)")
            }
            #expect(daemon.stop(with: SIGTERM) == 0, "\(daemon.errors.values)")
            // The name went with the daemon.
            let gone = try bus.busctl(["status", "org.roam.PathMonitor1"])
            #expect(gone.status != 0, "\(gone)")
        }
    }

    /// No other user can take the name (the policy), and a daemon that cannot own it says why,
    /// exits 2 and leaves no socket behind; nor can another user run a second daemon as root's.
    @Test func anotherUserCannotTakeTheName() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let bus = try PrivateSystemBus(directory: directory)
            let own = directory + "/nobody"
            mkdir(own, 0o700)
            chown(own, 65534, 65534)
            let squatter = try RunningCommand.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/env",
                                                                      "DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", roam, "daemon", "--dbus", "system",
                                                                      "--socket", own + "/path.sock"])
            #expect(squatter.status == 2, "\(squatter)")
            #expect(squatter.error.contains("cannot own org.roam.PathMonitor1 on the system bus: the bus's policy does not let this user own it"), "\(squatter.error)")
            #expect(access(own + "/path.sock", F_OK) != 0, "its socket is removed")
            // A second daemon while one runs: refused (its socket first, then the name).
            let notify = try NotifySocket(path: directory + "/notify")
            let first = try startDaemon(test.name, bus: bus, ["--socket", directory + "/first.sock"], notify: notify)
            let second = try RunningCommand.run("/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", roam, "daemon", "--netns", test.name,
                                                                 "--dbus", "system", "--socket", directory + "/second.sock"])
            #expect(second.status == 2 && second.error.contains("another connection owns it"), "\(second)")
            #expect(access(directory + "/second.sock", F_OK) != 0)
            #expect(first.stop(with: SIGTERM) == 0)
            // --private and --dbus do not go together; a bus that is not there is said.
            let both = try RunningCommand.run(roam, ["daemon", "--dbus", "system", "--private"])
            #expect(both.status == 2 && both.error.contains("--private cannot go with --dbus"), "\(both)")
            let nowhere = try RunningCommand.run("/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(directory)/none", roam, "daemon", "--netns", test.name,
                                                                  "--dbus", "system", "--socket", directory + "/third.sock"])
            #expect(nowhere.status == 2 && nowhere.error.contains("cannot connect to the system bus (DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(directory)/none)"), "\(nowhere)")
        }
    }

    /// `--dbus session`: a user's daemon on the user's session bus (dbus-daemon's own session
    /// configuration, where any connection may own a name): the same object, and a change of
    /// the path reaches the property.
    @Test func servesThePathOnASessionBus() async throws {
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let address = "unix:path=" + directory + "/session_bus_socket"
            let session = try RunningCommand("/usr/bin/dbus-daemon", ["--session", "--nofork", "--print-address=1", "--address=" + address])
            defer { _ = session.stop(with: SIGKILL) }
            try #require(session.lines.wait(timeout: 20, until: { !$0.isEmpty }) != nil, "the session bus starts: \(session.errors.values)")
            let notify = try NotifySocket(path: directory + "/notify")
            let daemon = try RunningCommand("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", "DBUS_SESSION_BUS_ADDRESS=\(address)",
                                                             roam, "daemon", "--netns", test.name, "--dbus", "session", "--socket", directory + "/path.sock"])
            let ready = notify.receive()
            #expect(ready?.contains("READY=1") == true && ready?.contains("org.roam.PathMonitor1 on the session bus") == true,
                    "\(ready ?? "") \(daemon.errors.values)")
            func property(_ name: String) throws -> String {
                try RunningCommand.run("/usr/bin/busctl", ["--address=" + address, "get-property", "org.roam.PathMonitor1", "/org/roam/PathMonitor1",
                                                           "org.roam.PathMonitor1", name]).output
            }
            #expect(try property("PrimaryInterface") == "s \"wl0\"")
            // The Wi-Fi's peer goes: its carrier with it, and the cellular link is the primary.
            try test.socket.setLink(index: wifiPeer, up: false)
            let deadline = Date().addingTimeInterval(10)
            while try property("PrimaryInterface") != "s \"ce0\"", Date() < deadline { usleep(20_000) }
            #expect(try property("PrimaryInterface") == "s \"ce0\"" && property("Status") == "s \"satisfied\"")
            #expect(daemon.stop(with: SIGTERM) == 0, "\(daemon.errors.values)")
        }
    }

    /// A bus that takes the connection and never answers (a wedged bus daemon: here a socket
    /// that is listened on and never accepted) does not hold the daemon: SIGTERM still ends it,
    /// at once and cleanly, rather than after sd-bus's timeouts.
    @Test func aBusThatNeverAnswersDoesNotHoldOffSIGTERM() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(listener >= 0)
            defer { close(listener) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = directory + "/wedged-bus"
            withUnsafeMutableBytes(of: &address.sun_path) { bytes in
                for (index, byte) in path.utf8.enumerated() where index < bytes.count - 1 { bytes[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            try #require(bound == 0 && listen(listener, 4) == 0)
            let daemon = try RunningCommand("/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(path)", roam, "daemon", "--netns", test.name,
                                                             "--dbus", "system", "--socket", directory + "/path.sock"])
            // The daemon has connected (its connection waits in the backlog, unanswered).
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            try #require(poll(&entry, 1, 30_000) == 1, "the daemon connects to the bus: \(daemon.errors.values)")
            let status = daemon.stop(with: SIGTERM)
            #expect(status == 0, "\(daemon.errors.values)")
            #expect(daemon.errors.values.contains { $0.contains("stopped while the system bus had not answered") }, "\(daemon.errors.values)")
            #expect(!daemon.errors.values.contains { $0.contains("did not answer within") }, "ended by the signal, not by sd-bus's timeout: \(daemon.errors.values)")
            #expect(access(directory + "/path.sock", F_OK) != 0, "its socket removed")
        }
    }

    /// A bus that goes away ends the daemon with exit 2 (for Restart=on-failure), after its cleanup.
    @Test func aBusThatGoesAwayEndsTheDaemonForItsServiceManagerToRestart() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let bus = try PrivateSystemBus(directory: directory)
            let notify = try NotifySocket(path: directory + "/notify")
            let daemon = try startDaemon(test.name, bus: bus, ["--socket", directory + "/path.sock"], notify: notify)
            bus.kill()
            #expect(daemon.waitForExit(timeout: 20) == 2, "\(daemon.errors.values)")
            #expect(daemon.errors.values.contains { $0.contains("the system bus connection ended") }, "\(daemon.errors.values)")
            #expect(notify.receive(timeout: 5)?.contains("STOPPING=1") == true)
            #expect(access(directory + "/path.sock", F_OK) != 0, "its socket removed")
        }
    }

    /// `--network-manager`: NetworkManager's Metered (python-dbusmock's NetworkManager on the
    /// private system bus) makes the Wi-Fi expensive and the cellular one not, follows a change,
    /// and the interfaces file still wins.
    @Test func followsNetworkManagersMeteredFlag() async throws {
        let dbusmock = try RunningCommand.run("/usr/bin/python3", ["-c", "import dbusmock"])
        try #require(dbusmock.status == 0, "needs python3-dbusmock (scripts/setup.sh --dbus): \(dbusmock.error)")
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            try test.addUplink("en0", subnet: 2, metric: 300, alias: "roam:type=wired")
            let directory = try sharedDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let bus = try PrivateSystemBus(directory: directory, extraPolicy: """
                <policy user="root"><allow own="org.freedesktop.NetworkManager"/><allow send_destination="org.freedesktop.NetworkManager"/></policy>
                """)
            let networkManager = try RunningCommand("/usr/bin/env", ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", "/usr/bin/python3", "-m", "dbusmock",
                                                                     "--system", "--template", "networkmanager"])
            defer { _ = networkManager.stop(with: SIGKILL) }
            // dbusmock prints its name's owner once it serves.
            #expect(networkManager.lines.wait(timeout: 20, until: { !$0.isEmpty }) != nil, "\(networkManager.errors.values)")
            func mock(_ arguments: [String]) throws -> String {
                let result = try bus.busctl(["call", "org.freedesktop.NetworkManager"] + arguments)
                #expect(result.status == 0, "\(arguments): \(result)")
                return result.output
            }
            // A Wi-Fi device NetworkManager says is metered (a phone's hotspot), the modem it says is not.
            let wifi = try mock(["/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock", "AddWiFiDevice", "ssi", "wifi0", "wl0", "100"])
            let modem = try mock(["/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock", "AddEthernetDevice", "ssi", "modem0", "ce0", "100"])
            let wifiPath = try #require(wifi.split(separator: "\"").dropFirst().first.map(String.init), "\(wifi)")
            let modemPath = try #require(modem.split(separator: "\"").dropFirst().first.map(String.init), "\(modem)")
            for (device, metered) in [(wifiPath, "1"), (modemPath, "4")] {
                _ = try mock([device, "org.freedesktop.DBus.Mock", "AddProperty", "ssv", "org.freedesktop.NetworkManager.Device", "Metered", "u", metered])
            }
            // The interfaces file: the wired one is expensive whatever NetworkManager says.
            try "en0 expensive\n".write(toFile: directory + "/interfaces", atomically: true, encoding: .utf8)
            let notify = try NotifySocket(path: directory + "/notify")
            let socket = directory + "/path.sock"
            let daemon = try startDaemon(test.name, bus: bus, ["--socket", socket, "--network-manager", "--interfaces", directory + "/interfaces"], notify: notify)
            // What the daemon serves, as it changes.
            let reader = try RunningCommand(roam, ["monitor", "--daemon", "--socket", socket, "--json"])
            defer { _ = reader.stop(with: SIGKILL) }
            func expensive(_ line: String) -> [String: Bool] {
                let interfaces = Self.json(line)?["interfaces"] as? [[String: Any]] ?? []
                return Dictionary(interfaces.compactMap { interface in
                    (interface["name"] as? String).map { ($0, interface["isExpensive"] as? Bool ?? false) }
                }) { first, _ in first }
            }
            func waitFor(_ wanted: [String: Bool]) -> [String: Bool] {
                let lines = reader.lines.wait(timeout: 20) { $0.contains { expensive($0) == wanted } } ?? reader.lines.values
                return lines.contains { expensive($0) == wanted } ? wanted : expensive(lines.last ?? "")
            }
            let first = waitFor(["wl0": true, "ce0": false, "en0": true, "lo": false])
            #expect(first == ["wl0": true, "ce0": false, "en0": true, "lo": false], "metered Wi-Fi, unmetered modem, the file's wired: \(first) \(daemon.errors.values)")
            // The user marks the Wi-Fi unmetered: it follows.
            _ = try mock([wifiPath, "org.freedesktop.DBus.Mock", "UpdateProperties", "sa{sv}", "org.freedesktop.NetworkManager.Device", "1", "Metered", "u", "2"])
            let second = waitFor(["wl0": false, "ce0": false, "en0": true, "lo": false])
            #expect(second == ["wl0": false, "ce0": false, "en0": true, "lo": false], "\(second) \(daemon.errors.values)")
            #expect(daemon.errors.values.contains { $0.contains("NetworkManager: metered ce0=no wl0=no") }, "\(daemon.errors.values)")
            #expect(daemon.stop(with: SIGTERM) == 0)
        }
    }
}

/// `roam daemon --cgroup-policy`: a group with `prohibit=expensive` sends over the Wi-Fi while it
/// is there and over nothing once only the cellular link is left (its link's byte counter does
/// not move), while a program outside the group goes on over the cellular link; the Wi-Fi back,
/// the group uses it again; stopping removes every rule, route and nftables table.
@Suite(.enabled(if: TestEnvironment.isRoot && TestEnvironment.roamExecutable != nil && access("/usr/sbin/nft", X_OK) == 0,
                "needs root, the built roam and nft"), .serialized)
struct DaemonCgroupPolicyTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    /// Bytes `interface` sent, from the kernel's counters.
    static func sentBytes(_ namespace: String, _ interface: String) throws -> Int {
        let output = try RunningCommand.run("/usr/sbin/ip", ["-n", namespace, "-s", "-j", "link", "show", "dev", interface]).output
        let links = (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [[String: Any]]
        let stats = links?.first?["stats64"] as? [String: Any]
        return (stats?["tx"] as? [String: Any])?["bytes"] as? Int ?? -1
    }

    @Test func aGroupThatMayNotUseExpensiveLinksSendsNothingOverCellular() async throws {
        let root = try #require(Self.cgroup2Root(), "a cgroup2 hierarchy")
        try await TestNamespace.with { test in
            let (_, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            // The gateways answer no ARP here: permanent neighbours let the packets leave.
            for (gateway, device) in [("198.18.0.1", "wl0"), ("198.18.1.1", "ce0")] {
                let added = try RunningCommand.run("/usr/sbin/ip", ["-n", test.name, "neigh", "replace", gateway, "lladdr", "02:00:00:00:00:01", "dev", device, "nud", "permanent"])
                #expect(added.status == 0, "\(added.error)")
            }
            // As a phone's stack would: a route through a link without carrier is not used
            // (Linux's default keeps using it; the path already leaves it out).
            let sysctl = try RunningCommand.run("/usr/sbin/ip", ["netns", "exec", test.name, "/usr/sbin/sysctl", "-qw", "net.ipv4.conf.all.ignore_routes_with_linkdown=1"])
            #expect(sysctl.status == 0, "\(sysctl.error)")
            let group = "roam-test-\(getpid())-backup"
            let groupPath = root + "/" + group
            #expect(mkdir(groupPath, 0o755) == 0, "mkdir \(groupPath): \(String(cString: strerror(errno)))")
            defer { rmdir(groupPath) }
            let directory = try TestEnvironment.processScratchDirectory("roam-cgroup")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try "# the backup job: never over a metered link\n\(group) prohibit=expensive\n".write(toFile: directory + "/policy", atomically: true, encoding: .utf8)
            let notify = try NotifySocket(path: directory + "/notify")
            let daemon = try RunningCommand("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", roam, "daemon", "--netns", test.name,
                                                             "--socket", directory + "/path.sock", "--cgroup-policy", directory + "/policy"])
            func policyTable() throws -> String {
                try RunningCommand.run("/usr/bin/nsenter", ["--net=/run/netns/\(test.name)", "/usr/sbin/nft", "list", "table", "inet", "roam-cgroup-policy"]).output
            }
            #expect(notify.receive()?.contains("READY=1") == true, "\(daemon.errors.values)")
            // Ready means in force: the group's mark is set by the time READY=1 is said (a unit
            // ordered after the daemon starts marked), not after a slow first nft.
            #expect(try policyTable().contains("meta mark set"), "at READY=1: \(daemon.errors.values)")
            #expect(daemon.errors.wait(timeout: 20, until: { $0.contains { $0.contains("nftables: 1 of 1 group(s) present") } }) != nil, "\(daemon.errors.values)")

            // 500 datagrams of 1,000 bytes to an address beyond either gateway, from inside the
            // group or not: how many the kernel took.
            let sender = """
                import socket, sys
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sent = failed = 0
                for _ in range(500):
                    try:
                        s.sendto(b"x" * 1000, ("198.19.0.1", 9)); sent += 1
                    except OSError:
                        failed += 1
                print(sent, failed)
                """
            func send(inGroup: Bool) throws -> (sent: Int, failed: Int) {
                let join = inGroup ? "echo $$ > '\(groupPath)/cgroup.procs' && " : ""
                let result = try RunningCommand.run("/bin/sh", ["-c", "\(join)exec /usr/bin/nsenter --net=/run/netns/\(test.name) /usr/bin/python3 -c \"$0\"", sender])
                let numbers = result.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                #expect(result.status == 0 && numbers.count == 2, "\(result)")
                return numbers.count == 2 ? (numbers[0], numbers[1]) : (0, 0)
            }
            func moved(_ body: () throws -> Void) throws -> (wifi: Int, cellular: Int) {
                let before = (try Self.sentBytes(test.name, "wl0"), try Self.sentBytes(test.name, "ce0"))
                try body()
                return (try Self.sentBytes(test.name, "wl0") - before.0, try Self.sentBytes(test.name, "ce0") - before.1)
            }

            // The Wi-Fi there: the group's traffic goes over it.
            let home = try moved {
                let result = try send(inGroup: true)
                #expect(result.sent == 500, "\(result)")
            }
            #expect(home.wifi >= 500_000 && home.cellular < 5_000, "\(home)")

            // Only the cellular link: the group sends nothing over it; another program does.
            try test.socket.setLink(index: wifiPeer, up: false)
            #expect(daemon.errors.wait(timeout: 20, until: { $0.contains { $0.contains("\(group): no interface") } }) != nil, "\(daemon.errors.values)")
            var refused = (sent: 0, failed: 0)
            let away = try moved { refused = try send(inGroup: true) }
            #expect(away.cellular < 5_000 && away.wifi < 5_000, "the group moved nothing: \(away), \(refused)")
            let other = try moved {
                let result = try send(inGroup: false)
                #expect(result.sent == 500, "\(result)")
            }
            #expect(other.cellular >= 500_000, "a program outside the group goes on over cellular: \(other)")
            print("cgroup policy, bytes sent over wl0/ce0: group at home \(home), group with only cellular \(away) (sendto: \(refused.sent) taken, \(refused.failed) refused), another program \(other)")

            // The Wi-Fi back: the group uses it again.
            try test.socket.setLink(index: wifiPeer, up: true)
            #expect(daemon.errors.wait(timeout: 20, until: { $0.contains { $0.contains("\(group): wl0") } }) != nil, "\(daemon.errors.values)")
            let back = try moved {
                let result = try send(inGroup: true)
                #expect(result.sent == 500, "\(result)")
            }
            #expect(back.wifi >= 500_000 && back.cellular < 5_000, "\(back)")

            // A daemon that dies leaves its table, rules and routes; the next one replaces the
            // table in its first nft transaction (one table, the group marked once) and carries
            // on from there.
            #expect(daemon.stop(with: SIGKILL) == SIGKILL)
            #expect(try policyTable().contains("meta mark set"), "left by the daemon that died")
            let notifyAgain = try NotifySocket(path: directory + "/notify-again")
            let again = try RunningCommand("/usr/bin/env", ["NOTIFY_SOCKET=\(notifyAgain.path)", roam, "daemon", "--netns", test.name,
                                                            "--socket", directory + "/path-again.sock", "--cgroup-policy", directory + "/policy"])
            #expect(notifyAgain.receive()?.contains("READY=1") == true, "\(again.errors.values)")
            let replaced = try RunningCommand.run("/usr/bin/nsenter", ["--net=/run/netns/\(test.name)", "/usr/sbin/nft", "list", "tables"]).output
            #expect(replaced.components(separatedBy: "roam-cgroup-policy").count == 2, "one table: \(replaced)")
            #expect(try policyTable().components(separatedBy: "meta mark set").count == 2, "the group marked once")
            let afterRestart = try moved {
                let result = try send(inGroup: true)
                #expect(result.sent == 500, "\(result)")
            }
            #expect(afterRestart.wifi >= 500_000 && afterRestart.cellular < 5_000, "\(afterRestart)")

            #expect(again.stop(with: SIGTERM) == 0, "\(again.errors.values)")
            let rules = try RunningCommand.run("/usr/sbin/ip", ["-n", test.name, "rule", "show"]).output
            #expect(!rules.contains("0x524f01"), "the rules are gone: \(rules)")
            let tables = try RunningCommand.run("/usr/sbin/nft", ["list", "tables"])
            let nft = try RunningCommand.run("/usr/bin/nsenter", ["--net=/run/netns/\(test.name)", "/usr/sbin/nft", "list", "tables"]).output
            #expect(!nft.contains("roam-cgroup-policy") && !tables.output.contains("roam-cgroup-policy"), "the table is gone: \(nft)")
            let routes = try RunningCommand.run("/usr/sbin/ip", ["-n", test.name, "route", "show", "table", "all"]).output
            #expect(!routes.contains("table 1380909"), "the routes are gone: \(routes)")
        }
    }

    /// scenarios/laptop-daemon.yaml: roam daemon inside a run's phone (a command workload
    /// running `$ROAM_EXECUTABLE daemon`) as the phone's path manager. What the server received,
    /// by the link it came over: the backup job's group nothing over the cellular link, the call
    /// over it while the Wi-Fi was gone; the unmodified programs under mptcpize carried on
    /// throughout on the daemon's MPTCP endpoints, the upload while the Wi-Fi passed nothing too
    /// (the daemon judged its subflow stalled and withdrew the Wi-Fi's endpoints: the sink checks
    /// what arrived then, and the daemon's log says why).
    @Test func theDaemonIsThePhonesPathManagerInARun() throws {
        let report = try TestEnvironment.processScratchDirectory("roam-laptop")
        defer { try? FileManager.default.removeItem(atPath: report) }
        let result = try RunningCommand.run(roam, ["run", NetemHost.root + "/scenarios/laptop-daemon.yaml", "--backend", "userspace",
                                                   "--report", report + "/run", "--quiet"], timeout: 120)
        let sink = NetemHost.text(report + "/run/sink.stdout"), download = NetemHost.text(report + "/run/download.stdout")
        let daemon = NetemHost.text(report + "/run/daemon.stderr")
        #expect(result.status == 0, "\(result.output)\n\(sink)\n\(download)\n\(daemon)")
        let counts = (try? JSONSerialization.jsonObject(with: Data((sink.split(separator: "\n").first ?? "").utf8))) as? [String: Int] ?? [:]
        let backupOverCellular = counts.filter { $0.key.hasPrefix("backup ") && $0.key.contains("cell") }.values.reduce(0, +)
        let callOverCellularAway = counts.filter { $0.key.hasPrefix("call ") && $0.key.contains("cell") && $0.key.hasSuffix("away") }.values.reduce(0, +)
        #expect(backupOverCellular == 0 && callOverCellularAway > 100_000, "\(counts)")
        #expect(daemon.contains("cgroup policy: roam-") && daemon.contains(": no interface") && daemon.contains("mptcp: added"), "\(daemon)")
        #expect(daemon.contains("mptcp: wifi stalled sending") && daemon.contains("wifi restored after its hold-down"), "\(daemon)")
        #expect(sink.contains("'wifi passing nothing': "), "\(sink)")
        print("laptop-daemon: \(sink.split(separator: "\n").dropFirst().first ?? ""); download: \(download.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    /// A bad policy file is refused with every line's problem and exit 2, before anything changes.
    @Test func refusesABadPolicyFile() throws {
        let directory = try TestEnvironment.processScratchDirectory("roam-cgroup")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "/abs prohibit=expensive\nok.slice prohibit=money\nok.slice\n../up require=validated\n".write(toFile: directory + "/policy", atomically: true, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["daemon", "--socket", directory + "/path.sock", "--cgroup-policy", directory + "/policy"])
        #expect(result.status == 2)
        for expected in ["policy:1: error: '/abs' is not a control group below the root", "policy:2: error: cannot prohibit 'money'",
                         "policy:3: error: nothing for 'ok.slice'", "policy:4: error: '../up' is not a control group"] {
            #expect(result.error.contains(expected), "\(expected) in \(result.error)")
        }
        #expect(access(directory + "/path.sock", F_OK) != 0)
        // A FIFO in its place is refused at once, not waited on.
        unlink(directory + "/policy")
        mkfifo(directory + "/policy", 0o600)
        let fifo = try RunningCommand.run(roam, ["daemon", "--socket", directory + "/path.sock", "--cgroup-policy", directory + "/policy"], timeout: 10)
        #expect(fifo.status == 2 && fifo.error.contains("cannot read it"), "\(fifo)")
    }

    static func cgroup2Root() -> String? {
        // cgroup2's root, and only it, has cgroup.controllers.
        ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].first { access($0 + "/cgroup.controllers", F_OK) == 0 }
    }
}
