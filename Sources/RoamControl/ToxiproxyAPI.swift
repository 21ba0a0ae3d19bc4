import RoamCore
import ScenarioModel
import Simulator

/// Toxiproxy's HTTP API (its 2.x routes, bodies, status codes and error form) over a run's
/// proxies, served on a loopback port of its own (`roam run --toxiproxy-port`), so that
/// toxiproxy's clients (toxiproxy-python, the Go client, toxiproxy-cli) drive a Roam run as they
/// drive toxiproxy. The proxies are the run's (``ProxyHub``): those of the scenario's
/// `proxies:` and those made here, in the run's nodes or on the host's loopback.
///
/// Toxiproxy's port has no token (its clients send none): ``ControlServer`` admits only
/// connections from the run's own user (or root), asked of the kernel, and, as toxiproxy does,
/// refuses requests from browsers (a `User-Agent` starting with `Mozilla/`).
extension ControlAPI {
    /// The toxiproxy version the API answers as (the 2.x series its clients expect).
    package static let toxiproxyVersion = "2.12.0-roam"

    /// Every route of toxiproxy's API that Roam answers.
    package static let toxiproxyRoutes: [Route] = [
        Route(method: "GET", pattern: "/version"),
        Route(method: "POST", pattern: "/reset"),
        Route(method: "GET", pattern: "/proxies"),
        Route(method: "POST", pattern: "/proxies"),
        Route(method: "POST", pattern: "/populate"),
        Route(method: "GET", pattern: "/proxies/{proxy}"),
        Route(method: "POST", pattern: "/proxies/{proxy}"),
        Route(method: "PATCH", pattern: "/proxies/{proxy}"),
        Route(method: "DELETE", pattern: "/proxies/{proxy}"),
        Route(method: "GET", pattern: "/proxies/{proxy}/toxics"),
        Route(method: "POST", pattern: "/proxies/{proxy}/toxics"),
        Route(method: "GET", pattern: "/proxies/{proxy}/toxics/{toxic}"),
        Route(method: "POST", pattern: "/proxies/{proxy}/toxics/{toxic}"),
        Route(method: "PATCH", pattern: "/proxies/{proxy}/toxics/{toxic}"),
        Route(method: "DELETE", pattern: "/proxies/{proxy}/toxics/{toxic}"),
    ]

    /// Toxiproxy's error body: `{"error": MESSAGE, "status": STATUS}`.
    static func toxiproxyError(_ status: Int, _ message: String) -> Answer {
        .json(status: status, body: .object([("error", .string(message)), ("status", .int(Int64(status)))]))
    }

    /// Answers one request of toxiproxy's API. Blocking (a change waits for the proxies'
    /// thread): call it off any event loop.
    package func handleToxiproxy(method: String, target: String, body: [UInt8], userAgent: String?, respond: @escaping @Sendable (Answer) -> Void) {
        if let userAgent, userAgent.hasPrefix("Mozilla/") {
            respond(Self.toxiproxyError(403, "User agent not allowed"))
            return
        }
        let path = Self.split(target).path
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { Self.percentDecoded(String($0)) }
        guard let route = Self.toxiproxyRoutes.first(where: { $0.method == method && Self.matches($0.pattern, segments) }) else {
            let known = Self.toxiproxyRoutes.contains { Self.matches($0.pattern, segments) }
            respond(Self.toxiproxyError(known ? 405 : 404, known ? "method \(escapedForMessage(method, maximumLength: 16)) not allowed on \(escapedForMessage(path, maximumLength: 200))"
                                                       : "no such endpoint: \(escapedForMessage(path, maximumLength: 200))"))
            return
        }
        if route.pattern == "/version" {
            respond(.json(status: 200, body: .object([("version", .string(Self.toxiproxyVersion))])))
            return
        }
        guard let network = runningNetwork, let hub = network.proxies else {
            respond(Self.toxiproxyError(503, isEnded ? "the run has ended" : "the run is starting; ask again shortly"))
            return
        }
        let text = String(decoding: body, as: UTF8.self)
        let nodes = Set(network.scenario.nodes.map(\.name))
        let proxyName = segments.count >= 2 ? segments[1] : ""
        let toxicName = segments.count >= 4 ? segments[3] : ""
        do throws(ProxyHub.Refusal) {
            switch (route.method, route.pattern) {
            case ("POST", "/reset"):
                try hub.reset()
                respond(.json(status: 204, body: .null))
            case ("GET", "/proxies"):
                respond(.json(status: 200, body: .object(hub.proxies().map { ($0.name, $0.json) })))
            case ("POST", "/proxies"):
                let read = ProxyRequest.proxy(text, nodes: nodes)
                guard let spec = read.value else { return respond(Self.toxiproxyError(400, "bad request body: " + read.message)) }
                respond(.json(status: 201, body: try hub.create(spec).json))
            case ("POST", "/populate"):
                let read = ProxyRequest.populate(text, nodes: nodes)
                guard let specs = read.value else { return respond(Self.toxiproxyError(400, "bad request body: " + read.message)) }
                respond(.json(status: 201, body: .object([("proxies", .array(try hub.populate(specs).map(\.json)))])))
            case ("GET", "/proxies/{proxy}"):
                respond(.json(status: 200, body: try hub.proxy(named: proxyName).json))
            case ("POST", "/proxies/{proxy}"), ("PATCH", "/proxies/{proxy}"):
                let existing = try hub.proxy(named: proxyName)
                let read = ProxyRequest.proxy(text, nodes: nodes, base: existing)
                guard var spec = read.value else { return respond(Self.toxiproxyError(400, "bad request body: " + read.message)) }
                spec.name = existing.name
                respond(.json(status: 200, body: try hub.update(proxyName, to: spec).json))
            case ("DELETE", "/proxies/{proxy}"):
                try hub.remove(proxyName)
                respond(.json(status: 204, body: .null))
            case ("GET", "/proxies/{proxy}/toxics"):
                respond(.json(status: 200, body: .array(try hub.proxy(named: proxyName).toxics.map(\.json))))
            case ("POST", "/proxies/{proxy}/toxics"):
                let read = ProxyRequest.toxic(text)
                guard let toxic = read.value else { return respond(Self.toxiproxyError(400, "bad request body: " + read.message)) }
                _ = try hub.setToxics(proxyName) { (toxics: [Toxic]) throws(ProxyHub.Refusal) -> [Toxic] in
                    guard !toxics.contains(where: { $0.name == toxic.name }) else { throw ProxyHub.Refusal(status: 409, message: "toxic already exists") }
                    return toxics + [toxic]
                }
                respond(.json(status: 200, body: toxic.json))
            case ("GET", "/proxies/{proxy}/toxics/{toxic}"):
                guard let toxic = try hub.proxy(named: proxyName).toxics.first(where: { $0.name == toxicName }) else {
                    return respond(Self.toxiproxyError(404, "toxic not found"))
                }
                respond(.json(status: 200, body: toxic.json))
            case ("POST", "/proxies/{proxy}/toxics/{toxic}"), ("PATCH", "/proxies/{proxy}/toxics/{toxic}"):
                guard let existing = try hub.proxy(named: proxyName).toxics.first(where: { $0.name == toxicName }) else {
                    return respond(Self.toxiproxyError(404, "toxic not found"))
                }
                let read = ProxyRequest.toxic(text, base: existing)
                guard var updated = read.value else { return respond(Self.toxiproxyError(400, "bad request body: " + read.message)) }
                updated.name = existing.name
                let change = updated
                _ = try hub.setToxics(proxyName) { (toxics: [Toxic]) throws(ProxyHub.Refusal) -> [Toxic] in
                    guard let index = toxics.firstIndex(where: { $0.name == change.name }) else { throw ProxyHub.Refusal(status: 404, message: "toxic not found") }
                    var next = toxics
                    next[index] = change
                    return next
                }
                respond(.json(status: 200, body: updated.json))
            case ("DELETE", "/proxies/{proxy}/toxics/{toxic}"):
                _ = try hub.setToxics(proxyName) { (toxics: [Toxic]) throws(ProxyHub.Refusal) -> [Toxic] in
                    guard toxics.contains(where: { $0.name == toxicName }) else { throw ProxyHub.Refusal(status: 404, message: "toxic not found") }
                    return toxics.filter { $0.name != toxicName }
                }
                respond(.json(status: 204, body: .null))
            default:
                respond(Self.toxiproxyError(404, "no such endpoint"))
            }
        } catch {
            respond(Self.toxiproxyError(error.status, error.message))
        }
    }

    private static func matches(_ pattern: String, _ segments: [String]) -> Bool {
        let parts = pattern.split(separator: "/").map(String.init)
        guard parts.count == segments.count else { return false }
        for (part, segment) in zip(parts, segments) {
            if part.hasPrefix("{") { if segment.isEmpty { return false } } else if part != segment { return false }
        }
        return true
    }
}
