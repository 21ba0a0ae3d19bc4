import Multipath
import Netlink
import PathMonitor
import Testing

/// The handover rules on a manual clock: each event and the actions it asks for. No sockets, no
/// root: what ``HandoverConnection`` and the simulator's workloads both carry out.
@Suite struct HandoverStateMachineTests {
    typealias Machine = HandoverStateMachine

    static let wifi = NetworkInterface(name: "wifi", index: 2, type: .wifi, addresses: [IPPrefix("198.18.1.2/24")!])
    static let cell = NetworkInterface(name: "cell", index: 3, type: .cellular, isExpensive: true, addresses: [IPPrefix("198.18.2.2/24")!])

    static func path(_ interfaces: [NetworkInterface]) -> NetworkPath {
        NetworkPath(status: interfaces.isEmpty ? .unsatisfied : .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces,
                    primaryInterface: interfaces.first, isExpensive: interfaces.first?.isExpensive ?? false, isConstrained: false,
                    supportsIPv4: true, supportsIPv6: false, supportsDNS: false, gateways: [])
    }

    static let both = path([wifi, cell])
    static let cellOnly = path([cell])

    func ms(_ value: Int64) -> Duration { .milliseconds(value) }

    /// A machine that saw both paths and connected over `interface` at time zero.
    func connected(over interface: String = "wifi", transport: Machine.Transport = .tcp, policy: PathPolicy = PathPolicy(),
                   configure: (inout Machine.Configuration) -> Void = { _ in }) -> Machine {
        var configuration = Machine.Configuration()
        configure(&configuration)
        var machine = Machine(configuration: configuration, policy: policy)
        _ = machine.handle(.pathUpdated(Self.both, at: .zero))
        #expect(machine.handle(.connected(interface: interface, transport: transport, at: .zero)) == [])
        return machine
    }

    // MARK: Stalls

    @Test func theStallThresholdFollowsTheSmoothedRTTWithinItsBounds() {
        let machine = Machine()
        #expect(machine.stallThreshold(smoothedRTT: nil) == ms(600), "100 ms assumed: 4 × 100 + 200")
        #expect(machine.stallThreshold(smoothedRTT: ms(10)) == ms(300), "the floor")
        #expect(machine.stallThreshold(smoothedRTT: ms(50)) == ms(400))
        #expect(machine.stallThreshold(smoothedRTT: .seconds(5)) == .seconds(10), "the ceiling")
    }

    @Test func aConnectionSilentForTheThresholdWhileDataIsAwaitedIsLeftAndItsInterfaceHeldDown() {
        var machine = connected()
        _ = machine.handle(.received(bytes: 1000, at: ms(100)))
        // 50 ms RTT: 400 ms threshold, from the last data.
        #expect(machine.nextDeadline(smoothedRTT: ms(50), awaitingDataSince: ms(50)) == ms(500))
        #expect(machine.handle(.tick(at: ms(499), smoothedRTT: ms(50), awaitingDataSince: ms(50))) == [])
        // Expecting nothing, silence is no stall.
        #expect(machine.handle(.tick(at: ms(5000), smoothedRTT: ms(50), awaitingDataSince: nil)) == [])
        let actions = machine.handle(.tick(at: ms(5000), smoothedRTT: ms(50), awaitingDataSince: ms(4600)))
        #expect(actions == [.markStalled(interface: "wifi", holdDown: .seconds(1)),
                            .move(.stalled(interface: "wifi", threshold: ms(400)))])
        #expect(machine.connection == nil)
        #expect(machine.racePath(at: ms(5500))?.availableInterfaces.map(\.name) == ["cell", "wifi"], "raced last while held down")
        #expect(machine.racePath(at: ms(5500))?.primaryInterface?.name == "cell")
        #expect(machine.racePath(at: ms(6000))?.availableInterfaces.map(\.name) == ["wifi", "cell"], "the hold-down passed")
    }

    @Test func theHoldDownDoublesWithEachStallUpToItsCeiling() {
        var machine = connected()
        var holds: [Duration] = []
        var now = Duration.zero
        for _ in 0..<7 {
            _ = machine.handle(.connected(interface: "wifi", transport: .tcp, at: now))
            for action in machine.handle(.tick(at: now + .seconds(1), smoothedRTT: nil, awaitingDataSince: now)) {
                if case .markStalled(_, let hold) = action { holds.append(hold) }
            }
            now += .seconds(2)
        }
        #expect(holds == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
    }

    @Test func aNewConnectionRestartsTheStallClock() {
        var machine = connected { $0.movesBack = false }
        // Waiting since 0; a new connection at 1 s is not stalled at 1.2 s.
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: .seconds(1)))
        #expect(machine.handle(.tick(at: ms(1200), smoothedRTT: nil, awaitingDataSince: .zero)) == [])
        #expect(machine.handle(.tick(at: ms(1600), smoothedRTT: nil, awaitingDataSince: .zero)).contains {
            if case .move(.stalled) = $0 { true } else { false }
        })
    }

    // MARK: Path lost

    @Test func aTCPConnectionLeavesAnInterfaceThatLeftThePathAtOnceWithoutHoldingItDown() {
        var machine = connected()
        #expect(machine.handle(.pathUpdated(Self.cellOnly, at: ms(10))) == [.move(.pathLost(interface: "wifi"))])
        #expect(machine.stalledPaths.isHeldDown("wifi", at: ms(20)) == false)
    }

    // MARK: Connectivity

    static func with(_ interface: NetworkInterface, _ state: InterfaceConnectivity.State) -> NetworkInterface {
        var changed = interface
        changed.connectivity = InterfaceConnectivity(state: state)
        return changed
    }

    /// A Wi-Fi whose connectivity check finds a portal or nothing is left at once while cellular
    /// is validated (as Wi-Fi Assist leaves a Wi-Fi that passes nothing), and not moved back to
    /// until it validates; without a validated other, or with the rule off, the flow stays.
    @Test func aConnectionLeavesAnInterfaceThatLostItsInternetWhileAnotherIsValidated() {
        var machine = connected()
        let lost = Self.path([Self.with(Self.wifi, .limited), Self.with(Self.cell, .unknown)])
        #expect(machine.handle(.pathUpdated(lost, at: ms(10))) == [], "no validated interface to go to")
        let portal = Self.path([Self.with(Self.wifi, .portal), Self.with(Self.cell, .validated)])
        #expect(machine.handle(.pathUpdated(portal, at: ms(20))) == [.move(.connectivityLost(interface: "wifi", connectivity: .portal))])
        #expect(Machine.Reason.connectivityLost(interface: "wifi", connectivity: .portal).description
            == "wifi is behind a captive portal while another interface is validated")
        // On cellular now: the free Wi-Fi is not probed while it is a portal, only once it validates.
        #expect(machine.handle(.connected(interface: "cell", transport: .tcp, at: ms(30))) == [])
        #expect(!machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)).contains { if case .startProbe = $0 { true } else { false } })
        let passed = Self.path([Self.with(Self.wifi, .validated), Self.with(Self.cell, .validated)])
        #expect(machine.handle(.pathUpdated(passed, at: .seconds(6))).contains(.startProbe(interface: "wifi")))
        // The rule off: the flow stays where it is.
        var staying = connected(policy: PathPolicy(validation: .ignore))
        #expect(staying.handle(.pathUpdated(portal, at: ms(20))) == [])
    }

    /// A phone on validated cellular whose free Wi-Fi appears: not probed while its check runs
    /// (`unknown`) nor while it is a portal; once it validates, probed and moved to, over TCP as
    /// over MPTCP whose subflows Roam controls (the Wi-Fi was never demoted: a hotel's, joined
    /// after the flow began).
    @Test(arguments: [Machine.Transport.tcp, .mptcp])
    func aFreeNetworkJoinedLaterIsMovedToOnlyOnceValidated(_ transport: Machine.Transport) {
        var machine = Machine(configuration: { var c = Machine.Configuration(); c.controlsSubflows = transport == .mptcp; return c }())
        _ = machine.handle(.pathUpdated(Self.path([Self.with(Self.cell, .validated)]), at: .zero))
        _ = machine.handle(.connected(interface: "cell", transport: transport, at: .zero))
        func probes(_ actions: [Machine.Action]) -> [String] {
            actions.compactMap { if case .startProbe(let interface) = $0 { interface } else { nil } }
        }
        for state in [InterfaceConnectivity.State.unknown, .portal] {
            let joined = Self.path([Self.with(Self.wifi, state), Self.with(Self.cell, .validated)])
            #expect(probes(machine.handle(.pathUpdated(joined, at: .seconds(1)))).isEmpty, "\(state)")
            #expect(probes(machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil))).isEmpty, "\(state)")
        }
        let passed = Self.path([Self.with(Self.wifi, .validated), Self.with(Self.cell, .validated)])
        #expect(probes(machine.handle(.pathUpdated(passed, at: .seconds(6)))) == ["wifi"])
        var now = Duration.seconds(6)
        var moved: [Machine.Action] = []
        for _ in 0..<5 where moved.isEmpty {
            moved = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now)).filter {
                switch $0 {
                case .move, .switchSubflows: true
                default: false
                }
            }
            now += .seconds(1)
            _ = machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil))
        }
        switch (transport, moved.first) {
        case (.tcp, .move(.betterPath(let interface, _))?): #expect(interface == "wifi")
        case (.mptcp, .switchSubflows(let interface, _)?): #expect(interface == "wifi")
        default: Issue.record("\(transport): no move to the Wi-Fi: \(moved)")
        }
    }

    @Test func overMPTCPThePathManagerMovesTheSubflowsWhenAnInterfaceLeaves() {
        var machine = connected(transport: .mptcp)
        #expect(machine.handle(.pathUpdated(Self.cellOnly, at: ms(10))) == [])
        #expect(machine.connection != nil)
    }

    @Test func aConnectionTheDriverKeptAfterAMoveIsJudgedAgainFromThen() {
        var machine = connected()
        _ = machine.handle(.tick(at: ms(1000), smoothedRTT: ms(50), awaitingDataSince: ms(500)))
        #expect(machine.connection == nil)
        #expect(machine.handle(.stayed(at: ms(1200))) == [])
        #expect(machine.connection?.interface == "wifi" && machine.connection?.since == ms(1200))
        #expect(machine.connections == 1, "staying is not a new connection")
        // The stall clock starts again at the stay, not at the old wait.
        #expect(machine.handle(.tick(at: ms(1500), smoothedRTT: ms(50), awaitingDataSince: ms(500))) == [])
        #expect(machine.handle(.tick(at: ms(1600), smoothedRTT: ms(50), awaitingDataSince: ms(500))).contains(.markStalled(interface: "wifi", holdDown: .seconds(2))))
        // Nothing to stay on without a move.
        var fresh = connected()
        #expect(fresh.handle(.stayed(at: ms(10))) == [] && fresh.connection?.since == .zero)
    }

    // MARK: Moving back

    @Test func onAnExpensivePathTheFreeOneIsProbedAndTheFlowMovesBackAfterThreeProbesInARow() {
        var machine = connected(over: "cell")
        #expect(machine.handle(.tick(at: ms(10), smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
        // One probe at a time.
        #expect(machine.handle(.tick(at: ms(20), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.handle(.probeFinished(interface: "wifi", connected: true, at: ms(50))) == [])
        // Within a streak the next probe goes 200 ms later.
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == ms(250))
        #expect(machine.handle(.tick(at: ms(249), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.handle(.tick(at: ms(250), smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
        // A failure ends the streak: the next probe waits the full second.
        #expect(machine.handle(.probeFinished(interface: "wifi", connected: false, at: ms(300))) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == ms(1250))
        var now = ms(1250)
        var actions: [Machine.Action] = []
        for _ in 0..<3 {
            #expect(machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
            actions = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(10)))
            now += ms(210)
        }
        #expect(actions == [.move(.betterPath(interface: "wifi", probes: 3))])
    }

    @Test func aProbeThatTakesLongerThanItsIntervalIsAbandoned() {
        var machine = connected(over: "cell")
        #expect(machine.handle(.tick(at: .zero, smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == .seconds(1))
        #expect(machine.handle(.tick(at: ms(999), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.handle(.tick(at: .seconds(1), smoothedRTT: nil, awaitingDataSince: nil)) == [.abandonProbe(interface: "wifi")])
        // Its late answer counts for nothing.
        #expect(machine.handle(.probeFinished(interface: "wifi", connected: true, at: ms(1100))) == [])
    }

    @Test func aHeldDownInterfaceIsNotProbedUntilItsHoldDownEnds() {
        var machine = connected()
        _ = machine.handle(.tick(at: ms(600), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(machine.stalledPaths.isHeldDown("wifi", at: ms(700)))
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: ms(700)))
        #expect(machine.handle(.tick(at: ms(800), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == ms(1600), "when Wi-Fi's hold-down ends")
        #expect(machine.handle(.tick(at: ms(1600), smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
    }

    @Test func aFreePathIsNotProbedFromAnotherFreeOneOrWhenMovingBackIsOff() {
        let second = NetworkInterface(name: "eth", index: 4, type: .wiredEthernet, addresses: [IPPrefix("198.18.3.2/24")!])
        var machine = Machine()
        _ = machine.handle(.pathUpdated(Self.path([Self.wifi, second]), at: .zero))
        _ = machine.handle(.connected(interface: "eth", transport: .tcp, at: .zero))
        #expect(machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        var stays = connected(over: "cell") { $0.movesBack = false }
        #expect(stays.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)) == [])
    }

    @Test func aMoveBackThatEndsOnAnotherInterfaceHoldsTheCheaperOneDownAgain() {
        var machine = connected(over: "cell") { $0.probesToReturn = 1 }
        _ = machine.handle(.tick(at: .zero, smoothedRTT: nil, awaitingDataSince: nil))
        #expect(machine.handle(.probeFinished(interface: "wifi", connected: true, at: ms(10))) == [.move(.betterPath(interface: "wifi", probes: 1))])
        // The race went to cellular after all: the probe was luck.
        #expect(machine.handle(.connected(interface: "cell", transport: .tcp, at: ms(100))) == [.markStalled(interface: "wifi", holdDown: .seconds(1))])
        #expect(machine.handovers == 0, "cellular to cellular")
    }

    @Test func aPathThatStalledAgainMustAnswerMoreProbesInARow() {
        var machine = connected()
        // Wi-Fi stalls twice (at 0.6 s and, back on it, at 3.6 s).
        _ = machine.handle(.tick(at: ms(600), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(machine.probesRequired(for: "wifi") == 3)
        _ = machine.handle(.connected(interface: "wifi", transport: .tcp, at: .seconds(3)))
        _ = machine.handle(.tick(at: ms(3600), smoothedRTT: nil, awaitingDataSince: .seconds(3)))
        #expect(machine.probesRequired(for: "wifi") == 6)
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: ms(3700)))
        // Its 2 s hold-down ends at 5.6 s; then six probes in a row, not three.
        var now = ms(5600)
        var moves: [Int] = []
        for probe in 1...6 {
            #expect(machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")], "probe \(probe)")
            if machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(5))).contains(.move(.betterPath(interface: "wifi", probes: 6))) {
                moves.append(probe)
            }
            now += ms(205)
        }
        #expect(moves == [6])
        // The evidence asked for stops growing at four times the first.
        var often = connected()
        for stall in 0..<6 {
            let start = Duration.seconds(Int64(stall) * 100)
            _ = often.handle(.connected(interface: "wifi", transport: .tcp, at: start))
            _ = often.handle(.tick(at: start + .seconds(1), smoothedRTT: nil, awaitingDataSince: start))
        }
        #expect(often.stalledPaths.stalls(of: "wifi") == 6)
        #expect(often.probesRequired(for: "wifi") == 12)
    }

    @Test func aPathTheStreamRuleFoundTooPoorIsNotProbedUntilTheEvidenceIsOld() {
        var machine = connected { $0.stream = .init(bytesPerSecond: 500_000, buffer: .seconds(2)) }
        var now = Duration.zero
        while now < .seconds(2) {
            now += ms(100)
            _ = machine.handle(.received(bytes: 10_000, at: now))
        }
        #expect(machine.handle(.playout(buffered: ms(500), at: now)).contains(.markStalled(interface: "wifi", holdDown: .seconds(1))))
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: now + ms(100)))
        // The hold-down ends at 3 s, the evidence at 12 s: no probe before.
        #expect(machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == .seconds(12))
        #expect(machine.handle(.tick(at: .seconds(12), smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
    }

    /// The same over MPTCP with subflow control: the subflow the stream rule left is not probed
    /// (and so does not take the data back) while the evidence stands.
    @Test func controllingSubflowsAPathTheStreamRuleFoundTooPoorIsNotProbedUntilTheEvidenceIsOld() {
        var machine = connected(transport: .mptcp) {
            $0.stream = .init(bytesPerSecond: 500_000, buffer: .seconds(2))
            $0.controlsSubflows = true
            $0.usesPathManager = true
        }
        var now = Duration.zero
        while now < .seconds(2) {
            now += ms(100)
            _ = machine.handle(.received(bytes: 10_000, at: now))
        }
        let actions = machine.handle(.playout(buffered: ms(500), at: now))
        #expect(actions.first == .markStalled(interface: "wifi", holdDown: .seconds(1)), "\(actions)")
        #expect(machine.currentInterface == "cell")
        // Cellular delivers; the hold-down ends at 3 s, the evidence at 12 s: no probe before.
        #expect(machine.handle(.received(bytes: 100_000, at: .seconds(5))) == [])
        #expect(machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == .seconds(12))
        #expect(machine.handle(.tick(at: .seconds(12), smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
    }

    // MARK: MPTCP

    @Test func withAPathManagerAStalledInterfaceIsDemotedAndRestoredOnceItProvesItself() {
        var machine = connected(transport: .mptcp) { $0.usesPathManager = true }
        _ = machine.handle(.received(bytes: 100, at: ms(10)))
        _ = machine.handle(.subflowsDelivered(["wifi": 100], at: ms(10)))
        let stalled = machine.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(stalled.first == .markStalled(interface: "wifi", holdDown: .seconds(1)))
        #expect(machine.demoted == ["wifi"])
        _ = machine.handle(.connected(interface: "cell", transport: .mptcp, at: ms(800)))
        #expect(machine.handle(.tick(at: ms(900), smoothedRTT: nil, awaitingDataSince: nil)) == [], "held down")
        var now = ms(1700)
        var last: [Machine.Action] = []
        for _ in 0..<3 {
            #expect(machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
            last = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(5)))
            now += ms(205)
        }
        #expect(last == [.restore(interface: "wifi")])
        #expect(machine.demoted.isEmpty)
        #expect(machine.connection != nil, "restoring moves no connection")
    }

    @Test func controllingSubflowsAStallOrALostPathSwitchesTheDataWithoutReconnecting() {
        var machine = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        #expect(machine.currentInterface == "wifi")
        let stalled = machine.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(stalled == [.markStalled(interface: "wifi", holdDown: .seconds(1)),
                            .switchSubflows(to: "cell", .stalled(interface: "wifi", threshold: ms(600)))])
        #expect(machine.connection != nil && machine.currentInterface == "cell" && machine.handovers == 1)
        #expect(machine.demoted == ["wifi"])
        // The stall clock starts again on the new subflow.
        #expect(machine.handle(.tick(at: ms(1200), smoothedRTT: nil, awaitingDataSince: .zero)) == [])
        // Wi-Fi answers three probes once its hold-down is over: the data goes back to it.
        var now = ms(1700)
        var last: [Machine.Action] = []
        for _ in 0..<3 {
            _ = machine.handle(.received(bytes: 100, at: now))
            #expect(machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil)) == [.startProbe(interface: "wifi")])
            last = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(5)))
            now += ms(205)
        }
        #expect(last == [.restore(interface: "wifi"), .switchSubflows(to: "wifi", .betterPath(interface: "wifi", probes: 3))])
        #expect(machine.currentInterface == "wifi" && machine.handovers == 2)
        // Wi-Fi leaves the path: straight to cellular, and Wi-Fi must prove itself again.
        #expect(machine.handle(.pathUpdated(Self.cellOnly, at: .seconds(3))) == [.switchSubflows(to: "cell", .pathLost(interface: "wifi"))])
        #expect(machine.demoted == ["wifi"] && !machine.stalledPaths.isHeldDown("wifi", at: ms(3001)))
        // With nothing else left, a stall reconnects.
        let alone = machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: .seconds(3)))
        #expect(alone.last == .move(.stalled(interface: "cell", threshold: ms(600))), "\(alone)")
    }

    /// Head-of-line blocking after a switch: the cellular subflow brings data but the app gets
    /// none (MPTCP waits for a gap the Wi-Fi left). Cellular is not judged stalled while its
    /// subflow delivers; if the gap is not resent within the wait, a new connection is made and
    /// nothing is held down. Then, with the Wi-Fi demoted and not yet restored, a race tries
    /// it last. A subflow that brings nothing is judged at the threshold as before.
    @Test func controllingSubflowsDataHeldBehindAGapIsNotAStallOfThePathThatBringsIt() {
        var machine = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        let switched = machine.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(switched.last == .switchSubflows(to: "cell", .stalled(interface: "wifi", threshold: ms(600))))
        // Cellular's subflow delivers every 100 ms from 800 ms; the app gets nothing.
        var now = ms(800)
        while now < ms(2300) {
            _ = machine.handle(.subflowsDelivered(["cell": 1400], at: now))
            let actions = machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: .zero))
            if now == ms(1700) {
                // Wi-Fi's hold-down is over: probed (and found wanting).
                #expect(actions == [.startProbe(interface: "wifi")])
                #expect(machine.handle(.probeFinished(interface: "wifi", connected: false, at: ms(1710))) == [])
            } else {
                #expect(actions == [], "at \(now)")
                // Not due before the wait is over (1300 ms + 1 s) or the subflow's data stops (or a probe).
                #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: .zero) == min(now + ms(600), ms(2300), now < ms(1700) ? ms(1700) : ms(2700)))
            }
            now += ms(100)
        }
        #expect(machine.currentInterface == "cell" && machine.demoted == ["wifi"])
        // Still delivering, still blocked at 2300 ms: a new connection, cellular not held down.
        let replaced = machine.handle(.tick(at: ms(2300), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(replaced == [.move(.stalled(interface: nil, threshold: ms(1600)))], "no app data for 1600 ms: \(replaced)")
        #expect(machine.connection == nil && !machine.stalledPaths.isHeldDown("cell", at: ms(2300)))
        // Wi-Fi's hold-down is over, but it is demoted until probes restore it: raced last.
        #expect(!machine.stalledPaths.isHeldDown("wifi", at: ms(2300)))
        #expect(machine.racePath(at: ms(2300))?.availableInterfaces.map(\.name) == ["cell", "wifi"])

        // On the new connection over cellular, a subflow that brings nothing is a stall at the threshold.
        _ = machine.handle(.connected(interface: "cell", transport: .mptcp, family: .inet, at: ms(2500)))
        _ = machine.handle(.subflowsDelivered(["cell": 1400], at: ms(2600)))
        let blocked = machine.handle(.tick(at: ms(3150), smoothedRTT: nil, awaitingDataSince: ms(2500)))
        #expect(!blocked.contains { if case .markStalled = $0 { true } else if case .move = $0 { true } else { false } },
                "delivered 550 ms ago: still blocked: \(blocked)")
        let stalled = machine.handle(.tick(at: ms(3250), smoothedRTT: nil, awaitingDataSince: ms(2500)))
        #expect(stalled.contains(.markStalled(interface: "cell", holdDown: .seconds(1))), "\(stalled)")
    }

    /// A Wi-Fi the monitor calls minimal (at the edge of its range) is not probed back to while
    /// cellular's link is good, over MPTCP (restoring a demoted interface) and over TCP (moving
    /// back to a free one). Over MPTCP, a Wi-Fi the flow left for a stall is not probed either
    /// while it grades moderate (still below cellular's good), only once it grades as well;
    /// over TCP a moderate free primary is.
    @Test func aLinkThatBarelyWorksIsNotMovedBackToWhileTheCurrentOneIsBetter() {
        var weak = Self.wifi, good = Self.cell
        weak.linkQuality = .minimal
        good.linkQuality = .good
        var better = weak, recovered = weak
        better.linkQuality = .moderate
        recovered.linkQuality = .good
        // MPTCP: Wi-Fi demoted by a stall, its hold-down over at 1700 ms.
        var machine = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        _ = machine.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(machine.demoted == ["wifi"])
        _ = machine.handle(.pathUpdated(Self.path([weak, good]), at: ms(800)))
        #expect(machine.handle(.tick(at: .seconds(3), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == nil, "nothing to probe")
        #expect(machine.handle(.pathUpdated(Self.path([better, good]), at: ms(3100))) == [], "moderate, below cellular's good")
        #expect(machine.handle(.tick(at: .seconds(5), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(machine.nextDeadline(smoothedRTT: nil, awaitingDataSince: nil) == nil, "nothing to probe")
        #expect(machine.handle(.pathUpdated(Self.path([recovered, good]), at: ms(5100))) == [.startProbe(interface: "wifi")])
        // Left for a stall, then gone and back moderate: probed (the stall says nothing of it now).
        var gone = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        _ = gone.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(gone.handle(.pathUpdated(Self.path([better, good]), at: .seconds(3))) == [], "still there, below cellular")
        _ = gone.handle(.pathUpdated(Self.path([good]), at: ms(3100)))
        #expect(gone.handle(.pathUpdated(Self.path([better, good]), at: ms(3200))) == [.startProbe(interface: "wifi")])
        // Where cellular's grade is not known, a moderate Wi-Fi left for a stall is probed.
        var unknown = good
        unknown.linkQuality = .unknown
        var ungraded = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        _ = ungraded.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(ungraded.handle(.pathUpdated(Self.path([better, unknown]), at: .seconds(3))) == [.startProbe(interface: "wifi")])
        // A Wi-Fi left because it went (not for a stall) is probed when it comes back moderate.
        var lost = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        _ = lost.handle(.pathUpdated(Self.path([good]), at: ms(100)))
        #expect(lost.demoted == ["wifi"] && lost.currentInterface == "cell")
        #expect(lost.handle(.pathUpdated(Self.path([better, good]), at: .seconds(3))) == [.startProbe(interface: "wifi")])
        // TCP on cellular, Wi-Fi the free primary.
        var tcp = connected(over: "cell")
        _ = tcp.handle(.pathUpdated(Self.path([weak, good]), at: ms(100)))
        #expect(tcp.handle(.tick(at: .seconds(2), smoothedRTT: nil, awaitingDataSince: nil)) == [])
        #expect(tcp.handle(.pathUpdated(Self.path([better, good]), at: ms(2100))) == [.startProbe(interface: "wifi")])
    }

    /// A switch to an interface whose standby subflow is still being opened: the new path is
    /// given the whole threshold from when its subflow is established, not from the switch (on
    /// a slow machine the subflow can come up most of a threshold later), and is then judged as
    /// usual.
    @Test func controllingSubflowsASwitchedToPathIsTimedFromWhenItsSubflowIsEstablished() {
        var machine = connected(transport: .mptcp) { $0.controlsSubflows = true; $0.usesPathManager = true }
        let stalled = machine.handle(.tick(at: ms(700), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(stalled.last == .switchSubflows(to: "cell", .stalled(interface: "wifi", threshold: ms(600))))
        // Cellular's subflow comes up 500 ms after the switch.
        #expect(machine.handle(.subflowEstablished(interface: "cell", at: ms(1200))) == [])
        #expect(machine.handle(.tick(at: ms(1300), smoothedRTT: nil, awaitingDataSince: .zero)) == [],
                "600 ms after the switch, 100 ms after the subflow: not stalled")
        // A subflow of another interface does not restart the clock.
        #expect(machine.handle(.subflowEstablished(interface: "wifi", at: ms(1700))) == [])
        let late = machine.handle(.tick(at: ms(1800), smoothedRTT: nil, awaitingDataSince: .zero))
        #expect(late.contains(.markStalled(interface: "cell", holdDown: .seconds(1))), "\(late)")
    }

    /// An IPv4-only Wi-Fi and an IPv6-only cellular network: a subflow of a connection can only
    /// come from an interface with an address of its family, so the flow moves between them with
    /// new connections, and back to Wi-Fi after its probes.
    @Test func controllingSubflowsAnInterfaceOfAnotherFamilyIsReachedByReconnecting() {
        let cell6 = NetworkInterface(name: "cell", index: 3, type: .cellular, isExpensive: true, addresses: [IPPrefix("fd00:2::2/64")!])
        var configuration = Machine.Configuration()
        configuration.controlsSubflows = true
        configuration.usesPathManager = true
        var machine = Machine(configuration: configuration)
        _ = machine.handle(.pathUpdated(Self.path([Self.wifi, cell6]), at: .zero))
        _ = machine.handle(.connected(interface: "wifi", transport: .mptcp, family: .inet, at: .zero))
        // Wi-Fi goes: cellular cannot join an IPv4 connection.
        #expect(machine.handle(.pathUpdated(Self.path([cell6]), at: .seconds(1))) == [.move(.pathLost(interface: "wifi"))])
        #expect(machine.connection == nil)
        _ = machine.handle(.connected(interface: "cell", transport: .mptcp, family: .inet6, at: ms(1100)))
        // Wi-Fi returns: probed, then a new connection over it.
        var now = ms(2000)
        var actions = machine.handle(.pathUpdated(Self.path([Self.wifi, cell6]), at: now))
        for probe in 0..<3 {
            #expect(actions == [.startProbe(interface: "wifi")], "probe \(probe)")
            actions = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(5)))
            if probe == 2 { break }
            #expect(actions == [])
            now += ms(205)
            _ = machine.handle(.received(bytes: 100, at: now))
            actions = machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil))
        }
        #expect(actions == [.move(.betterPath(interface: "wifi", probes: 3))])
        // Back on Wi-Fi, the costly cellular it left for a better path is no path to probe and
        // return to (the flow went back and forth every second in the VM before).
        now += ms(100)
        #expect(machine.handle(.connected(interface: "wifi", transport: .mptcp, family: .inet, at: now)) == [])
        for _ in 0..<20 {
            now += ms(250)
            _ = machine.handle(.received(bytes: 100, at: now))
            #expect(machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil)) == [])
        }
        // Nor is a demoted interface that comes after the active one in the path's order: once
        // it answers, it is restored as a standby, not moved to.
        _ = machine.handle(.pathUpdated(Self.path([cell6]), at: now))
        _ = machine.handle(.connected(interface: "cell", transport: .mptcp, family: .inet6, at: now + ms(100)))
        // Wi-Fi returns, ranked after cellular (a phone set to prefer its cellular network).
        now += ms(2000)
        actions = machine.handle(.pathUpdated(Self.path([cell6, Self.wifi]), at: now))
        #expect(actions == [.startProbe(interface: "wifi")], "wifi, demoted when it was lost, is probed")
        for probe in 0..<3 {
            actions = machine.handle(.probeFinished(interface: "wifi", connected: true, at: now + ms(5)))
            if probe == 2 { break }
            now += ms(205)
            _ = machine.handle(.received(bytes: 100, at: now))
            actions = machine.handle(.tick(at: now, smoothedRTT: nil, awaitingDataSince: nil))
        }
        #expect(actions == [.restore(interface: "wifi")], "after cellular in the path's order: a standby, not a move")
        // Had cellular an IPv4 address as well, the same loss would switch subflows.
        var dual = Machine(configuration: configuration)
        _ = dual.handle(.pathUpdated(Self.both, at: .zero))
        _ = dual.handle(.connected(interface: "wifi", transport: .mptcp, family: .inet, at: .zero))
        #expect(dual.handle(.pathUpdated(Self.cellOnly, at: .seconds(1))) == [.switchSubflows(to: "cell", .pathLost(interface: "wifi"))])
    }

    // MARK: Streams

    @Test func aStreamLeavesAPathThatTricklesWhileItsBufferRunsLowButKeepsANewOneThatRefillsIt() {
        // 4 Mbit/s, 2 s of buffer.
        var machine = connected { $0.stream = .init(bytesPerSecond: 500_000, buffer: .seconds(2)) }
        var now = Duration.zero
        // Wi-Fi delivers a fifth of the bitrate for 2 s.
        while now < .seconds(2) {
            now += ms(100)
            _ = machine.handle(.received(bytes: 10_000, at: now))
        }
        #expect(machine.handle(.playout(buffered: ms(1300), at: now)) == [], "1.3 s outlasts a move at 20%")
        let actions = machine.handle(.playout(buffered: ms(1100), at: now))
        #expect(actions.first == .markStalled(interface: "wifi", holdDown: .seconds(1)))
        guard case .move(.tooPoor(let interface, let detail)) = actions.last else {
            Issue.record("no move: \(actions)")
            return
        }
        #expect(interface == "wifi" && detail.contains("20% of the bitrate"), "\(detail)")
        // Cellular, a second after connecting, refills at twice the bitrate with the buffer still low.
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: now))
        let connectedAt = now
        while now < connectedAt + ms(1200) {
            now += ms(100)
            _ = machine.handle(.received(bytes: 100_000, at: now))
        }
        #expect(machine.handle(.playout(buffered: ms(100), at: now)) == [])
    }

    @Test func aStreamThatIsSilentIsJudgedOnItsSilenceNotOnItsLastGoodSecond() {
        var machine = connected { $0.stream = .init(bytesPerSecond: 500_000, buffer: .seconds(2)) }
        var now = Duration.zero
        while now < .seconds(2) {
            now += ms(100)
            _ = machine.handle(.received(bytes: 60_000, at: now))
        }
        // Nothing more arrives; the player's tick still reports the buffer.
        now += ms(1100)
        let actions = machine.handle(.playout(buffered: ms(400), at: now))
        #expect(actions.contains { if case .move(.tooPoor) = $0 { true } else { false } }, "\(actions)")
    }

    // MARK: Accounting

    @Test func bytesAreCountedPerInterfaceAndOverExpensiveOnesAndMovesAreHandovers() {
        var machine = connected()
        _ = machine.handle(.received(bytes: 1000, at: ms(10)))
        _ = machine.handle(.pathUpdated(Self.cellOnly, at: ms(20)))
        _ = machine.handle(.connected(interface: "cell", transport: .tcp, at: ms(100)))
        _ = machine.handle(.received(bytes: 300, at: ms(110)))
        #expect(machine.bytesByInterface == ["wifi": 1000, "cell": 300])
        #expect(machine.expensiveBytes == 300)
        #expect(machine.bytesReceived == 1300)
        #expect(machine.handovers == 1 && machine.connections == 2)
    }

    @Test(arguments: [(MultipathServiceType.handover, 1), (.aggregate, 0)])
    func overMPTCPDataMovingToAnotherSubflowIsAHandoverOnlyInHandoverMode(_ type: MultipathServiceType, _ expected: Int) {
        var machine = connected(transport: .mptcp) { $0.serviceType = type }
        _ = machine.handle(.received(bytes: 300, at: ms(10)))
        _ = machine.handle(.subflowsDelivered(["wifi": 100, "cell": 3], at: ms(10)))
        // A backup subflow's few bytes do not make it the carrier.
        #expect(machine.currentInterface == "wifi")
        _ = machine.handle(.subflowsDelivered(["wifi": 2, "cell": 197], at: ms(30)))
        #expect(machine.bytesByInterface == ["wifi": 102, "cell": 200])
        #expect(machine.handovers == expected)
        #expect(machine.currentInterface == "cell")
        // With a path manager, its preference names the interface the kernel sends over.
        _ = machine.handle(.pathManagerPrefers(interface: "wifi"))
        #expect(machine.currentInterface == "wifi")
    }
}
