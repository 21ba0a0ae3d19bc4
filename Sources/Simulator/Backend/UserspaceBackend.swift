import Glibc
import LinkEmulation
import Netlink
import RoamSystem
import ScenarioModel

/// The userspace backend: each link is a pair of TUN interfaces, one named after the link in
/// each node, and Roam's ``LinkEmulator`` moves packets between them through a pipeline per
/// direction (loss, corruption, duplication, queue, rate or trace, delay and jitter), every
/// random decision drawn from a generator seeded per direction from the scenario's seed.
/// Carrier loss is the TUN interfaces' own carrier (`TUNSETCARRIER`), so a path monitor sees
/// `NO-CARRIER` exactly as with a veth pair.
package final class UserspaceBackend: LinkBackend {
    package let kind = BackendKind.userspace

    /// Where decision logs and captures go, and which to write.
    package struct Recording: Sendable {
        package var directory: SecureDirectory
        package var decisionLogs: Bool
        package var capturedLinks: Set<String>
        /// How much the logs and captures may hold.
        package var budget: OutputBudget

        package init(directory: SecureDirectory, decisionLogs: Bool, capturedLinks: Set<String>, budget: OutputBudget = OutputBudget()) {
            self.directory = directory
            self.decisionLogs = decisionLogs
            self.capturedLinks = capturedLinks
            self.budget = budget
        }
    }

    private let plan: TopologyPlan
    private let flowResolution: FlowResolution
    private let seed: UInt64
    private let recording: Recording?
    private var interfaces: [String: (first: TunInterface, second: TunInterface)] = [:]
    private var emulator: LinkEmulator?
    /// Where each link's directions (up, then down) are in the emulator's list.
    private var firstDirection: [String: Int] = [:]
    private var origin: Int64 = 0
    private var distributions: [DelayDistribution: [Int16]] = [:]
    /// Record how late each packet left the emulator against its due time (benchmarks).
    package var measuresLateness = false
    /// Open the TUN interfaces with the kernel's offloads (``TunInterface``): segmented packets
    /// move whole where a direction changes nothing, and are cut into wire packets where it
    /// decides. Off: every wire packet is a read and a write (benchmarks compare the two).
    package var offloads = true
    /// How many threads the emulator uses (nil: one per core; never more than one per link).
    package var threads: Int?
    /// How the emulator's threads are scheduled (real-time where allowed, by default).
    package var scheduling: LinkEmulator.Scheduling = .realtime
    /// Once stopped: packets read that stood for more than one wire packet.
    package private(set) var superPackets = 0
    /// How many of the emulator's threads ran in the real-time class (known once it stopped).
    package private(set) var realtimeThreads = 0
    /// How many threads the emulator ran (known once it stopped).
    package private(set) var emulatorThreadCount = 0
    /// Once stopped: writes that merged several wire packets of one flow into one.
    package private(set) var mergedWrites = 0
    /// Once stopped: packets a TUN interface refused (its queue full): the emulator could not
    /// keep up.
    package private(set) var refusedPackets = 0
    /// Once stopped: each delivered packet's lateness, when measured.
    package private(set) var deliveryLateness: [Duration] = []
    /// Once stopped: the CPU time of the emulator's thread.
    package private(set) var emulatorCPUTime: Duration = .zero
    /// What the emulator did with each direction's packets once stopped, in link order (up, down).
    package private(set) var linkStatistics: [LinkStatistics] = []

    package init(plan: TopologyPlan, seed: UInt64, recording: Recording? = nil) {
        self.plan = plan
        self.flowResolution = FlowResolution(plan: plan)
        self.seed = seed
        self.recording = recording
    }

    /// Whether this machine can run the emulator: it needs `/dev/net/tun`.
    package static func probe() -> String? {
        access("/dev/net/tun", R_OK | W_OK) == 0 ? nil : "/dev/net/tun is missing (modprobe tun)"
    }

    package func createInterfaces(for link: TopologyPlan.Link, in topology: Topology) throws(SimulatorError) {
        guard let first = topology.namespace(of: link.first), let second = topology.namespace(of: link.second) else {
            throw SimulatorError(.invalidScenario, "link '\(link.name)' names a node that was not built")
        }
        do {
            interfaces[link.name] = (try TunInterface(name: link.firstInterface, in: first, offloads: offloads),
                                     try TunInterface(name: link.secondInterface, in: second, offloads: offloads))
        } catch {
            throw SimulatorError(error)
        }
    }

    package func start(_ topology: Topology) throws(SimulatorError) {
        do {
            try startEmulator()
        } catch {
            throw SimulatorError(error)
        }
    }

    private func startEmulator() throws(LinkEmulationError) {
        var directions: [LinkEmulator.Direction] = []
        for (index, link) in plan.links.enumerated() {
            guard let pair = interfaces[link.name] else { continue }
            firstDirection[link.name] = directions.count
            for direction in TrafficDirection.allCases {
                let name = "\(link.name)-\(direction.rawValue)"
                var decisions: BufferedFile?
                var capture: PcapWriter?
                if let recording {
                    if recording.decisionLogs {
                        decisions = try BufferedFile(directory: recording.directory, name: "decisions-\(name).log", budget: recording.budget)
                    }
                    if recording.capturedLinks.contains(link.name) {
                        capture = try PcapWriter(directory: recording.directory, name: "capture-\(name).pcap", budget: recording.budget)
                    }
                }
                var emulated = LinkEmulator.Direction(
                    link: index,
                    pipeline: LinkPipeline(conditions: LinkConditions(), capacity: .unlimited,
                                           seed: NetemBackend.seed(seed, link: index, direction: direction), logsDecisions: decisions != nil),
                    source: direction == .up ? pair.first : pair.second,
                    destination: direction == .up ? pair.second : pair.first,
                    decisions: decisions, capture: capture)
                emulated.isUplink = direction == .up
                emulated.flowSeed = NetemBackend.seed(seed, link: index, direction: direction)
                directions.append(emulated)
            }
        }
        origin = MonotonicInstant.now.nanoseconds
        var radios: [Int: RadioStateMachine] = [:]
        for (index, link) in plan.links.enumerated() {
            if let states = link.radio, interfaces[link.name] != nil { radios[index] = RadioStateMachine(states, origin: origin) }
        }
        let emulator = try LinkEmulator(directions: directions, links: plan.links.count, threads: threads, measuresLateness: measuresLateness,
                                        scheduling: scheduling, radios: radios)
        try emulator.start()
        self.emulator = emulator
    }

    package func apply(_ conditions: LinkConditions, link name: String, direction: TrafficDirection) throws(SimulatorError) {
        guard let first = firstDirection[name], let emulator else {
            throw SimulatorError(.invalidScenario, "unknown link '\(name)'")
        }
        let (capacity, distribution) = try pipelineSettings(conditions.impairment)
        var flows: [FlowSetup] = []
        for flow in conditions.flows {
            let effective = flow.effective(on: conditions)
            let (flowCapacity, flowDistribution) = try pipelineSettings(effective.impairment)
            flows.append(FlowSetup(selector: flowResolution.selector(flow.match, link: name), conditions: effective, capacity: flowCapacity,
                                   distribution: flowDistribution))
        }
        emulator.post(.conditions(direction: first + (direction == .up ? 0 : 1), conditions.withoutFlows, capacity, distribution: distribution,
                                  flows: flows))
    }

    /// A pipeline's capacity and delay distribution for `impairment`.
    private func pipelineSettings(_ impairment: Impairment) throws(SimulatorError) -> (LinkCapacity, [Int16]?) {
        var distribution: [Int16]?
        if let kind = impairment.distribution, kind != .uniform {
            if distributions[kind] == nil { distributions[kind] = try DelayDistributionTable.load(kind) }
            distribution = distributions[kind]
        }
        let capacity: LinkCapacity
        if let trace = impairment.trace {
            // Every trace runs from the emulator's start, whenever the timeline switches to it.
            capacity = .trace(trace.trace, origin: origin)
        } else {
            capacity = impairment.rate.map { .rate(bitsPerSecond: $0.bitsPerSecond) } ?? .unlimited
        }
        return (capacity, distribution)
    }

    package func setCarrier(_ up: Bool, link name: String) throws(SimulatorError) {
        guard let index = plan.links.firstIndex(where: { $0.name == name }), let pair = interfaces[name], let emulator else {
            throw SimulatorError(.invalidScenario, "unknown link '\(name)'")
        }
        emulator.post(.carrier(link: index, up: up))
        do {
            try pair.first.setCarrier(up)
            try pair.second.setCarrier(up)
        } catch {
            throw SimulatorError(error)
        }
    }

    package func stop() {
        if let emulator {
            let counters = emulator.finish()
            deliveryLateness = emulator.lateness.map { .nanoseconds($0) }
            emulatorCPUTime = emulator.cpuTime
            superPackets = emulator.offloadStatistics.superPackets
            realtimeThreads = emulator.realtimeThreads
            emulatorThreadCount = emulator.threadCount
            mergedWrites = emulator.offloadStatistics.merged
            refusedPackets = emulator.refusedPackets
            var index = 0
            for link in plan.links where interfaces[link.name] != nil {
                for direction in TrafficDirection.allCases where index < counters.count {
                    linkStatistics.append(LinkStatistics(link: link.name, direction: direction, counters: counters[index]))
                    index += 1
                }
            }
        }
        emulator = nil
        for (first, second) in interfaces.values {
            first.close()
            second.close()
        }
        interfaces = [:]
    }
}
