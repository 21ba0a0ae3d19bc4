import Glibc
import Netlink
import RoamSystem
import SystemPackage

/// What came back from a connectivity probe: the status, the redirect's target, and what was
/// read of the body. Parsed from at most ``ConnectivityProbe/maximumAnswer`` bytes; a head that
/// does not end within them, or a status line that is not HTTP's, is no answer.
package struct ProbeResponse: Sendable, Hashable {
    package var status: Int
    /// The `Location` header, when it is printable ASCII of at most 2048 bytes.
    package var location: String?
    package var body: [UInt8]

    /// The longest head read (status line and headers).
    static let maximumHead = 8192

    /// Where an HTTP head in `bytes` ends (its last line break) and what follows it begins: at the
    /// first empty line (CRLF CRLF, or LF LF from a lax peer) within `limit` bytes.
    package static func headEnd(of bytes: [UInt8], limit: Int = maximumHead) -> (end: Int, bodyStart: Int)? {
        var index = 0
        while index < min(bytes.count, limit) {
            if bytes[index] == 0x0a {
                if index + 1 < bytes.count, bytes[index + 1] == 0x0a { return (index, index + 2) }
                if index + 2 < bytes.count, bytes[index + 1] == 0x0d, bytes[index + 2] == 0x0a { return (index, index + 3) }
            }
            index += 1
        }
        return nil
    }

    package init?(parsing bytes: some Collection<UInt8>) {
        let bytes = Array(bytes.prefix(ConnectivityProbe.maximumAnswer))
        guard let (end, bodyStart) = Self.headEnd(of: bytes) else { return nil }
        let lines = bytes[..<end].split(separator: 0x0a, omittingEmptySubsequences: false).map { line -> ArraySlice<UInt8> in
            line.last == 0x0d ? line.dropLast() : line
        }
        // HTTP/1.0 or HTTP/1.1, a space, three digits.
        guard let statusLine = lines.first, statusLine.count >= 12 else { return nil }
        let start = statusLine.startIndex
        guard Array(statusLine[start..<(start + 7)]) == Array("HTTP/1.".utf8), statusLine[start + 8] == 0x20 else { return nil }
        let digits = statusLine[(start + 9)..<(start + 12)]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        location = nil
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 0x3a) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            guard name == "location" else { continue }
            let value = line[line.index(after: colon)...].drop { $0 == 0x20 || $0 == 0x09 }
            if value.count <= 2048, !value.isEmpty, value.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) {
                location = String(decoding: value, as: UTF8.self)
            }
        }
        body = Array(bytes[bodyStart...])
    }
}

/// One probe, made on the calling thread: the host looked up through `interface` (unless it is
/// an address), a TCP connection from `interface`, `GET PATH`, and at most
/// ``maximumAnswer`` bytes read, all within the configuration's timeout.
package enum ConnectivityProbe {
    /// The most a probe reads: a portal's page beyond it says nothing more.
    package static let maximumAnswer = 16384

    package static func run(_ target: ProbeTarget, _ validation: ConnectivityValidation, interface: String, namespace: NetworkNamespace,
                            resolvers: [IPAddress], stop: EventSignal, portalAPI: ProbeTarget? = nil) -> InterfaceConnectivity {
        let deadline = MonotonicInstant.now + validation.timeout
        var apiNote: String?
        var session: PortalAPIAnswer?
        if let portalAPI {
            // RFC 8908: the API first; it knows the portal's page and how long a session lasts.
            // Half the time at most: an API that drips leaves the probe the other half.
            switch get(portalAPI, accept: PortalAPIAnswer.mediaType, validation, interface: interface, namespace: namespace,
                       resolvers: resolvers, deadline: MonotonicInstant.now + validation.timeout / 2, stop: stop) {
            case .success(let response):
                switch PortalAPIAnswer.parse(response) {
                case .success(let answer) where answer.captive:
                    return InterfaceConnectivity(state: .portal, portalURL: answer.userPortalURL,
                                                 reason: "the portal API at \(portalAPI.url) says captive")
                case .success(let answer): session = answer
                case .failure(let why): apiNote = "the portal API at \(portalAPI.url) \(why)"
                }
            case .failure(let why):
                apiNote = "the portal API at \(portalAPI.url): \(why.reason)"
            }
        }
        var found: InterfaceConnectivity
        switch get(target, accept: "*/*", validation, interface: interface, namespace: namespace, resolvers: resolvers, deadline: deadline, stop: stop) {
        case .success(let response): found = judge(response, validation, url: target.url)
        case .failure(let why): found = InterfaceConnectivity(state: .limited, reason: why.reason)
        }
        if let apiNote { found.reason = (found.reason.map { $0 + "; " } ?? "") + apiNote }
        if found.state == .validated, let remaining = session?.secondsRemaining {
            found.sessionRemaining = .seconds(remaining)
        }
        return found
    }

    /// `GET` of `target` from `interface`: its host looked up through the interface (unless it
    /// is an address), then each address tried in turn until one answers HTTP, by `deadline`.
    private static func get(_ target: ProbeTarget, accept: String, _ validation: ConnectivityValidation, interface: String,
                            namespace: NetworkNamespace, resolvers: [IPAddress], deadline: MonotonicInstant,
                            stop: EventSignal) -> Result<ProbeResponse, ProbeFailure> {
        let addresses: [IPAddress]
        if let literal = IPAddress(target.host) {
            addresses = [literal]
        } else {
            // A third of the timeout a try, so that a query lost on a lossy radio is asked again.
            switch NameLookup.resolve(target.host, families: [.inet6, .inet], servers: resolvers, in: namespace, interface: interface,
                                      deadline: deadline, stop: stop, tryTimeout: validation.timeout / 3) {
            case .success(let answer): addresses = answer.addresses
            case .failure(let failure): return .failure(ProbeFailure(reason: "looking up \(target.host): \(failure)"))
            }
        }
        var lastFailure = "the lookup of \(target.host) took the whole timeout"
        for address in addresses {
            guard MonotonicInstant.now < deadline else { break }
            switch fetch(address, target, accept: accept, interface: interface, namespace: namespace, deadline: deadline, stop: stop) {
            case .success(let bytes):
                guard let response = ProbeResponse(parsing: bytes) else {
                    return .failure(ProbeFailure(reason: bytes.isEmpty ? "\(address) closed the connection without an answer"
                                                 : "\(address) answered with something other than HTTP"))
                }
                return .success(response)
            case .failure(let why):
                lastFailure = why.reason
            }
        }
        return .failure(ProbeFailure(reason: lastFailure))
    }

    /// What an answer means: the expected one validates; another status below 400 is a portal
    /// (a redirect's `Location` is its page); an error status is `limited`.
    package static func judge(_ response: ProbeResponse, _ validation: ConnectivityValidation, url: String) -> InterfaceConnectivity {
        let bodyMatches = validation.expectedBody.map { response.body.starts(with: Array($0.utf8)) } ?? true
        if response.status == validation.expectedStatus, bodyMatches {
            return InterfaceConnectivity(state: .validated, reason: "HTTP \(response.status) from \(url)")
        }
        if response.status >= 300, response.status < 400 {
            return InterfaceConnectivity(state: .portal, portalURL: response.location,
                                         reason: "HTTP \(response.status) to \(response.location ?? "nowhere") in place of \(url)")
        }
        if response.status < 400 {
            return InterfaceConnectivity(state: .portal, reason: "HTTP \(response.status)\(bodyMatches ? "" : " with another body") in place of \(url)")
        }
        return InterfaceConnectivity(state: .limited, reason: "HTTP \(response.status) from \(url)")
    }

    /// Connects from `interface` to `address` and reads the answer to the probe's request.
    private static func fetch(_ address: IPAddress, _ target: ProbeTarget, accept: String, interface: String, namespace: NetworkNamespace,
                              deadline: MonotonicInstant, stop: EventSignal) -> Result<[UInt8], ProbeFailure> {
        let domain = address.family == .inet ? AF_INET : AF_INET6
        guard let descriptor = try? namespace.perform({
            socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }), descriptor >= 0 else {
            return .failure(ProbeFailure(reason: "cannot open a socket: \(Errno.current)"))
        }
        defer { close(descriptor) }
        guard NameLookup.bind(descriptor, toDevice: interface) else { return .failure(ProbeFailure(reason: "cannot bind a socket to \(interface): \(Errno.current)")) }
        let started = address.withSocketAddress(port: target.port) { connect(descriptor, $0, $1) }
        if started != 0, errno != EINPROGRESS { return .failure(ProbeFailure(reason: "\(address): \(Errno.current)")) }
        // Connected once writable; the error, if any, is SO_ERROR's.
        switch wait(descriptor, for: Int16(POLLOUT), until: deadline, stop: stop) {
        case .ready:
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { return .failure(ProbeFailure(reason: "\(address): \(Errno(rawValue: error))")) }
        case .timedOut: return .failure(ProbeFailure(reason: "no connection to \(address) in time"))
        case .stopped: return .failure(ProbeFailure(reason: "stopped"))
        }
        let host = target.host.contains(":") ? "[\(target.host)]" : target.host
        let request = Array("GET \(target.path) HTTP/1.1\r\nHost: \(host)\(target.port == 80 ? "" : ":\(target.port)")\r\nUser-Agent: roam-connectivity-check\r\nAccept: \(accept)\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                sent += count
                continue
            }
            guard errno == EAGAIN else { return .failure(ProbeFailure(reason: "\(address): \(Errno.current)")) }
            switch wait(descriptor, for: Int16(POLLOUT), until: deadline, stop: stop) {
            case .ready: continue
            case .timedOut: return .failure(ProbeFailure(reason: "\(address) took the request too slowly"))
            case .stopped: return .failure(ProbeFailure(reason: "stopped"))
            }
        }
        // Read until the peer closes, the limit, or the deadline (a slow drip ends there).
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while answer.count < maximumAnswer {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, min($0.count, maximumAnswer - answer.count), 0) }
            if count > 0 {
                answer += buffer[..<count]
                continue
            }
            if count == 0 { break }
            guard errno == EAGAIN else {
                if answer.isEmpty { return .failure(ProbeFailure(reason: "\(address): \(Errno.current)")) }
                break
            }
            switch wait(descriptor, for: Int16(POLLIN), until: deadline, stop: stop) {
            case .ready: continue
            case .timedOut:
                if answer.isEmpty { return .failure(ProbeFailure(reason: "no answer from \(address) in time")) }
                return .success(answer)
            case .stopped: return .failure(ProbeFailure(reason: "stopped"))
            }
        }
        return .success(answer)
    }

    private enum Wait { case ready, timedOut, stopped }

    package struct ProbeFailure: Error {
        var reason: String
    }

    private static func wait(_ descriptor: Int32, for events: Int16, until deadline: MonotonicInstant, stop: EventSignal) -> Wait {
        var entries = [pollfd(fd: descriptor, events: events, revents: 0), stop.pollEntry]
        _ = try? waitForEvents(&entries, until: deadline)
        if entries[1].revents != 0 { return .stopped }
        return entries[0].revents != 0 ? .ready : .timedOut
    }
}

/// What a captive-portal API (RFC 8908) answered: whether the client is held by the portal, the
/// page it logs in at, and how long its session has left. Parsed from a `200` answer whose body
/// is a JSON object with a boolean `captive`; what else is in it is ignored, a value of the
/// wrong kind is not. The body is at most what a probe reads (``ConnectivityProbe/maximumAnswer``).
package struct PortalAPIAnswer: Sendable, Hashable {
    /// RFC 8908's media type.
    package static let mediaType = "application/captive+json"
    /// A session longer than a year is taken as a year.
    package static let maximumSeconds: Int64 = 366 * 86_400

    package var captive: Bool
    /// `user-portal-url`: only an http:// or https:// URL of printable ASCII, at most 2048 bytes.
    package var userPortalURL: String?
    /// `seconds-remaining`, whole seconds, from 0 to ``maximumSeconds``.
    package var secondsRemaining: Int64?

    package init(captive: Bool, userPortalURL: String? = nil, secondsRemaining: Int64? = nil) {
        self.captive = captive
        self.userPortalURL = userPortalURL
        self.secondsRemaining = secondsRemaining
    }

    /// The answer in `response`, or why it is not one (`answered HTTP 404`, `sent no JSON: ...`).
    package static func parse(_ response: ProbeResponse) -> Result<PortalAPIAnswer, PortalAPIError> {
        guard response.status == 200 else { return .failure(PortalAPIError("answered HTTP \(response.status)")) }
        let text = String(decoding: response.body, as: UTF8.self)
        let value: JSONValue
        do throws(JSONParseError) {
            value = try JSONValue.parse(text)
        } catch {
            return .failure(PortalAPIError("sent no JSON (\(error))"))
        }
        guard case .object = value else { return .failure(PortalAPIError("sent JSON that is not an object")) }
        guard case .bool(let captive)? = value["captive"] else { return .failure(PortalAPIError("sent no boolean 'captive'")) }
        var answer = PortalAPIAnswer(captive: captive)
        if let url = value["user-portal-url"] {
            guard let text = url.stringValue, text.utf8.count <= 2048, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }),
                  text.lowercased().hasPrefix("http://") || text.lowercased().hasPrefix("https://") else {
                return .failure(PortalAPIError("sent a 'user-portal-url' that is not an http(s) URL of at most 2048 characters"))
            }
            answer.userPortalURL = text
        }
        if let remaining = value["seconds-remaining"] {
            guard let seconds = remaining.doubleValue, seconds.isFinite, seconds >= 0 else {
                return .failure(PortalAPIError("sent a 'seconds-remaining' that is not a number of seconds"))
            }
            answer.secondsRemaining = Int64(min(seconds, Double(maximumSeconds)).rounded(.down))
        }
        return .success(answer)
    }
}

/// Why a captive-portal API's answer was not taken.
package struct PortalAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
