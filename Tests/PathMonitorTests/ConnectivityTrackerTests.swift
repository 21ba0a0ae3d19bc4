import Netlink
@testable import PathMonitor
import Testing

/// Connectivity validation's logic on a manual clock, root-free: when each interface is probed,
/// what each answer makes of it, and the parsing of what a probe gets back.
@Suite struct ConnectivityTrackerTests {
    static let validation = ConnectivityValidation(url: "http://connectivity.roam.test/generate_204", interval: .seconds(300),
                                                   retryDelay: .seconds(1), maximumRetryDelay: .seconds(8), failuresBeforeLimited: 2)
    static let wifi = NetworkInterface(name: "wlan0", index: 2, type: .wifi, addresses: [IPPrefix("192.168.0.10/24")!])
    static let cell = NetworkInterface(name: "rmnet0", index: 3, type: .cellular, isExpensive: true, addresses: [IPPrefix("100.64.0.10/24")!])
    static let validated = InterfaceConnectivity(state: .validated, reason: "HTTP 204")
    static let portal = InterfaceConnectivity(state: .portal, portalURL: "http://portal/", reason: "HTTP 302")
    static let nothing = InterfaceConnectivity(state: .limited, reason: "no answer")

    func s(_ seconds: Int) -> Duration { .seconds(seconds) }

    @Test func newInterfacesAreProbedAtOnceAndOneProbeAtATime() {
        var tracker = ConnectivityTracker(configuration: Self.validation)
        let probes = tracker.update([Self.wifi, Self.cell], at: .zero)
        #expect(probes.map(\.interface) == ["wlan0", "rmnet0"])
        #expect(tracker.connectivity[2]?.state == .unknown)
        // In flight: nothing more is asked, however often the path changes.
        let onPathChange = tracker.update([Self.wifi, Self.cell], at: s(1))
        #expect(onPathChange.isEmpty)
        let longAfter = tracker.due(at: s(100))
        #expect(longAfter.isEmpty)
        #expect(tracker.nextDue == nil)
        let wifiChanged = tracker.finished(probes[0], Self.validated, at: s(1))
        #expect(wifiChanged)
        #expect(tracker.connectivity[2] == Self.validated)
        // Validated: again after the interval, not before.
        #expect(tracker.nextDue == s(301))
        let beforeInterval = tracker.due(at: s(300))
        #expect(beforeInterval.isEmpty)
        let atInterval = tracker.due(at: s(301))
        #expect(atInterval.map(\.interface) == ["wlan0"])
        #expect(tracker.probesStarted == 3)
    }

    @Test func aPortalOrNothingIsProbedAgainBackingOff() {
        var tracker = ConnectivityTracker(configuration: Self.validation)
        var probe = tracker.update([Self.wifi], at: .zero)[0]
        let portalChanged = tracker.finished(probe, Self.portal, at: .zero)
        #expect(portalChanged)
        #expect(tracker.connectivity[2]?.portalURL == "http://portal/")
        // 1 s, 2 s, 4 s, then 8 s at most.
        var times: [Duration] = []
        var now = Duration.zero
        for _ in 0..<5 {
            now = tracker.nextDue!
            times.append(now)
            probe = tracker.due(at: now)[0]
            let samePortal = tracker.finished(probe, Self.portal, at: now)
            #expect(!samePortal, "the same portal again is no change")
        }
        #expect(times == [s(1), s(3), s(7), s(15), s(23)])
        // Logging in: validated, and the back-off starts over.
        probe = tracker.due(at: tracker.nextDue!)[0]
        let loggedIn = tracker.finished(probe, Self.validated, at: s(31))
        #expect(loggedIn)
        #expect(tracker.nextDue == s(331))
    }

    @Test func aValidatedInterfaceTurnsLimitedOnlyAfterFailuresInARow() {
        var tracker = ConnectivityTracker(configuration: Self.validation)
        var probe = tracker.update([Self.wifi], at: .zero)[0]
        _ = tracker.finished(probe, Self.validated, at: .zero)
        probe = tracker.due(at: s(300))[0]
        // One probe that found nothing: still validated, asked again after the retry delay.
        let firstMiss = tracker.finished(probe, Self.nothing, at: s(300))
        #expect(!firstMiss)
        #expect(tracker.connectivity[2]?.state == .validated && tracker.nextDue == s(301))
        probe = tracker.due(at: s(301))[0]
        let secondMiss = tracker.finished(probe, Self.nothing, at: s(301))
        #expect(secondMiss)
        #expect(tracker.connectivity[2] == Self.nothing)
        // From unknown too: a first miss is asked again soon, a second is the verdict.
        var fresh = ConnectivityTracker(configuration: Self.validation)
        let first = fresh.update([Self.cell], at: .zero)[0]
        let freshMiss = fresh.finished(first, Self.nothing, at: s(1))
        #expect(!freshMiss && fresh.connectivity[3]?.state == .unknown && fresh.nextDue == s(2))
        let again = fresh.due(at: s(2))[0]
        let freshSecondMiss = fresh.finished(again, Self.nothing, at: s(2))
        #expect(freshSecondMiss && fresh.connectivity[3]?.state == .limited)
    }

    /// New addresses on an interface are checked again at once, its verdict kept meanwhile (a
    /// renewed lease is the same network: Android keeps its validation); a probe in flight is
    /// followed by another as soon as it ends. A gone interface is forgotten.
    @Test func aRenumberedInterfaceIsCheckedAgainAndAGoneOneIsForgotten() {
        var tracker = ConnectivityTracker(configuration: Self.validation)
        let probe = tracker.update([Self.wifi], at: .zero)[0]
        _ = tracker.finished(probe, Self.validated, at: .zero)
        var renumbered = Self.wifi
        renumbered.addresses = [IPPrefix("192.168.0.74/24")!]
        let again = tracker.update([renumbered], at: s(5))
        #expect(again.map(\.interface) == ["wlan0"] && tracker.connectivity[2]?.state == .validated)
        let newAnswer = tracker.finished(again[0], Self.portal, at: s(6))
        #expect(newAnswer && tracker.connectivity[2]?.state == .portal)
        // Renumbered again while a probe is in flight: none now, one as soon as it ends.
        let inFlight = tracker.due(at: s(7))
        #expect(inFlight.map(\.interface) == ["wlan0"])
        renumbered.addresses = [IPPrefix("192.168.0.138/24")!]
        #expect(tracker.update([renumbered], at: .milliseconds(7100)).isEmpty)
        _ = tracker.finished(inFlight[0], Self.portal, at: s(8))
        #expect(tracker.nextDue == s(8))
        // A link-local address coming or going is no change.
        let next = tracker.due(at: s(8))
        _ = tracker.finished(next[0], Self.portal, at: s(8))
        var linkLocal = renumbered
        linkLocal.addresses.append(IPPrefix("fe80::1/64")!)
        let afterLinkLocal = tracker.update([linkLocal], at: .milliseconds(8500))
        #expect(afterLinkLocal.isEmpty && tracker.connectivity[2]?.state == .portal)
        let lateProbe = tracker.due(at: s(100))
        let afterGone = tracker.update([], at: s(101))
        #expect(afterGone.isEmpty && tracker.connectivity.isEmpty)
        let goneAnswer = tracker.finished(lateProbe[0], Self.validated, at: s(102))
        #expect(!goneAnswer)
    }

    @Test func answersAreJudgedAsAndroidAndNetworkManagerDo() throws {
        func response(_ text: String) throws -> ProbeResponse { try #require(ProbeResponse(parsing: Array(text.utf8))) }
        let validation = Self.validation
        let url = "http://connectivity.roam.test/generate_204"
        #expect(ConnectivityProbe.judge(try response("HTTP/1.1 204 No Content\r\n\r\n"), validation, url: url).state == .validated)
        let redirect = ConnectivityProbe.judge(try response("HTTP/1.0 302 Found\r\nlocation:  http://portal/login\r\n\r\n"), validation, url: url)
        #expect(redirect == InterfaceConnectivity(state: .portal, portalURL: "http://portal/login", reason: "HTTP 302 to http://portal/login in place of \(url)"))
        #expect(ConnectivityProbe.judge(try response("HTTP/1.1 200 OK\n\n<html>"), validation, url: url).state == .portal)
        #expect(ConnectivityProbe.judge(try response("HTTP/1.1 511 Network Authentication Required\r\n\r\n"), validation, url: url).state == .limited)
        // NetworkManager's way: 200 with a known body.
        var manager = validation
        manager.expectedStatus = 200
        manager.expectedBody = "NetworkManager is online"
        #expect(ConnectivityProbe.judge(try response("HTTP/1.1 200 OK\r\nContent-Length: 24\r\n\r\nNetworkManager is online\n"), manager, url: url).state == .validated)
        #expect(ConnectivityProbe.judge(try response("HTTP/1.1 200 OK\r\n\r\nHotel login"), manager, url: url).state == .portal)
    }

    @Test func whatIsNotAnHTTPAnswerIsRefusedWithinBounds() {
        for text in ["", "HTTP/1.1 204", "HTTP/2 204\r\n\r\n", "HTTP/1.1 2x4 OK\r\n\r\n", "SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1204 OK\r\n\r\n"] {
            #expect(ProbeResponse(parsing: Array(text.utf8)) == nil, "\(text)")
        }
        // A head that does not end within 8 KiB is no answer, however much follows.
        let endless = Array("HTTP/1.1 200 OK\r\n".utf8) + [UInt8](repeating: 0x41, count: 100_000) + Array("\r\n\r\n".utf8)
        #expect(ProbeResponse(parsing: endless) == nil)
        // A Location with control characters or past 2048 bytes is not kept.
        let control = ProbeResponse(parsing: Array("HTTP/1.1 302 Found\r\nLocation: http://a/\u{1b}[31m\r\n\r\n".utf8))
        #expect(control?.status == 302 && control?.location == nil)
        let long = ProbeResponse(parsing: Array("HTTP/1.1 302 Found\r\nLocation: http://\(String(repeating: "a", count: 3000))\r\n\r\n".utf8))
        #expect(long?.status == 302 && long?.location == nil)
        // The body kept is what fits in the probe's 16 KiB.
        let big = ProbeResponse(parsing: Array("HTTP/1.1 200 OK\r\n\r\n".utf8) + [UInt8](repeating: 0x78, count: 1 << 20))
        #expect(big.map { $0.body.count <= ConnectivityProbe.maximumAnswer } == true)
    }

    @Test(arguments: [
        ("http://connectivity.roam.test/generate_204", "connectivity.roam.test", 80, "/generate_204"),
        ("http://198.18.0.1:8080", "198.18.0.1", 8080, "/"),
        ("HTTP://[fd00::1]:81/check?x=1", "fd00::1", 81, "/check?x=1"),
    ])
    func probeURLsAreParsed(_ url: String, _ host: String, _ port: Int, _ path: String) throws {
        let target = try ConnectivityValidation(url: url).target().get()
        #expect(target == ProbeTarget(host: host, port: UInt16(port), path: path))
    }

    @Test(arguments: [
        ("https://example.test/", "only http:// is probed"),
        ("http://user@example.test/", "user information is not allowed"),
        ("http://example.test:0/", "the port must be 1 to 65535"),
        ("http://example.test:99999/", "the port must be 1 to 65535"),
        ("http://[fd00::1/", "closing ']'"),
        ("http:///path", "the host must be 1 to 253 characters"),
        ("http://exa mple.test/", "spaces and control"),
        ("http://exa_mple.test/", "characters a host name cannot"),
    ])
    func badProbeURLsAreRefusedSayingWhy(_ url: String, _ message: String) {
        guard case .failure(let error) = ConnectivityValidation(url: url).target() else {
            Issue.record("'\(url)' was accepted")
            return
        }
        #expect(error.code == .invalidConfiguration && error.message.contains(message), "\(error.message)")
    }

    /// A session the portal API gave a length is checked again just after it ends; a check asked
    /// for (a login) comes at once, or right after the probe in flight.
    @Test func aSessionsEndAndARevalidationBringTheNextProbeForward() {
        var tracker = ConnectivityTracker(configuration: Self.validation)
        let first = tracker.update([Self.wifi], at: .zero)
        var session = Self.validated
        session.sessionRemaining = s(30)
        _ = tracker.finished(first[0], session, at: s(1))
        #expect(tracker.nextDue == s(1) + s(30) + ConnectivityTracker.sessionMargin)
        // Longer than the interval: the interval wins.
        session.sessionRemaining = s(3600)
        let second = tracker.due(at: s(32))
        _ = tracker.finished(second[0], session, at: s(32))
        #expect(tracker.nextDue == s(332))
        // Asked to check again: now.
        let asked = tracker.revalidate(nil, at: s(40))
        #expect(asked.map(\.interface) == ["wlan0"])
        // Asked again while that probe is in flight: none now, one as soon as it ends.
        let whileInFlight = tracker.revalidate(["wlan0"], at: s(41))
        #expect(whileInFlight.isEmpty)
        _ = tracker.finished(asked[0], Self.portal, at: s(42))
        #expect(tracker.nextDue == s(42))
        // Another interface's name asks nothing of this one.
        let next = tracker.due(at: s(42))
        _ = tracker.finished(next[0], Self.portal, at: s(43))
        let other = tracker.revalidate(["rmnet0"], at: s(44))
        #expect(other.isEmpty)
    }

    /// RFC 8908's JSON as a portal sends it, and what is refused of it, each within bounds.
    @Test func portalAPIAnswersAreReadAndBadOnesRefused() throws {
        func answer(_ body: String, status: Int = 200) -> Result<PortalAPIAnswer, PortalAPIError> {
            PortalAPIAnswer.parse(ProbeResponse(parsing: Array("HTTP/1.1 \(status) OK\r\nContent-Type: application/captive+json\r\n\r\n\(body)".utf8))!)
        }
        let captive = try answer(#"{"captive": true, "user-portal-url": "https://portal.example/login", "venue-info-url": 3}"#).get()
        #expect(captive == PortalAPIAnswer(captive: true, userPortalURL: "https://portal.example/login"))
        let through = try answer(#"{"captive": false, "seconds-remaining": 326.7, "can-extend-session": true}"#).get()
        #expect(through == PortalAPIAnswer(captive: false, secondsRemaining: 326))
        let forever = try answer(#"{"captive": false, "seconds-remaining": 1e300}"#).get()
        #expect(forever.secondsRemaining == PortalAPIAnswer.maximumSeconds)
        let refused: [(String, Int, String)] = [
            (#"{"captive": false}"#, 404, "answered HTTP 404"),
            ("<html>login</html>", 200, "sent no JSON"),
            ("[true]", 200, "not an object"),
            (#"{"captive": "yes"}"#, 200, "no boolean 'captive'"),
            (#"{"user-portal-url": "http://a/"}"#, 200, "no boolean 'captive'"),
            (#"{"captive": true, "user-portal-url": "javascript:alert(1)"}"#, 200, "not an http(s) URL"),
            (#"{"captive": true, "user-portal-url": "http://a/\u001b[31m"}"#, 200, "not an http(s) URL"),
            (#"{"captive": false, "seconds-remaining": -5}"#, 200, "not a number of seconds"),
            (#"{"captive": false, "seconds-remaining": "10"}"#, 200, "not a number of seconds"),
            (String(repeating: "[", count: 100_000), 200, "sent no JSON"),
            ("{\"captive\": true, \"pad\": \"" + String(repeating: "x", count: 100_000) + "\"}", 200, "sent no JSON"),
        ]
        for (body, status, message) in refused {
            guard case .failure(let error) = answer(body, status: status) else {
                Issue.record("accepted: \(body.prefix(80))")
                continue
            }
            #expect(error.description.contains(message), "\(body.prefix(80)): \(error)")
            #expect(error.description.utf8.count < 300)
        }
    }

    @Test func aPortalAPIURLIsCheckedAsTheProbesIs() {
        var validation = Self.validation
        validation.interfacePortalAPIs = ["wlan0": "https://portal.example/api"]
        guard case .failure(let error) = validation.portalAPITargets() else {
            Issue.record("an https API was accepted")
            return
        }
        #expect(error.code == .invalidConfiguration && error.message.contains("captive-portal API URL of wlan0"), "\(error.message)")
        validation.interfacePortalAPIs = ["wlan0": "http://portal.roam.test/api"]
        #expect((try? validation.portalAPITargets().get())?["wlan0"] == ProbeTarget(host: "portal.roam.test", port: 80, path: "/api"))
    }
}
