import Foundation
import Glibc
import Netlink
@testable import ScenarioModel
@testable import Simulator
import Testing
import TestSupport

/// `roam attach` plays a scenario's links with the netem backend `roam run` uses, on interfaces
/// it did not make. Checked here against recordings, root-free: for the same scenario and seed,
/// every qdisc the kernel is asked for, on every interface, in order, is the same as run's.
@Suite struct AttachTests {
    /// Bundled scenarios attach can play (links between nodes, no networks, no userspace-only links).
    static let attachable: [String] = bundledScenarios.filter { path in
        guard let scenario = ScenarioReader.read(contentsOf: path).scenario else { return false }
        return ScenarioAttacher.problems(scenario).isEmpty
    }

    /// Plays `schedule` through `backend` as the timeline player does, change by change.
    static func play(_ schedule: TimelineSchedule, through backend: NetemBackend) throws {
        for initial in schedule.initial {
            try backend.apply(initial.conditions, link: initial.link, direction: initial.direction)
        }
        for change in schedule.changes {
            switch change.change {
            case .carrier(let up): try backend.setCarrier(up, link: change.link)
            case .conditions(let direction, let conditions): try backend.apply(conditions, link: change.link, direction: direction)
            case .membership, .network: Issue.record("an attachable scenario has a network change: \(change)")
            }
        }
    }

    /// Namespaces `pod-NODE` with a veth pair per link, made as a container runtime would (the
    /// interfaces named after the link), in `network`; the attached sides of `nodes`.
    static func pods(_ scenario: Scenario, plan: TopologyPlan, nodes: Set<String>, in network: RecordingNetwork) throws -> AttachedInterfaces {
        var sockets: [String: any RouteSocket] = [:]
        for node in plan.nodes {
            let namespace = try network.createNamespace(named: "pod-\(node.name)")
            sockets[node.name] = try network.routeSocket(in: namespace)
        }
        var sides: [AttachedInterfaces.Side: (socket: any RouteSocket, index: Int32, interface: String)] = [:]
        var snapshots: [AttachedInterfaces.Side: AttachedInterfaces.Snapshot] = [:]
        for link in plan.links {
            let first = try #require(sockets[link.first]), second = try #require(sockets[link.second])
            try first.createVethPair(link.firstInterface, peer: link.secondInterface, peerNamespace: try NetworkNamespace.named("pod-\(link.second)"))
            for (node, socket, name) in [(link.first, first, link.firstInterface), (link.second, second, link.secondInterface)] where nodes.contains(node) {
                let interface = try #require(try socket.link(named: name))
                try socket.setLink(index: interface.index, up: true, alias: nil, mtu: nil, name: nil)
                let side = AttachedInterfaces.Side(link: link.name, node: node)
                sides[side] = (socket, interface.index, name)
                if node == link.second {
                    let address = try #require(IPPrefix("198.19.\(plan.links.firstIndex { $0.name == link.name }!).2/24"))
                    try socket.addAddress(address, interfaceIndex: interface.index, skipDAD: true)
                    snapshots[side] = .init(addresses: [address])
                }
            }
        }
        return AttachedInterfaces(sides: sides, snapshots: snapshots)
    }

    @Test(arguments: attachable)
    func attachAsksTheKernelForExactlyWhatRunDoes(_ path: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: path).scenario)
        // As both play it on netem: a trace's rate stepped.
        let schedule = TimelineSchedule(scenario: scenario).played(on: .netem, scenario: scenario).schedule
        #expect(!schedule.changes.isEmpty || scenario.links.count > 0)

        // roam run: the topology it builds.
        let ran = RecordingNetwork()
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        let runBackend = NetemBackend(plan: plan, seed: scenario.seed)
        let topology = try Topology.build(plan, backend: runBackend, control: ran)
        defer { topology.teardown() }
        try runBackend.start(topology)
        var built: [String: Int] = [:]
        for node in plan.nodes { built[node.name] = try #require(ran.namespace(node.namespaceName)).shaping.count }
        try Self.play(schedule, through: runBackend)

        // roam attach: every node attached, in namespaces something else made.
        let attached = RecordingNetwork()
        let interfaces = try Self.pods(scenario, plan: try TopologyPlan(scenario: scenario, runID: "other"), nodes: Set(plan.nodes.map(\.name)), in: attached)
        var made: [String: Int] = [:]
        for node in plan.nodes { made[node.name] = try #require(attached.namespace("pod-\(node.name)")).shaping.count }
        let attachBackend = NetemBackend(plan: try TopologyPlan(scenario: scenario, runID: "other"), seed: scenario.seed, interfaces: interfaces)
        try Self.play(schedule, through: attachBackend)

        var total = 0
        for node in plan.nodes {
            let run = Array(try #require(ran.namespace(node.namespaceName)).shaping.dropFirst(built[node.name]!))
            let attach = Array(try #require(attached.namespace("pod-\(node.name)")).shaping.dropFirst(made[node.name]!))
            #expect(run == attach, "node \(node.name): first difference at \(zip(run, attach).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(run.count, attach.count))")
            total += run.count
        }
        // Every initial condition and change asked for something (carrier changes on one end only).
        #expect(total >= schedule.initial.count)

        // At the end each attached interface is as the runtime left it: no qdisc of Roam's, up.
        interfaces.restore()
        for node in plan.nodes {
            let state = try #require(attached.namespace("pod-\(node.name)"))
            #expect(state.netem.isEmpty && state.tokenBuckets.isEmpty, "\(node.name) keeps a qdisc")
            #expect(state.links.filter { $0.name != "lo" }.allSatisfy { $0.flags.contains(.up) })
        }
        #expect(attached.strayCalls.isEmpty)
    }

    @Test func attachableScenariosAreThoseWithoutNetworks() throws {
        let names = Self.attachable.map { String($0.split(separator: "/").last ?? "") }
        #expect(names.contains("walk-out-of-home.yaml") && names.contains("elevator.yaml"))
        for path in bundledScenarios where !Self.attachable.contains(path) {
            let scenario = try #require(ScenarioReader.read(contentsOf: path).scenario)
            let problems = ScenarioAttacher.problems(scenario)
            #expect(!problems.isEmpty)
            if !scenario.networks.isEmpty { #expect(problems[0].contains("roam attach plays links on interfaces that exist")) }
        }
    }

    @Test func withOnlyTheFirstEndAttachedCarrierLossIsTotalLossThere() throws {
        let scenario = try walkOutOfHome()
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        let network = RecordingNetwork()
        let interfaces = try Self.pods(scenario, plan: plan, nodes: ["phone"], in: network)
        let backend = NetemBackend(plan: plan, seed: 7, interfaces: interfaces)
        let phone = try #require(network.namespace("pod-phone")), server = try #require(network.namespace("pod-server"))
        let wifi = try #require(phone.link("wifi")).index
        let shaped = LinkConditions(impairment: Impairment(delay: .milliseconds(30)))
        try backend.apply(shaped, link: "wifi", direction: .up)
        try backend.apply(shaped, link: "wifi", direction: .down)
        #expect(phone.netem[wifi]?.delay == .milliseconds(30))
        #expect(server.netem.isEmpty, "the server's side is not attached")

        try backend.setCarrier(false, link: "wifi")
        #expect(phone.netem[wifi]?.loss == .random(probability: 1, correlation: 0))
        #expect(phone.link("wifi")?.flags.contains(.up) == true, "no carrier to cut from the first end: it stays up")
        // A change while the carrier is out is kept for its return.
        try backend.apply(LinkConditions(impairment: Impairment(delay: .milliseconds(90))), link: "wifi", direction: .up)
        #expect(phone.netem[wifi]?.loss == .random(probability: 1, correlation: 0))
        try backend.setCarrier(true, link: "wifi")
        #expect(phone.netem[wifi]?.delay == .milliseconds(90))
        #expect(phone.netem[wifi]?.loss == .random(probability: 0, correlation: 0))
    }

    @Test func theSecondEndGoesDownAndComesBackWithItsAddresses() throws {
        let scenario = try walkOutOfHome()
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        let network = RecordingNetwork()
        let interfaces = try Self.pods(scenario, plan: plan, nodes: ["phone", "server"], in: network)
        let backend = NetemBackend(plan: plan, seed: 7, interfaces: interfaces)
        let server = try #require(network.namespace("pod-server"))
        let wifi = try #require(server.link("wifi")).index
        let address = try #require(server.addresses.first { $0.index == wifi }).prefix
        try backend.setCarrier(false, link: "wifi")
        #expect(server.link("wifi")?.flags.contains(.up) == false)
        // The kernel flushes what a down interface had; the snapshot puts it back.
        server.addresses.removeAll { $0.index == wifi }
        try backend.setCarrier(true, link: "wifi")
        #expect(server.link("wifi")?.flags.contains(.up) == true)
        #expect(server.addresses.contains { $0.index == wifi && $0.prefix == address })

        // Left down at the end (a cancelled attach): restore() sets it up again, addresses too.
        try backend.setCarrier(false, link: "wifi")
        server.addresses.removeAll { $0.index == wifi }
        interfaces.restore()
        #expect(server.link("wifi")?.flags.contains(.up) == true)
        #expect(server.addresses.contains { $0.index == wifi && $0.prefix == address })
    }

    @Test func aProcessNamespacePathIsReachedThroughItsProcess() {
        #expect(AttachedNamespace.processNamespacePid("/proc/4242/ns/net") == 4242)
        for path in ["/proc/self/ns/net", "/proc/4242/ns/user", "/proc/4242/ns/net/x", "/run/netns/pod", "/proc/-1/ns/net", "/proc/0/ns/net",
                     "proc/4242/ns/net", "/proc/99999999999/ns/net", "/proc/٤٢/ns/net"] {
            #expect(AttachedNamespace.processNamespacePid(path) == nil, "\(path)")
        }
    }
}

/// Issue 56, case 10: the host's network namespace is told on any kernel, also from a container
/// or pod given the host's network, where PID 1 is the container's and, before Linux 6.18, the
/// namespace has no fixed number.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to enter a network namespace"), .serialized)
struct AttachedNamespaceKernelTests {
    @Test func theHostsNamespaceIsToldByTheSettingsOnlyItHas() throws {
        // This test runs in the host's network namespace.
        #expect(AttachedNamespace.settingsOfTheInitialNamespace() == true)
        let isolated = try RunningCommand("/usr/bin/unshare", ["-n", "/bin/sh", "-c", "echo ready; exec sleep 30"])
        defer { _ = isolated.stop(with: SIGKILL) }
        try #require(isolated.lines.wait(timeout: 10, until: { $0.contains("ready") }) != nil, "\(isolated.errors.values)")
        let namespace = try AttachedNamespace.open(node: "phone", pid: isolated.process.processIdentifier)
        #expect(namespace.hasInitialNamespaceSettings() == false, "a namespace of its own has none of the host's own settings")
        // What a sidecar of a pod with `hostNetwork: true` would see of its own namespace: refused
        // (on this kernel by its number too; on an older one by its settings alone).
        #expect(throws: SimulatorError.self) { try AttachedNamespace.current(node: "phone") }
    }
}
