import CRoamLinux
import Glibc
import Netlink
import PathMonitor
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

/// Who a network's captive portal lets through, and until when: one session per member (per
/// access link: a portal knows a phone by its MAC address, which a renumbering keeps). Pure
/// state on the caller's clock; ``CaptivePortalServer`` keeps one under a lock.
package struct CaptivePortalSessions: Sendable {
    /// How a session began or ended.
    package enum Cause: Sendable, Hashable, CustomStringConvertible {
        /// A `portal: login` or `logout` on the timeline.
        case timeline
        /// The phone POSTed to the portal's page, from this address.
        case request(from: IPAddress)
        /// The session's time ran out.
        case expiry

        package var description: String {
            switch self {
            case .timeline: "by the timeline"
            case .request(let address): "by a POST from \(address)"
            case .expiry: "expired"
            }
        }
    }

    /// A session that began or ended.
    package struct Change: Sendable, Hashable {
        package var link: String
        package var loggedIn: Bool
        package var cause: Cause
    }

    package let portal: CaptivePortal
    /// Each logged-in member's session end (nil: until logout), by access link.
    private var sessions: [String: MonotonicInstant?] = [:]

    package init(portal: CaptivePortal) {
        self.portal = portal
    }

    package func isLoggedIn(_ link: String) -> Bool { sessions[link] != nil }

    /// How long `link`'s session has left at `now` (nil: not logged in, or no end).
    package func remaining(_ link: String, at now: MonotonicInstant) -> Duration? {
        guard case .some(.some(let end)) = sessions[link] else { return nil }
        return max(.zero, end - now)
    }

    /// Logs `link` in at `now` (again: its session starts over). Returns the change, or nil if
    /// it was logged in already (its session is renewed all the same).
    package mutating func login(_ link: String, at now: MonotonicInstant, cause: Cause) -> Change? {
        let was = isLoggedIn(link)
        sessions[link] = .some(portal.expires.map { now + $0 })
        return was ? nil : Change(link: link, loggedIn: true, cause: cause)
    }

    /// Logs `link` out. Returns the change, or nil if it was not logged in.
    package mutating func logout(_ link: String, cause: Cause) -> Change? {
        guard sessions.removeValue(forKey: link) != nil else { return nil }
        return Change(link: link, loggedIn: false, cause: cause)
    }

    /// Ends the sessions whose time is up at `now`.
    package mutating func expire(at now: MonotonicInstant) -> [Change] {
        let ended = sessions.compactMap { link, end -> String? in
            guard case .some(let end) = end, end <= now else { return nil }
            return link
        }.sorted()
        return ended.compactMap { logout($0, cause: .expiry) }
    }

    /// When the next session ends, if one does.
    package var nextExpiry: MonotonicInstant? {
        sessions.values.compactMap { $0 }.min()
    }
}

/// What a network's captive portal answers over HTTP (pure: tests feed it requests). `GET /` is
/// the login page, `POST /login` and `POST /logout` act for the phone asking, `GET /api` is the
/// RFC 8908 API; anything else, on any host, is redirected (`302`) to the page, as the portals of
/// hotels and trains do. Requests are at most ``maximumHead`` bytes of head and
/// ``maximumBody`` of body.
package enum CaptivePortalHTTP {
    package static let maximumHead = 8192
    package static let maximumBody = 4096
    package static let pagePath = "/"
    package static let apiPath = "/api"

    package static var pageURL: String { "http://\(CaptivePortal.host)\(pagePath)" }
    package static var apiURL: String { "http://\(CaptivePortal.host)\(apiPath)" }

    /// A request's head, parsed: its method, path and `Host`, and how long its body is.
    package struct Request: Sendable, Hashable {
        package var method: String
        package var path: String
        package var host: String?
        package var contentLength: Int
    }

    /// Why a request is refused before it is answered.
    package enum Refusal: Error, Sendable, Hashable {
        case malformed
        case tooLarge
    }

    /// The head in `bytes` (which holds all of it, up to its empty line).
    package static func parse(head bytes: [UInt8]) -> Result<Request, Refusal> {
        guard let (end, _) = ProbeResponse.headEnd(of: bytes, limit: maximumHead) else { return .failure(.malformed) }
        let lines = bytes[..<end].split(separator: 0x0a, omittingEmptySubsequences: false).map { $0.last == 0x0d ? $0.dropLast() : $0 }
        guard let first = lines.first else { return .failure(.malformed) }
        let words = first.split(separator: 0x20, omittingEmptySubsequences: true)
        guard words.count == 3, words[2].starts(with: Array("HTTP/1.".utf8)),
              words[0].count <= 16, words[0].allSatisfy({ $0 >= 0x41 && $0 <= 0x5a }),
              words[1].count <= 2048, words[1].allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return .failure(.malformed) }
        var request = Request(method: String(decoding: words[0], as: UTF8.self), path: String(decoding: words[1], as: UTF8.self),
                              host: nil, contentLength: 0)
        // An absolute form (`GET http://host/path`), as a proxy would get: the path is what follows the host.
        if request.path.lowercased().hasPrefix("http://") {
            let rest = request.path.dropFirst(7)
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            request.host = String(rest[..<slash]).lowercased()
            request.path = slash == rest.endIndex ? "/" : String(rest[slash...])
        }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 0x3a) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            var value = String(decoding: line[line.index(after: colon)...].drop { $0 == 0x20 || $0 == 0x09 }, as: UTF8.self)
            while value.last == " " || value.last == "\t" { value.removeLast() }
            switch name {
            case "host" where request.host == nil:
                request.host = value.lowercased()
            case "content-length":
                guard let length = Int(value), length >= 0 else { return .failure(.malformed) }
                guard length <= maximumBody else { return .failure(.tooLarge) }
                request.contentLength = length
            case "transfer-encoding":
                // A chunked body has no length to read up to: not taken.
                return .failure(.tooLarge)
            default:
                break
            }
        }
        return .success(request)
    }

    /// What the portal does with `request` from a phone whose session is `loggedIn` (with
    /// `remaining` of it left): the answer's bytes, and whether it logs the phone in (`true`)
    /// or out (`false`).
    package static func answer(_ request: Request, loggedIn: Bool, remaining: Duration?, network: String) -> (response: [UInt8], login: Bool?) {
        let host = request.host.map { $0.split(separator: ":").first.map(String.init) ?? $0 }
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        guard host == CaptivePortal.host else {
            return (response(302, "Found", headers: ["Location: \(pageURL)"], body: "See \(pageURL)\n"), nil)
        }
        switch (request.method, path) {
        case ("GET", apiPath), ("HEAD", apiPath):
            var members = "\"captive\": \(!loggedIn), \"user-portal-url\": \"\(pageURL)\", \"can-extend-session\": true"
            if loggedIn, let remaining { members += ", \"seconds-remaining\": \(remaining.components.seconds)" }
            return (response(200, "OK", headers: ["Content-Type: \(PortalAPIAnswer.mediaType)", "Cache-Control: private"],
                             body: "{\(members)}\n", head: request.method == "HEAD"), nil)
        case ("GET", pagePath), ("HEAD", pagePath):
            let page = loggedIn
                ? "<!doctype html><title>\(network)</title><p>You are online.</p><form method=post action=/logout><button>Log out</button></form>\n"
                : "<!doctype html><title>\(network)</title><p>Welcome to \(network). Accept the terms to go online.</p>"
                    + "<form method=post action=/login><button>Accept</button></form>\n"
            return (response(200, "OK", headers: ["Content-Type: text/html; charset=utf-8", "Cache-Control: no-store"], body: page,
                             head: request.method == "HEAD"), nil)
        case ("POST", "/login"):
            return (response(303, "See Other", headers: ["Location: \(pageURL)"], body: "Logged in\n"), true)
        case ("POST", "/logout"):
            return (response(303, "See Other", headers: ["Location: \(pageURL)"], body: "Logged out\n"), false)
        case (_, pagePath), (_, apiPath), (_, "/login"), (_, "/logout"):
            return (response(405, "Method Not Allowed", headers: [], body: "Not here\n"), nil)
        default:
            return (response(404, "Not Found", headers: [], body: "No such page\n"), nil)
        }
    }

    private static func response(_ status: Int, _ phrase: String, headers: [String], body: String, head: Bool = false) -> [UInt8] {
        let body = Array(body.utf8)
        let lines = ["HTTP/1.1 \(status) \(phrase)"] + headers + ["Content-Length: \(body.count)", "Connection: close"]
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) + (head ? [] : body)
    }
}

/// A network's captive portal in its gateway: the HTTP server of ``CaptivePortalHTTP`` on port 80
/// of the gateway's addresses, the sessions, and what carries them out (`apply`, called with each
/// change on the portal's thread: it updates the gateway's nftables set). One thread, polling its
/// listeners, its clients (at most ``maximumClients``, each given ``patience``) and the next
/// session's end.
final class CaptivePortalServer: Sendable {
    static let maximumClients = 64
    static let patience = Duration.seconds(2)

    private let sessions: Mutex<CaptivePortalSessions>
    private let stopSignal: EventSignal
    /// Woken when a session changes from outside (the timeline), so that the next expiry is seen.
    private let changed: EventSignal
    private let apply: @Sendable (CaptivePortalSessions.Change) -> Void
    private let thread: Mutex<PinnedThread?> = Mutex(nil)

    /// Listens on port 80 of `addresses` in `namespace` (the gateway's). `member` finds the access
    /// link of a phone's address; `apply` carries out each change of a session.
    init(portal: CaptivePortal, network: String, addresses: [IPAddress], in namespace: NetworkNamespace,
         member: @escaping @Sendable (IPAddress) -> String?, apply: @escaping @Sendable (CaptivePortalSessions.Change) -> Void) throws(SimulatorError) {
        sessions = Mutex(CaptivePortalSessions(portal: portal))
        self.apply = apply
        let listeners = try ConnectivityResponder.listen(on: addresses, in: namespace, for: "the captive portal")
        do {
            stopSignal = try EventSignal()
            changed = try EventSignal()
        } catch {
            for descriptor in listeners { close(descriptor) }
            throw SimulatorError(.environment, "cannot start the captive portal: \(error)")
        }
        let owned = listeners
        do throws(NetlinkError) {
            let started = try PinnedThread(name: "roam-portal") { [self] in
                serve(owned, network: network, member: member)
                for descriptor in owned { close(descriptor) }
            }
            thread.withLock { $0 = started }
        } catch {
            for descriptor in listeners { close(descriptor) }
            throw SimulatorError(.environment, "cannot start the captive portal's thread: \(error)")
        }
    }

    /// Logs the phone of `link` in or out (a timeline event); returns the change, if any.
    @discardableResult
    func set(_ loggedIn: Bool, link: String) -> CaptivePortalSessions.Change? {
        let change = sessions.withLock { sessions in
            loggedIn ? sessions.login(link, at: .now, cause: .timeline) : sessions.logout(link, cause: .timeline)
        }
        if let change { apply(change) }
        changed.signal()
        return change
    }

    func isLoggedIn(_ link: String) -> Bool { sessions.withLock { $0.isLoggedIn(link) } }

    func stop() {
        stopSignal.signal()
        thread.withLock { thread in
            thread?.join()
            thread = nil
        }
    }

    private func serve(_ listeners: [Int32], network: String, member: @Sendable (IPAddress) -> String?) {
        struct Client {
            var descriptor: Int32
            var peer: IPAddress?
            var received: [UInt8] = []
            var deadline: MonotonicInstant
        }
        var clients: [Client] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { for client in clients { close(client.descriptor) } }
        while true {
            // Listeners are not polled while every place is taken: a connection waiting in the
            // backlog would wake the loop at once, again and again, until a client's time is up.
            let listening = Int16(clients.count < Self.maximumClients ? POLLIN : 0)
            var entries = [stopSignal.pollEntry, changed.pollEntry] + listeners.map { pollfd(fd: $0, events: listening, revents: 0) }
                + clients.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let expiry = sessions.withLock { $0.nextExpiry }
            let wake = ([expiry] + clients.map(\.deadline)).compactMap { $0 }.min() ?? MonotonicInstant.now + .seconds(3600)
            _ = try? waitForEvents(&entries, until: wake)
            if entries[0].revents != 0 { return }
            if entries[1].revents != 0 { changed.reset() }
            for change in sessions.withLock({ $0.expire(at: .now) }) { apply(change) }
            let polled = clients.count
            for (index, listener) in listeners.enumerated() where entries[2 + index].revents != 0 {
                while clients.count < Self.maximumClients {
                    guard let (descriptor, peer) = ConnectivityResponder.acceptClient(listener) else { break }
                    clients.append(Client(descriptor: descriptor, peer: peer, deadline: .now + Self.patience))
                }
            }
            var done: Set<Int32> = []
            for (index, client) in clients.prefix(polled).enumerated() where entries[2 + listeners.count + index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(client.descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else {
                    if count == 0 || errno != EAGAIN { done.insert(client.descriptor) }
                    continue
                }
                clients[index].received += buffer[..<count]
                let received = clients[index].received
                if received.count > CaptivePortalHTTP.maximumHead + CaptivePortalHTTP.maximumBody {
                    done.insert(client.descriptor)
                    continue
                }
                guard let (_, bodyStart) = ProbeResponse.headEnd(of: received, limit: CaptivePortalHTTP.maximumHead) else {
                    if received.count > CaptivePortalHTTP.maximumHead { done.insert(client.descriptor) }
                    continue
                }
                let request: CaptivePortalHTTP.Request
                switch CaptivePortalHTTP.parse(head: Array(received[..<bodyStart])) {
                case .success(let parsed): request = parsed
                case .failure(let refusal):
                    let answer = refusal == .tooLarge ? "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        : "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    _ = Array(answer.utf8).withUnsafeBytes { send(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    done.insert(client.descriptor)
                    continue
                }
                // The body is read (and ignored) before a POST counts: a browser's form sends one.
                guard received.count - bodyStart >= request.contentLength else { continue }
                let link = client.peer.flatMap(member)
                let (loggedIn, remaining) = sessions.withLock { sessions in
                    (link.map { sessions.isLoggedIn($0) } ?? false, link.flatMap { sessions.remaining($0, at: .now) })
                }
                var (response, login) = CaptivePortalHTTP.answer(request, loggedIn: loggedIn, remaining: remaining, network: network)
                if login != nil, link == nil {
                    response = Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                    login = nil
                }
                if let login, let link, let peer = client.peer {
                    let change = sessions.withLock { sessions in
                        login ? sessions.login(link, at: .now, cause: .request(from: peer)) : sessions.logout(link, cause: .request(from: peer))
                    }
                    if let change { apply(change) }
                }
                _ = response.withUnsafeBytes { send(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                done.insert(client.descriptor)
            }
            let now = MonotonicInstant.now
            for client in clients where now >= client.deadline { done.insert(client.descriptor) }
            for descriptor in done { close(descriptor) }
            clients.removeAll { done.contains($0.descriptor) }
        }
    }
}
