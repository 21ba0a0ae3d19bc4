import RoamCore
import RoamSystem

/// `summary.json`: what a run was and how it went, typed. The simulator writes it through
/// ``json``, and `roam report`, the HTML report and Roam's tests read it back through
/// ``init(json:)``: one description of the file, as ``RunEvent`` is of `timeline.jsonl`.
///
/// The file carries its ``format`` (``currentFormat``); a summary written before the format
/// had a number reads as format 0. Fields a later format adds are optional here, so a reader
/// takes older summaries; a summary of a newer format than it knows is refused with a message
/// that says so.
public struct RunSummary: Sendable, Hashable {
    /// The format this version of Roam writes.
    public static let currentFormat = 1

    public var format: Int = RunSummary.currentFormat
    public var scenario: String
    public var description: String?
    public var runID: String
    /// When the run started, RFC 3339 (UTC).
    public var started: String
    public var seed: UInt64
    /// `netem` or `userspace`, and why.
    public var backend: String
    public var backendReason: String
    /// How multipath workloads kept their flows (`--multipath`, with `auto` resolved).
    public var multipath: String
    public var timeScale: Double = 1
    public var duration: Duration
    /// How far the run went (less than ``duration`` when it was ended early).
    public var endedAt: Duration
    public var cancelled: Bool
    public var passed: Bool
    public var expectations: [Expectation] = []
    public var workloads: [Workload] = []
    public var timeline = Timeline()
    /// Path updates per node.
    public var pathUpdates: [String: Int] = [:]
    /// Lines in `timeline.jsonl`.
    public var events: Int = 0
    public var notes: [String] = []
    /// The userspace emulator's counters per link direction (empty with netem).
    public var links: [LinkCounters] = []
    /// Where the phones went, for a scenario with `mobility:`.
    public var map: MobilityMap?
    /// Whether the run played what its scenario asked (``Fidelity``); nil in a summary written
    /// before Roam measured it.
    public var fidelity: Fidelity?

    public init(scenario: String, description: String? = nil, runID: String, started: String, seed: UInt64, backend: String,
                backendReason: String, multipath: String, duration: Duration, endedAt: Duration, cancelled: Bool, passed: Bool) {
        self.scenario = scenario
        self.description = description
        self.runID = runID
        self.started = started
        self.seed = seed
        self.backend = backend
        self.backendReason = backendReason
        self.multipath = multipath
        self.duration = duration
        self.endedAt = endedAt
        self.cancelled = cancelled
        self.passed = passed
    }

    /// One expectation, checked.
    public struct Expectation: Sendable, Hashable {
        /// The workload, node or link it is about.
        public var subject: String
        /// The scenario key of the check (`maxStall`, `path`, ...).
        public var check: String
        /// What the check was, in words: `longest stall ≤ 2s`.
        public var requirement: String
        /// The measured value, in the expectation's unit.
        public var measured: String
        public var passed: Bool
        /// Its line in the scenario file.
        public var line: Int
        public var detail: String?

        public init(subject: String, check: String, requirement: String, measured: String, passed: Bool, line: Int, detail: String? = nil) {
            self.subject = subject
            self.check = check
            self.requirement = requirement
            self.measured = measured
            self.passed = passed
            self.line = line
            self.detail = detail
        }
    }

    /// What one workload did.
    public struct Workload: Sendable, Hashable {
        public var name: String
        public var kind: String
        public var mode: String
        public var note: String?
        /// Transfer figures (every kind but `command`).
        public var transfer: Transfer?
        /// Bytes over each interface: received (multipath modes), or both ways while a command ran.
        public var bytesByInterface: [String: Int64] = [:]
        /// MPTCP subflows that came up (a command's, in a multipath mode).
        public var subflowsOpened: Int?
        public var completed: Bool
        public var incompleteReason: String?
        public var completionTime: Duration?
        public var requests: Requests?
        public var stream: Stream?
        public var command: Command?
        /// The lookups of the server's name (a client that connects by name).
        public var lookups: Lookups?

        public init(name: String, kind: String, mode: String, completed: Bool) {
            self.name = name
            self.kind = kind
            self.mode = mode
            self.completed = completed
        }

        /// What a transfer moved, and over what.
        public struct Transfer: Sendable, Hashable {
            public var bytesReceived: Int64
            public var activeTime: Duration
            /// Mean goodput over ``activeTime``, bits per second.
            public var throughput: Int64?
            public var connections: Int
            public var connectFailures: Int
            public var localAddresses: [String]
            public var handovers: Int
            /// `mptcp`, `tcp (mptcp fallback)` or `tcp`.
            public var transport: String
            /// The longest time without data, and when it began.
            public var longestGap: Gap?

            public init(bytesReceived: Int64, activeTime: Duration, throughput: Int64?, connections: Int, connectFailures: Int,
                        localAddresses: [String], handovers: Int, transport: String, longestGap: Gap?) {
                self.bytesReceived = bytesReceived
                self.activeTime = activeTime
                self.throughput = throughput
                self.connections = connections
                self.connectFailures = connectFailures
                self.localAddresses = localAddresses
                self.handovers = handovers
                self.transport = transport
                self.longestGap = longestGap
            }
        }

        public struct Gap: Sendable, Hashable {
            public var start: Duration
            public var length: Duration
            public init(start: Duration, length: Duration) {
                self.start = start
                self.length = length
            }
        }

        /// Percentiles of a set of durations (nil: none measured).
        public struct Percentiles: Sendable, Hashable {
            public var p50: Duration?
            public var p95: Duration?
            public var max: Duration?
            public init(p50: Duration?, p95: Duration?, max: Duration?) {
                self.p50 = p50
                self.p95 = p95
                self.max = max
            }
        }

        /// How a client's lookups of its server's name went.
        public struct Lookups: Sendable, Hashable {
            public var name: String
            public var succeeded: Int
            public var failed: Int
            /// Of those that succeeded.
            public var duration: Percentiles
            public init(name: String, succeeded: Int, failed: Int, duration: Percentiles) {
                self.name = name
                self.succeeded = succeeded
                self.failed = failed
                self.duration = duration
            }
        }

        public struct Requests: Sendable, Hashable {
            public var sent: Int
            public var succeeded: Int
            public var failed: Int
            public var unfinished: Int
            public var timeToFirstByte: Percentiles
            public var completion: Percentiles
            public init(sent: Int, succeeded: Int, failed: Int, unfinished: Int, timeToFirstByte: Percentiles, completion: Percentiles) {
                self.sent = sent
                self.succeeded = succeeded
                self.failed = failed
                self.unfinished = unfinished
                self.timeToFirstByte = timeToFirstByte
                self.completion = completion
            }
        }

        public struct Stream: Sendable, Hashable {
            public struct Stall: Sendable, Hashable {
                public var start: Duration
                public var duration: Duration
                /// Still stalled when the workload stopped.
                public var ongoing: Bool
                public init(start: Duration, duration: Duration, ongoing: Bool) {
                    self.start = start
                    self.duration = duration
                    self.ongoing = ongoing
                }
            }
            public var startupDelay: Duration?
            public var totalStall: Duration
            public var longestStall: Duration
            public var stalls: [Stall]
            public init(startupDelay: Duration?, totalStall: Duration, longestStall: Duration, stalls: [Stall]) {
                self.startupDelay = startupDelay
                self.totalStall = totalStall
                self.longestStall = longestStall
                self.stalls = stalls
            }
        }

        public struct Command: Sendable, Hashable {
            public var arguments: [String]
            public var exitCode: Int?
            public var signal: Int?
            public var terminatedByRoam: Bool
            public var runTime: Duration
            public var stdout: String
            public var stderr: String
            public init(arguments: [String], exitCode: Int?, signal: Int?, terminatedByRoam: Bool, runTime: Duration, stdout: String, stderr: String) {
                self.arguments = arguments
                self.exitCode = exitCode
                self.signal = signal
                self.terminatedByRoam = terminatedByRoam
                self.runTime = runTime
                self.stdout = stdout
                self.stderr = stderr
            }
        }
    }

    /// How the timeline went.
    public struct Timeline: Sendable, Hashable {
        public struct Failure: Sendable, Hashable {
            public var link: String
            public var action: String
            public var error: String
            public init(link: String, action: String, error: String) {
                self.link = link
                self.action = action
                self.error = error
            }
        }
        /// Link changes applied.
        public var changes: Int = 0
        /// Changes that could not be applied.
        public var failed: [Failure] = []
        /// How late changes took effect after their planned time.
        public var latenessP50: Duration?
        public var latenessP99: Duration?
        public var latenessMax: Duration?
        public init() {}
    }

    /// One link direction's counters in the userspace emulator.
    public struct LinkCounters: Sendable, Hashable {
        public var link: String
        public var direction: String
        public var arrived: Int64
        public var delivered: Int64
        public var lost: Int64
        public var blackholed: Int64
        public var overflowed: Int64
        public var corrupted: Int64
        public var duplicated: Int64
        public var reordered: Int64
        /// A cellular radio's RRC states (`radio:`): promotions this direction's packets started,
        /// and packets that waited for the radio to connect.
        public var promotions: Int64 = 0
        public var heldForRadio: Int64 = 0
        /// Packets the queue's AQM (`queue: codel`, `fq-codel`) dropped.
        public var aqmDropped: Int64 = 0
        /// How late delivered packets left against their due time (``Fidelity``).
        public var latenessP50: Duration?
        public var latenessP99: Duration?
        public var latenessMax: Duration?
        /// The packets the configured loss would have dropped on average, beside ``lost``
        /// (what was drawn).
        public var expectedLost: Double?
        public init(link: String, direction: String, arrived: Int64, delivered: Int64, lost: Int64, blackholed: Int64, overflowed: Int64,
                    corrupted: Int64, duplicated: Int64, reordered: Int64) {
            self.link = link
            self.direction = direction
            self.arrived = arrived
            self.delivered = delivered
            self.lost = lost
            self.blackholed = blackholed
            self.overflowed = overflowed
            self.corrupted = corrupted
            self.duplicated = duplicated
            self.reordered = reordered
        }
    }
}

// MARK: - Writing

extension RunSummary {
    /// The summary as `summary.json` holds it.
    public var json: JSONValue {
        let base: [(String, JSONValue)] = [
            ("format", .int(Int64(format))),
            ("scenario", .string(scenario)),
            ("description", description.map { .string($0) } ?? .null),
            ("runId", .string(runID)),
            ("started", .string(started)),
            ("seed", .int(Int64(bitPattern: seed))),
            ("backend", .string(backend)),
            ("backendReason", .string(backendReason)),
            ("multipath", .string(multipath)),
            ("timeScale", .double(timeScale)),
            ("durationSeconds", .seconds(duration)),
            ("endedAtSeconds", .seconds(endedAt)),
            ("cancelled", .bool(cancelled)),
            ("passed", .bool(passed)),
            ("expectations", .array(expectations.map(\.json))),
            ("workloads", .array(workloads.map(\.json))),
            ("timeline", .object([
                ("changes", .int(Int64(timeline.changes))),
                ("failed", .array(timeline.failed.map { .object([("link", .string($0.link)), ("action", .string($0.action)), ("error", .string($0.error))]) })),
                ("latenessMs", .object([("p50", .milliseconds(timeline.latenessP50)), ("p99", .milliseconds(timeline.latenessP99)),
                                        ("max", .milliseconds(timeline.latenessMax))])),
            ])),
            ("pathUpdates", .object(pathUpdates.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
            ("events", .int(Int64(events))),
            ("notes", .array(notes.map { .string($0) })),
            ("links", .array(links.map(\.json))),
        ]
        var members = base
        if let map { members.append(("map", map.json)) }
        if let fidelity { members.append(("fidelity", fidelity.json)) }
        return .object(members)
    }
}

extension RunSummary.Expectation {
    /// The expectation as `summary.json` holds it.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("subject", .string(subject)), ("check", .string(check)), ("requirement", .string(requirement)),
            ("measured", .string(measured)), ("passed", .bool(passed)), ("line", .int(Int64(line))),
        ]
        if let detail { members.append(("detail", .string(detail))) }
        return .object(members)
    }
}

extension RunSummary.Workload {
    /// The workload as `summary.json` holds it.
    public var json: JSONValue {
        func interfaces() -> JSONValue { .object(bytesByInterface.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) }) }
        var members: [(String, JSONValue)] = [("name", .string(name)), ("kind", .string(kind)), ("mode", .string(mode))]
        if let note { members.append(("note", .string(note))) }
        if let transfer {
            members += [
                ("bytesReceived", .int(transfer.bytesReceived)),
                ("activeSeconds", .seconds(transfer.activeTime)),
                ("throughputBps", transfer.throughput.map { .int($0) } ?? .null),
                ("connections", .int(Int64(transfer.connections))),
                ("connectFailures", .int(Int64(transfer.connectFailures))),
                ("localAddresses", .array(transfer.localAddresses.map { .string($0) })),
                ("bytesByInterface", interfaces()),
                ("handovers", .int(Int64(transfer.handovers))),
                ("transport", .string(transfer.transport)),
                ("subflowsOpened", .int(Int64(subflowsOpened ?? 0))),
                ("longestGap", transfer.longestGap.map { .object([("start", .seconds($0.start)), ("ms", .milliseconds($0.length))]) } ?? .null),
            ]
        } else {
            members.append(("bytesByInterface", interfaces()))
            if let subflowsOpened { members.append(("subflowsOpened", .int(Int64(subflowsOpened)))) }
        }
        members.append(("completed", .bool(completed)))
        if let incompleteReason { members.append(("incompleteReason", .string(incompleteReason))) }
        if let completionTime { members.append(("completionSeconds", .seconds(completionTime))) }
        func percentiles(_ values: Percentiles) -> JSONValue {
            .object([("p50", .milliseconds(values.p50)), ("p95", .milliseconds(values.p95)), ("max", .milliseconds(values.max))])
        }
        if let requests {
            members.append(("requests", .object([
                ("sent", .int(Int64(requests.sent))), ("succeeded", .int(Int64(requests.succeeded))),
                ("failed", .int(Int64(requests.failed))), ("unfinished", .int(Int64(requests.unfinished))),
                ("timeToFirstByteMs", percentiles(requests.timeToFirstByte)), ("completionMs", percentiles(requests.completion)),
            ])))
        }
        if let lookups {
            members.append(("lookups", .object([
                ("name", .string(lookups.name)), ("succeeded", .int(Int64(lookups.succeeded))), ("failed", .int(Int64(lookups.failed))),
                ("durationMs", percentiles(lookups.duration)),
            ])))
        }
        if let stream {
            members.append(("stream", .object([
                ("startupDelayMs", .milliseconds(stream.startupDelay)),
                ("stallCount", .int(Int64(stream.stalls.count))),
                ("totalStallMs", .milliseconds(stream.totalStall)),
                ("longestStallMs", .milliseconds(stream.longestStall)),
                ("stalls", .array(stream.stalls.map { stall in
                    .object([("start", .seconds(stall.start)), ("durationMs", .milliseconds(stall.duration)), ("ongoing", .bool(stall.ongoing))])
                })),
            ])))
        }
        if let command {
            members.append(("command", .object([
                ("run", .array(command.arguments.map { .string($0) })),
                ("exitCode", command.exitCode.map { .int(Int64($0)) } ?? .null),
                ("signal", command.signal.map { .int(Int64($0)) } ?? .null),
                ("terminatedByRoam", .bool(command.terminatedByRoam)),
                ("runSeconds", .seconds(command.runTime)),
                ("stdout", .string(command.stdout)),
                ("stderr", .string(command.stderr)),
            ])))
        }
        return .object(members)
    }
}

extension RunSummary.LinkCounters {
    /// The counters as `summary.json` holds them.
    public var json: JSONValue {
        .object([("link", .string(link)), ("direction", .string(direction)), ("arrived", .int(arrived)), ("delivered", .int(delivered)),
                 ("lost", .int(lost)), ("blackholed", .int(blackholed)), ("overflowed", .int(overflowed)), ("corrupted", .int(corrupted)),
                 ("duplicated", .int(duplicated)), ("reordered", .int(reordered))]
                + (promotions != 0 || heldForRadio != 0 ? [("promotions", .int(promotions)), ("heldForRadio", .int(heldForRadio))] : [])
                + (aqmDropped != 0 ? [("aqmDropped", .int(aqmDropped))] : [])
                + (latenessP99 != nil ? [("latenessMs", .object([("p50", .milliseconds(latenessP50)), ("p99", .milliseconds(latenessP99)),
                                                                 ("max", .milliseconds(latenessMax))]))] : [])
                + (expectedLost.map { [("expectedLost", JSONValue.double(($0 * 10).rounded() / 10))] } ?? []))
    }
}

// MARK: - Reading

extension RunSummary {
    /// The most of each list read: a summary is outside input (`roam report` reads any
    /// directory), and a run's own lists are far shorter.
    static let maximumItems = 100_000

    /// Reads `summary.json`'s value; the error names the field that is missing or of the
    /// wrong type.
    public init(json: JSONValue) throws(ReportError) {
        let fields = JSONFields(json, place: "summary.json")
        let format = try fields.optionalInt("format") ?? 0
        guard format <= Int64(RunSummary.currentFormat) else {
            throw ReportError("summary.json is format \(format), newer than this Roam reads (\(RunSummary.currentFormat)); use a newer roam")
        }
        guard format >= 0 else { throw ReportError("summary.json has a negative format (\(format))") }
        let scenario = try fields.string("scenario"), description = try fields.optionalString("description")
        let runID = try fields.optionalString("runId"), started = try fields.optionalString("started")
        let seed = try fields.optionalInt("seed"), backend = try fields.optionalString("backend")
        let backendReason = try fields.optionalString("backendReason"), multipath = try fields.optionalString("multipath")
        let duration = try fields.optionalDuration("durationSeconds"), endedAt = try fields.optionalDuration("endedAtSeconds")
        let cancelled = try fields.optionalBool("cancelled"), passed = try fields.optionalBool("passed")
        self.init(scenario: scenario, description: description, runID: runID ?? "?", started: started ?? "?",
                  seed: UInt64(bitPattern: seed ?? 0), backend: backend ?? "?", backendReason: backendReason ?? "",
                  multipath: multipath ?? "auto", duration: duration ?? .zero, endedAt: endedAt ?? duration ?? .zero,
                  cancelled: cancelled ?? false, passed: passed ?? false)
        self.format = Int(format)
        if let scale = try fields.optionalDouble("timeScale") { timeScale = scale }
        expectations = try fields.list("expectations", limit: RunSummary.maximumItems) { item throws(ReportError) in try Expectation(item) }
        workloads = try fields.list("workloads", limit: RunSummary.maximumItems) { item throws(ReportError) in try Workload(item) }
        if let value = fields.value("timeline") {
            let timeline = JSONFields(value, place: "summary.json 'timeline'")
            self.timeline.changes = Int(clamping: try timeline.optionalInt("changes") ?? 0)
            self.timeline.failed = try timeline.list("failed", limit: RunSummary.maximumItems) { item throws(ReportError) in
                let failure = JSONFields(item, place: "summary.json 'timeline.failed'")
                return Timeline.Failure(link: try failure.string("link"), action: try failure.string("action"), error: try failure.optionalString("error") ?? "")
            }
            if let value = timeline.value("latenessMs") {
                let lateness = JSONFields(value, place: "summary.json 'timeline.latenessMs'")
                self.timeline.latenessP50 = try lateness.optionalMilliseconds("p50")
                self.timeline.latenessP99 = try lateness.optionalMilliseconds("p99")
                self.timeline.latenessMax = try lateness.optionalMilliseconds("max")
            }
        }
        if let value = fields.value("pathUpdates") {
            guard case .object(let members) = value else { throw fields.error("'pathUpdates' that is not an object") }
            let updates = JSONFields(value, place: "summary.json 'pathUpdates'")
            for (node, _) in members.prefix(Self.maximumItems) { pathUpdates[node] = Int(clamping: try updates.int(node)) }
        }
        events = Int(clamping: try fields.optionalInt("events") ?? 0)
        notes = Array((try fields.optionalStrings("notes") ?? []).prefix(Self.maximumItems))
        links = try fields.list("links", limit: RunSummary.maximumItems) { item throws(ReportError) in
            let counters = JSONFields(item, place: "summary.json 'links'")
            var read = LinkCounters(link: try counters.string("link"), direction: try counters.string("direction"),
                                arrived: try counters.optionalInt("arrived") ?? 0, delivered: try counters.optionalInt("delivered") ?? 0,
                                lost: try counters.optionalInt("lost") ?? 0, blackholed: try counters.optionalInt("blackholed") ?? 0,
                                overflowed: try counters.optionalInt("overflowed") ?? 0, corrupted: try counters.optionalInt("corrupted") ?? 0,
                                duplicated: try counters.optionalInt("duplicated") ?? 0, reordered: try counters.optionalInt("reordered") ?? 0)
            read.promotions = try counters.optionalInt("promotions") ?? 0
            read.heldForRadio = try counters.optionalInt("heldForRadio") ?? 0
            read.aqmDropped = try counters.optionalInt("aqmDropped") ?? 0
            if let value = counters.value("latenessMs") {
                let lateness = JSONFields(value, place: "summary.json 'links.latenessMs'")
                read.latenessP50 = try lateness.optionalMilliseconds("p50")
                read.latenessP99 = try lateness.optionalMilliseconds("p99")
                read.latenessMax = try lateness.optionalMilliseconds("max")
            }
            read.expectedLost = try counters.optionalDouble("expectedLost")
            return read
        }
        if let map = fields.value("map") { self.map = try MobilityMap(json: map) }
        if let fidelity = fields.value("fidelity") { self.fidelity = try Fidelity(json: fidelity) }
    }
}

extension RunSummary.Expectation {
    init(_ value: JSONValue) throws(ReportError) {
        let fields = JSONFields(value, place: "summary.json 'expectations'")
        self.init(subject: try fields.string("subject"), check: try fields.string("check"), requirement: try fields.optionalString("requirement") ?? "",
                  measured: try fields.optionalString("measured") ?? "", passed: try fields.bool("passed"),
                  line: Int(clamping: try fields.optionalInt("line") ?? 0), detail: try fields.optionalString("detail"))
    }
}

extension RunSummary.Workload {
    init(_ value: JSONValue) throws(ReportError) {
        let fields = JSONFields(value, place: "summary.json 'workloads'")
        self.init(name: try fields.string("name"), kind: try fields.string("kind"), mode: try fields.optionalString("mode") ?? "none",
                  completed: try fields.optionalBool("completed") ?? false)
        note = try fields.optionalString("note")
        if let value = fields.value("bytesByInterface") {
            guard case .object(let members) = value else { throw fields.error("'bytesByInterface' that is not an object") }
            let bytes = JSONFields(value, place: "summary.json 'bytesByInterface'")
            for (interface, _) in members.prefix(RunSummary.maximumItems) { bytesByInterface[interface] = try bytes.int(interface) }
        }
        let subflows = try fields.optionalInt("subflowsOpened").map { Int(clamping: $0) }
        subflowsOpened = subflows
        if kind != "command" {
            var gap: Gap?
            if let value = fields.value("longestGap") {
                let longest = JSONFields(value, place: "summary.json 'longestGap'")
                gap = Gap(start: try longest.duration("start"), length: try longest.milliseconds("ms"))
            }
            transfer = Transfer(bytesReceived: try fields.optionalInt("bytesReceived") ?? 0, activeTime: try fields.optionalDuration("activeSeconds") ?? .zero,
                                throughput: try fields.optionalInt("throughputBps"),
                                connections: Int(clamping: try fields.optionalInt("connections") ?? 0),
                                connectFailures: Int(clamping: try fields.optionalInt("connectFailures") ?? 0),
                                localAddresses: Array((try fields.optionalStrings("localAddresses") ?? []).prefix(RunSummary.maximumItems)),
                                handovers: Int(clamping: try fields.optionalInt("handovers") ?? 0),
                                transport: try fields.optionalString("transport") ?? "tcp", longestGap: gap)
        }
        incompleteReason = try fields.optionalString("incompleteReason")
        completionTime = try fields.optionalDuration("completionSeconds")
        func percentiles(_ value: JSONValue?, _ what: String) throws(ReportError) -> Percentiles {
            guard let value else { return Percentiles(p50: nil, p95: nil, max: nil) }
            let fields = JSONFields(value, place: "summary.json '\(what)'")
            return Percentiles(p50: try fields.optionalMilliseconds("p50"), p95: try fields.optionalMilliseconds("p95"), max: try fields.optionalMilliseconds("max"))
        }
        if let value = fields.value("requests") {
            let requests = JSONFields(value, place: "summary.json 'requests'")
            self.requests = Requests(sent: Int(clamping: try requests.optionalInt("sent") ?? 0), succeeded: Int(clamping: try requests.optionalInt("succeeded") ?? 0),
                                     failed: Int(clamping: try requests.optionalInt("failed") ?? 0), unfinished: Int(clamping: try requests.optionalInt("unfinished") ?? 0),
                                     timeToFirstByte: try percentiles(requests.value("timeToFirstByteMs"), "timeToFirstByteMs"),
                                     completion: try percentiles(requests.value("completionMs"), "completionMs"))
        }
        if let value = fields.value("lookups") {
            let lookups = JSONFields(value, place: "summary.json 'lookups'")
            self.lookups = Lookups(name: try lookups.string("name"), succeeded: Int(clamping: try lookups.optionalInt("succeeded") ?? 0),
                                   failed: Int(clamping: try lookups.optionalInt("failed") ?? 0),
                                   duration: try percentiles(lookups.value("durationMs"), "durationMs"))
        }
        if let value = fields.value("stream") {
            let stream = JSONFields(value, place: "summary.json 'stream'")
            let stalls = try stream.list("stalls", limit: RunSummary.maximumItems) { item throws(ReportError) in
                let stall = JSONFields(item, place: "summary.json 'stalls'")
                // Format 0 wrote a stall's length as `ms`; a stall still going at the end may
                // have none (the report draws it to the end).
                let length = try stall.optionalMilliseconds("durationMs")
                let legacy = try stall.optionalMilliseconds("ms")
                return Stream.Stall(start: try stall.duration("start"), duration: length ?? legacy ?? .zero, ongoing: try stall.optionalBool("ongoing") ?? false)
            }
            let total = try stream.optionalMilliseconds("totalStallMs"), longest = try stream.optionalMilliseconds("longestStallMs")
            self.stream = Stream(startupDelay: try stream.optionalMilliseconds("startupDelayMs"),
                                 totalStall: total ?? stalls.reduce(.zero) { $0 + $1.duration },
                                 longestStall: longest ?? stalls.map(\.duration).max() ?? .zero, stalls: stalls)
        }
        if let value = fields.value("command") {
            let command = JSONFields(value, place: "summary.json 'command'")
            self.command = Command(arguments: Array((try command.optionalStrings("run") ?? []).prefix(RunSummary.maximumItems)), exitCode: try command.optionalInt("exitCode").map { Int(clamping: $0) },
                                   signal: try command.optionalInt("signal").map { Int(clamping: $0) },
                                   terminatedByRoam: try command.optionalBool("terminatedByRoam") ?? false,
                                   runTime: try command.optionalDuration("runSeconds") ?? .zero,
                                   stdout: try command.optionalString("stdout") ?? "", stderr: try command.optionalString("stderr") ?? "")
        }
    }
}
