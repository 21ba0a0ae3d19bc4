import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel

/// One run of a scenario, phase by phase: what ``ScenarioRunner/run(progress:started:)`` does,
/// split along its jobs. Each phase builds on the ones before; ``tearDown()`` releases what they
/// made, in the reverse order, on every way out of a run (an error in any phase included).
///
/// 1. ``init(scenario:options:stop:)`` checks what can be checked before anything is built.
/// 2. ``buildNetwork()``: the backend and the topology, with every link's initial conditions.
/// 3. ``startMonitors()``: a path monitor in every node.
/// 4. ``resolveTransport()``: what `--multipath auto` means on this kernel.
/// 5. ``startLog()``: the timeline's first events (time zero is fixed when play begins).
/// 6. ``setUpMultipath(transport:log:)``: MPTCP, and the path managers that follow the monitors.
/// 7. ``prepareWorkloads(transport:log:)``: servers listening, clients ready.
/// 8. ``play(log:progress:started:isCancelled:)``: time zero, then the timeline and the
///    workloads, sampled until the end.
/// 9. ``finish(log:transport:cancelled:endedAt:)``: results, expectations and the report.
final class RunSession {
    let scenario: Scenario
    let options: RunOptions
    let selection: BackendSelection
    let seed: UInt64
    let runID: String
    let plan: TopologyPlan
    /// The report directory as the user named it (or `roam-reports/NAME-RUNID`), for messages.
    let directory: String
    /// The report directory, held open: every file of the report is written through it.
    let report: SecureDirectory
    /// What the run's own files (command output, decision logs, captures) may hold.
    let outputBudget: OutputBudget
    /// Kills the commands' process groups if the run dies without stopping them (started by
    /// the first command).
    let watchdog = ProcessGroupWatchdog()
    let schedule: TimelineSchedule
    /// Ends waits at once: the runner signals it on cancel and finish.
    let stop: EventSignal
    /// What the run could not do as the scenario asked, short of failing.
    private(set) var notes: [String] = []

    // Made by the phases; released by tearDown() in the reverse order.
    private var backend: (any LinkBackend)?
    private var topology: Topology?
    /// The networks' NAT, resolvers and translators (scenarios with `networks:`).
    private var services: NetworkServices?
    private var monitors: [(NetworkPathMonitor, PathUpdateSubscription)] = []
    private var monitorOf: [String: NetworkPathMonitor] = [:]
    private let recorder = PathRecorder()
    private var log: RunLog?
    private var wallStart = ""
    private var useMPTCP = false
    private var pathManagers: [String: MPTCPPathManager] = [:]
    /// Client nodes whose MPTCP subflows Roam opens and switches per connection (userspace path manager).
    private var subflowControl: Set<String> = []
    private var following: [PathUpdateSubscription] = []
    private var drivers: [(driver: any WorkloadDriver, stop: EventSignal)] = []
    private var threads: [PinnedThread] = []
    private var player: TimelinePlayer?
    /// The run's TCP proxies (`proxies:`, and the toxiproxy API's), when it has any or a control API.
    private var proxies: ProxyHub?
    /// Where a rootless run noted its process for the host, until torn down.
    private var hostRegistration: RunRegistry?

    /// Checks what can be checked before anything is built: root, the scenario's own
    /// consistency, descriptors, programs, the backend; then plans the topology and makes the
    /// report directory.
    init(scenario: Scenario, options: RunOptions, stop: EventSignal) throws(SimulatorError) {
        guard geteuid() == 0 else {
            throw SimulatorError(.environment, "roam run needs root: it creates network namespaces (run it with sudo)")
        }
        // A scenario built in Swift has not been through the reader's checks.
        let problems = scenario.problems
        guard problems.isEmpty else {
            throw SimulatorError(.invalidScenario, "scenario cannot run: " + problems.joined(separator: "; "))
        }
        try ScenarioRunner.ensureDescriptors(for: scenario)
        if let wrapped = scenario.workloads.first(where: \.mptcpize), findProgram("mptcpize") == nil {
            throw SimulatorError(.environment, "workload '\(wrapped.name)' runs under mptcpize, which is not installed here: "
                + "install Debian's mptcpize package (apt-get install mptcpize), or remove mptcpize and have the program open IPPROTO_MPTCP sockets itself")
        }
        if let (link, why) = scenario.userspaceOnly {
            // What only the userspace emulator plays: refused on netem, chosen by auto.
            switch options.backend {
            case .netem:
                throw SimulatorError(.invalidScenario, "link '\(link.name)' \(why), which only the userspace backend plays; run with "
                    + "--backend userspace (or auto)", line: link.line)
            case .auto:
                var chosen = try BackendChoice.userspace.resolve(netemProbe: options.netemProbe)
                chosen.reason = "auto: link '\(link.name)' \(why), which only Roam's userspace link emulator plays"
                selection = chosen
            case .userspace:
                selection = try options.backend.resolve(netemProbe: options.netemProbe)
            }
        } else if let link = scenario.firstTracedLink, options.backend == .auto {
            // Both play a trace; the userspace emulator plays each delivery opportunity.
            var chosen = try BackendChoice.userspace.resolve(netemProbe: options.netemProbe)
            chosen.reason = "auto: link '\(link.name)' takes its capacity from a trace, whose every delivery opportunity Roam's userspace "
                + "link emulator plays (netem plays it as a stepped rate: --backend netem)"
            selection = chosen
        } else {
            selection = try options.backend.resolve(netemProbe: options.netemProbe)
        }
        self.scenario = scenario
        self.options = options
        self.stop = stop
        seed = options.seed ?? scenario.seed
        runID = options.runID ?? RunRegistry.newRunID(avoiding: options.hostRegistry)
        plan = try TopologyPlan(scenario: scenario, runID: runID)
        directory = options.reportDirectory ?? ScenarioRunner.defaultReportDirectory(scenario: scenario.name, runID: runID)
        let played = TimelineSchedule(scenario: scenario).played(on: selection.kind, scenario: scenario)
        schedule = played.schedule
        if let note = played.note { notes.append(note) }
        if let opened = options.openedReportDirectory {
            report = opened
        } else {
            report = try ScenarioRunner.openReportDirectory(options.reportDirectory, scenario: scenario.name, runID: runID)
        }
        outputBudget = OutputBudget(perFile: options.outputLimits.perFile, total: options.outputLimits.total)
    }

    /// Releases what the phases made, the last made first: the timeline player, the workloads
    /// (stopped, their threads joined), the path managers, the monitors, the backend and the
    /// topology. Safe to call more than once.
    func tearDown() {
        // A run that failed before time zero still leaves what it recorded, timed from now.
        log?.begin(in: .zero)
        player?.join()
        player = nil
        stop.signal()
        for (_, workloadStop) in drivers { workloadStop.signal() }
        for thread in threads { thread.join() }
        threads = []
        for (driver, _) in drivers { driver.finish() }
        drivers = []
        proxies?.stop()
        proxies = nil
        services?.stop()
        services = nil
        watchdog.stop()
        // Stop following first, so that no late path update adds endpoints back.
        for subscription in following { subscription.cancel() }
        following = []
        for manager in pathManagers.values { manager.stop() }
        pathManagers = [:]
        for (monitor, subscription) in monitors {
            subscription.cancel()
            monitor.cancel()
        }
        monitors = []
        backend?.stop()
        backend = nil
        topology?.teardown()
        topology = nil
        if let registry = hostRegistration {
            registry.unregister(runID)
            hostRegistration = nil
        }
    }

    // MARK: - Phases

    /// The backend and the topology, with every link's initial conditions applied.
    func buildNetwork() throws(SimulatorError) {
        let backend: any LinkBackend
        switch selection.kind {
        case .netem:
            let netem = NetemBackend(plan: plan, seed: seed)
            netem.expectFlows(schedule)
            backend = netem
        case .userspace:
            let userspace = UserspaceBackend(plan: plan, seed: seed, recording: UserspaceBackend.Recording(
                directory: report, decisionLogs: options.decisionLogs, capturedLinks: Set(scenario.links.filter(\.capture).map(\.name)),
                budget: outputBudget))
            userspace.threads = options.emulatorThreads.map { min(max(1, $0), RunOptions.maximumEmulatorThreads) }
            userspace.scheduling = options.emulatorPriority == .realtime ? .realtime : .normal
            backend = userspace
        }
        let topology = try Topology.build(plan, backend: backend)
        self.topology = topology
        self.backend = backend
        if let registry = options.hostRegistry {
            do throws(SafePathError) {
                try registry.register(runID)
            } catch {
                throw SimulatorError(.environment, "cannot note run \(runID) for roam exec: \(error.message)")
            }
            hostRegistration = registry
        }
        try backend.start(topology)
        let captured = scenario.links.filter(\.capture).map(\.name)
        if !captured.isEmpty, selection.kind == .netem {
            notes.append("capture: true (links \(captured.joined(separator: ", "))) is written by the userspace backend only; "
                + "with netem, capture with tcpdump inside the node (ip netns exec roam-RUNID-NODE tcpdump -i LINK)")
        }
        for initial in schedule.initial {
            try backend.apply(initial.conditions, link: initial.link, direction: initial.direction)
        }
        // The watchdog, once, before the first program the run spawns (a network's daemons
        // here, or a command workload later), so that each is watched as soon as it is spawned.
        let spawnsPrograms = !plan.networks.isEmpty || scenario.workloads.contains { if case .command = $0.kind { true } else { false } }
        if spawnsPrograms, !watchdog.start() {
            throw SimulatorError(.environment, "cannot start the watchdog (roam-watchdog) that stops the run's programs if the run is killed: "
                + "no pipe or no process could be made (see ulimit -n and ulimit -u)")
        }
        if !plan.networks.isEmpty {
            // A captive portal counts what each workload's client sends it (by the server's port).
            let counted = scenario.workloads.enumerated().compactMap { index, workload -> (index: Int, client: String, port: UInt16)? in
                if case .command = workload.kind { return nil }
                return workload.to.map { (index, $0, WorkloadContext.port(index: index)) }
            }
            let services = NetworkServices(plan: plan, topology: topology, report: report, watchdog: watchdog, countedWorkloads: counted)
            self.services = services
            try services.start()
        }
    }

    /// A path monitor in every node of the scenario's own (not in a network's gateway or the
    /// internet). Before time zero: starting one takes a while on a slow machine, and time zero
    /// is set once everything is ready.
    func startMonitors() throws(SimulatorError) {
        guard let topology else { return }
        for node in plan.nodes {
            switch node.role {
            case .gateway, .internet: continue
            case .host, .server: break
            }
            guard let namespace = topology.namespace(of: node.name) else { continue }
            // A network's member reads the resolv.conf its commands see (its primary network's).
            var configuration = NetworkPathMonitor.Configuration(resolverConfigurationPath: services?.resolvConfPath(of: node.name))
            // A phone of networks validates each: the internet answers its connectivity check.
            configuration.validation = services?.validation(of: node.name)
            let monitor = NetworkPathMonitor(namespace: namespace, configuration: configuration)
            let name = node.name
            let recorder = recorder
            let subscription = monitor.onUpdate { path in recorder.record(path, node: name) }
            do {
                try monitor.start()
            } catch {
                subscription.cancel()
                monitor.cancel()
                throw SimulatorError(.environment, "start the path monitor in node '\(name)': \(error)")
            }
            monitors.append((monitor, subscription))
            monitorOf[name] = monitor
        }
        // A login at a captive portal: the phone's monitor checks that network again at once, as
        // a phone does when its captive-portal sheet sees the user through.
        let phones = monitorOf
        services?.observeLogins { node, network in phones[node]?.revalidate(interface: network) }
    }

    /// What `--multipath` means here. `auto` hands `handover` over through the userspace path
    /// manager where this kernel's can do it (checked by doing it, in the client's namespace,
    /// before time zero), at the application level elsewhere; `mptcp-userspace` on a kernel
    /// that cannot is refused before time zero.
    func resolveTransport() throws(SimulatorError) -> MultipathTransport {
        let asked = options.multipath
        guard asked == .auto || asked == .mptcpUserspace,
              let client = scenario.workloads.first(where: \.handsOverThroughSubflows)?.to,
              let namespace = topology?.namespace(of: client), MPTCP.availability(in: namespace) == .available else { return asked }
        guard let reason = SubflowControlCheck.run(in: namespace) else { return .mptcpUserspace }
        if asked == .mptcpUserspace {
            throw SimulatorError(.environment, "--multipath mptcp-userspace: this kernel's userspace MPTCP path manager cannot move a "
                                 + "connection between its subflows (\(reason)); use --multipath auto or application")
        }
        notes.append("--multipath auto: handover ran at the application level: this kernel's userspace MPTCP path manager "
                     + "cannot move a connection between its subflows (\(reason))")
        return asked
    }

    /// Opens the timeline with its first events: the run, the links' initial conditions, and
    /// the paths the monitors published so far. Time zero is fixed later, when ``play(log:progress:started:isCancelled:)``
    /// begins, so that setting up multipath and the workloads (however slow the machine or the
    /// report directory) never eats into the lead every workload and first change is given.
    func startLog() throws(SimulatorError) -> RunLog {
        let log = try RunLog(beginningLater: report, holdingEvents: options.holdsEvents)
        self.log = log
        wallStart = RFC3339.now()
        log.record(.run(.started(scenario: scenario.name, runID: runID, seed: seed, backend: selection.kind.rawValue, duration: scenario.duration)),
                   at: .zero)
        for initial in schedule.initial {
            log.record(.link(RunEvent.LinkChange(link: initial.link, action: "initial",
                                                 kind: .conditions(direction: initial.direction.rawValue, conditions: initial.conditions.json))),
                       at: .zero)
        }
        recorder.attach(log)
        services?.attach(log)
        return log
    }

    /// Multipath modes: MPTCP where the kernel has it. Every node accepts the subflows a peer
    /// opens (a command's server may be another command, in any node); each node that opens
    /// connections in a multipath mode gets a path manager following its monitor, or, for
    /// `handover` under `mptcp-userspace`, the userspace path manager that Roam drives.
    func setUpMultipath(transport: MultipathTransport, log: RunLog) throws(SimulatorError) {
        guard let topology else { return }
        let multipathWorkloads = scenario.workloads.filter { $0.usesMPTCP(transport) && $0.connectingNode != nil }
        if transport == .application {
            let commands = scenario.workloads.filter { if case .command = $0.kind { $0.mode != .none } else { false } }
            if !commands.isEmpty {
                notes.append("--multipath application: Roam cannot hand over the connections of a command's program (\(commands.map(\.name).joined(separator: ", "))); it ran without multipath")
            }
        }
        if !multipathWorkloads.isEmpty, let probeNode = plan.nodes.first, let probeNamespace = topology.namespace(of: probeNode.name) {
            let availability = MPTCP.availability(in: probeNamespace)
            if availability == .available {
                useMPTCP = true
            } else if transport == .mptcp || transport == .mptcpUserspace {
                throw SimulatorError(.environment, "--multipath mptcp: MPTCP is \(availability) here; use --multipath auto or application for application-level handover")
            } else {
                notes.append("MPTCP is \(availability): multipath modes ran as application-level handover")
            }
        }
        guard useMPTCP else { return }
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
                    if existing.policy != workload.pathPolicy {
                        notes.append("node '\(client)' has workloads with different prohibit: lists; MPTCP endpoints are per node, so all follow the first's (\(workload.name)'s races and moves still follow its own)")
                    }
                    continue
                }
                // The endpoints follow the policy the workload's flow races and moves by.
                let manager = try MPTCPPathManager(namespace: namespace, serviceType: serviceType, policy: workload.pathPolicy)
                pathManagers[client] = manager
                following.append(manager.follow(monitor) { outcome, _ in
                    switch outcome {
                    case .success(let changes):
                        log.record(.mptcp(node: client, changes: changes.map(\.description), error: nil))
                    case .failure(let error):
                        log.record(.mptcp(node: client, changes: [], error: error.description))
                    }
                })
            }
        } catch {
            throw SimulatorError(.environment, "set up MPTCP path management: \(error)")
        }
    }

    /// Every workload's driver, prepared: servers listen before time zero.
    func prepareWorkloads(transport: MultipathTransport, log: RunLog) throws(SimulatorError) {
        guard let topology else { return }
        let environment = ScenarioRunner.environment(plan: plan, runID: runID, reportDirectory: directory)
        for (index, workload) in scenario.workloads.enumerated() {
            guard let server = plan.node(workload.from), let serverNamespace = topology.namespace(of: workload.from) else { continue }
            let workloadStop: EventSignal
            do { workloadStop = try EventSignal() } catch { throw SimulatorError("cannot make a workload's stop signal: eventfd", error) }
            var context = WorkloadContext(
                workload: workload, index: index, runID: runID, serverNamespace: serverNamespace,
                clientNamespace: workload.to.flatMap { topology.namespace(of: $0) }, serverAddresses: workload.family.families.map { $0 == .ipv4 ? server.serviceIPv4 : server.serviceIPv6 }, log: log,
                stop: workloadStop, startOffset: workload.start, stopOffset: min(workload.stop ?? scenario.duration, scenario.duration),
                reportDirectory: directory, report: report, outputBudget: outputBudget, watchdog: watchdog, environment: environment)
            context.environment["ROAM_NODE"] = workload.from
            context.resolvConf = services?.resolvConfPath(of: workload.from)
            if workload.host != nil, let client = workload.to, let services { context.nameServers = { services.nameServers(of: client) } }
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
                if peerNode.hasServiceAddresses {
                    context.environment["ROAM_PEER_ADDR"] = peerNode.serviceIPv4.description
                    context.environment["ROAM_PEER_ADDR6"] = peerNode.serviceIPv6.description
                }
            }
            let driver = context.makeDriver()
            drivers.append((driver, workloadStop))
            try driver.prepare()
        }
    }

    /// Plays the timeline and starts each workload on its own thread at its time, hands the
    /// network to `started`, then samples every interval, stops workloads at their time and
    /// ends on time (or when stopped). Returns how far the run went, and whether it was
    /// cancelled (`isCancelled`, asked as the loop ends).
    func play(log: RunLog, progress: (@Sendable (RunProgress) -> Void)?, started: (@Sendable (RunningNetwork) -> Void)?,
              isCancelled: () -> Bool) throws(SimulatorError) -> (endedAt: Duration, cancelled: Bool) {
        guard let topology, let backend else { return (.zero, isCancelled()) }
        log.begin(in: ScenarioRunner.lead)
        let player = TimelinePlayer(schedule: schedule, backend: backend, tagger: try topology.makeTagger(), membership: services, log: log, stop: stop,
                                    acceptsLiveChanges: options.holdsEvents, realtime: options.emulatorPriority == .realtime)
        try player.start()
        self.player = player
        try startProxies(topology: topology, log: log)
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
            var network = RunningNetwork(runID: runID, seed: seed, backend: selection.kind, reportDirectory: directory, start: log.start, plan: plan,
                                         namespaces: plan.nodes.reduce(into: [:]) { $0[$1.name] = topology.namespace(of: $1.name) },
                                         monitors: monitorOf, log: log, scenario: scenario, player: player, isOpen: options.hold)
            network.proxies = proxies
            started(network)
        }
        sampleUntilTheEnd(log: log, player: player, progress: progress)
        let cancelled = isCancelled()
        let endedAt = min(log.elapsed, scenario.duration)
        stop.signal()
        for (_, workloadStop) in drivers { workloadStop.signal() }
        for thread in threads { thread.join() }
        threads = []
        player.join()
        return (endedAt, cancelled)
    }

    /// Starts the scenario's proxies (and the hub the toxiproxy API adds to, in a run with a
    /// control API) before any workload, so that a workload's first connection finds them.
    private func startProxies(topology: Topology, log: RunLog) throws(SimulatorError) {
        guard !scenario.proxies.isEmpty || options.holdsEvents else { return }
        var addresses: [String: IPAddress] = [:]
        for node in plan.nodes {
            if node.hasServiceAddresses {
                addresses[node.name] = node.serviceIPv4
            } else if let address = node.interfaces.lazy.compactMap({ $0.address(.ipv4)?.address ?? $0.address(.ipv6)?.address }).first {
                addresses[node.name] = address
            }
        }
        let places = ProxyHub.Places(namespaces: plan.nodes.reduce(into: [:]) { $0[$1.name] = topology.namespace(of: $1.name) }, addresses: addresses)
        let hub = try ProxyHub(places: places, seed: seed) { text in log.record(.mark(text: text, node: nil)) }
        proxies = hub
        for spec in scenario.proxies {
            do throws(ProxyHub.Refusal) {
                try hub.create(spec)
            } catch {
                throw SimulatorError(.environment, "proxy '\(spec.name)': \(error.message)")
            }
        }
        hub.schedule(scenario.proxyEvents, from: log.start)
    }

    /// How often a run gives back the memory its threads freed (``FreedMemory/release()``).
    static let freedMemoryInterval = Duration.seconds(60)

    /// The run's own loop (``PlayClock``, as `roam attach`'s): sample every interval, stop
    /// workloads at their time, end on time.
    private func sampleUntilTheEnd(log: RunLog, player: TimelinePlayer, progress: (@Sendable (RunProgress) -> Void)?) {
        var previous: [Int64] = drivers.map { _ in 0 }
        var lastSampleAt = log.start
        var stopped = Set<Int>()
        // A long run gives back, once a minute, the memory its threads freed and the allocator
        // kept (``FreedMemory``): its resident memory stays what it holds.
        var nextRelease = log.start + Self.freedMemoryInterval
        // What each link carried, from the receiving interfaces' counters (read from now).
        let carried = topology.map { CarriedSampler(plan: plan, topology: $0) }
        let clock = PlayClock(log: log, duration: scenario.duration, sampleInterval: options.sampleInterval, hold: options.hold,
                              heldMark: "the scenario's timeline is over; the network is held until the run is stopped", stop: stop)
        let pendingStops = { [drivers] in drivers.indices.filter { !stopped.contains($0) }.map { ($0, drivers[$0].driver.context.stopAt) } }
        clock.run(nextMoment: { pendingStops().map(\.1).min() }) { now, sampleDue in
            for (index, at) in pendingStops() where at <= now {
                drivers[index].stop.signal()
                stopped.insert(index)
                log.record(.workload(name: drivers[index].driver.context.workload.name, started: false))
            }
            guard sampleDue else { return }
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
            if let carried, now - lastSampleAt > .zero {
                for link in carried.sample(interval: now - lastSampleAt) { log.record(.carried(link)) }
            }
            lastSampleAt = now
            if now >= nextRelease {
                FreedMemory.release()
                nextRelease = now + Self.freedMemoryInterval
            }
            if let progress {
                let states = player.linkStates
                progress(RunProgress(elapsed: min(now - log.start, scenario.duration), duration: scenario.duration,
                                     links: scenario.links.map { ($0.name, states[$0.name]?.summary ?? "?") }, workloads: rows,
                                     runID: runID))
            }
        }
    }

    /// The workloads' results, the expectations checked against them, and the report written:
    /// `summary.json` and `report.html`.
    func finish(log: RunLog, transport: MultipathTransport, cancelled: Bool, endedAt: Duration) throws(SimulatorError) -> RunReport {
        // The emulator's counters are final once it stops (the topology goes in tearDown()).
        backend?.stop()
        let linkStatistics = backend?.linkStatistics ?? []
        if let userspace = backend as? UserspaceBackend, userspace.refusedPackets > 0 {
            notes.append("the userspace emulator could not keep up: \(userspace.refusedPackets) packets were lost because a TUN interface's queue was full, not by the links' conditions (--emulator-threads, or fewer links per core)")
        }
        if let userspace = backend as? UserspaceBackend, userspace.emulatorThreadCount > userspace.realtimeThreads {
            let why = options.emulatorPriority == .ordinary ? "as asked (--emulator-priority ordinary)"
                : "as this process may not use the real-time class (a rootless run, or no RLIMIT_RTPRIO)"
            notes.append("the userspace emulator's threads ran in the ordinary scheduling class, \(why): with the machine's cores busy, packets may leave later than their links' delays say")
        }
        var results = drivers.map { driver, _ in
            driver.result(end: min(endedAt, driver.context.workload.stop ?? scenario.duration))
        }
        if let counts = services?.portalCounts() {
            for (position, (driver, _)) in drivers.enumerated() {
                results[position].bytesWhilePortal = counts[driver.context.index] ?? [:]
            }
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
            endedAt: endedAt)
        report.multipath = transport
        report.refusedPackets = (backend as? UserspaceBackend)?.refusedPackets ?? 0
        report.qdiscCounters = (backend as? NetemBackend)?.qdiscCounters ?? []
        report.fidelityBounds = options.fidelityBounds
        for file in outputBudget.filesCut {
            report.notes.append("\(file) was cut short: the run's files may hold \(byteCountDescription(Int(outputBudget.perFile))) each and "
                + "\(byteCountDescription(Int(outputBudget.total))) together (roam run --max-file-size, --max-output-size)")
        }
        try ReportWriter.write(&report, log: log, to: self.report, started: wallStart, timeScale: options.timeScale,
                               renderedTimelineLimit: options.renderedTimelineLimit)
        return report
    }
}
