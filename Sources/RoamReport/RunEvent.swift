import RoamCore
import RoamSystem

/// One line of a run's `timeline.jsonl`: what happened, and when (since the scenario's time
/// zero).
///
/// The one definition of the timeline's format: the runner and the workloads write these
/// (`RunLog/record(_:at:)`), and the report, `roam report` and Roam's own tests read them
/// back (``RecordedRun/events``). On disk each is a JSON object, `t` (seconds) and `type`
/// first, then the event's fields; an event type this version does not know (from a newer
/// Roam) reads back as ``RunEvent/unknown(type:fields:)``.
public struct RecordedEvent: Sendable {
    /// Time since time zero (negative for what happened while the network was being built).
    public var time: Duration
    public var event: RunEvent

    public init(time: Duration, event: RunEvent) {
        self.time = time
        self.event = event
    }
}

/// What happened, by kind. See ``RecordedEvent``.
public enum RunEvent: Sendable {
    /// `run`: the run started (with what), ended or was cancelled.
    case run(RunPhase)
    /// `link`: a link change of the timeline was applied (or failed), or a link's initial
    /// conditions.
    case link(LinkChange)
    /// `quality`: a link's Wi-Fi quality was tagged for path monitors after a change.
    case quality(link: String, quality: String, error: String?)
    /// `carried`: what a link carried each way over the sample interval that ends at the event,
    /// bits per second, as the receiving end's interface counted it (the bytes the kernel says
    /// it received): what the link played, beside the conditions it was set to.
    case carried(Carried)
    /// `path`: a node's path monitor published a path.
    case path(node: String, summary: String, path: JSONValue)
    /// `mark`: something the code under test marked (RoamTesting's `mark`).
    case mark(text: String, node: String?)
    /// `mptcp`: MPTCP endpoints a node's path manager changed (or the error).
    case mptcp(node: String, changes: [String], error: String?)
    /// `workload`: a workload started or stopped.
    case workload(name: String, started: Bool)
    /// `sample`: a workload's once-a-second measurement.
    case sample(Sample)
    /// `connect`: a workload's connection was made.
    case connect(Connect)
    /// `connect-failed`: an attempt to connect failed (it is retried).
    case connectFailed(workload: String, reason: String)
    /// `disconnect`: a workload's connection ended.
    case disconnect(workload: String, reason: String)
    /// `request`: a request of a `requests` workload completed or failed.
    case request(Request)
    /// `stall`: a stream stalled (its buffer ran dry) for a time.
    case stall(workload: String, start: Duration, duration: Duration)
    /// `complete`: a `bulk` workload received everything.
    case complete(workload: String, bytes: Int64)
    /// `subflow`: an MPTCP subflow was added or closed, or controlling subflows failed.
    case subflow(Subflow)
    /// `subflow-switch`: a flow's data moved to another interface's subflow.
    case subflowSwitch(workload: String, to: String, reason: String)
    /// `path-stalled`: a flow's path passed nothing for the stall threshold.
    case pathStalled(PathStalled)
    /// `path-restored`: an interface left for a stall is used again.
    case pathRestored(workload: String, interface: String, changes: [String]?)
    /// `command`: a `command` workload's program started, could not start, or exited.
    case command(Command)
    /// An event type this version of Roam does not know, with all its fields.
    case unknown(type: String, fields: JSONValue)

    public enum RunPhase: Sendable, Hashable {
        case started(scenario: String, runID: String, seed: UInt64, backend: String, duration: Duration)
        case ended(passed: Bool)
        case cancelled(passed: Bool)
    }

    public struct LinkChange: Sendable {
        public enum Kind: Sendable {
            case carrier(up: Bool)
            /// What a network's gateway did (`rebind`, `renumber ADDRESSES`, `dns timeout`, `dns ok`).
            case network(String)
            /// The conditions, as `summary.json` and the timeline write them (`delayMs`,
            /// `loss`, `rateBps`, `blackhole`, ...): only what is set.
            case conditions(direction: String, conditions: JSONValue)
        }
        public var link: String
        /// `initial`, or the timeline action that made the change (`set`, `down`, `ramp`, ...).
        public var action: String
        public var kind: Kind
        /// When the timeline planned it and when it was applied; nil for initial conditions.
        public var planned: Duration?
        public var actual: Duration?
        /// `3/10`: the step of a ramp or trace.
        public var step: String?
        /// The line of the scenario file.
        public var line: Int?
        public var error: String?
        /// Sent while the run played, through its control API (`roam run --control`), not
        /// written in the scenario's timeline.
        public var live = false

        public init(link: String, action: String, kind: Kind, planned: Duration? = nil, actual: Duration? = nil, step: String? = nil,
                    line: Int? = nil, error: String? = nil) {
            self.link = link
            self.action = action
            self.kind = kind
            self.planned = planned
            self.actual = actual
            self.step = step
            self.line = line
            self.error = error
        }
    }

    /// What a link carried each way over a sample interval (``RunEvent/carried(_:)``).
    public struct Carried: Sendable, Hashable {
        public var link: String
        /// The interval that ends at the event.
        public var interval: Duration
        /// Bits per second received by the link's second node (up) and first node (down); nil
        /// where that end's interface could not be read.
        public var up: Int64?
        public var down: Int64?

        public init(link: String, interval: Duration, up: Int64?, down: Int64?) {
            self.link = link
            self.interval = interval
            self.up = up
            self.down = down
        }
    }

    public struct Sample: Sendable, Hashable {
        public var workload: String
        public var bytes: Int64
        public var throughputBitsPerSecond: Int64
        public var rtt: Duration?
        /// For streams: how much is buffered, and whether it is stalled.
        public var buffered: Duration?
        public var stalled: Bool?

        public init(workload: String, bytes: Int64, throughputBitsPerSecond: Int64, rtt: Duration?, buffered: Duration? = nil, stalled: Bool? = nil) {
            self.workload = workload
            self.bytes = bytes
            self.throughputBitsPerSecond = throughputBitsPerSecond
            self.rtt = rtt
            self.buffered = buffered
            self.stalled = stalled
        }
    }

    public struct Connect: Sendable, Hashable {
        public struct Attempt: Sendable, Hashable {
            public var interface: String
            public var started: Duration
            public var outcome: String

            public init(interface: String, started: Duration, outcome: String) {
                self.interface = interface
                self.started = started
                self.outcome = outcome
            }
        }
        public var workload: String
        public var local: String
        public var remote: String
        /// The interface the connection went out of; nil for a server-side record.
        public var interface: String?
        /// `tcp`, `multipath` or `fallback`.
        public var transport: String?
        public var attempts: [Attempt]
        /// How long the flow had been trying to connect again, after losing a connection.
        public var retryingFor: Duration?
        /// The lookup of the server's name that gave the addresses connected to (nil: the
        /// client connected to an address as is).
        public var lookup: Lookup?

        /// A host name looked up through the client node's resolver.
        public struct Lookup: Sendable, Hashable {
            public var name: String
            /// The name server that answered.
            public var server: String
            public var duration: Duration
            /// What it gave, IPv6 first.
            public var addresses: [String]

            public init(name: String, server: String, duration: Duration, addresses: [String]) {
                self.name = name
                self.server = server
                self.duration = duration
                self.addresses = addresses
            }
        }

        public init(workload: String, local: String, remote: String, interface: String? = nil, transport: String? = nil,
                    attempts: [Attempt] = [], retryingFor: Duration? = nil) {
            self.workload = workload
            self.local = local
            self.remote = remote
            self.interface = interface
            self.transport = transport
            self.attempts = attempts
            self.retryingFor = retryingFor
        }
    }

    public struct Request: Sendable, Hashable {
        public var workload: String
        public var number: Int
        public var outcome: Outcome
        /// How long looking the server's name up took, when the request had to connect first
        /// (part of its time to first byte).
        public var lookup: Duration?

        public enum Outcome: Sendable, Hashable {
            case completed(timeToFirstByte: Duration, completion: Duration)
            case failed(reason: String)
        }

        public init(workload: String, number: Int, outcome: Outcome) {
            self.workload = workload
            self.number = number
            self.outcome = outcome
        }
    }

    public struct Subflow: Sendable, Hashable {
        public var workload: String
        /// `added` or `closed`; nil for an error.
        public var event: String?
        public var interface: String?
        /// `local:port -> remote:port`.
        public var subflow: String?
        public var token: Int64?
        public var backup: Bool?
        public var error: String?

        public init(workload: String, event: String? = nil, interface: String? = nil, subflow: String? = nil, token: Int64? = nil,
                    backup: Bool? = nil, error: String? = nil) {
            self.workload = workload
            self.event = event
            self.interface = interface
            self.subflow = subflow
            self.token = token
            self.backup = backup
            self.error = error
        }
    }

    public struct PathStalled: Sendable, Hashable {
        public var workload: String
        public var interface: String
        public var threshold: Duration
        public var holdDown: Duration
        /// The MPTCP endpoint changes made for it, when the path manager is Roam's.
        public var mptcp: [String]?

        public init(workload: String, interface: String, threshold: Duration, holdDown: Duration, mptcp: [String]? = nil) {
            self.workload = workload
            self.interface = interface
            self.threshold = threshold
            self.holdDown = holdDown
            self.mptcp = mptcp
        }
    }

    public struct Command: Sendable, Hashable {
        public enum Phase: Sendable, Hashable {
            case started(pid: Int32, node: String)
            case failed(error: String)
            case exited(code: Int32?, signal: Int32?, terminatedByRoam: Bool)
        }
        public var workload: String
        public var phase: Phase

        public init(workload: String, phase: Phase) {
            self.workload = workload
            self.phase = phase
        }
    }
}

extension RunEvent {
    /// The `type` written for it.
    public var type: String {
        switch self {
        case .run: "run"
        case .link: "link"
        case .quality: "quality"
        case .carried: "carried"
        case .path: "path"
        case .mark: "mark"
        case .mptcp: "mptcp"
        case .workload: "workload"
        case .sample: "sample"
        case .connect: "connect"
        case .connectFailed: "connect-failed"
        case .disconnect: "disconnect"
        case .request: "request"
        case .stall: "stall"
        case .complete: "complete"
        case .subflow: "subflow"
        case .subflowSwitch: "subflow-switch"
        case .pathStalled: "path-stalled"
        case .pathRestored: "path-restored"
        case .command: "command"
        case .unknown(let type, _): type
        }
    }

    /// The workload it is about, if any.
    public var workload: String? {
        switch self {
        case .workload(let name, _): name
        case .sample(let sample): sample.workload
        case .connect(let connect): connect.workload
        case .connectFailed(let workload, _), .disconnect(let workload, _), .stall(let workload, _, _), .complete(let workload, _),
             .subflowSwitch(let workload, _, _), .pathRestored(let workload, _, _):
            workload
        case .request(let request): request.workload
        case .subflow(let subflow): subflow.workload
        case .pathStalled(let stalled): stalled.workload
        case .command(let command): command.workload
        case .run, .link, .quality, .carried, .path, .mark, .mptcp, .unknown: nil
        }
    }
}

// MARK: - Writing

extension RecordedEvent {
    /// The line's JSON object: `t` and `type`, then the fields.
    public var json: JSONValue {
        .object([("t", .seconds(time)), ("type", .string(event.type))] + event.fields)
    }
}

extension RunEvent {
    /// The fields written after `t` and `type`.
    var fields: [(String, JSONValue)] {
        func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
        switch self {
        case .run(.started(let scenario, let runID, let seed, let backend, let duration)):
            return [("event", "start"), ("scenario", .string(scenario)), ("runId", .string(runID)), ("seed", .int(Int64(bitPattern: seed))),
                    ("backend", .string(backend)), ("duration", .seconds(duration))]
        case .run(.ended(let passed)):
            return [("event", "end"), ("passed", .bool(passed))]
        case .run(.cancelled(let passed)):
            return [("event", "cancelled"), ("passed", .bool(passed))]
        case .link(let change):
            var fields: [(String, JSONValue)] = [("link", .string(change.link)), ("action", .string(change.action))]
            if let planned = change.planned { fields.append(("planned", .seconds(planned))) }
            if let actual = change.actual { fields.append(("actual", .seconds(actual))) }
            if let planned = change.planned, let actual = change.actual {
                fields.append(("lateMs", .double(((actual - planned).milliseconds * 1000).rounded() / 1000)))
            }
            if let step = change.step { fields.append(("step", .string(step))) }
            switch change.kind {
            case .carrier(let up): fields.append(("carrier", .string(up ? "up" : "down")))
            case .network(let detail): fields.append(("network", .string(detail)))
            case let .conditions(direction, conditions): fields += [("direction", .string(direction)), ("conditions", conditions)]
            }
            if let line = change.line { fields.append(("line", .int(Int64(line)))) }
            if change.live { fields.append(("live", .bool(true))) }
            if let error = change.error { fields.append(("error", .string(error))) }
            return fields
        case let .quality(link, quality, error):
            return [("link", .string(link)), ("quality", .string(quality))] + (error.map { [("error", .string($0))] } ?? [])
        case let .path(node, summary, path):
            return [("node", .string(node)), ("summary", .string(summary)), ("path", path)]
        case let .mark(text, node):
            return [("text", .string(text))] + (node.map { [("node", .string($0))] } ?? [])
        case .carried(let carried):
            return [("link", .string(carried.link)), ("intervalMs", .milliseconds(carried.interval))]
                + (carried.up.map { [("upBps", .int($0))] } ?? []) + (carried.down.map { [("downBps", .int($0))] } ?? [])
        case let .mptcp(node, changes, error):
            return [("node", .string(node))] + (error.map { [("error", .string($0))] } ?? [("changes", strings(changes))])
        case let .workload(name, started):
            return [("workload", .string(name)), ("event", started ? "start" : "stop")]
        case .sample(let sample):
            var fields: [(String, JSONValue)] = [("workload", .string(sample.workload)), ("bytes", .int(sample.bytes)),
                                                 ("throughputBps", .int(sample.throughputBitsPerSecond)), ("rttMs", .milliseconds(sample.rtt))]
            if let buffered = sample.buffered { fields.append(("bufferedMs", .milliseconds(buffered))) }
            if let stalled = sample.stalled { fields.append(("stalled", .bool(stalled))) }
            return fields
        case .connect(let connect):
            var fields: [(String, JSONValue)] = [("workload", .string(connect.workload)), ("local", .string(connect.local)), ("remote", .string(connect.remote))]
            if let interface = connect.interface { fields.append(("interface", .string(interface))) }
            if let transport = connect.transport { fields.append(("transport", .string(transport))) }
            if connect.interface != nil || !connect.attempts.isEmpty {
                fields.append(("attempts", .array(connect.attempts.map { attempt in
                    .object([("interface", .string(attempt.interface)), ("startedMs", .milliseconds(attempt.started)), ("outcome", .string(attempt.outcome))])
                })))
            }
            if let retryingFor = connect.retryingFor { fields.append(("retryingForMs", .milliseconds(retryingFor))) }
            if let lookup = connect.lookup {
                fields.append(("lookup", .object([("name", .string(lookup.name)), ("server", .string(lookup.server)),
                                                  ("durationMs", .milliseconds(lookup.duration)), ("addresses", .array(lookup.addresses.map { .string($0) }))])))
            }
            return fields
        case let .connectFailed(workload, reason), let .disconnect(workload, reason):
            return [("workload", .string(workload)), ("reason", .string(reason))]
        case .request(let request):
            var fields: [(String, JSONValue)] = [("workload", .string(request.workload)), ("number", .int(Int64(request.number)))]
            if let lookup = request.lookup { fields.append(("lookupMs", .milliseconds(lookup))) }
            switch request.outcome {
            case let .completed(timeToFirstByte, completion):
                return fields + [("ok", true), ("ttfbMs", .milliseconds(timeToFirstByte)), ("completionMs", .milliseconds(completion))]
            case .failed(let reason):
                return fields + [("ok", false), ("reason", .string(reason))]
            }
        case let .stall(workload, start, duration):
            return [("workload", .string(workload)), ("start", .seconds(start)), ("durationMs", .milliseconds(duration))]
        case let .complete(workload, bytes):
            return [("workload", .string(workload)), ("bytes", .int(bytes))]
        case .subflow(let subflow):
            var fields: [(String, JSONValue)] = [("workload", .string(subflow.workload))]
            if let event = subflow.event { fields.append(("event", .string(event))) }
            if let interface = subflow.interface { fields.append(("interface", .string(interface))) }
            if let key = subflow.subflow { fields.append(("subflow", .string(key))) }
            if let token = subflow.token { fields.append(("token", .int(token))) }
            if let backup = subflow.backup { fields.append(("backup", .bool(backup))) }
            if let error = subflow.error { fields.append(("error", .string(error))) }
            return fields
        case let .subflowSwitch(workload, to, reason):
            return [("workload", .string(workload)), ("to", .string(to)), ("reason", .string(reason))]
        case .pathStalled(let stalled):
            return [("workload", .string(stalled.workload)), ("interface", .string(stalled.interface)),
                    ("thresholdMs", .milliseconds(stalled.threshold)), ("holdDownMs", .milliseconds(stalled.holdDown))]
                + (stalled.mptcp.map { [("mptcp", strings($0))] } ?? [])
        case let .pathRestored(workload, interface, changes):
            return [("workload", .string(workload)), ("interface", .string(interface))] + (changes.map { [("changes", strings($0))] } ?? [])
        case .command(let command):
            let workload: (String, JSONValue) = ("workload", .string(command.workload))
            switch command.phase {
            case let .started(pid, node):
                return [workload, ("event", "started"), ("pid", .int(Int64(pid))), ("node", .string(node))]
            case .failed(let error):
                return [workload, ("event", "failed"), ("error", .string(error))]
            case let .exited(code, signal, terminatedByRoam):
                return [workload, ("event", "exited"), ("exitCode", code.map { .int(Int64($0)) } ?? .null),
                        ("signal", signal.map { .int(Int64($0)) } ?? .null), ("terminatedByRoam", .bool(terminatedByRoam))]
            }
        case .unknown(_, let fields):
            guard case .object(let members) = fields else { return [] }
            return members.filter { $0.0 != "t" && $0.0 != "type" }
        }
    }
}

// MARK: - Reading

extension RecordedEvent {
    /// Reads one line's JSON object. A known type with a field missing or of the wrong kind is
    /// an error naming it; an unknown type is kept as ``RunEvent/unknown(type:fields:)``.
    public init(json: JSONValue) throws(ReportError) {
        let fields = JSONFields(json, type: "event")
        let type = try fields.string("type")
        let typed = JSONFields(json, type: type)
        time = try typed.duration("t")
        event = try RunEvent(type: type, typed)
    }
}

extension RunEvent {
    init(type: String, _ f: JSONFields) throws(ReportError) {
        switch type {
        case "run":
            switch try f.string("event") {
            case "start":
                let seed = try f.int("seed")
                self = .run(.started(scenario: try f.string("scenario"), runID: try f.string("runId"), seed: UInt64(bitPattern: seed),
                                     backend: try f.string("backend"), duration: try f.duration("duration")))
            case "end": self = .run(.ended(passed: try f.bool("passed")))
            case "cancelled": self = .run(.cancelled(passed: try f.bool("passed")))
            case let other: throw f.error("an unknown run event '\(escapedForMessage(other))'")
            }
        case "link":
            let kind: LinkChange.Kind
            if let carrier = try f.optionalString("carrier") {
                guard carrier == "up" || carrier == "down" else { throw f.error("'carrier' is '\(escapedForMessage(carrier))', not up or down") }
                kind = .carrier(up: carrier == "up")
            } else if let detail = try f.optionalString("network") {
                kind = .network(detail)
            } else {
                guard let conditions = f.object["conditions"], case .object = conditions else { throw f.error("neither 'carrier' nor a 'conditions' object") }
                kind = .conditions(direction: try f.string("direction"), conditions: conditions)
            }
            var change = LinkChange(link: try f.string("link"), action: try f.string("action"), kind: kind,
                                    planned: try f.optionalDuration("planned"), actual: try f.optionalDuration("actual"),
                                    step: try f.optionalString("step"), line: try f.optionalInt("line").map { Int(clamping: $0) },
                                    error: try f.optionalString("error"))
            change.live = try f.optionalBool("live") ?? false
            self = .link(change)
        case "quality":
            self = .quality(link: try f.string("link"), quality: try f.string("quality"), error: try f.optionalString("error"))
        case "path":
            guard let path = f.object["path"], case .object = path else { throw f.error("no 'path' object") }
            self = .path(node: try f.string("node"), summary: try f.optionalString("summary") ?? "", path: path)
        case "carried":
            let interval = try f.milliseconds("intervalMs")
            guard interval > .zero, interval <= .seconds(3600) else { throw f.error("'intervalMs' that is not from 0 to an hour") }
            func rate(_ key: String) throws(ReportError) -> Int64? {
                guard let value = try f.optionalInt(key) else { return nil }
                guard value >= 0 else { throw f.error("'\(key)' that is negative") }
                return value
            }
            self = .carried(Carried(link: try f.string("link"), interval: interval, up: try rate("upBps"), down: try rate("downBps")))
        case "mark":
            self = .mark(text: try f.string("text"), node: try f.optionalString("node"))
        case "mptcp":
            self = .mptcp(node: try f.string("node"), changes: try f.optionalStrings("changes") ?? [], error: try f.optionalString("error"))
        case "workload":
            let event = try f.string("event")
            guard event == "start" || event == "stop" else { throw f.error("'event' is '\(escapedForMessage(event))', not start or stop") }
            self = .workload(name: try f.string("workload"), started: event == "start")
        case "sample":
            self = .sample(Sample(workload: try f.string("workload"), bytes: try f.int("bytes"), throughputBitsPerSecond: try f.int("throughputBps"),
                                  rtt: try f.optionalMilliseconds("rttMs"), buffered: try f.optionalMilliseconds("bufferedMs"),
                                  stalled: try f.optionalBool("stalled")))
        case "connect":
            var attempts: [Connect.Attempt] = []
            for attempt in f.object["attempts"]?.arrayValue ?? [] {
                let a = JSONFields(attempt, type: "connect attempt")
                attempts.append(Connect.Attempt(interface: try a.string("interface"), started: try a.milliseconds("startedMs"), outcome: try a.string("outcome")))
            }
            var connect = Connect(workload: try f.string("workload"), local: try f.string("local"), remote: try f.string("remote"),
                                  interface: try f.optionalString("interface"), transport: try f.optionalString("transport"),
                                  attempts: attempts, retryingFor: try f.optionalMilliseconds("retryingForMs"))
            if let lookup = f.object["lookup"] {
                let l = JSONFields(lookup, type: "connect lookup")
                connect.lookup = Connect.Lookup(name: try l.string("name"), server: try l.string("server"), duration: try l.milliseconds("durationMs"),
                                                addresses: try l.optionalStrings("addresses") ?? [])
            }
            self = .connect(connect)
        case "connect-failed":
            self = .connectFailed(workload: try f.string("workload"), reason: try f.string("reason"))
        case "disconnect":
            self = .disconnect(workload: try f.string("workload"), reason: try f.string("reason"))
        case "request":
            let outcome: Request.Outcome = try f.bool("ok")
                ? .completed(timeToFirstByte: try f.milliseconds("ttfbMs"), completion: try f.milliseconds("completionMs"))
                : .failed(reason: try f.string("reason"))
            var request = Request(workload: try f.string("workload"), number: Int(clamping: try f.int("number")), outcome: outcome)
            request.lookup = try f.optionalMilliseconds("lookupMs")
            self = .request(request)
        case "stall":
            self = .stall(workload: try f.string("workload"), start: try f.duration("start"), duration: try f.milliseconds("durationMs"))
        case "complete":
            self = .complete(workload: try f.string("workload"), bytes: try f.int("bytes"))
        case "subflow":
            self = .subflow(Subflow(workload: try f.string("workload"), event: try f.optionalString("event"), interface: try f.optionalString("interface"),
                                    subflow: try f.optionalString("subflow"), token: try f.optionalInt("token"), backup: try f.optionalBool("backup"),
                                    error: try f.optionalString("error")))
        case "subflow-switch":
            self = .subflowSwitch(workload: try f.string("workload"), to: try f.string("to"), reason: try f.string("reason"))
        case "path-stalled":
            self = .pathStalled(PathStalled(workload: try f.string("workload"), interface: try f.string("interface"),
                                            threshold: try f.milliseconds("thresholdMs"), holdDown: try f.milliseconds("holdDownMs"),
                                            mptcp: try f.optionalStrings("mptcp")))
        case "path-restored":
            self = .pathRestored(workload: try f.string("workload"), interface: try f.string("interface"), changes: try f.optionalStrings("changes"))
        case "command":
            let phase: Command.Phase
            switch try f.string("event") {
            case "started": phase = .started(pid: Int32(clamping: try f.int("pid")), node: try f.string("node"))
            case "failed": phase = .failed(error: try f.string("error"))
            case "exited":
                phase = .exited(code: try f.optionalInt("exitCode").map { Int32(clamping: $0) }, signal: try f.optionalInt("signal").map { Int32(clamping: $0) },
                                terminatedByRoam: try f.optionalBool("terminatedByRoam") ?? false)
            case let other: throw f.error("an unknown command event '\(escapedForMessage(other))'")
            }
            self = .command(Command(workload: try f.string("workload"), phase: phase))
        default:
            self = .unknown(type: type, fields: f.object)
        }
    }
}

/// Typed access to the fields of a JSON object Roam wrote (an event of `timeline.jsonl`, a part
/// of `summary.json`), with errors that name where the field is and what is wrong with it.
struct JSONFields {
    let object: JSONValue
    /// How an error begins: "a 'link' event with" or "summary.json 'workloads':".
    private let context: String

    /// The fields of a timeline event of `type`.
    init(_ object: JSONValue, type: String) {
        self.object = object
        context = "a '\(escapedForMessage(type))' event with"
    }

    /// The fields of the object at `place` (`summary.json 'workloads'`).
    init(_ object: JSONValue, place: String) {
        self.object = object
        context = place + ":"
    }

    func error(_ what: String) -> ReportError {
        ReportError("\(context) \(what)")
    }

    /// The value at `key`; nil when absent or null.
    func value(_ key: String) -> JSONValue? {
        guard let value = object[key], value != .null else { return nil }
        return value
    }

    func optionalString(_ key: String) throws(ReportError) -> String? {
        guard let value = value(key) else { return nil }
        guard let text = value.stringValue else { throw error("'\(key)' that is not a string") }
        return text
    }

    func string(_ key: String) throws(ReportError) -> String {
        guard let text = try optionalString(key) else { throw error("no '\(key)'") }
        return text
    }

    func optionalStrings(_ key: String) throws(ReportError) -> [String]? {
        guard let value = value(key) else { return nil }
        guard let items = value.arrayValue else { throw error("'\(key)' that is not a list") }
        var strings: [String] = []
        for item in items {
            guard let text = item.stringValue else { throw error("'\(key)' that is not a list of strings") }
            strings.append(text)
        }
        return strings
    }

    /// A whole number; a number written with a fraction or an exponent is rounded, and one
    /// beyond 64 bits is clamped (a report is outside input: read it, never trap on it).
    func optionalInt(_ key: String) throws(ReportError) -> Int64? {
        guard let value = value(key) else { return nil }
        if let number = value.intValue { return number }
        guard let number = value.doubleValue, !number.isNaN else { throw error("'\(key)' that is not a number") }
        return number >= 9.2e18 ? .max : number <= -9.2e18 ? .min : Int64(number.rounded())
    }

    func int(_ key: String) throws(ReportError) -> Int64 {
        guard let number = try optionalInt(key) else { throw error("no '\(key)'") }
        return number
    }

    func optionalBool(_ key: String) throws(ReportError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard let flag = value.boolValue else { throw error("'\(key)' that is not true or false") }
        return flag
    }

    func bool(_ key: String) throws(ReportError) -> Bool {
        guard let flag = try optionalBool(key) else { throw error("no '\(key)'") }
        return flag
    }

    /// A number in `unit`s (1 for seconds, 1e-3 for milliseconds) as a duration, clamped to
    /// ±10⁹ s (about 31 years), so that a damaged or hostile report renders instead of trapping.
    private func optionalDuration(_ key: String, unit: Double) throws(ReportError) -> Duration? {
        guard let value = value(key) else { return nil }
        guard let number = value.doubleValue, !number.isNaN else { throw error("'\(key)' that is not a number") }
        let seconds = min(max(number * unit, -1e9), 1e9)
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    func optionalDuration(_ key: String) throws(ReportError) -> Duration? { try optionalDuration(key, unit: 1) }

    func duration(_ key: String) throws(ReportError) -> Duration {
        guard let duration = try optionalDuration(key) else { throw error("no '\(key)'") }
        return duration
    }

    func optionalMilliseconds(_ key: String) throws(ReportError) -> Duration? { try optionalDuration(key, unit: 1e-3) }

    func milliseconds(_ key: String) throws(ReportError) -> Duration {
        guard let duration = try optionalMilliseconds(key) else { throw error("no '\(key)'") }
        return duration
    }

    /// A finite number.
    func optionalDouble(_ key: String) throws(ReportError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.doubleValue, number.isFinite else { throw error("'\(key)' that is not a finite number") }
        return number
    }

    /// Each item of the list at `key` (none when absent), at most `limit` of them.
    func list<T>(_ key: String, limit: Int, _ item: (JSONValue) throws(ReportError) -> T) throws(ReportError) -> [T] {
        guard let value = value(key) else { return [] }
        guard let items = value.arrayValue else { throw error("'\(key)' that is not a list") }
        var result: [T] = []
        for entry in items.prefix(limit) { result.append(try item(entry)) }
        return result
    }
}
