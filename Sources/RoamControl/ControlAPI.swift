import PathMonitor
import RoamCore
import RoamReport
import ScenarioModel
import Simulator
import Synchronization

/// The control API's routes and answers, apart from HTTP: what `roam run --control` serves
/// (``ControlServer`` carries it over HTTP/1.1). Every answer is JSON but the event stream.
///
/// A run's API goes through three states: starting (the network is being built: 503),
/// running (every route), and ended (410, but for the answer to the stop that ended it).
package final class ControlAPI: Sendable {
    /// One route: a method and a path pattern (`{name}` matches one segment).
    package struct Route: Sendable, Hashable {
        package var method: String
        package var pattern: String
    }

    /// Every route the API answers, as the OpenAPI document lists them (checked by a test).
    package static let routes: [Route] = [
        Route(method: "GET", pattern: "/v1/run"),
        Route(method: "GET", pattern: "/v1/nodes/{node}/path"),
        Route(method: "GET", pattern: "/v1/links/{link}"),
        Route(method: "POST", pattern: "/v1/links/{link}"),
        Route(method: "POST", pattern: "/v1/networks/{network}"),
        Route(method: "GET", pattern: "/v1/events"),
        Route(method: "POST", pattern: "/v1/stop"),
    ]

    /// The most a request's body may hold.
    package static let maximumBodySize = LiveChange.maximumSize

    /// What the API answers.
    package enum Answer: Sendable {
        /// A JSON body with a status.
        case json(status: Int, body: JSONValue)
        /// The run's events as Server-Sent Events, from sequence number `from`.
        case events(log: EventSource, from: Int)
    }

    /// Where the event stream reads from (the run's record).
    package struct EventSource: Sendable {
        package let next: @Sendable (_ from: Int, _ limit: Int) -> (lines: [String], first: Int, next: Int)
        package let subscribe: @Sendable (_ wake: @escaping @Sendable () -> Void) -> Int
        package let unsubscribe: @Sendable (Int) -> Void
        /// Whether the run has ended (the stream ends once it has sent everything).
        package let ended: @Sendable () -> Bool
        /// False: the stream ends once it has sent the events recorded so far (`follow=false`).
        package let follow: Bool
    }

    private enum Phase {
        case starting
        case running(RunningNetwork)
        /// Ended, with the report's place and verdict for late stop requests.
        case ended(JSONValue)
    }

    private struct State {
        var phase: Phase = .starting
        var stopRequested = false
        /// Callers of POST /v1/stop waiting for the report.
        var waiting: [@Sendable (JSONValue) -> Void] = []
        var lastNetwork: RunningNetwork?
    }

    private let state = Mutex(State())
    /// Ends the run (``ScenarioRunner/finish()``).
    private let finish: @Sendable () -> Void

    package init(finish: @escaping @Sendable () -> Void) {
        self.finish = finish
    }

    /// The run is at time zero: every route answers from now on.
    package func started(_ network: RunningNetwork) {
        state.withLock { state in
            state.phase = .running(network)
            state.lastNetwork = network
        }
    }

    /// The run ended and wrote its report: stop requests waiting are answered with it, and
    /// every request from now on is answered 410.
    package func ended(_ report: JSONValue) {
        let waiting = state.withLock { state -> [@Sendable (JSONValue) -> Void] in
            state.phase = .ended(report)
            defer { state.waiting = [] }
            return state.waiting
        }
        for answer in waiting { answer(report) }
    }

    /// Answers one request. Blocking (a live change waits for the backend): call it off any
    /// event loop. `respond` is called once; for POST /v1/stop, when the report is written.
    package func handle(method: String, target: String, body: [UInt8], lastEventID: String?, respond: @escaping @Sendable (Answer) -> Void) {
        let (path, query) = Self.split(target)
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard let route = Self.match(segments) else {
            respond(Self.error(404, "no such endpoint: \(escapedForMessage(path, maximumLength: 200)); endpoints: "
                + Self.routes.map { "\($0.method) \($0.pattern)" }.joined(separator: ", ")))
            return
        }
        guard route.methods.contains(method) else {
            respond(Self.error(405, "\(escapedForMessage(path, maximumLength: 200)) answers \(route.methods.joined(separator: " and ")), not \(escapedForMessage(method, maximumLength: 16))"))
            return
        }
        // A request is checked before the run's state is: a bad one is a 400 at any time.
        if route.name == "events", case .refused(let answer) = Self.eventsStart(query: query, lastEventID: lastEventID) {
            respond(answer)
            return
        }
        let phase = state.withLock { $0.phase }
        let network: RunningNetwork
        switch phase {
        case .starting:
            respond(Self.error(503, "the run is starting: its network is being built; ask again shortly"))
            return
        case .ended(let report):
            if route.name == "stop" {
                respond(.json(status: 410, body: Self.stoppedBody(report, message: "the run has ended")))
            } else {
                respond(Self.error(410, "the run has ended; its report: \(Self.reportPlace(report))"))
            }
            return
        case .running(let running):
            network = running
        }
        switch (route.name, method) {
        case ("run", _):
            respond(.json(status: 200, body: Self.runBody(network)))
        case ("path", _):
            let node = route.parameter
            guard network.scenario.nodes.contains(where: { $0.name == node }) else {
                respond(Self.error(404, "no node named '\(escapedForMessage(node))'; nodes: \(network.scenario.nodes.map(\.name).joined(separator: ", "))"))
                return
            }
            guard let path = network.currentPath(of: node) else {
                respond(Self.error(404, "node '\(escapedForMessage(node))' has no path monitor (a network's gateway or the internet); "
                    + "nodes with one: \(network.scenario.nodes.filter { network.monitor(of: $0.name) != nil }.map(\.name).joined(separator: ", "))"))
                return
            }
            respond(.json(status: 200, body: path.json(time: RFC3339.now())))
        case ("link", "GET"):
            let link = route.parameter
            guard let state = network.linkStates[link] else {
                respond(Self.error(404, "no link named '\(escapedForMessage(link))'; links: \(network.scenario.links.map(\.name).joined(separator: ", "))"))
                return
            }
            respond(.json(status: 200, body: Self.linkBody(link, state)))
        case ("link", _), ("network", _):
            guard body.count <= Self.maximumBodySize else {
                respond(Self.error(413, "a change may hold at most \(Self.maximumBodySize) bytes"))
                return
            }
            guard let text = String(validating: body, as: UTF8.self) else {
                respond(Self.error(400, "the body is not UTF-8 text: send a JSON object such as {\"down\": true}"))
                return
            }
            let target: LiveChange.Target = route.name == "link" ? .link(route.parameter) : .network(route.parameter)
            let (outcome, applied) = network.applyLive(text, to: target)
            guard outcome.events != nil else {
                let errors = outcome.errors
                // An unknown link or network is the path's fault, not the body's.
                let unknown = errors.count == 1 && errors[0].line == 0 && errors[0].message.hasPrefix("no ")
                respond(.json(status: unknown ? 404 : 400, body: .object([
                    ("error", .string(errors.map(\.message).joined(separator: "; "))),
                    ("diagnostics", .array(outcome.diagnostics.map(Self.diagnosticBody))),
                ])))
                return
            }
            let failed = applied.filter { $0.failure != nil }
            let body = JSONValue.object([
                ("applied", .array(applied.map(Self.appliedBody))),
                ("warnings", .array(outcome.diagnostics.filter { $0.severity == .warning }.map(Self.diagnosticBody))),
            ] + (failed.isEmpty ? [] : [("error", .string("the change could not be applied: " + failed.compactMap(\.failure).joined(separator: "; ")))]))
            respond(.json(status: failed.isEmpty ? 200 : 500, body: body))
        case ("events", _):
            let from: Int, follow: Bool
            switch Self.eventsStart(query: query, lastEventID: lastEventID) {
            case .start(let first, let following): (from, follow) = (first, following)
            case .refused(let answer):
                respond(answer)
                return
            }
            let log = network.log
            respond(.events(log: EventSource(next: { log.events(from: $0, limit: $1) }, subscribe: { log.subscribe($0) },
                                             unsubscribe: { log.unsubscribe($0) },
                                             ended: { [weak self] in self?.hasEnded ?? true },
                                             follow: follow), from: from))
        case ("stop", _):
            let first = state.withLock { state -> Bool in
                state.waiting.append { report in respond(.json(status: 200, body: Self.stoppedBody(report, message: "the run has ended"))) }
                defer { state.stopRequested = true }
                return !state.stopRequested
            }
            if first { finish() }
        default:
            respond(Self.error(404, "no such endpoint"))
        }
    }

    /// The run, while it runs.
    var runningNetwork: RunningNetwork? {
        state.withLock { if case .running(let network) = $0.phase { network } else { nil } }
    }

    var isEnded: Bool { hasEnded }

    private var hasEnded: Bool {
        state.withLock { if case .ended = $0.phase { true } else { false } }
    }

    /// Where an event stream starts, or why the request is refused.
    package enum EventsStart {
        case start(from: Int, follow: Bool)
        case refused(Answer)
    }

    /// Reads `from`, `Last-Event-ID` and `follow`, each range-checked.
    package static func eventsStart(query: String, lastEventID: String?) -> EventsStart {
        let from: Int
        if let text = queryValue("from", in: query) {
            guard let number = sequenceNumber(text) else {
                return .refused(error(400, "from is a sequence number from 0 to \(maximumSequenceNumber), not '\(escapedForMessage(text, maximumLength: 40))'"))
            }
            from = number
        } else if let text = lastEventID {
            guard let number = sequenceNumber(text) else {
                return .refused(error(400, "Last-Event-ID is the id of an event this stream sent (0 to \(maximumSequenceNumber)), "
                    + "not '\(escapedForMessage(text, maximumLength: 40))'"))
            }
            from = number + 1
        } else {
            from = 0
        }
        let follow = queryValue("follow", in: query)
        guard follow == nil || ["true", "false", "1", "0"].contains(follow!) else {
            return .refused(error(400, "follow is true or false, not '\(escapedForMessage(follow!, maximumLength: 40))'"))
        }
        return .start(from: from, follow: follow != "false" && follow != "0")
    }

    /// The largest sequence number a request may name (`from`, `Last-Event-ID`): far more events
    /// than any run records, and small enough that nothing derived from it can overflow.
    package static let maximumSequenceNumber = 1 << 48

    /// `text` as a sequence number: decimal digits only (no sign, no spaces), at most
    /// ``maximumSequenceNumber``.
    package static func sequenceNumber(_ text: String) -> Int? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let value = Int(text), value <= maximumSequenceNumber else { return nil }
        return value
    }

    // MARK: - Routing

    private struct Matched {
        var name: String
        var methods: [String]
        var parameter: String
    }

    /// The methods `target`'s path answers (for a 405's `Allow`), or nil when it is no endpoint.
    package static func allowedMethods(for target: String) -> [String]? {
        let segments = split(target).path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        return match(segments)?.methods
    }

    private static func match(_ segments: [String]) -> Matched? {
        switch segments.count {
        case 2 where segments[0] == "v1" && segments[1] == "run": Matched(name: "run", methods: ["GET"], parameter: "")
        case 2 where segments[0] == "v1" && segments[1] == "events": Matched(name: "events", methods: ["GET"], parameter: "")
        case 2 where segments[0] == "v1" && segments[1] == "stop": Matched(name: "stop", methods: ["POST"], parameter: "")
        case 3 where segments[0] == "v1" && segments[1] == "links" && !segments[2].isEmpty:
            Matched(name: "link", methods: ["GET", "POST"], parameter: percentDecoded(segments[2]))
        case 3 where segments[0] == "v1" && segments[1] == "networks" && !segments[2].isEmpty:
            Matched(name: "network", methods: ["POST"], parameter: percentDecoded(segments[2]))
        case 4 where segments[0] == "v1" && segments[1] == "nodes" && !segments[2].isEmpty && segments[3] == "path":
            Matched(name: "path", methods: ["GET"], parameter: percentDecoded(segments[2]))
        default: nil
        }
    }

    package static func split(_ target: String) -> (path: String, query: String) {
        guard let mark = target.firstIndex(of: "?") else { return (target, "") }
        return (String(target[..<mark]), String(target[target.index(after: mark)...]))
    }

    static func queryValue(_ name: String, in query: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.first.map({ percentDecoded(String($0)) }) == name { return parts.count == 2 ? percentDecoded(String(parts[1])) : "" }
        }
        return nil
    }

    /// `%XX` decoded (invalid escapes stay as they are).
    static func percentDecoded(_ text: String) -> String {
        guard text.contains("%") else { return text }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%"), iterator.count >= 2,
               let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The `type` of a timeline line (`{"t":…,"type":"link",…}`), for the SSE event name.
    package static func eventType(of line: String) -> String {
        guard let start = line.range(of: ",\"type\":\"")?.upperBound, let end = line[start...].firstIndex(of: "\"") else { return "message" }
        let name = line[start..<end]
        return name.isEmpty || name.count > 32 ? "message" : String(name)
    }

    // MARK: - Bodies

    static func error(_ status: Int, _ message: String) -> Answer {
        .json(status: status, body: .object([("error", .string(message))]))
    }

    private static func reportPlace(_ report: JSONValue) -> String {
        if case .object(let members) = report, case .string(let place)? = members.first(where: { $0.0 == "reportDirectory" })?.1 { return place }
        return "?"
    }

    private static func stoppedBody(_ report: JSONValue, message: String) -> JSONValue {
        guard case .object(let members) = report else { return report }
        return .object([("message", .string(message))] + members)
    }

    static func runBody(_ network: RunningNetwork) -> JSONValue {
        let scenario = network.scenario
        let elapsed = max(network.elapsed, .zero)
        let phase = network.isOpen && elapsed >= scenario.duration ? "held" : "running"
        let nodes: [JSONValue] = scenario.nodes.map { node in
            let role: String = switch node.role {
            case .host: "host"
            case .server: "server"
            case .gateway: "gateway"
            case .internet: "internet"
            }
            return .object([("name", .string(node.name)), ("role", .string(role)), ("pathMonitor", .bool(network.monitor(of: node.name) != nil))])
        }
        let links: [JSONValue] = scenario.links.map { link in
            var members: [(String, JSONValue)] = [("name", .string(link.name)), ("endpoints", .array([.string(link.endpoints.0), .string(link.endpoints.1)])),
                                                  ("type", .string(link.type.rawValue))]
            switch link.role {
            case .direct: break
            case .access(let network, let node, _): members += [("network", .string(network)), ("member", .string(node))]
            case .uplink(let network): members.append(("uplinkOf", .string(network)))
            case .attachment(let server): members.append(("attachmentOf", .string(server)))
            }
            return .object(members)
        }
        let networks: [JSONValue] = scenario.networks.map { spec in
            .object([("name", .string(spec.name)), ("type", .string(spec.type.rawValue)), ("members", .array(spec.members.map { .string($0) })),
                     ("captivePortal", .bool(spec.portal != nil))])
        }
        return .object([
            ("api", "v1"),
            ("scenario", .string(scenario.name)),
            ("runId", .string(network.runID)),
            ("seed", .int(Int64(bitPattern: network.seed))),
            ("backend", .string(network.backend.rawValue)),
            ("state", .string(phase)),
            ("elapsed", .seconds(elapsed)),
            ("duration", .seconds(scenario.duration)),
            ("hold", .bool(network.isOpen)),
            ("reportDirectory", .string(network.reportDirectory)),
            ("nextEvent", .int(Int64(network.log.eventCount))),
            ("nodes", .array(nodes)),
            ("links", .array(links)),
            ("networks", .array(networks)),
            // What a command workload gets: each node's addresses, for programs started in nodes.
            ("environment", .object(network.environment.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
        ])
    }

    static func linkBody(_ link: String, _ state: TimelinePlayer.LinkState) -> JSONValue {
        .object([("link", .string(link)), ("carrier", .string(state.carrier ? "up" : "down")), ("quality", .string(state.quality.rawValue)),
                 ("up", state.up.json), ("down", state.down.json), ("summary", .string(state.summary))])
    }

    static func appliedBody(_ applied: AppliedChange) -> JSONValue {
        var members: [(String, JSONValue)] = [("link", .string(applied.change.link)), ("action", .string(applied.change.action))]
        switch applied.change.change {
        case .carrier(let up), .membership(let up): members.append(("carrier", .string(up ? "up" : "down")))
        case .network: members.append(("network", .string(applied.change.action)))
        case let .conditions(direction, conditions): members += [("direction", .string(direction.rawValue)), ("conditions", conditions.json)]
        }
        members.append(("at", .seconds(applied.actual)))
        if let failure = applied.failure { members.append(("error", .string(failure))) }
        return .object(members)
    }

    static func diagnosticBody(_ diagnostic: ScenarioDiagnostic) -> JSONValue {
        .object([("severity", .string(diagnostic.severity.rawValue)), ("line", .int(Int64(diagnostic.line))),
                 ("column", .int(Int64(diagnostic.column))), ("message", .string(diagnostic.message))])
    }
}
