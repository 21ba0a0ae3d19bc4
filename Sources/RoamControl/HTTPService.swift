import Glibc

/// What ``ControlServer`` serves over HTTP/1.1: a run's control API (``ControlAPI``) or the
/// host's path service (``PathService``, `roam daemon`). The server owns the connections,
/// their limits and timeouts, peer credentials and event streams; a service answers requests.
package protocol HTTPService: Sendable {
    /// Answers `request`, calling `respond` once (from any thread).
    func handle(_ request: ServiceRequest, respond: @escaping @Sendable (ControlAPI.Answer) -> Void)
    /// The methods `target` answers, for a 405's `Allow` (nil: not a route).
    func allowedMethods(for target: String) -> [String]?
    /// The `event:` of an event stream's line.
    func eventType(of line: String) -> String
}

/// A request as a service sees it.
package struct ServiceRequest: Sendable {
    package var method: String
    package var target: String
    package var body: [UInt8]
    package var lastEventID: String?
    package var userAgent: String?
    /// The connecting process's user (`SO_PEERCRED`), on a Unix socket; nil on TCP.
    package var peerUID: uid_t?
    /// Toxiproxy's port (its routes), not the control API's.
    package var toxiproxy = false

    package init(method: String, target: String, body: [UInt8] = [], lastEventID: String? = nil, userAgent: String? = nil,
                 peerUID: uid_t? = nil, toxiproxy: Bool = false) {
        self.method = method
        self.target = target
        self.body = body
        self.lastEventID = lastEventID
        self.userAgent = userAgent
        self.peerUID = peerUID
        self.toxiproxy = toxiproxy
    }
}

extension ControlAPI: HTTPService {
    package func handle(_ request: ServiceRequest, respond: @escaping @Sendable (Answer) -> Void) {
        if request.toxiproxy {
            handleToxiproxy(method: request.method, target: request.target, body: request.body, userAgent: request.userAgent, respond: respond)
        } else {
            handle(method: request.method, target: request.target, body: request.body, lastEventID: request.lastEventID, respond: respond)
        }
    }

    package func allowedMethods(for target: String) -> [String]? { Self.allowedMethods(for: target) }

    package func eventType(of line: String) -> String { Self.eventType(of: line) }
}
