import RoamCore
import RoamSystem
import Foundation
import Glibc
import Netlink
import PathMonitor
@testable import ScenarioModel
import Testing
import TestSupport
@testable import Simulator

func walkOutOfHome() throws -> Scenario {
    let path = try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") })
    return try #require(ScenarioReader.read(contentsOf: path).scenario)
}

@Suite struct TopologyPlanTests {
    @Test func addressesEachLinkAndOrdersDefaultsByTheFile() throws {
        let plan = try TopologyPlan(scenario: walkOutOfHome(), runID: "abc123")
        #expect(plan.nodes.map(\.namespaceName) == ["roam-abc123-phone", "roam-abc123-server"])
        let phone = try #require(plan.node("phone"))
        #expect(phone.interfaces.map(\.name) == ["wifi", "cell"])
        let wifi = phone.interfaces[0], cell = phone.interfaces[1]
        #expect(wifi.ipv4 == IPPrefix("198.18.0.1/24")! && wifi.peerIPv4 == IPAddress("198.18.0.2")!)
        #expect(cell.ipv4 == IPPrefix("198.18.1.1/24")!)
        #expect(wifi.ipv6 == IPPrefix("fd72:6f61:6d00::1/64")! && cell.ipv6 == IPPrefix("fd72:6f61:6d00:1::1/64")!)
        #expect((wifi.metric, cell.metric) == (100, 110))
        #expect((wifi.table, cell.table) == (RouteTable(1000), RouteTable(1001)))
        #expect(wifi.alias == "roam:type=wifi,expensive=false,constrained=false,ultraConstrained=false,quality=good")
        #expect(cell.alias == "roam:type=cellular,expensive,constrained=false,ultraConstrained=false,quality=good")
        let server = try #require(plan.node("server"))
        #expect(server.interfaces.map(\.ipv4) == [IPPrefix("198.18.0.2/24")!, IPPrefix("198.18.1.2/24")!])
        #expect(server.interfaces.map(\.peer) == ["phone", "phone"])
    }

    @Test func spreadsLinksOverTheWholeBenchmarkingRange() throws {
        var scenario = try walkOutOfHome()
        let template = scenario.links[0]
        scenario.links = (0..<300).map { index in
            var link = template
            link.name = "l\(index)"
            return link
        }
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        #expect(plan.node("phone")?.interfaces[299].ipv4 == IPPrefix("198.19.43.1/24")!)
        #expect(plan.node("phone")?.interfaces[299].ipv6 == IPPrefix("fd72:6f61:6d00:12b::1/64")!)
        #expect(plan.addressing == .wide)
        scenario.links = (0..<8129).map { index in
            var link = template
            link.name = "l\(index)"
            return link
        }
        #expect(throws: SimulatorError.self) { try TopologyPlan(scenario: scenario, runID: "abc123") }
    }

    /// A scenario larger than the /24 plan (500 phones with a Wi-Fi and a cellular link each:
    /// 1,000 links, 501 nodes) takes the dense one: a /28 a link, service addresses in
    /// 198.19.252.0/22; every address in it is distinct, each link's two ends share its subnet,
    /// and no link's subnet reaches the service addresses.
    @Test func aCrowdTakesTheDensePlan() throws {
        var yaml = "name: crowd\nduration: 5s\nnodes:\n  server: {}\n" + (1...500).map { "  phone\($0): {}\n" }.joined()
        yaml += "links:\n" + (1...500).map { "  - { name: wifi\($0), between: [phone\($0), server] }\n  - { name: cell\($0), between: [phone\($0), server] }\n" }.joined()
        let scenario = try #require(ScenarioReader.parse(yaml, file: "crowd.yaml").scenario)
        let plan = try TopologyPlan(scenario: scenario, runID: "abc123")
        #expect(plan.addressing == .dense)
        #expect(plan.node("server")?.serviceIPv4 == IPAddress("198.19.252.1"))
        #expect(plan.node("phone500")?.serviceIPv4 == IPAddress("198.19.253.245"))
        let last = try #require(plan.node("phone500")?.interfaces.last)
        #expect(last.ipv4 == IPPrefix("198.18.62.113/28")!)
        #expect(last.peerIPv4 == IPAddress("198.18.62.114"))
        #expect(last.ipv6 == IPPrefix("fd72:6f61:6d00:3e7::1/64")!)
        let interfaces = plan.nodes.flatMap(\.interfaces)
        #expect(interfaces.count == 2000)
        #expect(Set(interfaces.map(\.ipv4.address)).count == 2000)
        #expect(Set(interfaces.map(\.ipv6.address)).count == 2000)
        let services = Set(plan.nodes.map(\.serviceIPv4))
        #expect(services.count == 501)
        let serviceBlock = IPPrefix("198.19.252.0/22")!
        for interface in interfaces {
            #expect(interface.ipv4.contains(interface.peerIPv4), "\(interface.name): \(interface.ipv4) and its peer \(interface.peerIPv4)")
            #expect(!serviceBlock.contains(interface.ipv4.address))
        }
        #expect(services.allSatisfy { serviceBlock.contains($0) })
        // More nodes than the dense plan holds are refused, with the limit.
        let tooMany = Scenario(name: "many", duration: .seconds(1), nodes: (0...1022).map { ScenarioNode("n\($0)") })
        #expect(throws: SimulatorError.self) { try TopologyPlan(scenario: tooMany, runID: "abc123") }
    }
}

@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct TopologyKernelTests {
    @Test func buildsAWorkingNetworkAndRemovesIt() throws {
        let before = try HostNetworkState.capture()
        let runID = RunRegistry.newRunID()
        let plan = try TopologyPlan(scenario: walkOutOfHome(), runID: runID)
        let topology = try Topology.build(plan)
        defer { topology.teardown() }
        #expect(NetworkNamespace.list().filter { $0.hasPrefix("roam-\(runID)-") }.count == 2)
        #expect(try RunRegistry.root(creating: false).note(of: runID).process?.identity == ProcessIdentity.current)

        let phone = try #require(topology.socket(of: "phone"))
        let links = try phone.links()
        #expect(links.first { $0.name == "cell" }?.alias == "roam:type=cellular,expensive,constrained=false,ultraConstrained=false,quality=good")
        let defaults = try phone.routes().filter { $0.isDefault && $0.table == .main }
        #expect(defaults.filter { $0.family == .inet }.map(\.metric).sorted() == [100, 110])
        #expect(defaults.filter { $0.family == .inet6 }.count == 2)
        #expect(try phone.rules().contains(RoutingRule(family: .inet, priority: 1001, source: IPPrefix("198.18.1.1/32")!, table: RouteTable(1001))))

        // Every link carries traffic, IPv4 and IPv6, from the address bound to it.
        let phoneNamespace = try #require(topology.namespace(of: "phone"))
        let serverNamespace = try #require(topology.namespace(of: "server"))
        for (family, port) in [(AddressFamily.inet, UInt16(7001)), (.inet6, 7002)] {
            let listener = try TCPProbe.listen(in: serverNamespace, family: family, port: port)
            defer { close(listener) }
            for interface in plan.node("phone")!.interfaces {
                let source = family == .inet ? interface.ipv4.address : interface.ipv6.address
                let destination = family == .inet ? interface.peerIPv4 : interface.peerIPv6
                #expect(try TCPProbe.connect(in: phoneNamespace, from: source, to: destination, port: port, listener: listener) == source)
                // The server's service address (on its loopback) is reachable over every link too.
                let server = plan.node("server")!
                let service = family == .inet ? server.serviceIPv4 : server.serviceIPv6
                #expect(try TCPProbe.connect(in: phoneNamespace, from: source, to: service, port: port, listener: listener) == source)
            }
        }
        // Each interface's own table leads out of that interface, and rules send its addresses there.
        let phoneRoutes = try phone.routes()
        let phoneRules = try phone.rules()
        for interface in plan.node("phone")!.interfaces {
            let index = try #require(links.first { $0.name == interface.name }).index
            for (address, peer) in [(interface.ipv4, interface.peerIPv4), (interface.ipv6, interface.peerIPv6)] {
                let table = phoneRoutes.filter { $0.table == interface.table && $0.family == address.address.family }
                #expect(table.contains { $0.isDefault && $0.gateway == peer && $0.interfaceIndices == [index] }, "\(interface.name) \(address)")
                #expect(table.contains { !$0.isDefault && $0.destination.contains(address.address) && $0.interfaceIndices == [index] })
                // Without carrier the default is ignored; the last resort keeps traffic from an
                // address of this link from leaking out of another.
                #expect(table.contains { $0.destination.length == 0 && $0.type == .unreachable && $0.metric == UInt32.max })
                let subnet = IPPrefix(address.address.masked(to: address.length), length: address.length)
                #expect(phoneRoutes.contains { $0.table == .main && $0.destination == subnet && $0.type == .unreachable })
                #expect(phoneRules.contains(RoutingRule(family: address.address.family, priority: interface.rulePriority,
                                                        source: IPPrefix(address.address, length: address.address.bitWidth), table: interface.table)))
            }
        }

        // A path monitor in the phone sees Wi-Fi first, and cellular (expensive) when Wi-Fi loses carrier.
        let monitor = NetworkPathMonitor(namespace: phoneNamespace)
        let paths = Recorder<NetworkPath>()
        let subscription = monitor.onUpdate { paths.append($0) }
        defer { subscription.cancel(); monitor.cancel() }
        try monitor.start()
        #expect(monitor.currentPath?.primaryInterface?.name == "wifi")
        #expect(monitor.currentPath?.primaryInterface?.type == .wifi)
        #expect(monitor.currentPath?.supportsIPv4 == true && monitor.currentPath?.supportsIPv6 == true)
        let server = try #require(topology.socket(of: "server"))
        try server.setLink(index: try #require(try server.link(named: "wifi")).index, up: false)
        let cellular = paths.waitForLast { $0.primaryInterface?.name == "cell" }
        #expect(cellular?.isExpensive == true)
        monitor.cancel()

        topology.teardown()
        #expect(NetworkNamespace.list().filter { $0.hasPrefix("roam-\(runID)-") }.isEmpty)
        #expect(try RunRegistry.root(creating: false).note(of: runID).process == nil)
        #expect(try HostNetworkState.capture() == before)
    }

    @Test func cleanupRemovesWhatADeadRunLeft() throws {
        let runID = RunRegistry.newRunID()
        let topology = try Topology.build(try TopologyPlan(scenario: walkOutOfHome(), runID: runID))
        defer { topology.teardown() }
        // A process inside the phone's namespace, as a workload would be.
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sh")
        sleeper.arguments = ["-c", "exec ip netns exec roam-\(runID)-phone sleep 120"]
        try sleeper.run()
        var sleeperInside = false
        for _ in 0..<200 where !sleeperInside {
            var target = stat(), info = stat()
            stat("/run/netns/roam-\(runID)-phone", &target)
            sleeperInside = stat("/proc/\(sleeper.processIdentifier)/ns/net", &info) == 0 && info.st_ino == target.st_ino
            if !sleeperInside { usleep(10_000) } // waiting for ip to enter the namespace, bounded
        }
        #expect(sleeperInside)

        #expect(!Leftovers.find().contains("roam-\(runID)-phone"), "a live run is not a leftover")
        // The owner dies: its registration now names a process that is gone.
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.run()
        dead.waitUntilExit()
        // A note of the dead process, with a start time it never had: pid and time must both match.
        let registry = try RunRegistry.root(creating: false)
        registry.unregister(runID)
        try registry.register(runID, as: ProcessIdentity(pid: dead.processIdentifier, startTime: 1))

        let report = Leftovers.remove()
        #expect(Set(report.namespaces).isSuperset(of: ["roam-\(runID)-phone", "roam-\(runID)-server"]))
        #expect(report.processes.contains(sleeper.processIdentifier))
        sleeper.waitUntilExit()
        #expect(sleeper.terminationReason == .uncaughtSignal)
        #expect(NetworkNamespace.list().filter { $0.hasPrefix("roam-\(runID)-") }.isEmpty)
        #expect(try RunRegistry.root(creating: false).note(of: runID).process == nil)
    }
}
