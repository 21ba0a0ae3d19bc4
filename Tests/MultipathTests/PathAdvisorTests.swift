import Multipath
import Netlink
import PathMonitor
import Testing

/// The advice RoamNIO fires into a channel's pipeline, on a manual clock: each event, the
/// advice it gives, and none where none is due. No sockets, no root.
@Suite struct PathAdvisorTests {
    typealias Advisor = PathAdvisor
    static let wifi = HandoverStateMachineTests.wifi
    static let cell = HandoverStateMachineTests.cell
    static let both = HandoverStateMachineTests.both
    static let cellOnly = HandoverStateMachineTests.cellOnly
    static let peer = IPAddress("198.19.255.2")!

    func ms(_ value: Int64) -> Duration { .milliseconds(value) }

    /// An advisor that saw both interfaces and connected over `interface` at time zero.
    func connected(over interface: String = "wifi", transport: HandoverStateMachine.Transport = .tcp, path: NetworkPath = Self.both,
                   policy: PathPolicy = PathPolicy()) -> Advisor {
        var advisor = Advisor(policy: policy, peer: [Self.peer], port: 9000)
        #expect(advisor.handle(.pathUpdated(path, at: .zero)) == [.advise(.pathChanged(path))])
        #expect(advisor.handle(.connected(interface: interface, transport: transport, family: .inet, at: .zero)) == [])
        return advisor
    }

    func advice(_ actions: [Advisor.Action]) -> [Advisor.Advice] {
        actions.compactMap { if case .advise(let advice) = $0 { advice } else { nil } }
    }

    @Test func anIdleConnectionIsNeverJudgedAndNothingIsSaidWithoutAReason() {
        var advisor = connected()
        #expect(advisor.nextDeadline(smoothedRTT: ms(50)) == nil, "nothing timed: free Wi-Fi, nothing awaited")
        #expect(advisor.handle(.tick(at: .seconds(60), smoothedRTT: ms(50))) == [])
        #expect(advisor.isViable)
        // Answered in time: still nothing.
        _ = advisor.handle(.sent(bytes: 100, at: .seconds(61)))
        #expect(advisor.nextDeadline(smoothedRTT: ms(50)) == .seconds(61) + ms(400))
        #expect(advisor.handle(.received(bytes: 2000, at: .seconds(61) + ms(300))) == [])
        #expect(advisor.handle(.tick(at: .seconds(70), smoothedRTT: ms(50))) == [])
    }

    @Test func aStalledRequestMakesTheConnectionUnviableUntilDataComesAndPointsToTheOtherInterface() {
        var advisor = connected()
        _ = advisor.handle(.sent(bytes: 100, at: ms(100)))
        #expect(advisor.handle(.tick(at: ms(499), smoothedRTT: ms(50))) == [])
        let stalled = advisor.handle(.tick(at: ms(500), smoothedRTT: ms(50)))
        let reason = HandoverStateMachine.Reason.stalled(interface: "wifi", threshold: ms(400))
        #expect(stalled == [.heldDown(interface: "wifi", holdDown: .seconds(1)),
                            .advise(.viability(isViable: false, reason: reason)),
                            .advise(.betterPathAvailable(interface: "cell", reason: reason))])
        // Said once: later ticks neither repeat it nor hold the interface down again.
        #expect(advisor.handle(.tick(at: ms(900), smoothedRTT: ms(50))) == [])
        #expect(advisor.handle(.tick(at: ms(1400), smoothedRTT: ms(50))) == [])
        #expect(advisor.stalledPaths.stalls(of: "wifi") == 1)
        // Data again: viable, and no better path.
        #expect(advice(advisor.handle(.received(bytes: 10, at: ms(1500)))) == [.viability(isViable: true, reason: nil), .betterPathUnavailable])
        #expect(advisor.isViable && advisor.betterInterface == nil)
    }

    @Test func anInterfaceThatLeavesThePathIsNotViableUntilItIsBack() {
        var advisor = connected()
        let lost = HandoverStateMachine.Reason.pathLost(interface: "wifi")
        #expect(advisor.handle(.pathUpdated(Self.cellOnly, at: ms(100))) == [
            .advise(.pathChanged(Self.cellOnly)), .advise(.viability(isViable: false, reason: lost)),
            .advise(.betterPathAvailable(interface: "cell", reason: lost)),
        ])
        #expect(advisor.stalledPaths.stalls(of: "wifi") == 0, "a lost path is no stall")
        #expect(advisor.handle(.pathUpdated(Self.both, at: ms(2000))) == [
            .advise(.pathChanged(Self.both)), .advise(.viability(isViable: true, reason: nil)), .advise(.betterPathUnavailable),
        ])
    }

    @Test func withNothingElseToTakeThereIsNoBetterPath() {
        // Cellular is the only other interface and the policy forbids expensive ones.
        var advisor = connected(policy: PathPolicy(allowsExpensive: false))
        #expect(advice(advisor.handle(.pathUpdated(Self.cellOnly, at: ms(100)))) == [
            .pathChanged(Self.cellOnly), .viability(isViable: false, reason: .pathLost(interface: "wifi")),
        ])
    }

    @Test func overCellularAFreeWiFiThatAnswersThreeProbesInARowIsABetterPathUntilItGoes() throws {
        var advisor = connected(over: "cell")
        // The probe is due at once, then one after another 200 ms apart.
        var now = ms(0)
        for probe in 1...3 {
            let deadline = try #require(advisor.nextDeadline(smoothedRTT: ms(50)))
            now = max(now, deadline)
            #expect(advisor.handle(.tick(at: now, smoothedRTT: ms(50))) == [.startProbe(interface: "wifi")], "probe \(probe)")
            now += ms(30)
            let finished = advisor.handle(.probeFinished(interface: "wifi", connected: true, at: now))
            if probe < 3 {
                #expect(finished == [])
            } else {
                #expect(finished == [.advise(.betterPathAvailable(interface: "wifi", reason: .betterPath(interface: "wifi", probes: 3)))])
            }
        }
        #expect(advisor.isViable, "moving back is advice, not a failure")
        // Wi-Fi gone: the better path is too.
        let gone = advice(advisor.handle(.pathUpdated(Self.cellOnly, at: now + ms(100))))
        #expect(gone == [.pathChanged(Self.cellOnly), .betterPathUnavailable])
    }

    @Test func aProbeThatFailsBreaksTheStreak() throws {
        var advisor = connected(over: "cell")
        var now = ms(0)
        for connects in [true, true, false, true, true] {
            now = max(now, try #require(advisor.nextDeadline(smoothedRTT: ms(50))))
            #expect(advisor.handle(.tick(at: now, smoothedRTT: ms(50))) == [.startProbe(interface: "wifi")])
            now += ms(30)
            #expect(advisor.handle(.probeFinished(interface: "wifi", connected: connects, at: now)) == [])
        }
        #expect(advisor.betterInterface == nil)
    }

    @Test func anExpensiveWiFiIsNotProbedUntilItBecomesFree() throws {
        let hotspot = NetworkInterface(name: "wifi", index: 2, type: .wifi, isExpensive: true, addresses: [IPPrefix("198.18.1.2/24")!])
        let tethered = HandoverStateMachineTests.path([hotspot, Self.cell])
        var advisor = connected(over: "cell", path: tethered)
        #expect(advisor.nextDeadline(smoothedRTT: ms(50)) == nil)
        #expect(advisor.handle(.tick(at: .seconds(5), smoothedRTT: ms(50))) == [])
        // The cost changes: Wi-Fi is free now, and probed.
        let actions = advisor.handle(.pathUpdated(Self.both, at: .seconds(6)))
        #expect(actions == [.advise(.pathChanged(Self.both)), .startProbe(interface: "wifi")])
    }

    @Test func overMPTCPTheConnectionIsLostOnlyWithEveryInterface() {
        var advisor = connected(transport: .mptcp)
        #expect(advice(advisor.handle(.pathUpdated(Self.cellOnly, at: ms(100)))) == [.pathChanged(Self.cellOnly)])
        let none = HandoverStateMachineTests.path([])
        #expect(advice(advisor.handle(.pathUpdated(none, at: ms(200)))) == [
            .pathChanged(none), .viability(isViable: false, reason: .pathLost(interface: "wifi")),
        ])
        #expect(advice(advisor.handle(.pathUpdated(Self.cellOnly, at: ms(300)))) == [
            .pathChanged(Self.cellOnly), .viability(isViable: true, reason: nil),
        ])
    }
}
