import Glibc
import LinkEmulation
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

extension Scenario {
    /// Links whose capacity (or a flow's on them) comes from a trace, at the start or in the timeline.
    var tracedLinks: [String] {
        var names = links.filter { link in
            link.up.trace != nil || link.down.trace != nil || link.flows.contains { $0.impairment.trace != nil }
        }.map(\.name)
        for event in timeline {
            switch event.action {
            case .set(let impairment), .ramp(let impairment, _):
                if impairment.trace != nil { names.append(event.link) }
            default: break
            }
        }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }
}

extension Scenario {
    /// The first link with something only the userspace emulator plays, and what it is: a
    /// cellular radio's RRC states (netem delays every packet alike and cannot wake on traffic).
    var userspaceOnly: (link: LinkSpec, why: String)? {
        if let link = links.first(where: { $0.radio != nil }) {
            return (link, "has a cellular radio's RRC states (radio:), which hold the first packet after a silence for a promotion")
        }
        return nil
    }

    /// The first link that takes its capacity from a trace: the userspace emulator plays each
    /// delivery opportunity, netem the trace's rate stepped every
    /// ``TimelineSchedule/traceStep``; `--backend auto` chooses the userspace emulator for it.
    package var firstTracedLink: LinkSpec? {
        tracedLinks.first.flatMap { traced in links.first { $0.name == traced } }
    }
}

extension TimelineSchedule {
    /// The schedule a backend plays: as it is for the userspace emulator; for netem, each
    /// trace stepped as a rate (``steppingTraces(until:)``), with a note saying so.
    package func played(on backend: BackendKind, scenario: Scenario) -> (schedule: TimelineSchedule, note: String?) {
        guard backend == .netem else { return (self, nil) }
        let (stepped, window) = steppingTraces(until: scenario.duration)
        guard let window else { return (self, nil) }
        let traced = scenario.tracedLinks.map { "'\($0)'" }.joined(separator: ", ")
        return (stepped, "trace capacity on link\(scenario.tracedLinks.count == 1 ? "" : "s") \(traced) played by netem as a rate stepped every "
                    + "\(window.roamDescription) (each window's rate is the trace's delivery opportunities in it; a window without one passes "
                    + "\(TimelineSchedule.silentTraceRate(window: window)), a frame a window); the userspace backend plays each opportunity "
                    + "(--backend userspace)")
    }
}

/// How to run a scenario.
public struct RunOptions: Sendable {
    public var backend: BackendChoice = .auto
    /// Overrides the scenario's seed.
    public var seed: UInt64?
    /// Where the report goes; nil: `roam-reports/NAME-RUNID` in the working directory.
    public var reportDirectory: String?
    /// Plays the scenario this many times as fast (see `Scenario/timeScaled(by:)`).
    public var timeScale: Double = 1
    /// How often workloads are sampled (and progress reported).
    public var sampleInterval: Duration = .seconds(1)
    /// Write each link direction's decision log (userspace backend): `decisions-LINK-DIR.log`.
    public var decisionLogs = false
    /// How many threads the userspace emulator moves packets on (nil: one per core, and never
    /// more than the run has links). Each link is on one thread; its decisions do not depend on
    /// the count.
    public var emulatorThreads: Int?
    /// The most ``emulatorThreads`` may be.
    public static let maximumEmulatorThreads = 64
    /// The scheduling class of the userspace emulator's threads.
    public var emulatorPriority: EmulatorPriority = .realtime
    /// The bounds the run's ``RunReport/fidelity`` is judged against.
    public var fidelityBounds = Fidelity.Bounds()
    /// The largest `timeline.jsonl` that `report.html` is drawn from (smaller in tests).
    package var renderedTimelineLimit = HTMLReport.maximumTimelineSize
    /// Finds out whether the kernel has netem (replaced in tests).
    package var netemProbe: @Sendable () -> NetemAvailability = { NetemBackend.probe() }
    /// How workloads in multipath modes keep their flows alive.
    public var multipath: MultipathTransport = .auto
    /// What the run's own files may hold: each command's output, decision log and capture, and
    /// all of them together. What does not fit is left out and noted in the report.
    public var outputLimits = OutputLimits()

    /// Keeps the network up after the scenario's duration (its timeline and workloads over)
    /// until the run is ended by ``ScenarioRunner/finish()`` or ``ScenarioRunner/cancel()``:
    /// for interactive and long tests driven from outside (`roam run --hold`).
    public var hold = false
    /// Holds the run's latest events in memory for live readers (its control API).
    package var holdsEvents = false

    /// For a rootless run (`Rootless`): the registry, opened on the host, where the run also
    /// notes its process, so that `roam exec RUN NODE` finds its namespaces from another shell.
    package var hostRegistry: RunRegistry?
    /// The run id, when chosen before the run (a rootless `roam run` chooses it on the host).
    package var runID: String?
    /// The report directory, when opened before the run (a rootless `roam run` opens it on the
    /// host, before its private mount namespace hides the host's `/run`).
    package var openedReportDirectory: SecureDirectory?

    public init() {}
}

/// The bounds of a run's own files (see ``RunOptions/outputLimits``).
public struct OutputLimits: Sendable, Hashable {
    /// The most one file may hold (default 64 MiB).
    public var perFile: Int64 = OutputBudget.defaultPerFile
    /// The most all of them together may hold (default 1 GiB).
    public var total: Int64 = OutputBudget.defaultTotal

    public init() {}
}

/// How workloads in multipath modes (`handover`, `interactive`, `aggregate`) keep their flows.
public enum MultipathTransport: String, Sendable, Hashable, CaseIterable {
    /// `interactive` and `aggregate` over MPTCP where the kernel has it (subflows over every
    /// permitted path at once, kept in step with the client's path by the in-kernel path
    /// manager); `handover` as ``mptcpUserspace`` where the kernel's userspace path manager can
    /// move a connection between its subflows (checked before each run by doing it in the
    /// client's namespace), else at the application level (reconnect over the next path and
    /// resume). Not the in-kernel path manager's backup subflows, which measured worse on a
    /// Wi-Fi that degrades without going down (see the README's multipath figures).
    case auto
    /// Every multipath mode over MPTCP (`handover` with the cellular subflow as a backup), or an
    /// error where the kernel has none.
    case mptcp
    /// Application-level handover over plain TCP for every multipath mode.
    case application
    /// Every multipath mode over MPTCP, `handover` through the kernel's userspace path manager
    /// (`net.mptcp.pm_type = 1` on the client's node): each connection gets a standby subflow
    /// over every other path, and the handover state machine switches which one carries the
    /// data (stall, lost path, probes back) without reconnecting. A kernel whose userspace path
    /// manager cannot do that is refused before the run starts.
    case mptcpUserspace = "mptcp-userspace"
}

extension MultipathMode {
    /// Whether a workload in this mode uses MPTCP under `transport` (where the kernel has it).
    func usesMPTCP(_ transport: MultipathTransport) -> Bool {
        switch (self, transport) {
        case (.none, _), (_, .application): false
        case (.handover, .auto): false
        default: true
        }
    }
}

extension Workload {
    /// Whether the workload's connections go over MPTCP under `transport`. A command's own
    /// connections cannot be handed over by Roam at the application level, so under `auto` a
    /// command in any multipath mode gets MPTCP (`handover` with backup endpoints).
    func usesMPTCP(_ transport: MultipathTransport) -> Bool {
        if case .command = kind { return mode != .none && transport != .application }
        return mode.usesMPTCP(transport)
    }

    /// A built-in workload in `handover` mode, whose subflows Roam opens and switches itself
    /// through the userspace path manager under `mptcp-userspace`.
    var handsOverThroughSubflows: Bool {
        if case .command = kind { return false }
        return mode == .handover && to != nil
    }

    /// The node that opens the workload's connections, whose path manager serves them: a
    /// built-in workload's client (`to`); for a command, the node it runs in (`from`).
    var connectingNode: String? {
        if case .command = kind { return from }
        return to
    }
}

/// A snapshot of a run for progress lines.
public struct RunProgress: Sendable {
    public var elapsed: Duration
    public var duration: Duration
    public var links: [(name: String, state: String)]
    public var workloads: [(name: String, throughput: Rate?, detail: String?)]
    /// The run's id: its nodes are the namespaces `roam-RUNID-NODE`.
    public var runID: String
}

/// Packet counters of one direction of an emulated link.
public struct LinkStatistics: Sendable {
    public var link: String
    public var direction: TrafficDirection
    public var counters: LinkPipeline.Statistics

    var summary: RunSummary.LinkCounters {
        var summary = RunSummary.LinkCounters(link: link, direction: direction.rawValue, arrived: Int64(counters.arrived), delivered: Int64(counters.delivered),
              lost: Int64(counters.lost), blackholed: Int64(counters.blackholed), overflowed: Int64(counters.overflowed),
              corrupted: Int64(counters.corrupted), duplicated: Int64(counters.duplicated), reordered: Int64(counters.reordered))
            .withRadio(promotions: Int64(counters.promotions), held: Int64(counters.heldForRadio), aqmDropped: Int64(counters.aqmDropped))
        let lateness = counters.lateness
        summary.latenessP50 = lateness.percentile(0.5).map { .nanoseconds($0) }
        summary.latenessP99 = lateness.percentile(0.99).map { .nanoseconds($0) }
        summary.latenessMax = lateness.count > 0 ? .nanoseconds(lateness.maximum) : nil
        if counters.expectedLost > 0 { summary.expectedLost = counters.expectedLost }
        return summary
    }
}

extension RunSummary.LinkCounters {
    func withRadio(promotions: Int64, held: Int64, aqmDropped: Int64) -> Self {
        var counters = self
        counters.aqmDropped = aqmDropped
        counters.promotions = promotions
        counters.heldForRadio = held
        return counters
    }
}

/// The outcome of a run.
public struct RunReport: Sendable {
    public var scenario: Scenario
    public var runID: String
    public var seed: UInt64
    public var backend: BackendSelection
    public var reportDirectory: String
    public var expectations: [ExpectationResult]
    public var workloads: [WorkloadResult]
    /// Link changes that could not be applied: the scenario did not run as written.
    public var failedChanges: [AppliedChange]
    /// How late each link change took effect after its planned time.
    public var lateness: [Duration]
    /// Path updates per node.
    public var pathUpdates: [String: Int]
    /// Stopped early by ``ScenarioRunner/cancel()``.
    public var cancelled: Bool
    /// What the run could not do as the scenario asked, short of failing.
    public var notes: [String] = []
    /// Whether `report.html` was written (not for a timeline longer than it is drawn from).
    public var wroteHTML = true
    /// How multipath workloads kept their flows: the `--multipath` asked for, with `auto`
    /// resolved (`mptcp-userspace` where this kernel's userspace path manager can hand over,
    /// else `auto`: application-level handover, MPTCP for the other modes).
    public var multipath: MultipathTransport = .auto
    /// What the userspace emulator did with each direction's packets (empty with netem).
    public var linkStatistics: [LinkStatistics] = []
    /// Every link change, when it was planned and when it took effect.
    public var changes: [AppliedChange] = []
    /// Every path update of every node, in order.
    public var paths: [PathRecord] = []
    /// How far the run went: the scenario's duration, or less when it was ended early by
    /// ``ScenarioRunner/finish()`` or ``ScenarioRunner/cancel()``.
    public var endedAt: Duration = .zero

    /// Packets a TUN interface refused because the userspace emulator fell behind.
    public var refusedPackets = 0
    /// The bounds ``fidelity`` is judged against (`roam run --fidelity-delivery`, `--fidelity-timeline`).
    public var fidelityBounds = Fidelity.Bounds()
    /// On the netem backend: each link direction's qdiscs and their counters at the run's end.
    public var qdiscCounters: [Fidelity.QdiscCounters] = []

    /// Whether the run played what its scenario asked: the timeline's lateness and, on the
    /// userspace backend, every packet's delivery lateness and the packets the emulator lost
    /// by falling behind, judged against ``fidelityBounds``.
    public var fidelity: Fidelity {
        var fidelity = Fidelity(bounds: fidelityBounds)
        if backend.kind == .userspace {
            var all = LatenessHistogram()
            for statistics in linkStatistics { all.merge(statistics.counters.lateness) }
            fidelity.packets = Int64(all.count)
            fidelity.deliveryP50 = all.percentile(0.5).map { .nanoseconds($0) }
            fidelity.deliveryP99 = all.percentile(0.99).map { .nanoseconds($0) }
            fidelity.deliveryMax = all.count > 0 ? .nanoseconds(all.maximum) : nil
            fidelity.refused = Int64(refusedPackets)
        }
        fidelity.timelineP99 = DurationDistribution(changes.map(\.scheduleLateness)).percentile(0.99)
        fidelity.qdiscs = qdiscCounters
        fidelity.judge()
        return fidelity
    }

    /// Every expectation held, the run was not cut short, and every change was applied.
    public var passed: Bool { !cancelled && failedChanges.isEmpty && expectations.allSatisfy(\.passed) }
}

/// Plays a scenario on real Linux networking: builds its topology, applies its links'
/// conditions on a timeline, runs its workloads and a path monitor in every node, checks its
/// expectations, writes the report and tears everything down (also when it fails or is
/// cancelled). `run(progress:)` blocks; ``cancel()`` may be called from any thread, including
/// a signal-handling one.
public final class ScenarioRunner: Sendable {
    public let scenario: Scenario
    public let options: RunOptions
    private let cancellation = Mutex<(requested: Bool, finishing: Bool, signal: EventSignal?)>((false, false, nil))

    /// How long after everything is set up time zero is fixed, so that the timeline's player
    /// and the workloads' threads are started and waiting and the first events and workload
    /// starts are not late (setting up is not counted in it, however long it takes).
    static let lead = Duration.milliseconds(100)

    public init(scenario: Scenario, options: RunOptions = RunOptions()) {
        self.scenario = options.timeScale == 1 ? scenario : scenario.timeScaled(by: options.timeScale)
        self.options = options
    }

    /// Stops a run early: workloads stop, the report is written, the topology removed.
    public func cancel() {
        let signal = cancellation.withLock { state -> EventSignal? in
            state.requested = true
            return state.signal
        }
        signal?.signal()
    }

    /// Ends a run before the scenario's end without calling it cancelled: workloads stop,
    /// expectations are checked on what ran (``RunReport/endedAt`` says how far), the report is
    /// written and the topology removed. For code under test that has done its part.
    public func finish() {
        let signal = cancellation.withLock { state -> EventSignal? in
            state.finishing = true
            return state.signal
        }
        signal?.signal()
    }

    /// Plays the scenario and returns its report; blocks until the end.
    ///
    /// - Parameters:
    ///   - progress: called after every sample (``RunOptions/sampleInterval``).
    ///   - started: called once at time zero, with the network built and every link set, on
    ///     the calling thread; it must return quickly (hand the network to other work).
    public func run(progress: (@Sendable (RunProgress) -> Void)? = nil,
                    started: (@Sendable (RunningNetwork) -> Void)? = nil) throws(SimulatorError) -> RunReport {
        let stop: EventSignal
        do { stop = try EventSignal() } catch { throw SimulatorError("cannot make the run's stop signal: eventfd", error) }
        let session = try RunSession(scenario: scenario, options: options, stop: stop)
        let alreadyCancelled = cancellation.withLock { state -> Bool in
            state.signal = stop
            return state.requested || state.finishing
        }
        if alreadyCancelled { stop.signal() }
        defer { session.tearDown() }
        try session.buildNetwork()
        try session.startMonitors()
        let transport = try session.resolveTransport()
        let log = try session.startLog()
        try session.setUpMultipath(transport: transport, log: log)
        try session.prepareWorkloads(transport: transport, log: log)
        let (endedAt, cancelled) = try session.play(log: log, progress: progress, started: started) {
            cancellation.withLock { $0.requested }
        }
        return try session.finish(log: log, transport: transport, cancelled: cancelled, endedAt: endedAt)
    }

    /// How many descriptors a run of `scenario` may hold at once, each part counted at what a
    /// run was measured to take (``DescriptorCosts``) with room to spare: the process's own, each
    /// node's (its namespace and its monitor), each link's (a TUN device at each end, a captured
    /// link's files), each network's (its gateway, links and programs), each proxy's (its
    /// listener and every connection it may hold), and each workload's (its stop signal and
    /// listeners, and a connection with a standby and a probe over each of its client's
    /// interfaces, with the server's side of each; a command's pipes). The run's record spills
    /// share one file. Linear in the scenario: a client races over its own interfaces, not every
    /// link of the run.
    static func descriptorsNeeded(for scenario: Scenario) -> Int {
        typealias Costs = DescriptorCosts
        var interfaces: [String: Int] = [:]
        for link in scenario.links {
            interfaces[link.endpoints.0, default: 0] += 1
            interfaces[link.endpoints.1, default: 0] += 1
        }
        var total = Costs.process + Costs.node * scenario.nodes.count
        total += scenario.links.reduce(0) { $0 + Costs.link + ($1.capture ? Costs.capture : 0) }
        for network in scenario.networks {
            for member in network.members { interfaces[member, default: 0] += 1 }
            total += Costs.node + Costs.networkPrograms + Costs.link * (network.members.count + 1)
        }
        total += Costs.proxy * scenario.proxies.count
        for workload in scenario.workloads {
            if case .command = workload.kind {
                total += Costs.command
            } else {
                total += Costs.workload + Costs.interfaceOfAWorkload * (workload.to.flatMap { interfaces[$0] } ?? 0)
            }
        }
        return total
    }

    /// Raises the soft `RLIMIT_NOFILE` to what the scenario may need (up to the hard limit), or
    /// refuses to start when even the hard limit is too low, rather than failing mid-run.
    static func ensureDescriptors(for scenario: Scenario) throws(SimulatorError) {
        let needed = rlim_t(descriptorsNeeded(for: scenario))
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < needed else { return }
        guard limit.rlim_max >= needed else {
            throw SimulatorError(.environment, "scenario '\(scenario.name)' may need \(needed) open descriptors, more than this process may have "
                + "(\(limit.rlim_max), the hard RLIMIT_NOFILE); raise it (ulimit -Hn, or LimitNOFILE= for a service) or split the scenario")
        }
        var raised = limit
        raised.rlim_cur = min(limit.rlim_max, max(needed, 4096))
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 else {
            throw SimulatorError(.environment, "raise the open-descriptor limit to \(raised.rlim_cur): \(Errno.current.description)")
        }
    }

    /// `name` as one safe path component: what is not a letter, digit, `-` or `_` becomes `-`,
    /// so that no name can lead out of the directory it is put in.
    package static func pathComponent(_ name: String) -> String {
        let safe = String(String.UnicodeScalarView(name.unicodeScalars.prefix(Scenario.maximumNameLength).map { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_") ? scalar : "-"
        }))
        return safe.isEmpty ? "scenario" : safe
    }

    /// The topology in environment variables, for commands: `ROAM_RUN_ID`, `ROAM_NODES`,
    /// `ROAM_<NODE>_ADDR`/`_ADDR6` (the node's service address, reachable over every link) and
    /// `ROAM_<NODE>_<LINK>_ADDR`/`_ADDR6` (its address on one link), `ROAM_REPORT_DIR`,
    /// `ROAM_EXECUTABLE` (the running roam).
    static func environment(plan: TopologyPlan, runID: String, reportDirectory: String) -> [String: String] {
        func key(_ name: String) -> String { Scenario.environmentKey(name) }
        var values = ["ROAM_RUN_ID": runID, "ROAM_NODES": plan.nodes.map(\.name).joined(separator: " "), "ROAM_REPORT_DIR": reportDirectory]
        // The roam that runs the scenario, for a command that runs roam itself (roam daemon in a phone).
        var executable = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &executable, executable.count - 1)
        if length > 0 { values["ROAM_EXECUTABLE"] = String(decoding: executable[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        for node in plan.nodes {
            // A phone in networks has no service address: its addresses are its networks'.
            if node.hasServiceAddresses {
                values["ROAM_\(key(node.name))_ADDR"] = node.serviceIPv4.description
                values["ROAM_\(key(node.name))_ADDR6"] = node.serviceIPv6.description
            }
            for interface in node.interfaces {
                values["ROAM_\(key(node.name))_\(key(interface.link))_ADDR"] = interface.address(.ipv4)?.address.description
                values["ROAM_\(key(node.name))_\(key(interface.link))_ADDR6"] = interface.address(.ipv6)?.address.description
            }
        }
        // The internet's name server: it answers for the servers' names, as a public resolver
        // would (an app's fallback when its network's resolver fails).
        if let internet = plan.nodes.first(where: { $0.role == .internet }) {
            values["ROAM_INTERNET_DNS"] = internet.serviceIPv4.description
        }
        return values
    }

    /// `roam-reports/NAME-RUNID`, where a run's report goes unless told otherwise.
    package static func defaultReportDirectory(scenario: String, runID: String) -> String {
        "roam-reports/\(pathComponent(scenario))-\(runID)"
    }

    /// Opens the report directory of a run, made if missing: `path`, or
    /// ``defaultReportDirectory(scenario:runID:)`` (whose last directory must be the caller's).
    /// Every component is opened without following a link another user could have planted
    /// (`SecureDirectory`), and every file of the report is then written through it.
    package static func openReportDirectory(_ path: String?, scenario: String, runID: String) throws(SimulatorError) -> SecureDirectory {
        let directory: SecureDirectory
        do throws(SafePathError) {
            if let path {
                // The caller's, and written by no one else: what the run writes there and reads
                // back (the timeline the page is drawn from) no other user can replace or read
                // through a link of theirs.
                directory = try SecureDirectory.open(path, creating: 0o755, requirement: .ownedByCaller)
            } else {
                let reports = try SecureDirectory.open("roam-reports", creating: 0o755)
                directory = try reports.directory(named: "\(pathComponent(scenario))-\(runID)", creating: 0o755, requirement: .ownedByCaller)
            }
        } catch {
            throw SimulatorError(.environment, "cannot use the report directory: \(error.message)")
        }
        guard directory.isWritable else {
            throw SimulatorError(.environment, "cannot write to the report directory \(escapedForMessage(directory.path, maximumLength: 256)): "
                + "\(Errno.current.description)")
        }
        return directory
    }
}

extension RunReport {
    /// `summary.json`.
    package func summary(started: String, timeScale: Double, events: Int) -> RunSummary {
        var summary = RunSummary(scenario: scenario.name, description: scenario.description, runID: runID, started: started, seed: seed,
                                 backend: backend.kind.rawValue, backendReason: backend.reason, multipath: multipath.rawValue,
                                 duration: scenario.duration, endedAt: endedAt, cancelled: cancelled, passed: passed)
        summary.timeScale = timeScale
        summary.expectations = expectations.map(\.summary)
        summary.workloads = workloads.map(\.summary)
        summary.timeline.changes = lateness.count
        summary.timeline.failed = failedChanges.map { .init(link: $0.change.link, action: $0.change.action, error: $0.failure ?? "") }
        let lateness = DurationDistribution(lateness)
        summary.timeline.latenessP50 = lateness.percentile(0.5)
        summary.timeline.latenessP99 = lateness.percentile(0.99)
        summary.timeline.latenessMax = lateness.maximum
        summary.pathUpdates = pathUpdates
        summary.events = events
        summary.notes = notes
        summary.links = linkStatistics.map(\.summary)
        summary.map = scenario.mobilityMap(timeScale: timeScale)
        summary.fidelity = fidelity
        return summary
    }
}

/// What each part of a run takes in descriptors, for ``ScenarioRunner/descriptorsNeeded(for:)``.
/// Measured on the userspace backend with `ls /proc/PID/fd` at a run's peak (the scale
/// benchmark's phones, a Wi-Fi and a cellular link each; 10 to 40 phones): 7 a node, 2 a link,
/// 5 a plain stream or request workload over two interfaces and 9 a handover stream, 19 for the
/// process and the server; 21 a phone in all. Each is counted here with room above it.
enum DescriptorCosts {
    /// The process's own: standard streams, the log and report, the spill file, the control
    /// API's sockets, the emulator's and monitors' event loops (measured: 12).
    static let process = 64
    /// A node: its namespace, its monitor's netlink sockets, wake-ups and watch (measured: 7).
    static let node = 8
    /// A link: a TUN device at each end with the userspace backend (measured: 2).
    static let link = 3
    /// A captured link's two pcap files.
    static let capture = 2
    /// A network's programs (resolver, NAT64, DNS relay, portal): pipes and process handles.
    static let networkPrograms = 16
    /// A proxy: its listeners, and both ends of each connection it may hold
    /// (``ScenarioModel/ProxySpec/maximumConnections``).
    static let proxy = 4 + 2 * ProxySpec.maximumConnections
    /// A workload that is not a command: its stop signal, listeners and spare (measured with the
    /// next: 5 for a plain stream over two interfaces, 9 for a handover stream).
    static let workload = 4
    /// For each of the workload's client's interfaces: a connection, a standby or a probe, and
    /// the server's side.
    static let interfaceOfAWorkload = 3
    /// A command: its output pipes, its process handle and what it inherits while spawned.
    static let command = 16
}
