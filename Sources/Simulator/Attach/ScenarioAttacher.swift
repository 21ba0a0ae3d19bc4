import Glibc
import Netlink
import PathMonitor
import RoamCore
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// How to attach a scenario's links to interfaces that exist.
package struct AttachOptions: Sendable {
    /// Overrides the scenario's seed.
    package var seed: UInt64?
    /// Where the report goes; nil: `roam-reports/NAME-RUNID` in the working directory.
    package var reportDirectory: String?
    /// Plays the scenario this many times as fast.
    package var timeScale: Double = 1
    /// Time zero on the wall clock (seconds since the epoch), so that attaches in several
    /// pods or containers play one timeline; nil: as soon as the links are set.
    package var startAt: Double?
    /// Interface names: by `LINK` (in every attached node) or `NODE/LINK` (in that node alone);
    /// a link without one is the interface named after it.
    package var devices: [String: String] = [:]
    /// How often progress is reported.
    package var sampleInterval: Duration = .seconds(1)
    /// Keeps the links' last conditions after the timeline, until ``ScenarioAttacher/cancel()``
    /// (as `roam run --hold` keeps its network).
    package var hold = false
    /// The largest `timeline.jsonl` that `report.html` is drawn from (as ``RunOptions``'s).
    package var renderedTimelineLimit = HTMLReport.maximumTimelineSize

    package init() {}

    /// The interface of `link` in `node`.
    package func device(link: String, node: String) -> String {
        devices["\(node)/\(link)"] ?? devices[link] ?? link
    }

    /// How far ahead `--start-at` may be.
    package static let latestStart = Duration.seconds(86_400)
}

/// `roam attach`: plays a scenario's links, their conditions and timeline, on interfaces of
/// network namespaces that something else made (containers, pods, VMs' taps, `ip netns add`),
/// with the netem backend `roam run` uses: the same qdiscs, the same parameters, the same
/// seeds, the same timeline player. Each attached node shapes the egress of its own end of each
/// of its links; the sides of nodes not attached are left to whoever attaches them (another
/// pod's sidecar). Nothing is built: no namespace, interface, address or route; the qdiscs it
/// added are removed at the end, and an interface it set down is set up again as it was.
package final class ScenarioAttacher: Sendable {
    package let scenario: Scenario
    package let options: AttachOptions
    private let namespaces: [AttachedNamespace]
    private let stop: EventSignal
    private let cancelled = Atomic<Bool>(false)

    package init(scenario: Scenario, namespaces: [AttachedNamespace], options: AttachOptions) throws(SimulatorError) {
        self.scenario = options.timeScale == 1 ? scenario : scenario.timeScaled(by: options.timeScale)
        self.namespaces = namespaces
        self.options = options
        do { stop = try EventSignal() } catch { throw SimulatorError(.environment, "make the attach's stop signal: eventfd: \(error)") }
    }

    /// Ends the attach early (from any thread, a signal handler's included): the links are
    /// restored and the report written.
    package func cancel() {
        cancelled.store(true, ordering: .relaxed)
        stop.signal()
    }

    /// What in `scenario` roam attach cannot play on interfaces it did not build, one sentence
    /// each: the networks' gateways, NAT, resolvers and portals (and the timeline events that
    /// act on them), and what only the userspace emulator plays.
    package static func problems(_ scenario: Scenario) -> [String] {
        var problems: [String] = []
        if !scenario.networks.isEmpty {
            problems.append("the scenario has networks (\(scenario.networks.map(\.name).joined(separator: ", "))): their gateways, NAT, "
                + "resolvers and addresses are what roam run builds; roam attach plays links on interfaces that exist, so give it a "
                + "scenario of links between nodes")
        }
        if let (link, why) = scenario.userspaceOnly {
            problems.append("link '\(link.name)' \(why), which only the userspace backend plays; roam attach uses the kernel's netem")
        }
        // A server's addresses and a network's resolver are what roam run gives them; an
        // attached namespace's are its own.
        let resolved = scenario.links.flatMap { $0.flows.map(\.match) } + scenario.timeline.compactMap(\.match)
        if let match = resolved.first(where: { $0.dns || !$0.servers.isEmpty }) {
            problems.append("match \(match) names \(match.dns ? "a network's resolver (dns)" : "a server node") by what roam run gives it; "
                + "on attached namespaces name its addresses instead (to: PREFIX)")
        }
        if !scenario.proxies.isEmpty {
            problems.append("the scenario has proxies (\(scenario.proxies.map(\.name).joined(separator: ", "))), which roam attach does not start; "
                + "run toxiproxy beside the attached namespaces with the same proxies (docs/from-toxiproxy.md), or use roam run")
        }
        for event in scenario.timeline {
            let what: String?
            switch event.action {
            case .membership(let joins): what = joins ? "join" : "leave"
            case .renumber: what = "renumber"
            case .rebind: what = "rebind"
            case .portal(let login): what = login ? "portal login" : "portal logout"
            case .dns, .dnsDelay: what = "dns"
            default: what = nil
            }
            if let what {
                problems.append("\(what) on \(event.link) at \(event.at.roamDescription) acts on a network Roam builds; roam attach cannot play it")
            }
        }
        var seen = Set<String>()
        return problems.filter { seen.insert($0).inserted }
    }

    /// Plays the scenario on the attached namespaces; blocks until its end (or ``cancel()``).
    /// `progress` is called about once a second with what each link does.
    package func run(progress: (@Sendable (RunProgress) -> Void)? = nil) throws(SimulatorError) -> RunReport {
        guard geteuid() == 0 else {
            throw SimulatorError(.environment, "roam attach needs root: it enters other network namespaces (CAP_SYS_ADMIN) and sets qdiscs in them (CAP_NET_ADMIN)")
        }
        let problems = scenario.problems + Self.problems(scenario)
        guard problems.isEmpty else {
            throw SimulatorError(.invalidScenario, "scenario cannot be attached: " + problems.joined(separator: "; "))
        }
        let startDelay = try delayToStart()
        let seed = options.seed ?? scenario.seed
        let runID = RunRegistry.newRunID()
        let plan = try TopologyPlan(scenario: scenario, runID: runID)
        let interfaces = try AttachedInterfaces.open(scenario: scenario, plan: plan, namespaces: namespaces, options: options)
        defer { interfaces.restore() }
        // No probe for netem first: it would need a namespace of its own (CAP_SYS_ADMIN), which
        // a sidecar has not. A kernel without it refuses the first qdisc, and nothing is set.
        let backend = NetemBackend(plan: plan, seed: seed, interfaces: interfaces,
                                   elsewhere: " on the host (roam attach plays links with the kernel's netem: it has no userspace emulator for interfaces it did not make)")
        let (schedule, steppedNote) = TimelineSchedule(scenario: scenario).played(on: .netem, scenario: scenario)
        backend.expectFlows(schedule)
        for initial in schedule.initial {
            try backend.apply(initial.conditions, link: initial.link, direction: initial.direction)
        }
        let directory = options.reportDirectory ?? ScenarioRunner.defaultReportDirectory(scenario: scenario.name, runID: runID)
        let report = try ScenarioRunner.openReportDirectory(options.reportDirectory, scenario: scenario.name, runID: runID)
        // Time zero passed already: the changes due before now are applied at once, in order.
        let log = try RunLog(start: .now + (startDelay < .zero ? startDelay : max(ScenarioRunner.lead, startDelay)), directory: report)
        var notes = interfaces.notes
        if let steppedNote { notes.append(steppedNote) }
        if startDelay < .zero {
            notes.append("started \((Duration.zero - startDelay).roamDescription) after time zero (--start-at): the changes due before then were applied at once, late")
        }
        let started = RFC3339.now()
        let selection = BackendSelection(kind: .netem, reason: "roam attach: the kernel's netem on the interfaces of " + interfaces.played)
        log.record(.run(.started(scenario: scenario.name, runID: runID, seed: seed, backend: selection.kind.rawValue, duration: scenario.duration)), at: .zero)
        for initial in schedule.initial {
            log.record(.link(RunEvent.LinkChange(link: initial.link, action: "initial",
                                                 kind: .conditions(direction: initial.direction.rawValue, conditions: initial.conditions.json))),
                       at: .zero)
        }
        let player = TimelinePlayer(schedule: schedule, backend: backend, log: log, stop: stop)
        try player.start()
        let clock = PlayClock(log: log, duration: scenario.duration, sampleInterval: options.sampleInterval, hold: options.hold,
                              heldMark: "the scenario's timeline is over; the links keep their last conditions until roam attach is stopped", stop: stop)
        // What each played link carried, where its receiving end is attached.
        let carried = CarriedSampler(interfaces.receivingEnds(plan: plan))
        var lastSampleAt = log.start
        clock.run(nextMoment: { nil }) { now, sampleDue in
            guard sampleDue else { return }
            if now - lastSampleAt > .zero {
                for link in carried.sample(interval: now - lastSampleAt) { log.record(.carried(link)) }
            }
            lastSampleAt = now
            guard let progress else { return }
            let states = player.linkStates
            progress(RunProgress(elapsed: min(now - log.start, scenario.duration), duration: scenario.duration,
                                 links: scenario.links.map { ($0.name, states[$0.name]?.summary ?? "?") }, workloads: [], runID: runID))
        }
        let wasCancelled = cancelled.load(ordering: .relaxed)
        let endedAt = max(.zero, min(log.elapsed, scenario.duration))
        stop.signal()
        player.join()
        interfaces.restore()

        let changes = log.appliedChanges
        notes.append("roam attach plays links only: the scenario's workloads and expectations are left to the programs in the namespaces")
        var result = RunReport(
            scenario: scenario, runID: runID, seed: seed, backend: selection, reportDirectory: directory, expectations: [], workloads: [],
            failedChanges: changes.filter { $0.failure != nil }, lateness: changes.map { $0.actual - $0.change.at }, pathUpdates: [:],
            cancelled: wasCancelled, notes: notes, changes: changes, paths: [], endedAt: endedAt)
        try ReportWriter.write(&result, log: log, to: report, started: started, timeScale: options.timeScale,
                               renderedTimelineLimit: options.renderedTimelineLimit)
        return result
    }

    /// How long from now time zero is, for `--start-at`: negative when it has passed (a pod that
    /// started, or restarted, after it joins the timeline where it is).
    private func delayToStart() throws(SimulatorError) -> Duration {
        guard let startAt = options.startAt else { return .zero }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let seconds = startAt - (Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
        guard seconds > -Double(scenario.duration.components.seconds) else {
            throw SimulatorError(.invalidScenario, "--start-at \(startAt) was \(Duration.seconds(-seconds).roamDescription) ago, and the scenario "
                + "lasts \(scenario.duration.roamDescription): nothing is left to play (seconds since the epoch, as `date +%s` prints)")
        }
        guard seconds <= Double(AttachOptions.latestStart.components.seconds) else {
            throw SimulatorError(.invalidScenario, "--start-at \(startAt) is more than a day ahead (seconds since the epoch, as `date +%s` prints)")
        }
        return .nanoseconds(Int64(seconds * 1e9))
    }
}

/// The attached sides of a scenario's links: for each link end in an attached node, its
/// namespace's route socket and the interface's index; what was there to restore.
package final class AttachedInterfaces: NetemInterfaces, @unchecked Sendable {
    package struct Side: Hashable, Sendable {
        package var link: String
        package var node: String
        package init(link: String, node: String) {
            self.link = link
            self.node = node
        }
    }

    /// What an end that goes down had, for when it comes back: its addresses and the routes
    /// through it (the kernel drops them, and IPv6 addresses, at down).
    package struct Snapshot: Sendable {
        package var addresses: [IPPrefix] = []
        package var routes: [Route] = []
        package init(addresses: [IPPrefix] = [], routes: [Route] = []) {
            self.addresses = addresses
            self.routes = routes
        }
    }

    private let sides: [Side: (socket: any RouteSocket, index: Int32, interface: String)]
    private let snapshots: [Side: Snapshot]
    private let lock = Mutex<(down: Set<Side>, restored: Bool)>(([], false))
    /// The namespaces' sockets, held for as long as the sides are used.
    private let namespaces: [AttachedNamespace]
    /// What the attach says about the sides it plays, for the report.
    package private(set) var notes: [String] = []

    /// `sides` as given (tests, with recording sockets); ``open(scenario:plan:namespaces:options:)`` finds them.
    package init(sides: [Side: (socket: any RouteSocket, index: Int32, interface: String)], snapshots: [Side: Snapshot] = [:],
                 namespaces: [AttachedNamespace] = [], notes: [String] = []) {
        self.sides = sides
        self.snapshots = snapshots
        self.namespaces = namespaces
        self.notes = notes
    }

    /// Where each of `plan`'s links arrives each way (up: its second node, down: its first),
    /// where that node is attached: for counting what the link carried.
    func receivingEnds(plan: TopologyPlan) -> [(link: String, up: CarriedSampler.End?, down: CarriedSampler.End?)] {
        let byNode = Dictionary(namespaces.map { ($0.node, $0) }, uniquingKeysWith: { a, _ in a })
        func end(_ link: String, _ node: String) -> CarriedSampler.End? {
            guard let side = sides[Side(link: link, node: node)], let attached = byNode[node] else { return nil }
            return CarriedSampler.End(namespace: attached.namespace, node: node, interface: side.interface)
        }
        return plan.links.map { ($0.name, end($0.name, $0.second), end($0.name, $0.first)) }
    }

    /// `node/interface (namespace)` for each side played, for the report.
    package var played: String {
        let sources = Dictionary(namespaces.map { ($0.node, $0.source) }, uniquingKeysWith: { a, _ in a })
        return sides.keys.sorted { ($0.node, $0.link) < ($1.node, $1.link) }
            .map { "\($0.node)/\(sides[$0]!.interface) (\(sources[$0.node] ?? "given"))" }.joined(separator: ", ")
    }

    package func sendingInterface(link: String, node: String) throws(SimulatorError) -> (any RouteSocket, Int32)? {
        guard let side = sides[Side(link: link, node: node)] else { return nil }
        return (side.socket, side.index)
    }

    package func restore(link: String, node: String) throws(SimulatorError) {
        let key = Side(link: link, node: node)
        guard let side = sides[key] else { return }
        lock.withLock { _ = $0.down.remove(key) }
        guard let snapshot = snapshots[key] else { return }
        do throws(NetlinkError) {
            for prefix in snapshot.addresses {
                do throws(NetlinkError) {
                    try side.socket.addAddress(prefix, interfaceIndex: side.index, skipDAD: true)
                } catch where error.isAlreadyExists {}
            }
            for route in snapshot.routes {
                do throws(NetlinkError) {
                    try side.socket.addRoute(route, replace: true)
                } catch where error.isAlreadyExists {}
            }
        } catch {
            throw SimulatorError("restore the addresses and routes of \(side.interface) in node '\(node)'", error)
        }
    }

    /// Records that the backend set `node`'s end of `link` down, so that ``restore()`` sets it up.
    package func wentDown(link: String, node: String) {
        lock.withLock { _ = $0.down.insert(Side(link: link, node: node)) }
    }

    /// Every side as it was: the root qdisc Roam set removed (the kernel's default comes back),
    /// an end left down set up with its addresses and routes. Safe to call more than once.
    package func restore() {
        let down = lock.withLock { state -> Set<Side>? in
            guard !state.restored else { return nil }
            state.restored = true
            return state.down
        }
        guard let down else { return }
        for (key, side) in sides {
            if down.contains(key) {
                _ = try? side.socket.setLink(index: side.index, up: true, alias: nil, mtu: nil, name: nil)
                _ = try? restore(link: key.link, node: key.node)
            }
            do throws(NetlinkError) {
                try side.socket.deleteQdisc(interfaceIndex: side.index, handle: NetemBackend.netemHandle, parent: .root)
            } catch {
                // Gone already (never set, or removed with its interface): nothing to restore.
            }
        }
    }

    /// Finds every side of `scenario`'s links in the attached namespaces, refusing an
    /// interface that is missing or already has a root qdisc of someone else's (roam attach
    /// replaces the root qdisc and removes it at the end).
    package static func open(scenario: Scenario, plan: TopologyPlan, namespaces: [AttachedNamespace],
                             options: AttachOptions) throws(SimulatorError) -> AttachedInterfaces {
        let byNode = Dictionary(namespaces.map { ($0.node, $0) }, uniquingKeysWith: { a, _ in a })
        for node in byNode.keys where plan.node(node) == nil {
            throw SimulatorError(.invalidScenario, "node '\(escapedForMessage(node))' is not in the scenario (its nodes: \(plan.nodes.map(\.name).joined(separator: ", ")))")
        }
        var sockets: [String: NetlinkSocket] = [:]
        var sides: [Side: (socket: any RouteSocket, index: Int32, interface: String)] = [:]
        var snapshots: [Side: Snapshot] = [:]
        var notes: [String] = []
        for link in plan.links {
            for node in [link.first, link.second] {
                guard let attached = byNode[node] else { continue }
                let name = options.device(link: link.name, node: node)
                let what = "link '\(link.name)' in node '\(node)' (\(attached.source))"
                do {
                    let socket: NetlinkSocket
                    if let open = sockets[node] { socket = open } else {
                        socket = try NetlinkSocket(.route, in: attached.namespace)
                        sockets[node] = socket
                    }
                    guard let found = try socket.link(named: name) else {
                        let names = try socket.links().filter { !$0.isLoopback }.map(\.name).sorted()
                        throw SimulatorError(.invalidScenario, "\(what): no interface named '\(escapedForMessage(name))' there "
                            + "(it has \(names.isEmpty ? "none but lo" : names.joined(separator: ", "))); name it with --device \(link.name)=IFACE "
                            + "or --device \(node)/\(link.name)=IFACE")
                    }
                    if let root = try socket.qdiscs().first(where: { $0.interfaceIndex == found.index && $0.parent == .root }), root.handle.major != 0 {
                        throw SimulatorError(.invalidScenario, "\(what): \(name) already has a root qdisc (\(root.kind) \(root.handle)) that something "
                            + "else set; roam attach replaces the root qdisc and removes it at the end, so remove it first (tc qdisc del dev \(name) root)")
                    }
                    let side = Side(link: link.name, node: node)
                    sides[side] = (socket, found.index, name)
                    if node == link.second {
                        let addresses = try socket.addresses().filter { $0.interfaceIndex == found.index && $0.scope != .link }.map(\.prefix)
                        let routes = try socket.routes().filter {
                            $0.table != .local && $0.protocol != 2 /* RTPROT_KERNEL: back with the address */ && $0.interfaceIndices.contains(found.index)
                        }
                        snapshots[side] = Snapshot(addresses: addresses, routes: routes)
                    }
                } catch let error as SimulatorError {
                    throw error
                } catch let error as NetlinkError {
                    throw SimulatorError("find \(what)", error)
                } catch {
                    throw SimulatorError(.environment, "find \(what): \(error)")
                }
            }
            switch (byNode[link.first] != nil, byNode[link.second] != nil) {
            case (true, false):
                notes.append("link '\(link.name)': only \(link.first)'s end is attached: its down direction is \(link.second)'s to shape, and carrier loss is 100% loss on \(link.first)'s egress (no carrier to cut from here)")
            case (false, true):
                notes.append("link '\(link.name)': only \(link.second)'s end is attached: its up direction is \(link.first)'s to shape")
            default:
                break
            }
        }
        guard !sides.isEmpty else {
            throw SimulatorError(.invalidScenario, "none of the attached nodes (\(byNode.keys.sorted().joined(separator: ", "))) is an end of a link of the scenario")
        }
        return AttachedInterfaces(sides: sides, snapshots: snapshots, namespaces: namespaces, notes: notes)
    }
}
