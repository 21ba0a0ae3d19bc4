import Foundation
import Netlink
import PathMonitor
import RoamSystem
@testable import ScenarioModel
@testable import Simulator
import TestSupport
import Testing

/// A network's captive portal, root-free: its sessions on a manual clock, what its HTTP server
/// answers (hostile requests included), and the nftables table its gateway gets.
/// `NetworkScenarioTests` (RoamCLITests) plays portals against the kernel and real clients.
@Suite struct CaptivePortalTests {
    func at(_ seconds: Int64) -> MonotonicInstant { MonotonicInstant(nanoseconds: 1_000_000_000 * (1000 + seconds)) }

    @Test func sessionsBeginEndAndExpireOnTime() {
        var sessions = CaptivePortalSessions(portal: CaptivePortal(expires: .seconds(30)))
        #expect(!sessions.isLoggedIn("hotel.phone") && sessions.nextExpiry == nil)
        let login = sessions.login("hotel.phone", at: at(20), cause: .timeline)
        #expect(login == CaptivePortalSessions.Change(link: "hotel.phone", loggedIn: true, cause: .timeline))
        #expect(sessions.remaining("hotel.phone", at: at(25)) == .seconds(25))
        // A second login renews the session, and is no change.
        let again = sessions.login("hotel.phone", at: at(30), cause: .request(from: IPAddress("192.168.0.10")!))
        #expect(again == nil)
        #expect(sessions.nextExpiry == at(60))
        #expect(sessions.expire(at: at(59)).isEmpty)
        let expired = sessions.expire(at: at(60))
        #expect(expired == [CaptivePortalSessions.Change(link: "hotel.phone", loggedIn: false, cause: .expiry)])
        #expect(!sessions.isLoggedIn("hotel.phone") && sessions.nextExpiry == nil)
        #expect(sessions.logout("hotel.phone", cause: .timeline) == nil, "not logged in: nothing changes")
        // Without expiry, until logout.
        var open = CaptivePortalSessions(portal: CaptivePortal())
        _ = open.login("hotel.phone", at: at(0), cause: .timeline)
        #expect(open.remaining("hotel.phone", at: at(1_000_000)) == nil && open.expire(at: at(1_000_000)).isEmpty)
        #expect(open.logout("hotel.phone", cause: .request(from: IPAddress("192.168.0.10")!))?.loggedIn == false)
        #expect("\(CaptivePortalSessions.Cause.request(from: IPAddress("fd72:6f61:6e00::a")!))" == "by a POST from fd72:6f61:6e00::a")
    }

    func request(_ text: String) -> Result<CaptivePortalHTTP.Request, CaptivePortalHTTP.Refusal> {
        CaptivePortalHTTP.parse(head: Array(text.utf8))
    }

    func answer(_ text: String, loggedIn: Bool = false, remaining: Duration? = nil) throws -> (head: String, body: String, login: Bool?) {
        let parsed = try request(text).get()
        let (bytes, login) = CaptivePortalHTTP.answer(parsed, loggedIn: loggedIn, remaining: remaining, network: "hotel")
        let response = try #require(ProbeResponse(parsing: bytes))
        let text = String(decoding: bytes, as: UTF8.self)
        return (text.components(separatedBy: "\r\n")[0] + (response.location.map { " -> \($0)" } ?? ""), String(decoding: response.body, as: UTF8.self), login)
    }

    @Test func thePortalRedirectsEverythingButItsPageAndAPI() throws {
        // Any other host, the probe's included: a redirect to the page (Android and NetworkManager call that a portal).
        #expect(try answer("GET /generate_204 HTTP/1.1\r\nHost: connectivity.roam.test\r\n\r\n").head
            == "HTTP/1.1 302 Found -> http://portal.roam.test/")
        #expect(try answer("GET http://api.example.test/x HTTP/1.1\r\nHost: portal.roam.test\r\n\r\n").head.hasPrefix("HTTP/1.1 302"),
                "an absolute form names its own host")
        #expect(try answer("GET / HTTP/1.0\r\n\r\n").head.hasPrefix("HTTP/1.1 302"), "no host at all")
        // The page, the login and logout, on the portal's host (any port, any case).
        let page = try answer("GET / HTTP/1.1\r\nHost: Portal.Roam.Test:80\r\n\r\n")
        #expect(page.head == "HTTP/1.1 200 OK" && page.body.contains("action=/login"))
        #expect(try answer("GET / HTTP/1.1\r\nHost: portal.roam.test\r\n\r\n", loggedIn: true).body.contains("action=/logout"))
        let login = try answer("POST /login HTTP/1.1\r\nHost: portal.roam.test\r\nContent-Length: 10\r\n\r\n")
        #expect(login.head == "HTTP/1.1 303 See Other -> http://portal.roam.test/" && login.login == true)
        #expect(try answer("POST /logout HTTP/1.1\r\nHost: portal.roam.test\r\n\r\n").login == false)
        #expect(try answer("GET /login HTTP/1.1\r\nHost: portal.roam.test\r\n\r\n").head.hasPrefix("HTTP/1.1 405"), "a login is a POST")
        #expect(try answer("GET /nothing HTTP/1.1\r\nHost: portal.roam.test\r\n\r\n").head.hasPrefix("HTTP/1.1 404"))
        // The API, as PathMonitor reads it.
        for (loggedIn, remaining, expected) in [(false, nil, PortalAPIAnswer(captive: true, userPortalURL: "http://portal.roam.test/")),
                                                (true, Duration.seconds(29), PortalAPIAnswer(captive: false, userPortalURL: "http://portal.roam.test/", secondsRemaining: 29)),
                                                (true, nil, PortalAPIAnswer(captive: false, userPortalURL: "http://portal.roam.test/"))] {
            let parsed = try request("GET /api HTTP/1.1\r\nHost: portal.roam.test\r\nAccept: application/captive+json\r\n\r\n").get()
            let bytes = CaptivePortalHTTP.answer(parsed, loggedIn: loggedIn, remaining: remaining, network: "hotel").response
            let response = try #require(ProbeResponse(parsing: bytes))
            #expect(String(decoding: bytes, as: UTF8.self).contains("Content-Type: application/captive+json\r\n"))
            #expect(try PortalAPIAnswer.parse(response).get() == expected)
        }
    }

    @Test func hostileRequestsAreRefusedWithinBounds() {
        let refused: [(String, CaptivePortalHTTP.Refusal)] = [
            ("", .malformed),
            ("GET / HTTP/1.1\r\n", .malformed),
            ("GET /\r\n\r\n", .malformed),
            ("get / HTTP/1.1\r\n\r\n", .malformed),
            ("GET / SPDY/3\r\n\r\n", .malformed),
            ("GET /\u{1b}[31m HTTP/1.1\r\n\r\n", .malformed),
            ("GET /\(String(repeating: "a", count: 3000)) HTTP/1.1\r\n\r\n", .malformed),
            ("POST /login HTTP/1.1\r\nContent-Length: -1\r\n\r\n", .malformed),
            ("POST /login HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", .malformed),
            ("POST /login HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", .tooLarge),
            ("POST /login HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", .tooLarge),
            ("GET / HTTP/1.1\r\n" + String(repeating: "X-Pad: y\r\n", count: 1000) + "\r\n", .malformed),
        ]
        for (text, refusal) in refused {
            guard case .failure(let found) = request(text) else {
                Issue.record("accepted: \(text.prefix(60))")
                continue
            }
            #expect(found == refusal, "\(text.prefix(60))")
        }
    }

    @Test func theGatewaysTableHoldsPhonesUntilTheyLogIn() throws {
        let text = NetworkPlanTests.text.replacingOccurrences(of: "    delay: 5ms\n", with: "    delay: 5ms\n    portal: { dns: hijack, others: reset }\n")
        let scenario = try #require(ScenarioReader.parse(text, file: "s.yaml").scenario)
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        let home = try #require(plan.network("home")), lte = try #require(plan.network("lte"))
        let rules = try #require(NetworkServices.portalRuleset(home, accessInterfaces: ["p0", "p1"], counters: [("w2", "p0", 20002)]))
        #expect(rules.contains("set allowed {\n    type ifname\n  }"))
        #expect(rules.contains("iifname { \"p0\", \"p1\" } ip daddr != 192.168.0.1 tcp dport 80 dnat ip to 192.168.0.1:80"))
        #expect(rules.contains("ip6 daddr != fd72:6f61:6e00:0::1 tcp dport 80 dnat ip6 to [fd72:6f61:6e00:0::1]:80")
                || rules.contains("ip6 daddr != fd72:6f61:6e00::1 tcp dport 80 dnat ip6 to [fd72:6f61:6e00::1]:80"), "\(rules)")
        #expect(rules.contains("udp dport 53 dnat ip to 192.168.0.1:\(DNSFaultRelay.hijackPort)"))
        #expect(rules.contains("iifname @allowed accept\n    iifname { \"p0\", \"p1\" } meta l4proto tcp reject with tcp reset"))
        #expect(rules.contains("counter w2 {") && rules.contains("ct mark 0x5250 iifname \"p0\" tcp dport 20002 counter name \"w2\""))
        // A portal that lets DNS through and drops the rest.
        var through = home
        through.spec.portal = CaptivePortal()
        let plain = try #require(NetworkServices.portalRuleset(through, accessInterfaces: ["p0"]))
        #expect(!plain.contains("udp dport 53") && plain.contains("iifname { \"p0\" } drop") && !plain.contains("ct mark set"))
        #expect(NetworkServices.portalRuleset(lte, accessInterfaces: ["p0"]) == nil, "no portal")
        // The network's resolver answers the portal's name with its gateway.
        let resolver = NetworkServices.resolverConfiguration(home, nameServer: .v4(198, 19, 255, 5))
        #expect(resolver.contains("local-data: \"portal.roam.test. 60 IN A 192.168.0.1\""))
        #expect(!NetworkServices.resolverConfiguration(lte, nameServer: .v4(198, 19, 255, 5)).contains("portal.roam.test"))
    }

    /// The portal's request parser against mutated requests (a seeded generator: the same inputs
    /// every run): it answers or refuses each within its bounds, never traps, and what it
    /// answers is an HTTP response of bounded size.
    @Test func mutatedRequestsAreAnsweredOrRefusedWithinBounds() {
        let seeds = ["GET /api HTTP/1.1\r\nHost: portal.roam.test\r\nAccept: application/captive+json\r\n\r\n",
                     "POST /login HTTP/1.1\r\nHost: portal.roam.test:80\r\nContent-Length: 8\r\n\r\naccept=1",
                     "GET http://connectivity.roam.test/generate_204 HTTP/1.0\r\n\r\n"].map { Array($0.utf8) }
        var random = SystemRandomNumberGenerator.Seeded(seed: 0x726f616d)
        let alphabet = Array(" :/\r\n\t0123456789abcdefGETPOSThttp.?#%\u{0}\u{7f}\u{ff}".utf8)
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0...(Int(random.next() % 8)) {
                let position = Int(random.next() % UInt64(bytes.count + 1))
                switch random.next() % 4 {
                case 0 where position < bytes.count: bytes.remove(at: position)
                case 1: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: position)
                case 2 where position < bytes.count: bytes[position] = UInt8(truncatingIfNeeded: random.next())
                default: bytes.insert(contentsOf: bytes[position...].prefix(64), at: position)
                }
            }
            guard case .success(let request) = CaptivePortalHTTP.parse(head: bytes) else { continue }
            #expect(request.contentLength <= CaptivePortalHTTP.maximumBody && request.path.utf8.count <= 2048)
            let (response, _) = CaptivePortalHTTP.answer(request, loggedIn: round % 2 == 0, remaining: .seconds(Int64(round)), network: "hotel")
            #expect(response.count < 1024 && ProbeResponse(parsing: response) != nil, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }
}

extension SystemRandomNumberGenerator {
    /// SplitMix64: a seeded generator for reproducible test inputs.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }
}

/// The connectivity check's server with every place taken: 70 clients that send nothing hold
/// its 64 places and its backlog. It must wait for a place to free (a client's 2 s), not poll
/// its listener in a loop (it spun at 100% of a core until then). Its connections are
/// close-on-exec from the moment they are accepted (accept4).
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root (a network namespace)"), .serialized)
struct ConnectivityResponderKernelTests {
    @Test func aFullServerWaitsForAPlaceInsteadOfSpinning() throws {
        let test = try TestNamespace()
        let loopback = try #require(IPAddress("127.0.0.1"))
        let responder = try ConnectivityResponder(addresses: [loopback], in: test.namespace)
        defer { responder.stop() }
        var clients: [Int32] = []
        defer { for client in clients { close(client) } }
        try test.namespace.perform {
            for _ in 0..<70 {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard loopback.withSocketAddress(port: 80, { connect(fd, $0, $1) }) == 0 else { close(fd); continue }
                clients.append(fd)
            }
        }
        #expect(clients.count == 70)
        // What the process spends while the server is full and nothing else runs: a second and a
        // half of waiting (a measuring window, not a synchronisation).
        func cpu() -> Double {
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        let before = cpu()
        var none: [pollfd] = []
        _ = poll(&none, 0, 1_500)
        let spent = cpu() - before
        #expect(spent < 0.5, "the full server used \(spent) s of CPU in 1.5 s")
        // Each held client is answered or closed once its time is up, and a new one is answered.
        try test.namespace.perform {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(fd) }
            #expect(loopback.withSocketAddress(port: 80, { connect(fd, $0, $1) }) == 0)
            let request = Array("GET /generate_204 HTTP/1.1\r\nHost: connectivity.roam.test\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var entry = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            #expect(poll(&entry, 1, 10_000) == 1)
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = recv(fd, &buffer, buffer.count, 0)
            #expect(count > 0 && String(decoding: buffer[..<max(count, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 204"))
        }
    }
}

/// Where a run looks for the network's programs (nft, unbound, tayga, conntrack): as the host's
/// root, only where no other user could have put or replaced them.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root (files of another user's)"))
struct NetworkProgramSearchTests {
    @Test func rootRunsOnlyProgramsNoOtherUserCouldReplace() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-network-path")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(chmod(directory, 0o755) == 0)
        let planted = directory + "/nft"
        try "#!/bin/sh\necho planted\n".write(toFile: planted, atomically: false, encoding: .utf8)
        #expect(chmod(planted, 0o755) == 0)
        // Root's own, in root's directory: taken.
        #expect(NetworkServices.locate("nft", in: [directory], asHostRoot: true) == planted)
        // The program another user's, or the directory writable by others, or another user's
        // directory: not taken, as root; the next directory's is.
        #expect(chown(planted, 65534, 65534) == 0)
        #expect(NetworkServices.locate("nft", in: [directory], asHostRoot: true) == nil)
        #expect(NetworkServices.locate("nft", in: [directory], asHostRoot: false) == planted, "a user's run takes its user's PATH")
        #expect(chown(planted, 0, 0) == 0 && chmod(directory, 0o777) == 0)
        #expect(NetworkServices.locate("nft", in: [directory], asHostRoot: true) == nil)
        #expect(chmod(directory, 0o755) == 0 && chown(directory, 65534, 65534) == 0)
        #expect(NetworkServices.locate("nft", in: [directory], asHostRoot: true) == nil)
        if access("/usr/sbin/nft", X_OK) == 0 {
            #expect(NetworkServices.locate("nft", in: [directory, "/usr/sbin"], asHostRoot: true) == "/usr/sbin/nft")
        }
        // A link to root's program, made by another user where only that user writes: not taken
        // by root (as named, the chain is that user's).
        let link = directory + "/conntrack"
        #expect(symlink("/usr/sbin/conntrack", link) == 0 && lchown(link, 65534, 65534) == 0)
        #expect(NetworkServices.locate("conntrack", in: [directory], asHostRoot: true) == nil)
    }
}
