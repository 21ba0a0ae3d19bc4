import CRoamLinux
import Glibc
import Netlink
import RoamReport
import RoamSystem
import ScenarioModel

/// The kernel backend: each link is a veth pair; each direction is shaped on its sending side by
/// a netem qdisc at the root (delay, jitter, loss, duplication, reordering, corruption) with a
/// tbf child where a rate is set. Blackholing is netem at 100% loss; carrier loss is the second
/// node's end set down, so that the first node's end loses its carrier (`NO-CARRIER`), exactly
/// as a phone sees Wi-Fi go out of range.
///
/// Everything goes through libnl-route; nothing shells out to `tc`.
///
/// The same backend plays `roam attach`, on interfaces that something else made
/// (``NetemInterfaces``): there it shapes only the sides of the nodes it was attached to.
package final class NetemBackend: LinkBackend {
    package let kind = BackendKind.netem

    /// The root netem qdisc of each sending interface.
    package static let netemHandle = QdiscHandle(major: 1, minor: 0)
    /// The tbf qdisc under netem's one class, present while a rate is set.
    package static let tokenBucketHandle = QdiscHandle(major: 2, minor: 0)
    static let tokenBucketParent = QdiscHandle(major: 1, minor: 1)
    /// CoDel or FQ-CoDel in tbf's one class, in place of its byte FIFO (`queue:`).
    package static let managedQueueHandle = QdiscHandle(major: 3, minor: 0)
    static let managedQueueParent = QdiscHandle(major: 2, minor: 1)

    private let seed: UInt64
    private let links: [String: (index: Int, link: TopologyPlan.Link)]
    /// Where each side of each link is: the topology's (``start(_:)``), or what `roam attach` opened.
    private var interfaces: (any NetemInterfaces)?
    /// Links whose carrier is cut where the second end is not this backend's: the first end's
    /// egress is 100% loss instead (``setCarrier(_:link:)``), and what the timeline applies
    /// meanwhile is kept for the carrier's return.
    private var cutAtFirstEnd: Set<String> = []
    private var lastApplied: [String: LinkConditions] = [:]
    private var tokenBuckets: Set<String> = []
    /// The netem settings each qdisc was last given: a change that leaves them as they are (a
    /// trace's next rate, a ramp's rate step) does not touch netem.
    private var netemApplied: [String: NetemConfiguration] = [:]
    private var managedQueues: Set<String> = []
    private var distributions: [DelayDistribution: [Int16]] = [:]
    /// Resolves the flows' `server` and `dns` to addresses, as the userspace backend does.
    private let flowResolution: FlowResolution
    /// Directions (`link/direction`) with a `prio` root, once they had a flow: they keep it, so
    /// that the link's own packets never lose their queue to a change of root.
    private var prioRoots: Set<String> = []
    /// Directions the timeline gives a flow at some point (``expectFlows(_:)``): they start
    /// with the `prio` root.
    private var prioAhead: Set<String> = []
    /// Each such direction's flows by band (1...8), kept while the flow stays.
    private var bands: [String: [FlowMatch: Int]] = [:]
    /// The filters each such direction has (at their base priorities), to skip rewriting them
    /// when only settings change, and the offset their priorities have in the kernel.
    private var filtered: [String: (filters: [U32Filter], offset: UInt16)] = [:]

    /// What to do instead where the kernel lacks a qdisc, after `modprobe`: for `roam run`, its
    /// userspace backend; `roam attach` has none (the interfaces are not its own).
    private let elsewhere: String

    package init(plan: TopologyPlan, seed: UInt64, interfaces: (any NetemInterfaces)? = nil,
                 elsewhere: String = ", or use --backend userspace, whose emulator needs no qdisc (CoDel and FQ-CoDel included)") {
        self.elsewhere = elsewhere
        self.seed = seed
        self.links = Dictionary(uniqueKeysWithValues: plan.links.enumerated().map { ($0.element.name, ($0.offset, $0.element)) })
        self.interfaces = interfaces
        self.flowResolution = FlowResolution(plan: plan)
    }

    package func createInterfaces(for link: TopologyPlan.Link, in topology: Topology) throws(SimulatorError) {
        guard let socket = topology.routeSocket(of: link.first), let peer = topology.namespace(of: link.second) else {
            throw SimulatorError(.invalidScenario, "link '\(link.name)' names a node that was not built")
        }
        do throws(NetlinkError) {
            try socket.createVethPair(link.firstInterface, peer: link.secondInterface, peerNamespace: peer)
        } catch {
            throw SimulatorError("create link '\(link.name)' between \(link.first) and \(link.second)", error)
        }
    }

    package func start(_ topology: Topology) throws(SimulatorError) {
        if interfaces == nil { interfaces = TopologyInterfaces(topology, links: links.mapValues(\.link)) }
    }

    package func apply(_ conditions: LinkConditions, link name: String, direction: TrafficDirection) throws(SimulatorError) {
        guard let (index, link) = links[name] else { throw SimulatorError(.invalidScenario, "unknown link '\(name)'") }
        let node = direction == .up ? link.first : link.second
        guard let (socket, interface) = try sendingInterface(link: name, node: node) else { return }
        let key = "\(name)/\(direction.rawValue)"
        var conditions = conditions
        if direction == .up {
            lastApplied[key] = conditions
            if cutAtFirstEnd.contains(name) { conditions.isBlackholed = true }
        }
        let what = "\(direction.rawValue) on link '\(name)' (sent by \(node))"
        let directionSeed = Self.seed(self.seed, link: index, direction: direction)
        guard !conditions.flows.isEmpty || prioRoots.contains(key) || prioAhead.contains(key) else {
            try applyQdiscs(conditions, key: key, socket: socket, interface: interface, what: what, seed: directionSeed,
                            handles: (netem: Self.netemHandle, netemParent: QdiscHandle.root, tokenBucket: Self.tokenBucketHandle,
                                      tokenBucketParent: Self.tokenBucketParent, managedQueue: Self.managedQueueHandle,
                                      managedQueueParent: Self.managedQueueParent))
            return
        }
        try applyWithFlows(conditions, key: key, link: name, direction: direction, socket: socket, interface: interface, what: what,
                           seed: directionSeed)
    }

    /// Notes the directions `schedule` gives a flow at any time, so that they start with the
    /// `prio` root instead of changing roots (and dropping what the old one held) when the
    /// first flow comes. A live change's first flow still changes the root then.
    package func expectFlows(_ schedule: TimelineSchedule) {
        for change in schedule.changes {
            if case let .conditions(direction, conditions) = change.change, !conditions.flows.isEmpty {
                prioAhead.insert("\(change.link)/\(direction.rawValue)")
            }
        }
    }

    /// A direction with flows: `prio` at the root, the link's own qdiscs in band 0, each flow's
    /// in a band of its own, and `u32` filters to them, first match first.
    private func applyWithFlows(_ conditions: LinkConditions, key: String, link: String, direction: TrafficDirection, socket: any RouteSocket,
                                interface: Int32, what: String, seed: UInt64) throws(SimulatorError) {
        // The selectors first: a match that needs too many filters changes nothing.
        var assigned = bands[key] ?? [:]
        assigned = assigned.filter { entry in conditions.flows.contains { $0.match == entry.key } }
        var filters: [U32Filter] = []
        for (position, flow) in conditions.flows.enumerated() {
            let band = assigned[flow.match] ?? (1..<Self.prioBands).first { !assigned.values.contains($0) }
            guard let band else {
                throw SimulatorError(.invalidScenario, "apply \(what): more than \(ScenarioLimits.maximumFlows) flows with conditions of their own")
            }
            assigned[flow.match] = band
            let selector = flowResolution.selector(flow.match, link: link)
            filters += try selector.u32Filters(uplink: direction == .up, priority: UInt16(2 * position + 1),
                                               classID: QdiscHandle(major: 1, minor: UInt16(band + 1)),
                                               limit: Self.maximumFilters - filters.count)
        }
        if !prioRoots.contains(key) {
            do throws(NetlinkError) {
                // A direction takes its prio root once, at its first flow. Roam's own netem root
                // has prio's handle, so it goes first (the kernel changes a qdisc in place only
                // into one of its own kind); any other root (the device's default) is replaced.
                if (try? socket.qdiscs())?.contains(where: {
                    $0.interfaceIndex == interface && $0.parent == .root && $0.handle == Self.netemHandle && $0.kind == .netem
                }) == true {
                    try socket.deleteQdisc(interfaceIndex: interface, handle: Self.netemHandle, parent: .root)
                }
                try socket.replacePrio(bands: Self.prioBands, interfaceIndex: interface, handle: Self.prioHandle, parent: .root)
            } catch {
                throw SimulatorError("apply \(what): a prio qdisc for its flows", error)
            }
            prioRoots.insert(key)
            netemApplied[key] = nil
            tokenBuckets.remove(key)
            managedQueues.remove(key)
        }
        try applyQdiscs(conditions.withoutFlows, key: "\(key)#0", socket: socket, interface: interface, what: what, seed: seed,
                        handles: Self.bandHandles(0))
        for flow in conditions.flows {
            let band = assigned[flow.match]!
            try applyQdiscs(flow.effective(on: conditions), key: "\(key)#\(band)", socket: socket, interface: interface,
                            what: "\(what), flow \(flow.match)", seed: Self.seed(seed, band: band), handles: Self.bandHandles(band))
        }
        bands[key] = assigned
        let old = filtered[key] ?? ([], 0)
        guard old.filters != filters else { return }
        // Make before break: the new filters go in at the other set of priorities, then the old
        // ones go, so that every packet meets either the old set or the new one (a flow that
        // stays keeps its band throughout). Deleting first left a moment in which a flow's
        // packets matched nothing and took the link's own band: a UDP echo came back in 0.213 s
        // where its flow delays it 0.4 s, at another flow's reset (the VM's flow-faults check).
        let offset = old.filters.isEmpty ? 0 : Self.filterGenerationOffset - old.offset
        do throws(NetlinkError) {
            for var filter in filters {
                filter.priority += offset
                try socket.addU32Filter(filter, interfaceIndex: interface, parent: Self.prioHandle)
            }
            for priority in Set(old.filters.map(\.priority)).sorted() {
                try socket.deleteFilters(interfaceIndex: interface, parent: Self.prioHandle, priority: priority + old.offset)
            }
        } catch {
            if error.errno == ENOENT || error.errno == EOPNOTSUPP {
                throw SimulatorError(.environment, "apply \(what): the kernel has no cls_u32 (\(error)); load it with `modprobe cls_u32`\(elsewhere)")
            }
            throw SimulatorError("apply \(what): the filters of its flows", error)
        }
        filtered[key] = (filters, offset)
    }

    /// netem (and tbf, and CoDel) for one set of conditions at the handles given: the root's
    /// without flows, or one band's under the `prio` root.
    private func applyQdiscs(_ conditions: LinkConditions, key: String, socket: any RouteSocket, interface: Int32, what: String, seed: UInt64,
                             handles: (netem: QdiscHandle, netemParent: QdiscHandle, tokenBucket: QdiscHandle, tokenBucketParent: QdiscHandle,
                                       managedQueue: QdiscHandle, managedQueueParent: QdiscHandle)) throws(SimulatorError) {
        var distribution: [Int16]?
        if let kind = conditions.impairment.distribution { distribution = try table(for: kind) }
        let (netem, bucket) = conditions.qdiscConfiguration(seed: seed, distribution: distribution)
        do throws(NetlinkError) {
            if netemApplied[key] != netem {
                try socket.replaceNetem(netem, interfaceIndex: interface, handle: handles.netem, parent: handles.netemParent)
                netemApplied[key] = netem
            }
            if let bucket {
                try socket.replaceTokenBucket(bucket, interfaceIndex: interface, handle: handles.tokenBucket, parent: handles.tokenBucketParent)
                tokenBuckets.insert(key)
            } else if tokenBuckets.contains(key) {
                // The managed queue under it goes with it.
                try socket.deleteQdisc(interfaceIndex: interface, handle: handles.tokenBucket, parent: handles.tokenBucketParent)
                tokenBuckets.remove(key)
                managedQueues.remove(key)
            }
        } catch {
            if error.errno == ENOENT {
                throw SimulatorError(.environment, "apply \(what): the kernel has no sch_netem or sch_tbf (\(error)); "
                    + "load them with `modprobe sch_netem sch_tbf`\(elsewhere)")
            }
            throw SimulatorError("apply \(what)", error)
        }
        try applyManagedQueue(conditions, key: key, socket: socket, interface: interface, what: what,
                              handle: handles.managedQueue, parent: handles.managedQueueParent)
    }

    /// CoDel or FQ-CoDel in tbf's class, or back to tbf's byte FIFO (never no child: tbf
    /// without one would drop everything).
    private func applyManagedQueue(_ conditions: LinkConditions, key: String, socket: any RouteSocket, interface: Int32,
                                   what: String, handle: QdiscHandle, parent: QdiscHandle) throws(SimulatorError) {
        let wanted = tokenBuckets.contains(key) ? conditions.coDelConfiguration : nil
        do throws(NetlinkError) {
            if let wanted {
                try socket.replaceCoDel(wanted, interfaceIndex: interface, handle: handle, parent: parent)
                managedQueues.insert(key)
            } else if managedQueues.contains(key), let bucket = conditions.queuePlan.tokenBucket {
                try socket.replaceByteFIFO(limit: bucket.limit, interfaceIndex: interface, handle: handle, parent: parent)
                managedQueues.remove(key)
            }
        } catch {
            if error.errno == ENOENT, let wanted {
                throw SimulatorError(.environment, "apply \(what): queue: \(conditions.impairment.queue?.name ?? "codel") needs the kernel's "
                    + "sch_\(wanted.kind) qdisc, which this kernel does not have (\(error)); load it with `modprobe sch_\(wanted.kind)` "
                    + "where the module exists\(elsewhere)")
            }
            throw SimulatorError("apply \(what)", error)
        }
    }

    package func setCarrier(_ up: Bool, link name: String) throws(SimulatorError) {
        guard let (_, link) = links[name] else { throw SimulatorError(.invalidScenario, "unknown link '\(name)'") }
        guard let (socket, interface) = try sendingInterface(link: name, node: link.second) else {
            // Attached to the first end alone: no carrier to cut from here, so its egress
            // passes nothing until the carrier comes back.
            guard try sendingInterface(link: name, node: link.first) != nil else { return }
            if up { cutAtFirstEnd.remove(name) } else { cutAtFirstEnd.insert(name) }
            try apply(lastApplied["\(name)/up"] ?? LinkConditions(), link: name, direction: .up)
            return
        }
        do throws(NetlinkError) {
            try socket.setLink(index: interface, up: up, alias: nil, mtu: nil, name: nil)
        } catch {
            throw SimulatorError("set link '\(name)' \(up ? "up" : "down")", error)
        }
        // Down flushed that end's IPv6 addresses and its routes: back as they were.
        if up { try interfaces?.restore(link: name, node: link.second) } else { interfaces?.wentDown(link: name, node: link.second) }
    }

    /// Once stopped: each link direction's qdiscs and their counters, read from the kernel
    /// before the topology goes (``Fidelity/qdiscs``).
    package private(set) var qdiscCounters: [Fidelity.QdiscCounters] = []

    package func stop() {
        var counters: [Fidelity.QdiscCounters] = []
        for (name, entry) in links.sorted(by: { $0.value.index < $1.value.index }) {
            for direction in [TrafficDirection.up, .down] {
                let node = direction == .up ? entry.link.first : entry.link.second
                // A side this backend does not shape (roam attach's other node) has none of Roam's.
                guard let (socket, interface) = try? sendingInterface(link: name, node: node),
                      let qdiscs = try? socket.qdiscs() else { continue }
                let own = Self.ownHandles
                for qdisc in qdiscs where qdisc.interfaceIndex == interface && own.contains(qdisc.handle) {
                    let statistics = qdisc.statistics
                    counters.append(Fidelity.QdiscCounters(link: name, direction: direction.rawValue, kind: qdisc.kind.rawValue,
                                                           packets: Int64(clamping: statistics.packets), drops: Int64(clamping: statistics.drops),
                                                           overlimits: Int64(clamping: statistics.overlimits),
                                                           requeues: Int64(clamping: statistics.requeues)))
                }
            }
        }
        qdiscCounters = counters
    }

    private func sendingInterface(link: String, node: String) throws(SimulatorError) -> (any RouteSocket, Int32)? {
        guard let interfaces else { throw SimulatorError(.invalidScenario, "node '\(node)' is not running") }
        return try interfaces.sendingInterface(link: link, node: node)
    }

    private func table(for distribution: DelayDistribution) throws(SimulatorError) -> [Int16]? {
        guard distribution != .uniform else { return nil }
        if let cached = distributions[distribution] { return cached }
        let table = try DelayDistributionTable.load(distribution)
        distributions[distribution] = table
        return table
    }

    // MARK: - Pure parts

    /// The seed of one direction of one link: the scenario's seed mixed with both (splitmix64's
    /// finalizer), so that each direction draws its own sequence.
    package static func seed(_ scenarioSeed: UInt64, link: Int, direction: TrafficDirection) -> UInt64 {
        func mix(_ input: UInt64) -> UInt64 {
            var value = input &+ 0x9E37_79B9_7F4A_7C15
            value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
            value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
            return value ^ (value >> 31)
        }
        // The seed is mixed before the link and direction go in, so that no two (seed, link,
        // direction) triples meet on the same input.
        return mix(mix(scenarioSeed) ^ (UInt64(link) << 1 | (direction == .up ? 0 : 1)))
    }

    /// Whether this kernel runs netem: a netem qdisc is set on the loopback of a private,
    /// throwaway namespace (the kernel loads `sch_netem` on demand where it is a module).
    package static func probe() -> NetemAvailability {
        let outcome = UncheckedResultBox()
        do {
            let thread = try PinnedThread(name: "roam-probe") {
                do throws(NetlinkError) {
                    try probeOnPrivateNamespace()
                    outcome.value = .available
                } catch {
                    if error.errno == ENOENT || error.errno == EOPNOTSUPP {
                        outcome.value = .missing("\(error.reason)")
                    } else if error.isPermissionDenied {
                        outcome.value = .notPermitted("\(error)")
                    } else {
                        outcome.value = .missing("\(error)")
                    }
                }
            }
            thread.join()
        } catch {
            return .missing("\(error)")
        }
        return outcome.value
    }

    private static func probeOnPrivateNamespace() throws(NetlinkError) {
        guard unshare(CLONE_NEWNET) == 0 else { throw NetlinkError.posix("unshare(CLONE_NEWNET)") }
        let socket = try NetlinkSocket(.route)
        guard let lo = try socket.link(named: "lo") else { throw NetlinkError(.errno(ENODEV), operation: "find lo") }
        try socket.replaceNetem(NetemConfiguration(), interfaceIndex: lo.index, handle: netemHandle)
    }
}

/// Where the netem backend finds each side of each link: the route socket of the namespace it
/// is in and its interface index. A topology's are all its own; `roam attach` has only the sides
/// of the nodes it was attached to (nil for the others, which it leaves alone).
package protocol NetemInterfaces: AnyObject {
    func sendingInterface(link: String, node: String) throws(SimulatorError) -> (any RouteSocket, Int32)?
    /// `node`'s end of `link` came back up: its addresses and routes as they were before it went down.
    func restore(link: String, node: String) throws(SimulatorError)
    /// `node`'s end of `link` was set down.
    func wentDown(link: String, node: String)
}

extension NetemInterfaces {
    package func wentDown(link: String, node: String) {}
}

/// The sides of a topology Roam built.
final class TopologyInterfaces: NetemInterfaces {
    private weak var topology: Topology?
    private let links: [String: TopologyPlan.Link]
    private var indices: [String: Int32] = [:]

    init(_ topology: Topology, links: [String: TopologyPlan.Link]) {
        self.topology = topology
        self.links = links
    }

    func sendingInterface(link: String, node: String) throws(SimulatorError) -> (any RouteSocket, Int32)? {
        guard let topology, let socket = topology.routeSocket(of: node) else {
            throw SimulatorError(.invalidScenario, "node '\(node)' is not running")
        }
        let key = "\(node)/\(link)"
        if let index = indices[key] { return (socket, index) }
        let name = links[link]?.interface(in: node) ?? link
        do throws(NetlinkError) {
            guard let found = try socket.link(named: name) else {
                throw NetlinkError(.errno(ENODEV), operation: "find interface \(name) in node '\(node)'")
            }
            indices[key] = found.index
            return (socket, found.index)
        } catch {
            throw SimulatorError("find interface \(link) in node '\(node)'", error)
        }
    }

    func restore(link: String, node: String) throws(SimulatorError) {
        try topology?.restoreSecondEnd(link: link)
    }
}

private final class UncheckedResultBox: @unchecked Sendable {
    var value: NetemAvailability = .missing("the probe did not run")
}


/// netem's delay distribution tables, read from iproute2's `*.dist` files.
package enum DelayDistributionTable {
    static let directories = ["/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/aarch64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc",
                              "/usr/local/lib/tc", "/usr/share/tc"]

    package static func load(_ distribution: DelayDistribution) throws(SimulatorError) -> [Int16] {
        for directory in directories {
            let path = "\(directory)/\(distribution.rawValue).dist"
            guard access(path, R_OK) == 0 else { continue }
            do throws(SafePathError) {
                return try parse(RoamSystem.readTextFile(atPath: path, maximumBytes: 1 << 20))
            } catch {
                throw SimulatorError(.environment, "read the \(distribution.rawValue) delay distribution: \(error)")
            }
        }
        throw SimulatorError(.environment, "no \(distribution.rawValue).dist found in \(directories.joined(separator: ", ")); "
            + "the table comes with iproute2 (apt-get install iproute2)")
    }

    /// The numbers of a `.dist` file; `#` starts a comment.
    package static func parse(_ text: String) -> [Int16] {
        text.split(separator: "\n").flatMap { line in
            line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { Int16($0) }
        }
    }
}
