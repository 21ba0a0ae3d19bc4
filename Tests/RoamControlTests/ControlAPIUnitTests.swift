import Foundation
import Glibc
import RoamControl
import RoamSystem
import Testing
import Yams

/// The control API apart from a run: its routes against the OpenAPI document, its answers before
/// a run starts and after it ends, and its HTTP server and client over a real Unix socket.
/// Root-free (runs with a network are RoamCLITests.ControlAPITests and clients/python's tests).
struct ControlAPIUnitTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test func theOpenAPIDocumentListsEveryRouteTheServerAnswers() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/control-api.openapi.yaml", encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: Any])
        var documented: Set<String> = []
        for (path, value) in paths {
            let operations = try #require(value as? [String: Any])
            for method in ["get", "post", "put", "delete", "patch"] where operations[method] != nil {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        let served = Set(ControlAPI.routes.map { "\($0.method) \($0.pattern)" })
        #expect(documented == served, "documented only: \(documented.subtracting(served)); served only: \(served.subtracting(documented))")
    }

    /// Answers `method target` from `api` synchronously (the API calls back at once but for a stop).
    func answer(_ api: ControlAPI, _ method: String, _ target: String, body: String = "") -> (status: Int, text: String) {
        let box = Box()
        api.handle(method: method, target: target, body: Array(body.utf8), lastEventID: nil) { answer in box.set(answer) }
        guard case .json(let status, let value)? = box.value else { return (0, "") }
        return (status, value.serialized)
    }

    final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: ControlAPI.Answer?
        func set(_ answer: ControlAPI.Answer) { lock.withLock { stored = answer } }
        var value: ControlAPI.Answer? { lock.withLock { stored } }
    }

    @Test func beforeTheRunStartsEveryRouteAnswers503AndAfterItEndsEveryRouteAnswers410() {
        let finished = Box()
        let api = ControlAPI(finish: { finished.set(.json(status: 0, body: nil)) })
        for route in ControlAPI.routes {
            let path = route.pattern.replacingOccurrences(of: "{node}", with: "phone").replacingOccurrences(of: "{link}", with: "wifi")
                .replacingOccurrences(of: "{network}", with: "home")
            #expect(answer(api, route.method, path).status == 503, "\(route)")
        }
        #expect(answer(api, "GET", "/v1/nope").status == 404)
        #expect(answer(api, "GET", "/v1/nope").text.contains("GET /v1/run"))
        #expect(answer(api, "PUT", "/v1/run").status == 405)
        #expect(answer(api, "GET", "/v1/stop").status == 405)
        #expect(finished.value == nil, "nothing asked the run to finish")
        api.ended(.object([("reportDirectory", "roam-reports/x-abcdef"), ("passed", true)]))
        #expect(answer(api, "GET", "/v1/run").status == 410)
        #expect(answer(api, "GET", "/v1/run").text.contains("roam-reports/x-abcdef"))
        let stop = answer(api, "POST", "/v1/stop")
        #expect(stop.status == 410 && stop.text.contains(#""passed":true"#), "\(stop.text)")
    }

    @Test func theTokenIsComparedWhole() {
        let token = String(repeating: "ab", count: 32)
        #expect(ControlListeners.authorizes("Bearer " + token, token: token))
        #expect(!ControlListeners.authorizes(nil, token: token))
        #expect(!ControlListeners.authorizes(token, token: token))
        #expect(!ControlListeners.authorizes("Bearer " + token.dropLast(), token: token))
        #expect(!ControlListeners.authorizes("Bearer " + token + "0", token: token))
        #expect(!ControlListeners.authorizes("Bearer " + String(repeating: "ab", count: 31) + "ac", token: token))
        #expect(!ControlListeners.authorizes("bearer " + token, token: token))
    }

    @Test func anEventsTypeIsReadFromItsLine() {
        #expect(ControlAPI.eventType(of: #"{"t":1.5,"type":"link","link":"wifi"}"#) == "link")
        #expect(ControlAPI.eventType(of: #"{"t":0.0,"type":"connect-failed"}"#) == "connect-failed")
        #expect(ControlAPI.eventType(of: #"{"t":0.0}"#) == "message")
        #expect(ControlAPI.eventType(of: #"{"t":0.0,"type":"\#(String(repeating: "x", count: 40))"}"#) == "message")
    }

    /// The server and the client over a Unix socket in a directory of the test's: bodies past the
    /// bound are refused before the API sees them, and a run that has not started says so.
    @Test func theServerAnswersOverItsSocketAndBoundsWhatItReads() throws {
        var template = Array("/tmp/roam-control-XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer { try? FileManager.default.removeItem(atPath: made) }
        let directory = try SecureDirectory.open(made)
        let listeners = try ControlListeners(directory: directory, runID: "abc123", port: nil)
        defer { listeners.removeFiles() }
        var status = stat()
        #expect(lstat(listeners.socketPath, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK && status.st_mode & 0o777 == 0o600)
        let api = ControlAPI(finish: {})
        let server = ControlServer(api: api)
        try server.start(listeners)
        defer { server.shutdown() }
        let address = ControlClient.Address.unix(listeners.socketPath)
        let starting = try ControlClient.request(address, method: "GET", path: "/v1/run")
        #expect(starting.status == 503)
        #expect(String(decoding: starting.body, as: UTF8.self).contains("starting"))
        let large = try ControlClient.request(address, method: "POST", path: "/v1/links/wifi", body: Array(repeating: 0x20, count: ControlAPI.maximumBodySize + 1))
        #expect(large.status == 413)
        // Many clients at once are all answered.
        let statuses = Box2()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            statuses.append((try? ControlClient.request(address, method: "GET", path: "/v1/run").status) ?? -1)
        }
        #expect(statuses.values == Array(repeating: 503, count: 16))
        api.ended(.object([("reportDirectory", "r")]))
        #expect(try ControlClient.request(address, method: "GET", path: "/v1/run").status == 410)
        // A socket of the same name left by a dead run is replaced; anything else is refused.
        listeners.removeFiles()
        #expect(FileManager.default.createFile(atPath: made + "/abc124.sock", contents: Data("x".utf8)))
        #expect(throws: ControlListeners.Failure.self) { try ControlListeners(directory: directory, runID: "abc124", port: nil) }
        #expect(throws: ControlListeners.Failure.self) { try ControlListeners(directory: directory, runID: "../../x", port: nil) }
    }

    @Test func numbersInARequestAreRangeChecked() {
        #expect(ControlAPI.sequenceNumber("0") == 0)
        #expect(ControlAPI.sequenceNumber("281474976710656") == ControlAPI.maximumSequenceNumber)
        for text in ["", "-1", "+1", " 1", "1 ", "1e3", "0x10", "281474976710657", "9223372036854775807", "99999999999999999999", "١٢"] {
            #expect(ControlAPI.sequenceNumber(text) == nil, "\(text)")
        }
        // A bad number is a 400 whatever the run's state, checked before it.
        let api = ControlAPI(finish: {})
        let box = Box()
        api.handle(method: "GET", target: "/v1/events", body: [], lastEventID: "9223372036854775807") { box.set($0) }
        guard case .json(let status, let body)? = box.value else { Issue.record("no answer"); return }
        #expect(status == 400 && body.serialized.contains("Last-Event-ID"), "\(body.serialized)")
        #expect(answer(api, "GET", "/v1/events?from=-3").status == 400)
        #expect(answer(api, "GET", "/v1/events?follow=maybe").status == 400)
        #expect(answer(api, "GET", "/v1/events?from=3").status == 503)
    }

    /// The loopback port's places are its own: 70 idle connections (more than its 64) take none
    /// from the Unix socket, a client with the token still gets in (the oldest connection without
    /// one gives its place), and every connection that shows no token in time is closed.
    @Test func idleConnectionsOnThePortStarveNobodyAndAreClosed() throws {
        var template = Array("/tmp/roam-control-XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer { try? FileManager.default.removeItem(atPath: made) }
        let listeners = try ControlListeners(directory: try SecureDirectory.open(made), runID: "abc125", port: 0)
        defer { listeners.removeFiles() }
        let tcp = try #require(listeners.tcp)
        let server = ControlServer(api: ControlAPI(finish: {}), timeouts: .init(authentication: .milliseconds(500), idle: .seconds(1)))
        try server.start(listeners)
        defer { server.shutdown() }
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<70 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(tcp.port).bigEndian)
            address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(connected == 0)
            held.append(fd)
        }
        // A slow-loris: half a head, never finished.
        _ = "GET /v1/run HTTP/1.1\r\nHost: x\r\n".withCString { send(held[0], $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        #expect(try ControlClient.request(.unix(listeners.socketPath), method: "GET", path: "/v1/run").status == 503)
        #expect(try ControlClient.request(.loopback(port: tcp.port, token: tcp.token), method: "GET", path: "/v1/run").status == 503)
        #expect(try ControlClient.request(.loopback(port: tcp.port, token: String(repeating: "0", count: 64)), method: "GET", path: "/v1/run").status == 401)
        // Every held connection reads its end (EOF or a reset) within 10 s: none is kept.
        var open = Set(held)
        let deadline = ContinuousClock.now + .seconds(10)
        while !open.isEmpty, ContinuousClock.now < deadline {
            var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&descriptors, nfds_t(descriptors.count), 200)
            for entry in descriptors where entry.revents != 0 {
                var byte: UInt8 = 0
                if recv(entry.fd, &byte, 1, Int32(MSG_DONTWAIT)) <= 0 { open.remove(entry.fd) }
            }
        }
        #expect(open.isEmpty, "\(open.count) connections without the token still open")
        // The server forgets each as its close completes on the event loop.
        let forgotten = ContinuousClock.now + .seconds(5)
        while server.openConnections.tcp > 0, ContinuousClock.now < forgotten {
            var none: [pollfd] = []
            _ = poll(&none, 0, 20)
        }
        #expect(server.openConnections.tcp == 0)
        // An idle connection of the run's user is closed too, after the idle timeout.
        let unix = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(unix) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: listeners.socketPath.utf8) }
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(unix, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        try #require(connected == 0)
        var entry = [pollfd(fd: unix, events: Int16(POLLIN), revents: 0)]
        #expect(poll(&entry, 1, 10_000) == 1, "the idle connection was closed")
    }

    final class Box2: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [Int] = []
        func append(_ value: Int) { lock.withLock { stored.append(value) } }
        var values: [Int] { lock.withLock { stored } }
    }
}

/// toxiproxy's API port (`--toxiproxy-port`): no token, so the kernel is asked whose the
/// connecting socket is; another user's connection is closed unanswered, and browsers are refused.
@Suite struct ToxiproxyPortTests {
    func curl(_ arguments: [String], asNobody: Bool = false) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: asNobody ? "/usr/bin/setpriv" : "/usr/bin/curl")
        process.arguments = (asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl"] : []) + ["-s", "-m", "5", "-w", "%{http_code}", "-o", "/dev/null"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test(.enabled(if: geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/curl", X_OK) == 0,
                   "needs root, setpriv and curl to connect as another user"))
    func onlyTheRunsUserAndRootAreAnswered() throws {
        var template = Array("/tmp/roam-control-XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template).map { String(cString: $0) })
        defer { try? FileManager.default.removeItem(atPath: made) }
        let listeners = try ControlListeners(directory: try SecureDirectory.open(made), runID: "abc126", port: nil, toxiproxyPort: 0)
        defer { listeners.removeFiles() }
        let port = try #require(listeners.toxiproxy?.port)
        let server = ControlServer(api: ControlAPI(finish: {}))
        try server.start(listeners)
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(port)"
        #expect(try curl([url + "/version"]).output == "200")
        #expect(try curl([url + "/proxies"]).output == "503", "the run has not started")
        #expect(try curl([url + "/nothing"]).output == "404")
        #expect(try curl(["-X", "PUT", url + "/proxies"]).output == "405")
        #expect(try curl(["-A", "Mozilla/5.0", url + "/version"]).output == "403", "browsers are refused, as toxiproxy refuses them")
        // Another user: the connection is closed before any answer (curl: empty reply, 52, or a
        // reset, 56, when its request was still unread).
        let nobody = try curl([url + "/version"], asNobody: true)
        #expect([52, 56].contains(nobody.status) && nobody.output == "000", "curl exited \(nobody.status), status \(nobody.output)")
    }
}
