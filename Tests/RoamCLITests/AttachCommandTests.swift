import Foundation
import Glibc
import Netlink
import Simulator
import Testing
import TestSupport

/// `roam attach` where it must refuse, on the host: bad flags, files that are not network
/// namespaces, the host's own namespace, interfaces that are missing or shaped by someone else,
/// scenarios it cannot play, a kernel without netem. Each exits 2 with what to do, and leaves
/// the namespaces exactly as they were. (Playing on netem: NetemBackendTests, in the VM.)
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil && TestEnvironment.isRoot, "needs root and the built roam"), .serialized)
struct AttachCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    let walk = NetemHost.root + "/scenarios/walk-out-of-home.yaml"

    /// Two namespaces made as a container runtime makes them (`ip`), with veth pairs `wifi` and
    /// `cell` between them, addressed.
    final class Pods {
        let phone: TestNamespace, server: TestNamespace
        init() throws {
            phone = try TestNamespace()
            server = try TestNamespace()
            for (subnet, link) in ["wifi", "cell"].enumerated() {
                try Self.ip(["link", "add", link, "netns", phone.name, "type", "veth", "peer", "name", link, "netns", server.name])
                try Self.ip(["-n", phone.name, "addr", "add", "198.18.\(20 + subnet).1/24", "dev", link])
                try Self.ip(["-n", phone.name, "link", "set", link, "up"])
                try Self.ip(["-n", server.name, "link", "set", link, "up"])
            }
            // The kernel's link watch turns a veth's carrier on after both ends are up, on its
            // own time: what the tests compare starts once it has.
            let deadline = Date() + 10
            while try [phone, server].contains(where: { try $0.socket.links().contains { $0.kind == "veth" && !$0.isRunning } }) {
                try #require(Date() < deadline, "the veth pairs' carrier did not come up")
                usleep(10_000)
            }
        }

        static func ip(_ arguments: [String]) throws {
            let result = try RunningCommand.run("/usr/sbin/ip", arguments)
            try #require(result.status == 0, "ip \(arguments.joined(separator: " ")): \(result.error)")
        }

        /// What `ip` and `tc` show in both: links, addresses, routes, qdiscs (without IPv6's
        /// link-local addresses and routes, which the kernel adds on its own time after a link is up).
        func state() throws -> String {
            var text = ""
            for namespace in [phone.name, server.name] {
                for command in [["-n", namespace, "-br", "link"], ["-n", namespace, "-br", "addr", "show", "scope", "global"],
                                ["-n", namespace, "route", "show", "table", "all"]] {
                    text += try RunningCommand.run("/usr/sbin/ip", command).output.split(separator: "\n")
                        .filter { !$0.contains("fe80:") && !$0.contains("ff00::") }.joined(separator: "\n") + "\n"
                }
                text += try RunningCommand.run("/usr/sbin/ip", ["netns", "exec", namespace, "tc", "qdisc", "show"]).output + "\n"
            }
            return text
        }
    }

    func attach(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try RunningCommand.run(roam, ["attach"] + arguments, timeout: 60)
    }

    @Test func flagsAreChecked() throws {
        for (arguments, message) in [
            ([walk], "name at least one node's namespace: --netns NODE=PATH, --pid NODE=PID or --node NODE"),
            ([walk, "--netns", "phone"], "--netns phone: expected NODE=PATH"),
            ([walk, "--netns", "=x"], "--netns =x: expected NODE=PATH"),
            ([walk, "--pid", "phone=abc"], "--pid phone=abc: abc is not a process id"),
            ([walk, "--pid", "phone=-4"], "--pid phone=-4: -4 is not a process id"),
            ([walk, "--netns", "phone=a", "--pid", "phone=1"], "node 'phone' is attached twice"),
            ([walk, "--node", "phone", "--device", "wifi=a/b"], "'a/b' is not an interface name"),
            ([walk, "--node", "phone", "--device", "wifi=0123456789abcdef"], "is not an interface name (1 to 15 bytes"),
            ([walk, "--node", "phone", "--device", "wifi=a", "--device", "wifi=b"], "--device wifi is given twice"),
            ([walk, "--node", "phone", "--time-scale", "2"], "--time-scale 2.0 is not in (0, 1]"),
            ([walk, "--node", "phone", "--start-at", "-5"], "--start-at -5.0 is not a time"),
            ([walk, "--node", "phone", "--start-at", "nan"], "is not a time"),
        ] {
            let result = try attach(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.error.contains(message), "\(arguments): \(result.error)")
        }
    }

    @Test func onlyANetworkNamespaceThatIsNotTheHostsIsAttached() throws {
        let pods = try Pods()
        let link = FileManager.default.temporaryDirectory.appendingPathComponent("roam-attach-link-\(getpid())").path
        unlink(link)
        #expect(symlink("/run/netns/" + pods.phone.name, link) == 0)
        defer { unlink(link) }
        for (arguments, message) in [
            (["--netns", "phone=/etc/hostname"], "--netns phone=/etc/hostname is not a namespace file"),
            (["--netns", "phone=/proc/self/ns/user"], "is a symbolic link, which roam attach does not follow"),
            (["--netns", "phone=\(link)"], "is a symbolic link, which roam attach does not follow: give the namespace file itself, or --pid phone=PID"),
            (["--netns", "phone=no-such-namespace-\(getpid())"], "no such file (`ip netns list` shows the named namespaces"),
            (["--pid", "phone=\(Int32.max)"], "--pid phone=\(Int32.max): no process \(Int32.max)"),
            (["--netns", "laptop=\(pods.phone.name)"], "node 'laptop' is not in the scenario (its nodes: phone, server)"),
        ] {
            let result = try attach([walk] + arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.error.contains(message), "\(arguments): \(result.error)")
        }
        // The test runs in the host's namespace: by itself, by a process in it, by PID 1's file.
        let host = HostNetworkState.self
        let before = try host.capture()
        for arguments in [["--node", "phone"], ["--pid", "phone=\(getpid())"]] {
            let result = try attach([walk] + arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.error.contains("is the host's network namespace, which roam attach never changes")
                    || result.error.contains("cannot tell whether it is the host's network namespace"), "\(arguments): \(result.error)")
        }
        #expect(try host.capture() == before)
    }

    @Test func aScenarioWithNetworksIsRunsNotAttachs() throws {
        let pods = try Pods()
        let result = try attach([NetemHost.root + "/scenarios/coffee-shop-to-lte.yaml", "--netns", "phone=\(pods.phone.name)"])
        #expect(result.status == 2)
        #expect(result.error.contains("scenario cannot be attached: the scenario has networks"))
        #expect(result.error.contains("roam attach plays links on interfaces that exist"))

        // A time zero the whole scenario has passed, or more than a day ahead, is refused before anything is set.
        let now = Int(Date().timeIntervalSince1970)
        for (startAt, message) in [("1", "nothing is left to play"), ("\(now - 60)", "ago, and the scenario lasts 40s: nothing is left to play"),
                                   ("\(now + 2 * 86_400)", "is more than a day ahead")] {
            let result = try attach([walk, "--netns", "phone=\(pods.phone.name)", "--start-at", startAt])
            #expect(result.status == 2)
            #expect(result.error.contains("--start-at") && result.error.contains(message), "\(result.error)")
        }
    }

    @Test func aMissingInterfaceOrAnotherRootQdiscIsRefusedAndNothingChanges() throws {
        let pods = try Pods()
        try Pods.ip(["link", "add", "eth9", "netns", pods.phone.name, "type", "veth", "peer", "name", "eth9p", "netns", pods.server.name])
        let missing = try attach([walk, "--netns", "phone=\(pods.phone.name)", "--device", "phone/cell=wlan0"])
        #expect(missing.status == 2)
        #expect(missing.error.contains("link 'cell' in node 'phone' (\(pods.phone.name)): no interface named 'wlan0' there (it has cell, eth9, wifi)"),
                "\(missing.error)")

        // Someone else's root qdisc (a tbf a runtime or a user set) is theirs: refused, kept.
        let tbf = try RunningCommand.run("/usr/sbin/ip", ["netns", "exec", pods.server.name, "tc", "qdisc", "add", "dev", "wifi", "root", "handle", "5:",
                                                          "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms"])
        try #require(tbf.status == 0, "\(tbf.error)")
        let before = try pods.state()
        let shaped = try attach([walk, "--netns", "phone=\(pods.phone.name)", "--netns", "server=/run/netns/\(pods.server.name)"])
        #expect(shaped.status == 2)
        #expect(shaped.error.contains("link 'wifi' in node 'server' (/run/netns/\(pods.server.name)): wifi already has a root qdisc (tbf 5:)"),
                "\(shaped.error)")
        #expect(shaped.error.contains("tc qdisc del dev wifi root"))
        let after = try pods.state()
        #expect(after == before, "before:\n\(before)\nafter:\n\(after)")
    }

    /// As a pod's sidecar: inside the node's namespace and a PID namespace of its own (a
    /// container's), uid 0 with only CAP_NET_ADMIN (no
    /// CAP_SYS_ADMIN to enter a namespace, none to make one): `--node` needs nothing more, and
    /// goes as far as the kernel's qdiscs; `--netns` needs to enter one and says so.
    @Test func aSidecarWithOnlyNetAdminAttachesItsOwnNamespace() throws {
        let pods = try Pods()
        let before = try pods.state()
        func sidecar(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
            try RunningCommand.run("/usr/sbin/ip", ["netns", "exec", pods.phone.name, "unshare", "--pid", "--fork", "--mount-proc", "setpriv", "--bounding-set=-all,+net_admin", "--inh-caps=-all", "--",
                                                    roam, "attach", walk, "--time-scale", "0.1", "--quiet", "--report", "/dev/null/none"] + arguments, timeout: 60)
        }
        let own = try sidecar(["--node", "phone"])
        #expect(own.status == 2)
        if NetemBackend.probe() == .available {
            #expect(own.error.contains("/dev/null/none"), "with netem, only the report's place is left to refuse: \(own.error)")
        } else {
            #expect(own.error.contains("the kernel has no sch_netem"), "\(own.error)")
        }
        #expect(!own.error.contains("not permitted") && !own.error.contains("permission denied"), "\(own.error)")
        let other = try sidecar(["--netns", "server=\(pods.server.name)"])
        #expect(other.status == 2)
        #expect(other.error.contains("requires root (CAP_SYS_ADMIN)"), "\(other.error)")
        #expect(try pods.state() == before)
    }

    /// On this kernel: without sch_netem, refused with what to do and nothing changed; with it
    /// (a VM), played, and every interface back as it was.
    @Test func withoutNetemNothingIsTouchedAndWithItTheInterfacesComeBack() throws {
        let pods = try Pods()
        let before = try pods.state()
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("roam-attach-report-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: report) }
        let result = try attach([walk, "--netns", "phone=\(pods.phone.name)", "--netns", "server=\(pods.server.name)", "--time-scale", "0.1",
                                 "--quiet", "--report", report])
        if NetemBackend.probe() == .available {
            #expect(result.status == 0, "\(result.error)")
            #expect(result.output.contains("walk-out-of-home"))
            #expect(FileManager.default.fileExists(atPath: report + "/summary.json"))
        } else {
            #expect(result.status == 2)
            #expect(result.error.contains("the kernel has no sch_netem or sch_tbf") && result.error.contains("roam attach plays links with the kernel's netem"),
                    "\(result.error)")
            #expect(!FileManager.default.fileExists(atPath: report), "no report for an attach that never started")
        }
        let after = try pods.state()
        #expect(after == before, "before:\n\(before)\nafter:\n\(after)")
    }
}
