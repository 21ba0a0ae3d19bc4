import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

extension Scenario {
    /// Links whose capacity comes from a trace, at the start or in the timeline.
    var tracedLinks: [String] {
        var names = links.filter { $0.up.trace != nil || $0.down.trace != nil }.map(\.name)
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

/// How to run a scenario.
public struct RunOptions: Sendable {
    public var backend: BackendChoice = .auto
    /// Overrides the scenario's seed.
    public var seed: UInt64?
    /// Where the report goes; nil: `roam-reports/NAME-RUNID` in the working directory.
    public var reportDirectory: String?
    /// Plays the scenario this many times as fast (see ``Scenario/timeScaled(by:)``).
    public var timeScale: Double = 1
    /// How often workloads are sampled (and progress reported).
    public var sampleInterval: Duration = .seconds(1)
    /// Write each link direction's decision log (userspace backend): `decisions-LINK-DIR.log`.
    public var decisionLogs = false
    /// Finds out whether the kernel has netem (replaced in tests).
    public var netemProbe: @Sendable () -> NetemAvailability = { NetemBackend.probe() }
    /// How workloads in multipath modes keep their flows alive.
    public var multipath: MultipathTransport = .auto

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
}

/// Packet counters of one direction of an emulated link.
public struct LinkStatistics: Sendable {
    public var link: String
    public var direction: TrafficDirection
    public var counters: LinkPipeline.Statistics

    var json: JSONValue {
        .object([("link", .string(link)), ("direction", .string(direction.rawValue)),
                 ("arrived", .int(Int64(counters.arrived))), ("delivered", .int(Int64(counters.delivered))),
                 ("lost", .int(Int64(counters.lost))), ("blackholed", .int(Int64(counters.blackholed))),
                 ("overflowed", .int(Int64(counters.overflowed))), ("corrupted", .int(Int64(counters.corrupted))),
                 ("duplicated", .int(Int64(counters.duplicated))), ("reordered", .int(Int64(counters.reordered)))])
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

    /// Every expectation held, the run was not cut short, and every change was applied.
    public var passed: Bool { !cancelled && failedChanges.isEmpty && expectations.allSatisfy(\.passed) }
}

/// Plays a scenario on real Linux networking: builds its topology, applies its links'
/// conditions on a timeline, runs its workloads and a path monitor in every node, checks its
/// expectations, writes the report and tears everything down (also when it fails or is
/// cancelled). ``run(progress:)`` blocks; ``cancel()`` may be called from any thread, including
/// a signal-handling one.
public final class ScenarioRunner: Sendable {
    public let scenario: Scenario
    public let options: RunOptions
    private let cancellation = Mutex<(requested: Bool, finishing: Bool, signal: EventSignal?)>((false, false, nil))

    /// How long before time zero everything is set up and waiting, so that the first
    /// events and workload starts are not late.
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
        guard geteuid() == 0 else {
            throw SimulatorError(.environment, "roam run needs root: it creates network namespaces (run it with sudo)")
        }
        // A scenario built in Swift has not been through the reader's checks.
        let problems = scenario.problems
        guard problems.isEmpty else {
            throw SimulatorError(.invalidScenario, "scenario cannot run: " + problems.joined(separator: "; "))
        }
        try Self.ensureDescriptors(for: scenario)
        if let wrapped = scenario.workloads.first(where: \.mptcpize), findProgram("mptcpize") == nil {
            throw SimulatorError(.environment, "workload '\(wrapped.name)' runs under mptcpize, which is not installed here: "
                + "install Debian's mptcpize package (apt-get install mptcpize), or remove mptcpize and have the program open IPPROTO_MPTCP sockets itself")
        }
        let selection = try options.backend.resolve(netemProbe: options.netemProbe)
        if selection.kind == .netem, let traced = scenario.tracedLinks.first {
            throw SimulatorError(.invalidScenario, "link '\(traced)' takes its capacity from a trace, which only the userspace backend "
                + "plays; run with --backend userspace")
        }
        let seed = options.seed ?? scenario.seed
        let runID = RunRegistry.newRunID()
        let plan = try TopologyPlan(scenario: scenario, runID: runID)
        let directory = options.reportDirectory ?? "roam-reports/\(Self.pathComponent(scenario.name))-\(runID)"
        try Self.makeDirectory(directory)

        let stop: EventSignal
        do { stop = try EventSignal() } catch { throw SimulatorError("cannot make the run's stop signal: eventfd", error) }
        let alreadyCancelled = cancellation.withLock { state -> Bool in
            state.signal = stop
            return state.requested || state.finishing
        }
        if alreadyCancelled { stop.signal() }

        let backend: any LinkBackend
        switch selection.kind {
        case .netem:
            backend = NetemBackend(plan: plan, seed: seed)
        case .userspace:
            backend = UserspaceBackend(plan: plan, seed: seed, recording: UserspaceBackend.Recording(
                directory: directory, decisionLogs: options.decisionLogs, capturedLinks: Set(scenario.links.filter(\.capture).map(\.name))))
        }
        let topology = try Topology.build(plan, backend: backend)
        var monitors: [(NetworkPathMonitor, PathUpdateSubscription)] = []
        var monitorOf: [String: NetworkPathMonitor] = [:]
        defer {
            for (monitor, subscription) in monitors {
                subscription.cancel()
                monitor.cancel()
            }
            backend.stop()
            topology.teardown()
        }
        try backend.start(topology)
        var notes: [String] = []
        let captured = scenario.links.filter(\.capture).map(\.name)
        if !captured.isEmpty, selection.kind == .netem {
            notes.append("capture: true (links \(captured.joined(separator: ", "))) is written by the userspace backend only; "
                + "with netem, capture with tcpdump inside the node (ip netns exec roam-RUNID-NODE tcpdump -i LINK)")
        }
        let schedule = TimelineSchedule(scenario: scenario)
        for initial in schedule.initial {
            try backend.apply(initial.conditions, link: initial.link, direction: initial.direction)
        }

        // Monitors first: starting one takes a while on a slow machine, and time zero is set
        // once everything is ready.
        let recorder = PathRecorder()
        for node in plan.nodes {
            guard let namespace = topology.namespace(of: node.name) else { continue }
            let monitor = NetworkPathMonitor(namespace: namespace)
            let name = node.name
            let subscription = monitor.onUpdate { path in recorder.record(path, node: name) }
            do {
                try monitor.start()
            } catch {
                throw SimulatorError(.environment, "start the path monitor in node '\(name)': \(error)")
            }
            monitors.append((monitor, subscription))
            monitorOf[name] = monitor
        }

        // `--multipath auto` hands `handover` over through the userspace path manager where this
        // kernel's can do it (checked by doing it, in the client's namespace, before time zero),
        // at the application level elsewhere.
        // `--multipath mptcp-userspace` on a kernel that cannot is refused before time zero.
        var transport = options.multipath
        if transport == .auto || transport == .mptcpUserspace,
           let client = scenario.workloads.first(where: \.handsOverThroughSubflows)?.to,
           let namespace = topology.namespace(of: client), MPTCP.availability(in: namespace) == .available {
            let reason = SubflowControlCheck.run(in: namespace)
            if let reason, transport == .mptcpUserspace {
                throw SimulatorError(.environment, "--multipath mptcp-userspace: this kernel's userspace MPTCP path manager cannot move a "
                                     + "connection between its subflows (\(reason)); use --multipath auto or application")
            } else if let reason {
                notes.append("--multipath auto: handover ran at the application level: this kernel's userspace MPTCP path manager "
                             + "cannot move a connection between its subflows (\(reason))")
            } else {
                transport = .mptcpUserspace
            }
        }

        let log = try RunLog(start: .now + Self.lead, path: directory + "/timeline.jsonl")
        let wallStart = RFC3339.now()
        log.record(.run(.started(scenario: scenario.name, runID: runID, seed: seed, backend: selection.kind.rawValue, duration: scenario.duration)),
                   at: .zero)
        for initial in schedule.initial {
            log.record(.link(RunEvent.LinkChange(link: initial.link, action: "initial",
                                                 kind: .conditions(direction: initial.direction.rawValue, conditions: initial.conditions.json))),
                       at: .zero)
        }
        recorder.attach(log)

        // Multipath modes: MPTCP where the kernel has it. Every node accepts the subflows a peer
        // opens (a command's server may be another command, in any node); each node that opens
        // connections in a multipath mode gets a path manager following its monitor.
        var pathManagers: [String: MPTCPPathManager] = [:]
        /// Client nodes whose MPTCP subflows Roam opens and switches per connection (userspace path manager).
        var subflowControl: Set<String> = []
        var following: [PathUpdateSubscription] = []
        defer {
            // Stop following first, so that no late path update adds endpoints back.
            for subscription in following { subscription.cancel() }
            for manager in pathManagers.values { manager.stop() }
        }
        let multipathWorkloads = scenario.workloads.filter { $0.usesMPTCP(transport) && $0.connectingNode != nil }
        if transport == .application {
            let commands = scenario.workloads.filter { if case .command = $0.kind { $0.mode != .none } else { false } }
            if !commands.isEmpty {
                notes.append("--multipath application: Roam cannot hand over the connections of a command's program (\(commands.map(\.name).joined(separator: ", "))); it ran without multipath")
            }
        }
        var useMPTCP = false
        if !multipathWorkloads.isEmpty, let probeNode = plan.nodes.first,
           let probeNamespace = topology.namespace(of: probeNode.name) {
            let availability = MPTCP.availability(in: probeNamespace)
            if availability == .available {
                useMPTCP = true
            } else if transport == .mptcp || transport == .mptcpUserspace {
                throw SimulatorError(.environment, "--multipath mptcp: MPTCP is \(availability) here; use --multipath auto or application for application-level handover")
            } else {
                notes.append("MPTCP is \(availability): multipath modes ran as application-level handover")
            }
        }
        if useMPTCP {
            do throws(MultipathError) {
                for node in plan.nodes {
                    guard let namespace = topology.namespace(of: node.name) else { continue }
                    try MPTCPPathManager.acceptSubflows(in: namespace)
                }
                for workload in multipathWorkloads {
                    guard let client = workload.connectingNode, let namespace = topology.namespace(of: client), let monitor = monitorOf[client] else { continue }
                    let serviceType = MultipathServiceType(rawValue: workload.mode.rawValue) ?? .handover
                    if transport == .mptcpUserspace, workload.handsOverThroughSubflows {
                        // Roam opens and switches this node's subflows itself, per connection.
                        if !subflowControl.contains(client) {
                            do throws(NetlinkError) {
                                try namespace.setSysctls(["net.mptcp.pm_type": "1"])
                            } catch {
                                throw .system(operation: "switch node '\(client)' to the userspace MPTCP path manager", error)
                            }
                            subflowControl.insert(client)
                        }
                        continue
                    }
                    if let existing = pathManagers[client] {
                        if existing.serviceType != serviceType {
                            notes.append("node '\(client)' has workloads in modes \(existing.serviceType.rawValue) and \(serviceType.rawValue); MPTCP endpoints are per node, so all use \(existing.serviceType.rawValue)")
                        }
                        continue
                    }
                    let manager = try MPTCPPathManager(namespace: namespace, serviceType: serviceType)
                    pathManagers[client] = manager
                    let subscription = manager.follow(monitor) { outcome, _ in
                        switch outcome {
                        case .success(let changes):
                            log.record(.mptcp(node: client, changes: changes.map(\.description), error: nil))
                        case .failure(let error):
                            log.record(.mptcp(node: client, changes: [], error: error.description))
                        }
                    }
                    following.append(subscription)
                }
            } catch {
                throw SimulatorError(.environment, "set up MPTCP path management: \(error)")
            }
        }

        // Workloads: servers listen before time zero; each client starts on its own thread.
        let environment = Self.environment(plan: plan, runID: runID, reportDirectory: directory)
        var drivers: [(driver: any WorkloadDriver, stop: EventSignal)] = []
        var threads: [PinnedThread] = []
        defer {
            // On any way out (a server that cannot listen included): stop every workload and
            // wait for its threads.
            stop.signal()
            for (_, workloadStop) in drivers { workloadStop.signal() }
            for thread in threads { thread.join() }
            for (driver, _) in drivers { driver.finish() }
        }
        for (index, workload) in scenario.workloads.enumerated() {
            guard let server = plan.node(workload.from), let serverNamespace = topology.namespace(of: workload.from) else { continue }
            let workloadStop: EventSignal
            do { workloadStop = try EventSignal() } catch { throw SimulatorError("cannot make a workload's stop signal: eventfd", error) }
            var context = WorkloadContext(
                workload: workload, index: index, runID: runID, serverNamespace: serverNamespace,
                clientNamespace: workload.to.flatMap { topology.namespace(of: $0) }, serverAddresses: workload.family.families.map { $0 == .ipv4 ? server.serviceIPv4 : server.serviceIPv6 }, log: log,
                stop: workloadStop, startAt: log.start + workload.start, stopAt: log.start + min(workload.stop ?? scenario.duration, scenario.duration),
                reportDirectory: directory, environment: environment)
            context.environment["ROAM_NODE"] = workload.from
            if let client = workload.connectingNode, let monitor = monitorOf[client] {
                if case .command = workload.kind {} else {
                    context.clientPath = { monitor.currentPath }
                    context.clientMonitor = monitor
                }
                if workload.usesMPTCP(transport) { context.mptcp = pathManagers[client] }
                if workload.usesMPTCP(transport), subflowControl.contains(client), workload.handsOverThroughSubflows {
                    context.controlsSubflows = true
                }
                // A program can ask for MPTCP (IPPROTO_MPTCP) when told its node has a path manager.
                if case .command = workload.kind, context.mptcp != nil { context.environment["ROAM_MULTIPATH"] = workload.mode.rawValue }
            }
            context.serverAcceptsMPTCP = useMPTCP
            if let peer = workload.to, let peerNode = plan.node(peer) {
                context.environment["ROAM_PEER"] = peer
                context.environment["ROAM_PEER_ADDR"] = peerNode.serviceIPv4.description
                context.environment["ROAM_PEER_ADDR6"] = peerNode.serviceIPv6.description
            }
            let driver = context.makeDriver()
            drivers.append((driver, workloadStop))
            try driver.prepare()
        }
        let player = TimelinePlayer(schedule: schedule, backend: backend, tagger: try topology.makeTagger(), log: log, stop: stop)
        try player.start()
        defer { player.join() }
        for (driver, workloadStop) in drivers {
            do throws(NetlinkError) {
                threads.append(try PinnedThread(name: "roam-workload") {
                    guard workloadStop.wait(until: driver.context.startAt) else { return }
                    driver.context.log.record(.workload(name: driver.context.workload.name, started: true))
                    driver.run()
                })
            } catch {
                throw SimulatorError("start workload '\(driver.context.workload.name)'", error)
            }
        }

        if let started {
            started(RunningNetwork(runID: runID, seed: seed, backend: selection.kind, reportDirectory: directory, start: log.start, plan: plan,
                                   namespaces: plan.nodes.reduce(into: [:]) { $0[$1.name] = topology.namespace(of: $1.name) },
                                   monitors: monitorOf, log: log))
        }
        // The run's own loop: sample every interval, stop workloads at their time, end on time.
        let end = log.start + scenario.duration
        var nextSample = log.start + options.sampleInterval
        var previous: [Int64] = drivers.map { _ in 0 }
        var lastSampleAt = log.start
        var stopped = Set<Int>()
        while true {
            let pendingStops = drivers.indices.filter { !stopped.contains($0) }.map { ($0, drivers[$0].driver.context.stopAt) }
            let nextStop = pendingStops.map(\.1).min() ?? end
            guard stop.wait(until: min(nextSample, nextStop, end)) else { break }
            let now = MonotonicInstant.now
            for (index, at) in pendingStops where at <= now {
                drivers[index].stop.signal()
                stopped.insert(index)
                log.record(.workload(name: drivers[index].driver.context.workload.name, started: false))
            }
            if now >= nextSample || now >= end {
                let interval = Double((now - lastSampleAt).nanoseconds) / 1e9
                var rows: [(name: String, throughput: Rate?, detail: String?)] = []
                for (index, (driver, _)) in drivers.enumerated() where driver.context.startAt <= now {
                    let sample = driver.sample()
                    let delta = sample.bytesReceived - previous[index]
                    previous[index] = sample.bytesReceived
                    let throughput = interval > 0 ? Rate(bitsPerSecond: Double(delta) * 8 / interval) : nil
                    if case .command = driver.context.workload.kind {
                        rows.append((driver.context.workload.name, nil, stopped.contains(index) ? "ended" : "running"))
                        continue
                    }
                    var detail: String?
                    if let buffered = sample.buffered {
                        detail = (sample.isStalled ?? false) ? "STALLED" : "buffer \(buffered.roamDescription)"
                    }
                    log.record(.sample(RunEvent.Sample(workload: driver.context.workload.name, bytes: sample.bytesReceived,
                                                       throughputBitsPerSecond: Int64((throughput?.bitsPerSecond ?? 0).rounded()), rtt: sample.rtt,
                                                       buffered: sample.buffered, stalled: sample.buffered.map { _ in sample.isStalled ?? false })))
                    rows.append((driver.context.workload.name, throughput, detail))
                }
                lastSampleAt = now
                while nextSample <= now { nextSample = nextSample + options.sampleInterval }
                if let progress {
                    let states = player.linkStates
                    progress(RunProgress(elapsed: min(now - log.start, scenario.duration), duration: scenario.duration,
                                         links: scenario.links.map { ($0.name, states[$0.name]?.summary ?? "?") }, workloads: rows))
                }
            }
            if now >= end { break }
        }
        let cancelled = cancellation.withLock { $0.requested }
        let finishedAt = min(log.elapsed, scenario.duration)
        stop.signal()
        for (_, workloadStop) in drivers { workloadStop.signal() }
        for thread in threads { thread.join() }
        threads = []
        player.join()
        // The emulator's counters are final once it stops (the topology goes in the defer).
        backend.stop()
        let linkStatistics = backend.linkStatistics

        let results = drivers.map { driver, _ in
            driver.result(end: min(finishedAt, driver.context.workload.stop ?? scenario.duration))
        }
        let changes = log.appliedChanges
        let paths = log.paths
        let expectations = ExpectationEvaluator.evaluate(scenario.expectations, workloads: results, changes: changes, paths: paths)
        var pathUpdates: [String: Int] = [:]
        for record in paths { pathUpdates[record.node, default: 0] += 1 }
        var report = RunReport(
            scenario: scenario, runID: runID, seed: seed, backend: selection, reportDirectory: directory, expectations: expectations,
            workloads: results, failedChanges: changes.filter { $0.failure != nil }, lateness: changes.map { $0.actual - $0.change.at },
            pathUpdates: pathUpdates, cancelled: cancelled, notes: notes, linkStatistics: linkStatistics, changes: changes, paths: paths,
            endedAt: finishedAt)
        report.multipath = transport
        log.record(.run(cancelled ? .cancelled(passed: report.passed) : .ended(passed: report.passed)))
        try Self.write(report.json(started: wallStart, timeScale: options.timeScale, events: log.eventCount),
                       to: directory + "/summary.json")
        do {
            try HTMLReport.write(directory: directory)
        } catch {
            throw SimulatorError(.environment, "cannot write the run's HTML report: \(error.message)")
        }
        return report
    }

    /// The topology in environment variables, for commands: `ROAM_RUN_ID`, `ROAM_NODES`,
    /// `ROAM_<NODE>_ADDR`/`_ADDR6` (the node's service address, reachable over every link) and
    /// `ROAM_<NODE>_<LINK>_ADDR`/`_ADDR6` (its address on one link).
    /// How many descriptors a run of `scenario` may hold at once: the process's own, each
    /// node's monitor, each link's devices and captures, and each workload's listener,
    /// connections, race attempts, probes and child pipes, with room to spare.
    static func descriptorsNeeded(for scenario: Scenario) -> Int {
        64 + 8 * scenario.nodes.count + 8 * scenario.links.count + (16 + 2 * scenario.links.count) * scenario.workloads.count
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

    static func environment(plan: TopologyPlan, runID: String, reportDirectory: String) -> [String: String] {
        func key(_ name: String) -> String {
            String(name.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
        }
        var values = ["ROAM_RUN_ID": runID, "ROAM_NODES": plan.nodes.map(\.name).joined(separator: " "), "ROAM_REPORT_DIR": reportDirectory]
        for node in plan.nodes {
            values["ROAM_\(key(node.name))_ADDR"] = node.serviceIPv4.description
            values["ROAM_\(key(node.name))_ADDR6"] = node.serviceIPv6.description
            for interface in node.interfaces {
                values["ROAM_\(key(node.name))_\(key(interface.link))_ADDR"] = interface.address(.ipv4)?.address.description
                values["ROAM_\(key(node.name))_\(key(interface.link))_ADDR6"] = interface.address(.ipv6)?.address.description
            }
        }
        return values
    }

    static func makeDirectory(_ path: String) throws(SimulatorError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw SimulatorError(.environment, "cannot create the report directory \(path): \(Errno.current.description)")
            }
            prefix += "/"
        }
        guard access(path, W_OK) == 0 else {
            throw SimulatorError(.environment, "cannot write to the report directory \(path): \(Errno.current.description)")
        }
    }

    static func write(_ value: JSONValue, to path: String) throws(SimulatorError) {
        try write(text: value.serialized + "\n", to: path)
    }

    static func write(text: String, to path: String) throws(SimulatorError) {
        do {
            try writeFile(atPath: path, contents: text)
        } catch {
            throw SimulatorError("cannot write \(path)", error)
        }
    }
}

extension RunReport {
    /// `summary.json`.
    func json(started: String, timeScale: Double, events: Int) -> JSONValue {
        .object([
            ("scenario", .string(scenario.name)),
            ("description", scenario.description.map { .string($0) } ?? .null),
            ("runId", .string(runID)),
            ("started", .string(started)),
            ("seed", .int(Int64(bitPattern: seed))),
            ("backend", .string(backend.kind.rawValue)),
            ("backendReason", .string(backend.reason)),
            ("multipath", .string(multipath.rawValue)),
            ("timeScale", .double(timeScale)),
            ("durationSeconds", .seconds(scenario.duration)),
            ("endedAtSeconds", .seconds(endedAt)),
            ("cancelled", .bool(cancelled)),
            ("passed", .bool(passed)),
            ("expectations", .array(expectations.map(\.json))),
            ("workloads", .array(workloads.map(\.json))),
            ("timeline", .object([
                ("changes", .int(Int64(lateness.count))),
                ("failed", .array(failedChanges.map { .object([("link", .string($0.change.link)), ("action", .string($0.change.action)),
                                                               ("error", .string($0.failure ?? ""))]) })),
                ("latenessMs", .object([
                    ("p50", .milliseconds(percentile(lateness, 0.5))),
                    ("p99", .milliseconds(percentile(lateness, 0.99))),
                    ("max", .milliseconds(lateness.max())),
                ])),
            ])),
            ("pathUpdates", .object(pathUpdates.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
            ("events", .int(Int64(events))),
            ("notes", .array(notes.map { .string($0) })),
            ("links", .array(linkStatistics.map(\.json))),
        ])
    }
}

/// The path of `name` in `PATH` (executable), or nil.
func findProgram(_ name: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
    for directory in path.split(separator: ":") where !directory.isEmpty {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}
