import Foundation
import Glibc
import PathMonitor
import RoamControl
import RoamCore
import Synchronization
import Testing

/// `roam daemon`'s API apart from the daemon: its answers to every route, who may change
/// anything, resuming a stream, and what it holds. Root-free (the daemon itself, with curl,
/// another user and roam monitor --daemon as its readers, is RoamCLITests.DaemonCommandTests).
struct PathServiceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func path(_ names: [String]) -> NetworkPath {
        let interfaces = names.enumerated().map { offset, name in
            NetworkInterface(name: name, index: Int32(offset + 2), type: offset == 0 ? .wifi : .cellular, isExpensive: offset > 0,
                             addresses: [IPPrefix("198.18.\(offset).2/24")!])
        }
        return NetworkPath(status: interfaces.isEmpty ? .unsatisfied : .satisfied, unsatisfiedReason: interfaces.isEmpty ? .noUsableInterface : nil,
                           availableInterfaces: interfaces, primaryInterface: interfaces.first, isExpensive: interfaces.first?.isExpensive ?? false,
                           isConstrained: false, supportsIPv4: !interfaces.isEmpty, supportsIPv6: false, supportsDNS: false, gateways: [])
    }

    /// Answers a request synchronously (the service answers at once).
    func answer(_ service: PathService, _ method: String, _ target: String, peer: uid_t? = nil, lastEventID: String? = nil) -> ControlAPI.Answer? {
        let answered = Mutex<ControlAPI.Answer?>(nil)
        service.handle(ServiceRequest(method: method, target: target, lastEventID: lastEventID, peerUID: peer)) { answer in answered.withLock { $0 = answer } }
        return answered.withLock { $0 }
    }

    func status(_ answer: ControlAPI.Answer?) -> Int? {
        if case .json(let status, _) = answer { status } else { nil }
    }

    @Test func docsListEveryRoute() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/daemon.md", encoding: .utf8)
        for route in PathService.routes {
            #expect(text.contains("`\(route.method) \(route.pattern)"), "docs/daemon.md lists \(route.method) \(route.pattern)")
        }
    }

    @Test func thePathIsTheMonitorsWithItsSequenceAndDecodesBackToTheSame() throws {
        let service = PathService(owner: 1000, revalidate: nil)
        #expect(status(answer(service, "GET", "/v1/path")) == 503, "no path yet")
        let published = Self.path(["wlan0", "wwan0"])
        service.publish(published, time: "2026-12-05T10:00:00.000000Z")
        service.publish(Self.path(["wwan0"]), time: "2026-12-05T10:00:01.000000Z")
        guard case .json(200, let body)? = answer(service, "GET", "/v1/path") else {
            Issue.record("GET /v1/path answers 200 with the path")
            return
        }
        #expect(body["sequence"]?.intValue == 1)
        #expect(body["primaryInterface"]?.stringValue == "wwan0")
        #expect(body["time"]?.stringValue == "2026-12-05T10:00:01.000000Z")
        #expect(NetworkPath(json: body) == Self.path(["wwan0"]), "what a reader decodes is what the monitor published")
        // Every field of the monitor's JSON, for a path with two interfaces, decodes back.
        #expect(NetworkPath(json: published.json(time: "t")) == published)
        #expect(NetworkPath(json: .object([("status", "satisfied")])) == nil, "an incomplete path is none")
    }

    @Test func aStreamStartsWithTheCurrentPathAndResumesAfterTheLastEventItSaw() {
        let service = PathService(owner: 1000, revalidate: nil)
        for index in 0..<3 { service.publish(Self.path(index % 2 == 0 ? ["wlan0"] : ["wwan0"]), time: "t\(index)") }
        guard case .events(let source, let from)? = answer(service, "GET", "/v1/path/events") else {
            Issue.record("an event stream")
            return
        }
        #expect(from == 2, "the current path first")
        let batch = source.next(from, 256)
        #expect(batch.first == 2 && batch.lines.count == 1 && batch.lines[0].hasPrefix(#"{"sequence":2,"time":"t2""#), "\(batch)")
        #expect(service.eventType(of: batch.lines[0]) == "path")
        // Woken on each new path.
        let woken = Atomic<Int>(0)
        let token = source.subscribe { woken.add(1, ordering: .relaxed) }
        service.publish(Self.path([]), time: "t3")
        #expect(woken.load(ordering: .relaxed) == 1)
        source.unsubscribe(token)
        // Resuming: Last-Event-ID 0 goes on from 1; from=1 likewise.
        if case .events(_, let resumed)? = answer(service, "GET", "/v1/path/events", lastEventID: "0") { #expect(resumed == 1) } else { Issue.record("resumed") }
        if case .events(_, let resumed)? = answer(service, "GET", "/v1/path/events?from=1") { #expect(resumed == 1) } else { Issue.record("from") }
        #expect(status(answer(service, "GET", "/v1/path/events?from=-1")) == 400)
        #expect(status(answer(service, "GET", "/v1/path/events?from=x")) == 400)
        #expect(status(answer(service, "GET", "/v1/path/events", lastEventID: "\u{1b}[2J")) == 400)
        // What is no longer held: the stream's first line is later than asked (the server says gap).
        for index in 4..<(4 + PathService.retained) { service.publish(Self.path(["wlan0"]), time: "t\(index)") }
        let old = source.next(0, 8)
        #expect(old.first == 4 && old.lines.count == 8, "the oldest held: \(old.first)")
        #expect(!source.ended())
        service.end()
        #expect(source.ended())
    }

    /// Across restarts: a daemon that starts where the last stopped goes on from its sequence,
    /// and a client resuming beyond what this daemon published gets the current path, not a
    /// stream that waits for a sequence that may never come.
    @Test func sequencesGoOnAcrossRestartsAndAResumeBeyondThemGetsTheCurrentPath() {
        let restarted = PathService(owner: 1000, revalidate: nil, firstSequence: 42)
        let first = restarted.publish(Self.path(["wlan0"]), time: "t0")
        #expect(first.sequence == 42 && first.json.hasPrefix(#"{"sequence":42,"#), "\(first)")
        // The client saw 41 from the daemon before: it gets 42.
        if case .events(_, let from)? = answer(restarted, "GET", "/v1/path/events", lastEventID: "41") { #expect(from == 42) } else { Issue.record("resumed") }
        // A client of a daemon that kept no state, beyond: the current path.
        let fresh = PathService(owner: 1000, revalidate: nil)
        fresh.publish(Self.path(["wlan0"]), time: "t0")
        fresh.publish(Self.path(["wwan0"]), time: "t1")
        if case .events(_, let from)? = answer(fresh, "GET", "/v1/path/events", lastEventID: "900") { #expect(from == 1) } else { Issue.record("beyond") }
        if case .events(_, let from)? = answer(fresh, "GET", "/v1/path/events?from=2") { #expect(from == 2, "the next path: waits for it") } else { Issue.record("next") }
    }

    @Test func onlyTheDaemonsUserAndRootMayAskForAnotherCheck() {
        let asked = Mutex<[String]>([])
        let service = PathService(owner: 1000, revalidate: { interface in asked.withLock { $0.append(interface ?? "all") } })
        #expect(status(answer(service, "POST", "/v1/revalidate", peer: 1001)) == 403)
        #expect(status(answer(service, "POST", "/v1/revalidate", peer: nil)) == 403, "a peer not known may change nothing")
        #expect(status(answer(service, "POST", "/v1/revalidate?interface=wlan0", peer: 1000)) == 202)
        #expect(status(answer(service, "POST", "/v1/revalidate", peer: 0)) == 202)
        #expect(status(answer(service, "POST", "/v1/revalidate?interface=a/b", peer: 0)) == 400)
        #expect(status(answer(service, "POST", "/v1/revalidate?interface=0123456789abcdef", peer: 0)) == 400, "16 characters")
        #expect(asked.withLock { $0 } == ["wlan0", "all"])
        let unvalidated = PathService(owner: 1000, revalidate: nil)
        #expect(status(answer(unvalidated, "POST", "/v1/revalidate", peer: 1000)) == 409)
        // Routes and methods.
        #expect(status(answer(service, "GET", "/v1/revalidate", peer: 0)) == 405)
        #expect(service.allowedMethods(for: "/v1/revalidate") == ["POST"])
        #expect(status(answer(service, "POST", "/v1/path", peer: 0)) == 405)
        #expect(status(answer(service, "GET", "/v1/run")) == 404)
    }
}
