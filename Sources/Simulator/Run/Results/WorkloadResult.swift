import PathMonitor
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
    /// Times the flow moved to another path.
    public var handovers = 0
    /// What carried the workload's connections: `mptcp` (multipath), `tcp (mptcp fallback)`
    /// (an MPTCP socket whose peer or path spoke plain TCP), or `tcp`.
    public var transport = "tcp"
    /// MPTCP subflows that came up over the run, each connection's first included.
    public var subflowsOpened = 0
    /// The longest time without data while the workload ran, and when it began.
    public var longestGap: (start: Duration, length: Duration)?
    /// Whether the workload did all it set out to (see `Expectation/Check/completes(_:)`).
    public var completed = false
    /// Why it did not, if it did not.
    public var incompleteReason: String?
    /// For a bulk transfer of a given size: when the last byte arrived.
    public var completionTime: Duration?
    public var requests: RequestStatistics?
    public var stream: StreamStatistics?
    public var command: CommandStatistics?

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
    public var timesToFirstByte: [Duration] = []
    public var completionTimes: [Duration] = []
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

/// Percentiles by nearest rank over unsorted values.
func percentile(_ values: [Duration], _ fraction: Double) -> Duration? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

extension WorkloadResult {
    /// The workload's entry in `summary.json`.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("name", .string(name)), ("kind", .string(kind)), ("mode", .string(mode.rawValue)),
        ]
        if let note { members.append(("note", .string(note))) }
        if kind != "command" {
            members += [
                ("bytesReceived", .int(bytesReceived)),
                ("activeSeconds", .seconds(activeTime)),
                ("throughputBps", throughput.map { .int(Int64($0.bitsPerSecond.rounded())) } ?? .null),
                ("connections", .int(Int64(connections))),
                ("connectFailures", .int(Int64(connectFailures))),
                ("localAddresses", .array(localAddresses.map { .string($0) })),
                ("bytesByInterface", .object(bytesByInterface.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                ("handovers", .int(Int64(handovers))),
                ("transport", .string(transport)),
                ("subflowsOpened", .int(Int64(subflowsOpened))),
                ("longestGap", longestGap.map { .object([("start", .seconds($0.start)), ("ms", .milliseconds($0.length))]) } ?? .null),
            ]
        } else {
            // What the node's interfaces carried, both directions, while the command ran.
            members.append(("bytesByInterface", .object(bytesByInterface.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })))
            // In a multipath mode, the MPTCP subflows the node's connections opened (its events).
            if mode != .none { members.append(("subflowsOpened", .int(Int64(subflowsOpened)))) }
        }
        members.append(("completed", .bool(completed)))
        if let incompleteReason { members.append(("incompleteReason", .string(incompleteReason))) }
        if let completionTime { members.append(("completionSeconds", .seconds(completionTime))) }
        if let requests {
            members.append(("requests", .object([
                ("sent", .int(Int64(requests.sent))), ("succeeded", .int(Int64(requests.succeeded))),
                ("failed", .int(Int64(requests.failed))), ("unfinished", .int(Int64(requests.unfinished))),
                ("timeToFirstByteMs", .object([
                    ("p50", .milliseconds(percentile(requests.timesToFirstByte, 0.5))),
                    ("p95", .milliseconds(percentile(requests.timesToFirstByte, 0.95))),
                    ("max", .milliseconds(requests.timesToFirstByte.max())),
                ])),
                ("completionMs", .object([
                    ("p50", .milliseconds(percentile(requests.completionTimes, 0.5))),
                    ("p95", .milliseconds(percentile(requests.completionTimes, 0.95))),
                    ("max", .milliseconds(requests.completionTimes.max())),
                ])),
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
                ("stdout", .string(command.stdoutPath)),
                ("stderr", .string(command.stderrPath)),
            ])))
        }
        return .object(members)
    }
}
