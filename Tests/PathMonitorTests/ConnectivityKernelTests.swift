import Foundation
import Glibc
import Logging
import Netlink
import Testing
import TestSupport
@testable import PathMonitor

/// Connectivity validation against the kernel and a real HTTP server (Python's, in a namespace of
/// its own behind the phone's interface): the monitor's probes find the internet, a portal, an
/// error and nothing, and stay bounded against hostile answers (a slow drip, a huge page,
/// garbage). Root only.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct ConnectivityKernelTests {
    /// The server's behaviour, read from a file at each request: `ok` (204), `portal` (a 302
    /// to a login page), `page` (200 with a page), `error` (503), `drip` (a head that never
    /// ends, a byte at a time), `huge` (200 with 10 MB), `garbage` (not HTTP), `close` (nothing).
    static let server = #"""
        import http.server, socketserver, sys, time
        mode_file = sys.argv[1]
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/api":
                    return self.api(open(mode_file + ".api").read().strip())
                mode = open(mode_file).read().strip()
                if mode == "ok":
                    self.send_response(204); self.end_headers()
                elif mode == "portal":
                    self.send_response(302); self.send_header("Location", "http://portal.example.test/login?from=probe"); self.end_headers()
                elif mode == "page":
                    body = b"<html>Welcome to the hotel</html>"
                    self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
                elif mode == "error":
                    self.send_response(503); self.end_headers()
                elif mode == "drip":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for _ in range(600):
                        self.wfile.write(b"X"); self.wfile.flush(); time.sleep(0.05)
                elif mode == "huge":
                    self.send_response(200); self.send_header("Content-Length", str(10 << 20)); self.end_headers()
                    try:
                        self.wfile.write(b"x" * (10 << 20))
                    except OSError:
                        pass
                elif mode == "garbage":
                    self.wfile.write(b"\x00\xff garbage that is not HTTP\r\n\r\n")
                # close: no answer at all
            def api(self, mode):
                bodies = {"captive": b'{"captive": true, "user-portal-url": "http://portal.example.test/api-login"}',
                          "through": b'{"captive": false, "seconds-remaining": 1}',
                          "badjson": b'{"captive": tru', "array": b'[{"captive": true}]',
                          "huge": b'{"captive": true, "pad": "' + b"x" * (10 << 20) + b'"}'}
                if mode == "drip":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for _ in range(600):
                        self.wfile.write(b"X"); self.wfile.flush(); time.sleep(0.05)
                    return
                body = bodies.get(mode)
                if body is None:
                    self.send_response(404); self.end_headers(); return
                self.send_response(200); self.send_header("Content-Type", "application/captive+json")
                self.send_header("Content-Length", str(len(body))); self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass
            def log_message(self, *args): pass
        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
        print("ready", flush=True)
        Server(("198.18.0.1", 8080), Handler).serve_forever()
        """#

    /// A phone namespace whose `wl0` leads to a server namespace at 198.18.0.1 running the
    /// server above; `body` gets the phone's namespace and a way to change the server's mode.
    func withServer(_ body: (TestNamespace, @escaping @Sendable (String) throws -> Void) async throws -> Void) async throws {
        try await withServer { phone, setMode, _ in try await body(phone, setMode) }
    }

    /// The same, with a way to change what the server's portal API (`/api`) answers: `captive`,
    /// `through` (not captive, 1 s left), `badjson`, `array`, `huge` (10 MB), `drip`, `none` (404).
    func withServer(_ body: (TestNamespace, @escaping @Sendable (String) throws -> Void,
                                   @escaping @Sendable (String) throws -> Void) async throws -> Void) async throws {
        let before = try HostNetworkState.capture()
        // Under a directory of this test's own: the server, run as root, reads what is there.
        let directory = try TestEnvironment.scratchDirectory("roam-probe-mode")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let modeFile = directory + "/mode"
        try "ok".write(toFile: modeFile, atomically: true, encoding: .utf8)
        try "none".write(toFile: modeFile + ".api", atomically: true, encoding: .utf8)
        try await TestNamespace.with { phone in
            try await TestNamespace.with { server in
                try phone.socket.createVethPair("wl0", peer: "wl0p", peerNamespace: server.namespace)
                let wl0 = try phone.index(of: "wl0"), peer = try server.index(of: "wl0p")
                try phone.socket.setLink(index: wl0, up: true, alias: "roam:type=wifi")
                try server.socket.setLink(index: peer, up: true)
                try phone.socket.addAddress(IPPrefix("198.18.0.2/24")!, interfaceIndex: wl0)
                try server.socket.addAddress(IPPrefix("198.18.0.1/24")!, interfaceIndex: peer)
                try phone.socket.addRoute(.defaultRoute(via: IPAddress("198.18.0.1")!, interfaceIndex: wl0, metric: 100))
                let python = try RunningCommand("/usr/sbin/ip", ["netns", "exec", server.name, "python3", "-c", Self.server, modeFile])
                defer { _ = python.stop(with: SIGKILL) }
                #expect(python.lines.waitForLast(timeout: 20) { $0 == "ready" } != nil, "\(python.errors.values)")
                try await body(phone, { mode in try mode.write(toFile: modeFile, atomically: true, encoding: .utf8) },
                               { mode in try mode.write(toFile: modeFile + ".api", atomically: true, encoding: .utf8) })
            }
        }
        #expect(try HostNetworkState.capture() == before)
    }

    static func validation() -> ConnectivityValidation {
        ConnectivityValidation(url: "http://198.18.0.1:8080/generate_204", timeout: .milliseconds(800), interval: .milliseconds(200),
                               retryDelay: .milliseconds(50), maximumRetryDelay: .milliseconds(200), failuresBeforeLimited: 2)
    }

    func monitor(_ phone: TestNamespace, requiresValidated: Bool = false,
                 validation: ConnectivityValidation = validation()) throws -> (NetworkPathMonitor, Recorder<NetworkPath>, PathUpdateSubscription) {
        var configuration = NetworkPathMonitor.Configuration(resolverConfigurationPath: "/nonexistent/resolv.conf",
                                                             logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        configuration.validation = validation
        configuration.policy.validation = requiresValidated ? .require : .ignore
        let monitor = NetworkPathMonitor(namespace: phone.namespace, configuration: configuration)
        let recorder = Recorder<NetworkPath>()
        let subscription = monitor.onUpdate { recorder.append($0) }
        try monitor.start()
        return (monitor, recorder, subscription)
    }

    func wl0(_ path: NetworkPath) -> InterfaceConnectivity? { path.availableInterfaces.first { $0.name == "wl0" }?.connectivity }

    @Test func theProbeFindsTheInternetAPortalAnErrorAndNothing() async throws {
        try await withServer { phone, setMode in
            let (monitor, recorder, subscription) = try monitor(phone)
            defer { monitor.cancel(); subscription.cancel() }
            let validated = try #require(recorder.waitForLast { $0.connectivity == .validated }, "\(recorder.values.map(\.summary))")
            #expect(wl0(validated)?.reason == "HTTP 204 from http://198.18.0.1:8080/generate_204")
            // A redirect: the portal's page is where it sends a browser.
            try setMode("portal")
            let portal = try #require(recorder.waitForLast { $0.connectivity == .portal })
            #expect(wl0(portal)?.portalURL == "http://portal.example.test/login?from=probe")
            #expect(portal.status == .satisfied, "without validation .require a portal is still a path")
            try setMode("page")
            #expect(recorder.waitForLast { wl0($0)?.reason == "HTTP 200 in place of http://198.18.0.1:8080/generate_204" } != nil)
            try setMode("error")
            #expect(recorder.waitForLast { $0.connectivity == .limited && wl0($0)?.reason == "HTTP 503 from http://198.18.0.1:8080/generate_204" } != nil)
            try setMode("ok")
            #expect(recorder.waitForLast { $0.connectivity == .validated } != nil)
            // Nothing answers: a validated interface turns limited after two probes in a row.
            try setMode("close")
            let nothing = try #require(recorder.waitForLast { $0.connectivity == .limited })
            #expect(wl0(nothing)?.reason?.contains("198.18.0.1") == true, "\(String(describing: wl0(nothing)))")
            // Never more than one probe in flight: over this time, at most one per 50 ms retry.
            #expect(monitor.statistics.connectivityProbes >= 6)
        }
    }

    /// Hostile answers cost a probe's timeout and 16 KiB at most: a head that drips forever, a
    /// 10 MB page, bytes that are not HTTP.
    @Test func hostileAnswersAreBounded() async throws {
        try await withServer { phone, setMode in
            try setMode("drip")
            let (monitor, recorder, subscription) = try monitor(phone)
            defer { monitor.cancel(); subscription.cancel() }
            let dripped = try #require(recorder.waitForLast { $0.connectivity == .limited })
            #expect(wl0(dripped)?.reason == "198.18.0.1 answered with something other than HTTP", "\(String(describing: wl0(dripped)))")
            try setMode("huge")
            let huge = try #require(recorder.waitForLast { $0.connectivity == .portal })
            #expect(wl0(huge)?.reason == "HTTP 200 with another body in place of http://198.18.0.1:8080/generate_204" || wl0(huge)?.reason == "HTTP 200 in place of http://198.18.0.1:8080/generate_204")
            try setMode("garbage")
            #expect(recorder.waitForLast { $0.connectivity == .limited } != nil)
        }
    }

    /// With `validation: .require`, a portal or an unvalidated interface is no path, as Android's
    /// default network: unsatisfied with the reason, until the interface validates.
    @Test func aPolicyThatRequiresValidationWaitsForIt() async throws {
        try await withServer { phone, setMode in
            try setMode("portal")
            let (monitor, recorder, subscription) = try monitor(phone, requiresValidated: true)
            defer { monitor.cancel(); subscription.cancel() }
            let portal = try #require(recorder.waitForLast { $0.unsatisfiedReason == .portal }, "\(recorder.values.map(\.summary))")
            #expect(portal.status == .unsatisfied && portal.primaryInterface == nil)
            try setMode("ok")
            let validated = try #require(recorder.waitForLast { $0.status == .satisfied })
            #expect(validated.primaryInterface?.name == "wl0" && validated.connectivity == .validated)
            try setMode("close")
            #expect(recorder.waitForLast { $0.unsatisfiedReason == .noInternet } != nil)
        }
    }

    /// The portal API the network announced (RFC 8908) is asked first: `captive` is a portal
    /// whatever the probe would find, with the API's page; a session's length comes with
    /// `validated`. An API that answers nothing useful (bad JSON, 10 MB, a drip, a 404) is noted
    /// and the probe decides, in the same timeout.
    @Test func thePortalAPIIsAskedFirstAndItsHostileAnswersCostNothingMore() async throws {
        try await withServer { phone, _, setAPI in
            var validation = Self.validation()
            validation.interfacePortalAPIs = ["wl0": "http://198.18.0.1:8080/api"]
            try setAPI("captive")
            let (monitor, recorder, subscription) = try monitor(phone, validation: validation)
            defer { monitor.cancel(); subscription.cancel() }
            let captive = try #require(recorder.waitForLast { $0.connectivity == .portal }, "\(recorder.values.map(\.summary))")
            #expect(wl0(captive)?.portalURL == "http://portal.example.test/api-login")
            #expect(wl0(captive)?.reason == "the portal API at http://198.18.0.1:8080/api says captive")
            try setAPI("through")
            let through = try #require(recorder.waitForLast { $0.connectivity == .validated })
            #expect(wl0(through)?.sessionRemaining == .seconds(1) && wl0(through)?.reason == "HTTP 204 from http://198.18.0.1:8080/generate_204")
            for (mode, note) in [("badjson", "sent no JSON"), ("array", "not an object"), ("huge", "sent no JSON"), ("none", "answered HTTP 404"),
                                 ("drip", "answered with something other than HTTP")] {
                try setAPI(mode)
                let noted = recorder.waitForLast { $0.connectivity == .validated && wl0($0)?.reason?.contains(note) == true }
                #expect(noted != nil, "\(mode): \(recorder.values.last.flatMap { wl0($0)?.reason } ?? "-")")
                #expect(noted.flatMap { wl0($0)?.sessionRemaining } == nil)
            }
        }
    }

    /// A monitor asked to check again (as after a login) does so at once, whatever its interval.
    @Test func aRevalidationChecksAtOnce() async throws {
        try await withServer { phone, setMode in
            var validation = Self.validation()
            validation.interval = .seconds(300)
            validation.maximumRetryDelay = .seconds(300)
            let (monitor, recorder, subscription) = try monitor(phone, validation: validation)
            defer { monitor.cancel(); subscription.cancel() }
            #expect(recorder.waitForLast { $0.connectivity == .validated } != nil)
            let probes = monitor.statistics.connectivityProbes
            try setMode("portal")
            monitor.revalidate(interface: "wl0")
            #expect(recorder.waitForLast(timeout: 5) { $0.connectivity == .portal } != nil)
            try setMode("ok")
            monitor.revalidate()
            #expect(recorder.waitForLast(timeout: 5) { $0.connectivity == .validated } != nil)
            #expect(monitor.statistics.connectivityProbes == probes + 2)
        }
    }
}
