import Multipath
import Netlink
import PathMonitor
import ScenarioModel
import Simulator
import Testing

/// The one connectivity rule (``PathPolicy/validation``), as every driver applies it: the same
/// path gives the same race order, the same moves, the same userspace subflows and the same
/// kernel endpoints, whichever driver built the session, on a manual clock with no sockets.
/// Before, the race kept a network still being checked, the kernel's and the userspace path
/// managers dropped it, and the blocking and async connections moved by a default policy, not
/// their racer's.
@Suite struct ConnectivityRuleTests {
    typealias Role = ValidationRule.Role

    /// One row: Wi-Fi's and cellular's connectivity, the rule, and what each interface may do,
    /// written out by hand (not computed by the code under test).
    struct Row: CustomTestStringConvertible, Sendable {
        var wifi: InterfaceConnectivity.State
        var cell: InterfaceConnectivity.State
        var rule: ValidationRule
        var wifiRole: Role
        var cellRole: Role
        var testDescription: String { "wifi \(wifi), cell \(cell), \(rule): wifi \(wifiRole), cell \(cellRole)" }
    }

    static let rows: [Row] = [
        // Without validation every interface is unknown: nothing changes.
        Row(wifi: .unknown, cell: .unknown, rule: .prefer, wifiRole: .carries, cellRole: .carries),
        Row(wifi: .validated, cell: .validated, rule: .prefer, wifiRole: .carries, cellRole: .carries),
        // A hotel's Wi-Fi at its portal, cellular validated: the Wi-Fi is left out.
        Row(wifi: .portal, cell: .validated, rule: .prefer, wifiRole: .leftOut, cellRole: .carries),
        Row(wifi: .limited, cell: .validated, rule: .prefer, wifiRole: .leftOut, cellRole: .carries),
        // A Wi-Fi just joined, its check still running, cellular validated: it stands by.
        Row(wifi: .unknown, cell: .validated, rule: .prefer, wifiRole: .standsBy, cellRole: .carries),
        Row(wifi: .validated, cell: .unknown, rule: .prefer, wifiRole: .carries, cellRole: .standsBy),
        Row(wifi: .validated, cell: .limited, rule: .prefer, wifiRole: .carries, cellRole: .leftOut),
        // Nothing validated: the best there is carries, one rank below stands by.
        Row(wifi: .portal, cell: .unknown, rule: .prefer, wifiRole: .standsBy, cellRole: .carries),
        Row(wifi: .portal, cell: .limited, rule: .prefer, wifiRole: .carries, cellRole: .carries),
        // The rule off: connectivity plays no part.
        Row(wifi: .portal, cell: .validated, rule: .ignore, wifiRole: .carries, cellRole: .carries),
        Row(wifi: .unknown, cell: .validated, rule: .ignore, wifiRole: .carries, cellRole: .carries),
        // Validated only (Android's NET_CAPABILITY_VALIDATED asked for).
        Row(wifi: .unknown, cell: .validated, rule: .require, wifiRole: .leftOut, cellRole: .carries),
        Row(wifi: .portal, cell: .validated, rule: .require, wifiRole: .leftOut, cellRole: .carries),
        Row(wifi: .validated, cell: .validated, rule: .require, wifiRole: .carries, cellRole: .carries),
    ]

    static let server = IPAddress("198.19.255.2")!
    static let wifiAddress = IPAddress("198.18.1.2")!
    static let cellAddress = IPAddress("198.18.2.2")!

    /// The path as the monitor publishes it: better connectivity first, then free before costly.
    static func path(_ row: Row) -> NetworkPath {
        var wifi = HandoverStateMachineTests.wifi, cell = HandoverStateMachineTests.cell
        wifi.connectivity = InterfaceConnectivity(state: row.wifi)
        cell.connectivity = InterfaceConnectivity(state: row.cell)
        let ordered = ValidationRule.rank(row.cell) < ValidationRule.rank(row.wifi) ? [cell, wifi] : [wifi, cell]
        return HandoverStateMachineTests.path(ordered)
    }

    /// A driver: its name, the session it builds from a user's policy, and whether it controls
    /// MPTCP subflows itself.
    struct Driver: Sendable {
        var name: String
        var session: @Sendable (PathPolicy) -> HandoverSession.Configuration
        /// Whether the rule can be set through it (a scenario's workloads always `.prefer`).
        var rules: Set<ValidationRule> = Set(ValidationRule.allCases)
    }

    static let drivers: [Driver] = [
        // HandoverConnection, and AsyncHandoverConnection (which runs one).
        Driver(name: "blocking and async") { HandoverConnection.Configuration().session(policy: $0) },
        Driver(name: "MPTCP userspace (HandoverConnection)") { policy in
            var configuration = HandoverConnection.Configuration()
            configuration.controlsSubflows = true
            return configuration.session(policy: policy)
        },
        Driver(name: "simulator", session: { _ in
            ClientConnection.sessionConfiguration(for: Workload(name: "flow", kind: .bulk(size: nil), from: "server", to: "phone", mode: .handover),
                                                  usesPathManager: false, controlsSubflows: false)
        }, rules: [.prefer]),
        Driver(name: "simulator, MPTCP userspace", session: { _ in
            ClientConnection.sessionConfiguration(for: Workload(name: "flow", kind: .bulk(size: nil), from: "server", to: "phone", mode: .handover),
                                                  usesPathManager: true, controlsSubflows: true)
        }, rules: [.prefer]),
        // RoamNIO's channels: PathAdvisor with the bootstrap's policy (RoamNIO's own tests check
        // that the bootstrap hands it over unchanged).
        Driver(name: "RoamNIO (PathAdvisor)") { PathAdvisor(policy: $0).session.configuration },
    ]

    func expected(_ row: Row, _ interface: String) -> Role { interface == "wifi" ? row.wifiRole : row.cellRole }

    @Test(arguments: rows)
    func everyDriverDecidesAlike(_ row: Row) throws {
        let path = Self.path(row)
        let names = path.availableInterfaces.map(\.name)
        let carriers = names.filter { expected(row, $0) == .carries }, standing = names.filter { expected(row, $0) == .standsBy }
        let policy = PathPolicy(validation: row.rule)
        for interface in path.availableInterfaces {
            #expect(policy.role(of: interface, in: path) == expected(row, interface.name), "the rule's own answer for \(interface.name)")
        }
        for driver in Self.drivers where driver.rules.contains(row.rule) {
            let configuration = driver.session(policy)
            #expect(configuration.policy == policy, "\(driver.name) races and moves by the user's policy")
            // The race: carriers in the path's order, then those standing by; none left out.
            #expect(try configuration.policy.permittedInterfaces(of: path).get().map(\.name) == carriers + standing, "\(driver.name): race order")

            // A TCP flow on each interface: it leaves one the rule leaves out, for a carrier.
            for current in names {
                var session = HandoverSession(to: [Self.server], port: 9000, configuration: configuration)
                _ = session.handle(.pathUpdated(HandoverStateMachineTests.path([HandoverStateMachineTests.wifi, HandoverStateMachineTests.cell]), at: .zero))
                _ = session.handle(.connected(.init(interface: current, transport: .tcp, remote: Self.server), at: .zero))
                let requests = session.handle(.pathUpdated(path, at: .milliseconds(10)))
                let leaves = requests.contains { if case .leave(.connectivityLost(interface: current, _)) = $0 { true } else { false } }
                let shouldLeave = expected(row, current) == .leftOut && !carriers.filter { $0 != current }.isEmpty
                #expect(leaves == shouldLeave, "\(driver.name): a flow on \(current) \(shouldLeave ? "leaves" : "stays"): \(requests)")
            }

            // A TCP flow on cellular while the free Wi-Fi is the path's first: probed (to move
            // back) only when the Wi-Fi carries.
            if names.first == "wifi", configuration.rules.movesBack {
                var session = HandoverSession(to: [Self.server], port: 9000, configuration: configuration)
                _ = session.handle(.pathUpdated(HandoverStateMachineTests.path([HandoverStateMachineTests.cell]), at: .zero))
                _ = session.handle(.connected(.init(interface: "cell", transport: .tcp, remote: Self.server), at: .zero))
                var requests = session.handle(.pathUpdated(path, at: .seconds(5)))
                requests += session.handle(.tick(at: .seconds(6), transport: nil, awaitingDataSince: nil))
                // Probed, or (cellular left out) left at once for a new race.
                let probes = requests.contains { if case .probe(let interface, _, _) = $0 { interface.name == "wifi" } else { false } }
                let leaves = requests.contains { if case .leave = $0 { true } else { false } }
                #expect((probes || leaves) == (row.wifiRole == .carries), "\(driver.name): moving back to the Wi-Fi: \(requests)")
                #expect(leaves == (row.cellRole == .leftOut), "\(driver.name): leaving the cellular: \(requests)")
            }

            // Subflows Roam opens itself: a backup from every other interface that carries, none
            // from one standing by or left out.
            if configuration.rules.controlsSubflows, let active = carriers.first {
                var session = HandoverSession(to: [Self.server], port: 9000, configuration: configuration)
                _ = session.handle(.pathUpdated(path, at: .zero))
                let local = active == "wifi" ? Self.wifiAddress : Self.cellAddress
                let requests = session.handle(.connected(.init(interface: active, transport: .mptcp, local: local, remote: Self.server, token: 7), at: .zero))
                let opened = requests.compactMap { request -> (String, Bool)? in
                    if case .subflow(.open(_, _, let interface, _, _, let backup, _, _)) = request { (interface, backup) } else { nil }
                }
                let others = names.filter { $0 != active && expected(row, $0) == .carries }
                #expect(opened.map(\.0) == others && opened.allSatisfy(\.1), "\(driver.name): subflows besides \(active): \(opened)")
            }
        }

        // The kernel's path manager (MPTCPPathManager, as the simulator and HandoverConnection
        // with a path manager use it): endpoints for the carriers only, none a backup in
        // aggregate, all but the first in handover.
        let aggregate = MPTCPPathManager.endpoints(for: path, serviceType: .aggregate, policy: policy)
        #expect(aggregate.map(\.interface) == carriers, "kernel endpoints: \(aggregate)")
        #expect(aggregate.allSatisfy { !$0.endpoint.flags.contains(.backup) }, "aggregate: \(aggregate)")
        let handover = MPTCPPathManager.endpoints(for: path, serviceType: .handover, policy: policy)
        #expect(handover.map(\.interface) == carriers)
        #expect(handover.filter { !$0.endpoint.flags.contains(.backup) }.map(\.interface) == Array(carriers.prefix(1)), "handover: one carries")
    }

    /// The simulator's kernel path manager follows the workload's `prohibit:`, as its races do.
    @Test func theSimulatorsEndpointsFollowTheWorkloadsPolicy() {
        var workload = Workload(name: "backup", kind: .bulk(size: nil), from: "server", to: "phone", mode: .aggregate)
        workload.prohibits = [.expensive]
        let path = HandoverStateMachineTests.path([HandoverStateMachineTests.wifi, HandoverStateMachineTests.cell])
        #expect(MPTCPPathManager.endpoints(for: path, serviceType: .aggregate, policy: workload.pathPolicy).map(\.interface) == ["wifi"])
        let configuration = ClientConnection.sessionConfiguration(for: workload, usesPathManager: true, controlsSubflows: false)
        #expect(configuration.policy == workload.pathPolicy)
    }
}
