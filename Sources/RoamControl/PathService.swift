import Glibc
import PathMonitor
import RoamCore
import Synchronization

/// What `roam daemon` serves on its Unix socket: the path of the host (or of a namespace) as
/// its monitor publishes it, for programs in any language, in the control API's style.
///
/// - `GET /v1/path`: the current path, the object `roam monitor --json` prints, with its
///   `sequence` (503 until the first path).
/// - `GET /v1/path/events`: Server-Sent Events (`event: path`, `id:` the sequence), the
///   current path first, then every change; `?from=N` or `Last-Event-ID` resumes (a `gap` event
///   says what is no longer held: the last ``retained`` paths are).
/// - `POST /v1/revalidate` (`?interface=NAME`, or every interface): checks connectivity at
///   once, as after a login to a portal; only the daemon's user and root may (403 otherwise),
///   and only when the daemon validates (409).
package final class PathService: HTTPService {
    /// Every route, as docs/daemon.md lists them (checked by a test).
    package static let routes: [ControlAPI.Route] = [
        ControlAPI.Route(method: "GET", pattern: "/v1/path"),
        ControlAPI.Route(method: "GET", pattern: "/v1/path/events"),
        ControlAPI.Route(method: "POST", pattern: "/v1/revalidate"),
    ]

    /// How many paths are held for streams that resume.
    package static let retained = 256

    private struct State {
        /// The held paths' lines, oldest first; `first` is the sequence of `lines[0]`.
        var lines: [String] = []
        var first = 0
        var current: JSONValue?
        var subscribers: [Int: @Sendable () -> Void] = [:]
        var nextSubscriber = 0
        var ended = false
        var next: Int { first + lines.count }
    }

    private let state = Mutex(State())
    /// Who may change anything (besides root).
    private let owner: uid_t
    /// Asks the monitor to check an interface (nil: all) at once; nil when it validates nothing.
    private let revalidate: (@Sendable (String?) -> Void)?

    /// A service whose changes only `owner` (and root) may make.
    ///
    /// - Parameters:
    ///   - owner: The daemon's user.
    ///   - revalidate: The monitor's `revalidate(interface:)`, when it validates connectivity.
    ///   - firstSequence: The first path's sequence: where the daemon that ran before stopped
    ///     (its state directory), so that sequences only grow across restarts.
    package init(owner: uid_t, revalidate: (@Sendable (String?) -> Void)?, firstSequence: Int = 0) {
        self.owner = owner
        self.revalidate = revalidate
        state.withLock { $0.first = min(max(0, firstSequence), ControlAPI.maximumSequenceNumber) }
    }

    /// Publishes a path the monitor gave, taken at `time` (RFC 3339).
    ///
    /// - Returns: Its sequence and its object as `GET /v1/path` answers it (one line of JSON).
    @discardableResult
    package func publish(_ path: NetworkPath, time: String) -> (sequence: Int, json: String) {
        let (wakes, published) = state.withLock { state -> ([@Sendable () -> Void], (Int, String)) in
            guard case .object(var members) = path.json(time: time) else { return ([], (state.next, "")) }
            let sequence = state.next
            members.insert(("sequence", .int(Int64(sequence))), at: 0)
            let value = JSONValue.object(members)
            let line = value.serialized
            state.current = value
            state.lines.append(line)
            if state.lines.count > Self.retained {
                let excess = state.lines.count - Self.retained
                state.lines.removeFirst(excess)
                state.first += excess
            }
            return (Array(state.subscribers.values), (sequence, line))
        }
        for wake in wakes { wake() }
        return published
    }

    /// The daemon is stopping: streams end once they have sent what they hold.
    package func end() {
        let wakes = state.withLock { state -> [@Sendable () -> Void] in
            state.ended = true
            return Array(state.subscribers.values)
        }
        for wake in wakes { wake() }
    }

    package func handle(_ request: ServiceRequest, respond: @escaping @Sendable (ControlAPI.Answer) -> Void) {
        let (path, query) = ControlAPI.split(request.target)
        guard let methods = allowedMethods(for: request.target) else {
            respond(ControlAPI.error(404, "no such endpoint: \(escapedForMessage(path, maximumLength: 128)) (GET /v1/path, GET /v1/path/events, POST /v1/revalidate)"))
            return
        }
        guard methods.contains(request.method) else {
            respond(ControlAPI.error(405, "\(path) answers \(methods.joined(separator: " and "))"))
            return
        }
        switch path {
        case "/v1/path":
            guard let current = state.withLock({ $0.current }) else {
                respond(ControlAPI.error(503, "no path yet: the monitor is starting"))
                return
            }
            respond(.json(status: 200, body: current))
        case "/v1/path/events":
            let from: Int
            if let text = ControlAPI.queryValue("from", in: query) {
                guard let value = ControlAPI.sequenceNumber(text) else {
                    respond(ControlAPI.error(400, "from is a sequence number from 0 to \(ControlAPI.maximumSequenceNumber), not '\(escapedForMessage(text, maximumLength: 32))'"))
                    return
                }
                from = value
            } else if let last = request.lastEventID {
                guard let value = ControlAPI.sequenceNumber(last) else {
                    respond(ControlAPI.error(400, "Last-Event-ID is a sequence number from 0 to \(ControlAPI.maximumSequenceNumber), not '\(escapedForMessage(last, maximumLength: 32))'"))
                    return
                }
                from = value + 1
            } else {
                // The current path first.
                from = state.withLock { max($0.first, $0.next - 1) }
            }
            // Beyond what this daemon published: a sequence of a daemon that ran before without
            // a state directory, or a client's mistake. The current path, which says where the
            // sequence is now, rather than a stream that waits for a sequence that may never come.
            let resumed = state.withLock { state in from > state.next ? max(state.first, state.next - 1) : from }
            respond(.events(log: eventSource, from: resumed))
        default:
            // POST /v1/revalidate
            guard let peer = request.peerUID, peer == owner || peer == 0 else {
                respond(ControlAPI.error(403, "only the daemon's user and root may ask it to check connectivity; reading the path is open"))
                return
            }
            guard let revalidate else {
                respond(ControlAPI.error(409, "this daemon validates nothing: start it with --validate URL"))
                return
            }
            let interface = ControlAPI.queryValue("interface", in: query)
            if let interface {
                guard Self.isInterfaceName(interface) else {
                    respond(ControlAPI.error(400, "'\(escapedForMessage(interface, maximumLength: 32))' is not an interface name (1 to 15 characters, no '/', ':' or space)"))
                    return
                }
            }
            revalidate(interface)
            respond(.json(status: 202, body: .object([("revalidating", .string(interface ?? "all"))])))
        }
    }

    package func allowedMethods(for target: String) -> [String]? {
        switch ControlAPI.split(target).path {
        case "/v1/path", "/v1/path/events": ["GET"]
        case "/v1/revalidate": ["POST"]
        default: nil
        }
    }

    package func eventType(of line: String) -> String { "path" }

    /// A name the kernel would take for an interface (`dev_valid_name`).
    static func isInterfaceName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return (1...15).contains(bytes.count) && name != "." && name != ".."
            && !bytes.contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: ":") || $0 <= 0x20 || $0 >= 0x7F }
    }

    private var eventSource: ControlAPI.EventSource {
        ControlAPI.EventSource(
            next: { [self] from, limit in
                self.state.withLock { state in
                    let start = max(from, state.first)
                    guard start < state.next else { return ([], start, state.next) }
                    let offset = start - state.first
                    return (Array(state.lines[offset..<min(state.lines.count, offset + limit)]), start, state.next)
                }
            },
            subscribe: { [self] wake in
                self.state.withLock { state in
                    defer { state.nextSubscriber += 1 }
                    state.subscribers[state.nextSubscriber] = wake
                    return state.nextSubscriber
                }
            },
            unsubscribe: { [self] token in self.state.withLock { _ = $0.subscribers.removeValue(forKey: token) } },
            ended: { [self] in self.state.withLock { $0.ended } },
            follow: true)
    }
}
