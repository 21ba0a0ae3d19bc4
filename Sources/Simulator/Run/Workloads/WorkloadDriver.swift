import SystemPackage
import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// Where a workload runs and what it can reach: the seam between the runner and each kind of
/// traffic. Plain values, so that drivers never hold the topology itself.
struct WorkloadContext: Sendable {
    var workload: Workload
    /// The workload's position in the scenario; its server listens on ``port``.
    var index: Int
    var runID: String
    /// The namespace of `from` (the server, or where a command runs) and of `to` (the client).
    var serverNamespace: NetworkNamespace
    var clientNamespace: NetworkNamespace?
    /// The server's service addresses the client connects to (its `family`, IPv6 first): on
    /// its loopback, reachable over every link.
    var serverAddresses: [IPAddress]
    /// The first of them.
    var serverAddress: IPAddress { serverAddresses[0] }
    var log: RunLog
    /// Fires at the workload's `stop`, or when the run ends or is cancelled.
    var stop: EventSignal
    /// When the workload starts and stops, from time zero.
    var startOffset: Duration
    var stopOffset: Duration
    /// When the workload starts and stops (once time zero is fixed, as it is when it runs).
    var startAt: MonotonicInstant { log.start + startOffset }
    var stopAt: MonotonicInstant { log.start + stopOffset }
    /// The report directory as named, and held open (command output is written through it).
    var reportDirectory: String
    var report: SecureDirectory
    /// What command output may hold.
    var outputBudget: OutputBudget
    /// Kills the commands' process groups if the run dies without stopping them.
    var watchdog: ProcessGroupWatchdog
    /// Environment variables describing the topology, for commands.
    var environment: [String: String]
    /// The node's resolv.conf (in memory), where it is a phone of a network: a command sees it
    /// at /etc/resolv.conf.
    var resolvConf: String?
    /// The client node's name servers now (its resolv.conf's), for a client that connects by
    /// name (``Workload/host``).
    var nameServers: (@Sendable () -> [IPAddress])?
    /// The client node's path as its monitor last published it (for multipath modes).
    var clientPath: (@Sendable () -> NetworkPath?)?
    /// The client node's monitor, whose updates wake a flow in a multipath mode.
    var clientMonitor: NetworkPathMonitor?
    /// The client node's MPTCP path manager, when multipath modes use MPTCP (nil: application-
    /// level handover over plain TCP).
    var mptcp: MPTCPPathManager?
    /// Whether the server listens with MPTCP (and so accepts MPTCP and plain TCP alike).
    var serverAcceptsMPTCP = false
    /// Whether the client opens and switches its MPTCP connections' subflows itself (the
    /// userspace path manager on its node).
    var controlsSubflows = false

    var port: UInt16 { Self.port(index: index) }

    /// The port the server of workload number `index` listens on.
    static func port(index: Int) -> UInt16 { UInt16(20000 + index) }
}

/// One kind of traffic. ``prepare()`` runs before the scenario's time zero (listeners are
/// ready before any client connects); ``run()`` runs on the workload's own thread from its start
/// until it finishes or ``WorkloadContext/stop`` fires; ``sample()`` and ``result()`` may be
/// called from any thread.
protocol WorkloadDriver: AnyObject, Sendable {
    var context: WorkloadContext { get }
    func prepare() throws(SimulatorError)
    func run()
    /// Cumulative counters now.
    func sample() -> WorkloadSample
    /// Statistics once ``run()`` has returned; `end` is when the workload stopped.
    func result(end: Duration) -> WorkloadResult
    /// Ends what ``prepare()`` started (servers). Called after ``run()`` returned.
    func finish()
}

/// Counters a workload has at one moment.
struct WorkloadSample: Sendable {
    var bytesReceived: Int64
    var rtt: Duration?
    /// For streams: seconds of media buffered, and whether playback is stalled.
    var buffered: Duration?
    var isStalled: Bool?
}

extension WorkloadContext {
    /// Makes the driver for this context's workload.
    func makeDriver() -> any WorkloadDriver {
        switch workload.kind {
        case .bulk(let size): BulkWorkload(context: self, size: size)
        case let .requests(requestSize, responseSize, interval, count):
            RequestsWorkload(context: self, requestSize: requestSize, responseSize: responseSize, interval: interval, count: count)
        case let .stream(bitrate, buffer): StreamWorkload(context: self, bitrate: bitrate, buffer: buffer)
        case let .command(run, environment): CommandWorkload(context: self, arguments: run, environment: environment)
        }
    }
}
