import PathMonitor
import RoamReport
import ScenarioModel

/// What one workload did over a run: the figures expectations are checked against and the
/// report shows.
public struct WorkloadResult: Sendable {
    public var name: String
    public var kind: String
    /// The multipath mode asked for.
    public var mode: MultipathMode
    public var note: String?
    public var bytesReceived: Int64 = 0
    /// From the workload's start to when it stopped or completed.
    public var activeTime: Duration = .zero
    public var connections = 0
    public var connectFailures = 0
    /// The local addresses its connections came from, in order.
    public var localAddresses: [String] = []
    /// Bytes received over each interface (multipath modes): what went over cellular is what a
    /// user pays for.
    public var bytesByInterface: [String: Int64] = [:]
    /// What the gateway of each network with a captive portal counted of this workload's
    /// traffic while the portal held its client (by network name).
    public var bytesWhilePortal: [String: (bytes: Int64, packets: Int64)] = [:]
    /// Times the flow moved to another path.
    public var handovers = 0
    /// What carried the workload's connections: `mptcp` (multipath), `tcp (mptcp fallback)`
    /// (an MPTCP socket whose peer or path spoke plain TCP), or `tcp`.
    public var transport = "tcp"
    /// MPTCP subflows that came up over the run, each connection's first included.
    public var subflowsOpened = 0
    /// The longest time without data while the workload ran, and when it began.
    public var longestGap: (start: Duration, length: Duration)?
    /// Every time without data of 20 ms or more, in order (the first 4,096; one still open at
    /// the end runs to it): for measuring how long a flow took to resume after an event (the
    /// network benchmark).
    package var gaps: [(start: Duration, length: Duration)] = []
    /// Whether the workload did all it set out to (see `Expectation/Check/completes(_:)`).
    public var completed = false
    /// Why it did not, if it did not.
    public var incompleteReason: String?
    /// For a bulk transfer of a given size: when the last byte arrived.
    public var completionTime: Duration?
    public var requests: RequestStatistics?
    public var stream: StreamStatistics?
    public var command: CommandStatistics?
    /// The lookups of the server's name, for a client that connects by name.
    public var lookups: LookupStatistics?

    /// Mean goodput over ``activeTime``.
    public var throughput: Rate? {
        guard activeTime > .zero else { return nil }
        return Rate(bitsPerSecond: Double(bytesReceived) * 8 / (Double(activeTime.nanoseconds) / 1e9))
    }

    init(_ workload: Workload) {
        name = workload.name
        kind = workload.kind.name
        mode = workload.mode
    }
}

/// Request/response figures.
public struct RequestStatistics: Sendable {
    public var sent = 0
    public var succeeded = 0
    /// Requests that timed out or lost their connection.
    public var failed = 0
    /// In flight when the workload stopped (not counted as failures).
    public var unfinished = 0
    /// From each request's send to its first byte back, and to its last, over the successful
    /// ones: bounded however many requests a run makes (see ``DurationDistribution``).
    public var timeToFirstByte = DurationDistribution()
    public var completion = DurationDistribution()

    /// ``timeToFirstByte``'s values (each within 0.4 % past ``DurationDistribution/exactLimit``).
    public var timesToFirstByte: [Duration] {
        get { timeToFirstByte.values }
        set { timeToFirstByte = DurationDistribution(newValue) }
    }
    /// ``completion``'s values (each within 0.4 % past ``DurationDistribution/exactLimit``).
    public var completionTimes: [Duration] {
        get { completion.values }
        set { completion = DurationDistribution(newValue) }
    }
}

/// How a client's lookups of its server's name went: one before each connection.
public struct LookupStatistics: Sendable {
    public var name: String
    /// How long the successful lookups took (bounded: see ``DurationDistribution``).
    public var duration = DurationDistribution()
    /// ``duration``'s values (each within 0.4 % past ``DurationDistribution/exactLimit``).
    public var durations: [Duration] {
        get { duration.values }
        set { duration = DurationDistribution(newValue) }
    }
    public var failed = 0
    /// Why the last failed lookup failed.
    public var lastFailure: String?
}

/// Playback figures of a stream.
public struct StreamStatistics: Sendable {
    public struct Stall: Sendable {
        public var start: Duration
        public var duration: Duration
        /// Still stalled when the workload stopped.
        public var ongoing: Bool
    }
    /// From the workload's start to the first frame played (nil: never played).
    public var startupDelay: Duration?
    public var stalls: [Stall] = []
    public var totalStall: Duration { stalls.reduce(.zero) { $0 + $1.duration } }
    public var longestStall: Duration { stalls.map(\.duration).max() ?? .zero }
}

/// What a command did.
public struct CommandStatistics: Sendable {
    public var arguments: [String]
    public var exitCode: Int?
    /// The signal that ended it, if one did.
    public var signal: Int32?
    /// Roam ended it because the workload's time was up.
    public var terminatedByRoam = false
    public var stdoutPath: String
    public var stderrPath: String
    public var runTime: Duration = .zero
}


extension WorkloadResult {
    /// The workload's entry in `summary.json`.
    public var summary: RunSummary.Workload {
        var entry = RunSummary.Workload(name: name, kind: kind, mode: mode.rawValue, completed: completed)
        entry.note = note
        entry.bytesByInterface = bytesByInterface
        if kind != "command" {
            entry.transfer = .init(bytesReceived: bytesReceived, activeTime: activeTime, throughput: throughput.map { Int64($0.bitsPerSecond.rounded()) },
                                   connections: connections, connectFailures: connectFailures, localAddresses: localAddresses,
                                   handovers: handovers, transport: transport, longestGap: longestGap.map { .init(start: $0.start, length: $0.length) })
            entry.subflowsOpened = subflowsOpened
        } else if mode != .none {
            // In a multipath mode, the MPTCP subflows the node's connections opened (its events).
            entry.subflowsOpened = subflowsOpened
        }
        entry.incompleteReason = incompleteReason
        entry.completionTime = completionTime
        if let requests {
            entry.requests = .init(sent: requests.sent, succeeded: requests.succeeded, failed: requests.failed, unfinished: requests.unfinished,
                                   timeToFirstByte: .init(requests.timeToFirstByte), completion: .init(requests.completion))
        }
        if let lookups {
            entry.lookups = .init(name: lookups.name, succeeded: lookups.duration.count, failed: lookups.failed, duration: .init(lookups.duration))
        }
        if let stream {
            entry.stream = .init(startupDelay: stream.startupDelay, totalStall: stream.totalStall, longestStall: stream.longestStall,
                                 stalls: stream.stalls.map { .init(start: $0.start, duration: $0.duration, ongoing: $0.ongoing) })
        }
        if let command {
            entry.command = .init(arguments: command.arguments, exitCode: command.exitCode, signal: command.signal.map { Int($0) },
                                  terminatedByRoam: command.terminatedByRoam, runTime: command.runTime, stdout: command.stdoutPath,
                                  stderr: command.stderrPath)
        }
        return entry
    }

    /// The workload's entry in `summary.json`, as JSON.
    public var json: JSONValue { summary.json }
}

extension RunSummary.Workload.Percentiles {
    /// The median, the 95th percentile (nearest rank) and the maximum of `distribution`.
    init(_ distribution: DurationDistribution) {
        self.init(p50: distribution.percentile(0.5), p95: distribution.percentile(0.95), max: distribution.maximum)
    }
}
