import Multipath
import Netlink
import PathMonitor
import Testing

/// The session's plans on a manual clock, no sockets and no root: each divergence the drivers
/// had before they shared it (issue 31) is a test here.
@Suite struct HandoverSessionTests {
    static let wifi4 = NetworkInterface(name: "wifi", index: 2, type: .wifi, addresses: [IPPrefix("198.18.1.2/24")!])
    static let cell6 = NetworkInterface(name: "cell", index: 3, type: .cellular, isExpensive: true,
                                        addresses: [IPPrefix("198.18.2.2/24")!, IPPrefix("fd00::2/64")!])
    static let cell = HandoverStateMachineTests.cell
    static let wifi = HandoverStateMachineTests.wifi
    static let server6 = IPAddress("fd00::ffff:1")!
    static let server4 = IPAddress("198.19.255.2")!

    static func path(_ interfaces: [NetworkInterface]) -> NetworkPath { HandoverStateMachineTests.path(interfaces) }
    func ms(_ value: Int64) -> Duration { .milliseconds(value) }

    /// The first probe request, if any.
    func probe(_ requests: [HandoverSession.Request]) -> (interface: String, destination: IPAddress, port: UInt16)? {
        for request in requests { if case let .probe(interface, destination, port) = request { return (interface.name, destination, port) } }
        return nil
    }

    /// A flow over cellular (IPv6 first among the peer's addresses), with an IPv4-only free Wi-Fi
    /// back in the path: the probe goes to the peer's IPv4 address (HandoverConnection probed
    /// `addresses.first`, which the Wi-Fi could never reach, so it never moved back).
    @Test func aProbeGoesToAnAddressOfAFamilyTheInterfaceHas() {
        var session = HandoverSession(to: [Self.server6, Self.server4], port: 9000)
        _ = session.handle(.pathUpdated(Self.path([Self.cell6]), at: .zero))
        _ = session.handle(.connected(.init(interface: "cell", transport: .tcp, remote: Self.server6), at: .zero))
        let requests = session.handle(.pathUpdated(Self.path([Self.wifi4, Self.cell6]), at: .seconds(5)))
        let planned = probe(requests)
        #expect(planned?.interface == "wifi")
        #expect(planned?.destination == Self.server4)
        #expect(planned?.port == 9000)
        // A probe port of the app's choosing.
        var configuration = HandoverSession.Configuration()
        configuration.probePort = 8443
        var chosen = HandoverSession(to: [Self.server4], port: 9000, configuration: configuration)
        _ = chosen.handle(.pathUpdated(Self.path([Self.cell6]), at: .zero))
        _ = chosen.handle(.connected(.init(interface: "cell", transport: .tcp, remote: Self.server4), at: .zero))
        #expect(probe(chosen.handle(.pathUpdated(Self.path([Self.wifi4, Self.cell6]), at: .seconds(5))))?.port == 8443)
        // No address of the interface's family at all: the probe fails at once, nothing is opened.
        var none = HandoverSession(to: [Self.server6], port: 9000)
        _ = none.handle(.pathUpdated(Self.path([Self.cell6]), at: .zero))
        _ = none.handle(.connected(.init(interface: "cell", transport: .tcp, remote: Self.server6), at: .zero))
        #expect(probe(none.handle(.pathUpdated(Self.path([Self.wifi4, Self.cell6]), at: .seconds(5)))) == nil)
    }

    /// A renumbered interface is a new path: the connection made from its old address is left at
    /// once, not after a stall. A path published before the address came (a join adds IPv4 and
    /// IPv6 one after the other) does not count against it.
    @Test func aConnectionWhoseAddressWentIsLeftAtOnce() {
        let old = IPAddress("198.18.1.2")!
        var session = HandoverSession(to: [Self.server4], port: 9000)
        _ = session.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
        _ = session.handle(.connected(.init(interface: "wifi", transport: .tcp, local: old, remote: Self.server4), at: ms(10)))
        // The monitor's path still lacks the address: nothing to leave.
        let early = NetworkInterface(name: "wifi", index: 2, type: .wifi, addresses: [IPPrefix("fd00:1::2/64")!])
        #expect(!session.handle(.pathUpdated(Self.path([early, Self.cell]), at: ms(20))).contains { if case .leave = $0 { true } else { false } })
        _ = session.handle(.pathUpdated(Self.path([Self.wifi4, Self.cell]), at: ms(30)))
        let renumbered = NetworkInterface(name: "wifi", index: 2, type: .wifi, addresses: [IPPrefix("198.18.1.66/24")!])
        let requests = session.handle(.pathUpdated(Self.path([renumbered, Self.cell]), at: ms(40)))
        #expect(requests.contains(.leave(.addressLost(interface: "wifi", address: old))), "\(requests)")
        #expect(HandoverStateMachine.Reason.addressLost(interface: "wifi", address: old).description == "wifi lost the connection's address 198.18.1.2")
        // The next connection, from the new address, stays.
        _ = session.handle(.connectionEnded(at: ms(41)))
        _ = session.handle(.connected(.init(interface: "wifi", transport: .tcp, local: IPAddress("198.18.1.66")!, remote: Self.server4), at: ms(50)))
        #expect(!session.handle(.pathUpdated(Self.path([renumbered, Self.cell]), at: ms(60))).contains { if case .leave = $0 { true } else { false } })
    }

    /// The racer leaves out interfaces behind a portal or without internet while one is
    /// validated; without validation (all unknown), or with `validation: .ignore`, it keeps them.
    @Test func aRaceSkipsUnvalidatedInterfacesWhileOneIsValidated() throws {
        func with(_ interface: NetworkInterface, _ state: InterfaceConnectivity.State) -> NetworkInterface {
            var changed = interface
            changed.connectivity = InterfaceConnectivity(state: state)
            return changed
        }
        let policy = PathPolicy()
        let portal = Self.path([with(Self.wifi, .portal), with(Self.cell, .validated)])
        #expect(try policy.permittedInterfaces(of: portal).get().map(\.name) == ["cell"])
        // One still being checked comes after the validated one (Android's default network).
        let checking = Self.path([with(Self.wifi, .unknown), with(Self.cell, .validated)])
        #expect(try policy.permittedInterfaces(of: checking).get().map(\.name) == ["cell", "wifi"])
        let unchecked = Self.path([with(Self.wifi, .unknown), with(Self.cell, .unknown)])
        #expect(try policy.permittedInterfaces(of: unchecked).get().map(\.name) == ["wifi", "cell"])
        let nothingValidated = Self.path([with(Self.wifi, .portal), with(Self.cell, .limited)])
        #expect(try policy.permittedInterfaces(of: nothingValidated).get().map(\.name) == ["wifi", "cell"])
        // Nothing validated, one still being checked: the portal stands by, raced after it.
        let portalOrChecking = Self.path([with(Self.wifi, .portal), with(Self.cell, .unknown)])
        #expect(try policy.permittedInterfaces(of: portalOrChecking).get().map(\.name) == ["cell", "wifi"])
        var strict = policy
        strict.validation = .require
        #expect(try strict.permittedInterfaces(of: checking).get().map(\.name) == ["cell"])
        #expect(throws: PathRefusal.self) { try strict.permittedInterfaces(of: unchecked).get() }
        var indifferent = policy
        indifferent.validation = .ignore
        #expect(try indifferent.permittedInterfaces(of: portal).get().map(\.name) == ["wifi", "cell"])
    }

    /// One rule after a failed race for every driver (the simulator retried every 100 ms,
    /// HandoverConnection threw, RoamNIO waited for a path change): back off 100 ms doubling to
    /// 1 s, race at once on a new path, give up only after the policy's time.
    @Test func aFailedRaceBacksOffRacesAgainOnANewPathAndGivesUpOnTime() {
        var configuration = HandoverSession.Configuration()
        configuration.retry = .init(initialDelay: ms(100), maximumDelay: .seconds(1), giveUpAfter: .seconds(3))
        var session = HandoverSession(to: [Self.server4], port: 9000, configuration: configuration)
        #expect(session.connectPlan(at: .zero) == .wait(until: .seconds(3)), "no path yet: wait for one, at most the give-up time")
        _ = session.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: ms(10)))
        guard case .race = session.connectPlan(at: ms(10)) else {
            Issue.record("a path: race")
            return
        }
        var now = ms(10)
        var waits: [Duration] = []
        for _ in 0..<5 {
            _ = session.handle(.raceFailed(at: now))
            guard case .wait(let until?) = session.connectPlan(at: now) else {
                Issue.record("after a failure: wait")
                return
            }
            waits.append(until - now)
            now = until
        }
        #expect(waits == [ms(100), ms(200), ms(400), ms(800), ms(1000)])
        // A new path: race at once, backing off or not.
        _ = session.handle(.raceFailed(at: now))
        _ = session.handle(.pathUpdated(Self.path([Self.cell]), at: now + ms(1)))
        guard case .race = session.connectPlan(at: now + ms(1)) else {
            Issue.record("a new path: race at once")
            return
        }
        // Three seconds of failing: give up.
        _ = session.handle(.raceFailed(at: .seconds(3)))
        guard case .giveUp = session.connectPlan(at: .seconds(3) + ms(20)) else {
            Issue.record("three seconds of failing: give up")
            return
        }
        // A connection resets it all.
        var fresh = HandoverSession(to: [Self.server4], port: 9000, configuration: configuration)
        _ = fresh.handle(.pathUpdated(Self.path([Self.wifi]), at: .zero))
        _ = fresh.handle(.raceFailed(at: .zero))
        _ = fresh.handle(.connected(.init(interface: "wifi", transport: .tcp), at: ms(150)))
        _ = fresh.handle(.connectionEnded(at: .seconds(10)))
        guard case .race = fresh.connectPlan(at: .seconds(10)) else {
            Issue.record("after a connection, racing starts afresh")
            return
        }
    }

    /// A server that takes its time is not a dead path when the evidence asked for is data left
    /// unacknowledged: a slow answer to an acknowledged request is a stall only at the ceiling.
    @Test func aSlowServerIsNotAStallWhenItsRequestWasAcknowledged() {
        var configuration = HandoverSession.Configuration()
        configuration.stallEvidence = .unacknowledgedData
        configuration.rules.maximumStall = .seconds(10)
        var session = HandoverSession(to: [Self.server4], port: 80, configuration: configuration)
        _ = session.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
        _ = session.handle(.connected(.init(interface: "wifi", transport: .tcp), at: .zero))
        _ = session.handle(.sent(bytes: 100, at: .seconds(1)))
        let acknowledged = HandoverSession.TransportSample(smoothedRTT: ms(20), unacknowledged: 0)
        // The threshold (4 × 20 ms + 200 ms, at least 300 ms) passes, the request acknowledged: nothing.
        #expect(session.nextDeadline(transport: acknowledged, awaitingDataSince: nil, at: .seconds(1)) == .seconds(1) + ms(300))
        #expect(session.handle(.tick(at: .seconds(3), transport: acknowledged, awaitingDataSince: nil)).isEmpty)
        #expect(session.nextDeadline(transport: acknowledged, awaitingDataSince: nil, at: .seconds(3)) == .seconds(3) + ms(300), "looked at again")
        // Still nothing at the ceiling: a stall.
        let atCeiling = session.handle(.tick(at: .seconds(11), transport: acknowledged, awaitingDataSince: nil))
        #expect(atCeiling.contains { if case .leave(.stalled) = $0 { true } else { false } })

        // The same request left unacknowledged (a blackholed path): a stall at the threshold.
        var blackholed = HandoverSession(to: [Self.server4], port: 80, configuration: configuration)
        _ = blackholed.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
        _ = blackholed.handle(.connected(.init(interface: "wifi", transport: .tcp), at: .zero))
        _ = blackholed.handle(.sent(bytes: 100, at: .seconds(1)))
        let stuck = HandoverSession.TransportSample(smoothedRTT: ms(20), unacknowledged: 1)
        let requests = blackholed.handle(.tick(at: .seconds(1) + ms(300), transport: stuck, awaitingDataSince: nil))
        #expect(requests.first == .holdDown(interface: "wifi", for: .seconds(1)))
        #expect(requests.contains { if case .leave(.stalled(interface: "wifi", _)) = $0 { true } else { false } })

        // With silence as the evidence (a stream), the acknowledged request counts as before.
        var silence = HandoverSession(to: [Self.server4], port: 80)
        _ = silence.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
        _ = silence.handle(.connected(.init(interface: "wifi", transport: .tcp), at: .zero))
        _ = silence.handle(.sent(bytes: 100, at: .seconds(1)))
        #expect(silence.handle(.tick(at: .seconds(1) + ms(300), transport: acknowledged, awaitingDataSince: nil)).contains {
            if case .leave(.stalled) = $0 { true } else { false }
        })
    }

    /// Advice never points to an interface another flow of the app holds down (RoamNIO fired
    /// BetterPathAvailable(wifi) while its bootstrap still left the Wi-Fi out of races).
    @Test func aBetterPathIsNotOneAnotherFlowHoldsDown() {
        func advised(holding: Bool) -> [PathAdvisor.Advice] {
            var advisor = PathAdvisor(peer: [Self.server4], port: 80)
            _ = advisor.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
            _ = advisor.handle(.connected(interface: "cell", transport: .tcp, family: .inet, at: .zero))
            if holding { _ = advisor.handle(.heldDownElsewhere(interface: "wifi", until: .seconds(30))) }
            var advice: [PathAdvisor.Advice] = []
            var now = Duration.zero
            // Wi-Fi answers every probe.
            for _ in 0..<40 {
                now += ms(200)
                for action in advisor.handle(.tick(at: now, smoothedRTT: ms(20))) {
                    switch action {
                    case .advise(let item): advice.append(item)
                    case .startProbe(let interface):
                        for answer in advisor.handle(.probeFinished(interface: interface, connected: true, at: now + ms(10))) {
                            if case .advise(let item) = answer { advice.append(item) }
                        }
                    default: break
                    }
                }
            }
            return advice
        }
        #expect(advised(holding: false).contains(.betterPathAvailable(interface: "wifi", reason: .betterPath(interface: "wifi", probes: 3))))
        #expect(!advised(holding: true).contains { if case .betterPathAvailable = $0 { true } else { false } })
    }

    /// Subflow control over MPTCP: one subflow from every interface of the connection's family,
    /// the active one carrying the data; a stall switches the data and withdraws the address.
    @Test func subflowPlansFollowTheRules() {
        var configuration = HandoverSession.Configuration()
        configuration.rules.controlsSubflows = true
        configuration.rules.usesPathManager = true
        var session = HandoverSession(to: [Self.server4], port: 9000, configuration: configuration)
        _ = session.handle(.pathUpdated(Self.path([Self.wifi, Self.cell]), at: .zero))
        let wifiAddress = Self.wifi.addresses[0].address, cellAddress = Self.cell.addresses[0].address
        let connected = session.handle(.connected(.init(interface: "wifi", transport: .mptcp, local: wifiAddress, remote: Self.server4, token: 7),
                                                  at: .zero))
        #expect(connected == [.subflow(.open(token: 7, local: cellAddress, interface: "cell", interfaceIndex: 3, id: 1, backup: true,
                                             remote: Self.server4, port: 9000))])
        // Not asked again within 200 ms.
        let wifiSubflow = MPTCP.Subflow(local: wifiAddress, localPort: 40000, remote: Self.server4, remotePort: 9000, bytesAcked: 0, bytesReceived: 0,
                                        smoothedRTT: ms(5))
        #expect(!session.handle(.subflowsSampled([wifiSubflow], at: ms(100))).contains { if case .subflow = $0 { true } else { false } })
        let cellSubflow = MPTCP.Subflow(local: cellAddress, localPort: 40001, remote: Self.server4, remotePort: 9000, bytesAcked: 0, bytesReceived: 0,
                                        smoothedRTT: ms(40))
        var connecting = cellSubflow
        connecting.isEstablished = false
        let sampled = session.handle(.subflowsSampled([wifiSubflow, connecting], at: ms(300)))
        #expect(sampled.contains(.subflowOpened(key: cellSubflow.description, interface: "cell")))
        // Once its handshake is done, the backup is told so (MP_PRIO): a 6.1 kernel's MP_JOIN
        // does not carry the flag SUBFLOW_CREATE was given. Once.
        let cellBackup = HandoverSession.Request.subflow(.setBackup(token: 7, local: cellAddress, backup: true, remote: Self.server4, port: 9000))
        #expect(!sampled.contains(cellBackup), "not while its SYN is out")
        #expect(!session.handle(.subflowsSampled([wifiSubflow, cellSubflow], at: ms(320))).contains(cellBackup), "nor as its handshake ends")
        #expect(session.handle(.subflowsSampled([wifiSubflow, cellSubflow], at: ms(520))).contains(cellBackup))
        #expect(!session.handle(.subflowsSampled([wifiSubflow, cellSubflow], at: ms(540))).contains(cellBackup))
        // A stall of the Wi-Fi: the data goes over the cellular subflow, the Wi-Fi's address is
        // withdrawn (its localID 0, the connection's first).
        _ = session.handle(.sent(bytes: 10, at: .seconds(1)))
        let stalled = session.handle(.tick(at: .seconds(2), transport: .init(smoothedRTT: ms(20), unacknowledged: 1), awaitingDataSince: .seconds(1)))
        #expect(stalled.contains(.switchedSubflows(to: "cell", .stalled(interface: "wifi", threshold: ms(300)))))
        #expect(stalled.contains(.subflow(.withdraw(token: 7, localID: 0, interface: "wifi"))))
        #expect(stalled.contains(.subflow(.setBackup(token: 7, local: cellAddress, backup: false, remote: Self.server4, port: 9000))))
        #expect(!stalled.contains { if case .leave = $0 { true } else { false } }, "the connection stays")
        #expect(session.currentInterface == "cell")

        // A 6.1 kernel refuses to withdraw the first subflow (REMOVE has no address 0 there): it
        // stays listed and is told it is a backup (MP_PRIO). Told again while it still brings
        // data, since the lossy link it was left for loses that ACK as any packet (one walk out
        // in twenty: the server went on sending over the Wi-Fi and the cellular subflow, idle,
        // was judged stalled); at most once per 200 ms, and not once it is quiet.
        let wifiBackup = HandoverSession.Request.subflow(.setBackup(token: 7, local: wifiAddress, backup: true, remote: Self.server4, port: 9000))
        var lingering = wifiSubflow
        lingering.bytesReceived = 5000
        #expect(session.handle(.subflowsSampled([lingering, cellSubflow], at: ms(2020))).filter { $0 == wifiBackup }.count == 1)
        lingering.bytesReceived = 9000
        #expect(!session.handle(.subflowsSampled([lingering, cellSubflow], at: ms(2100))).contains(wifiBackup))
        lingering.bytesReceived = 12000
        #expect(session.handle(.subflowsSampled([lingering, cellSubflow], at: ms(2230))).contains(wifiBackup))
        #expect(!session.handle(.subflowsSampled([lingering, cellSubflow], at: ms(2500))).contains(wifiBackup), "quiet: not told again")

        // The Wi-Fi left for a stall gets no standby subflow (a new one would take data again on
        // a kernel that ignores its backup flag) until three probes in a row restore it; then
        // its subflow is opened to carry the data.
        func opensWiFi(_ requests: [HandoverSession.Request]) -> HandoverSession.SubflowRequest? {
            for case .subflow(let plan) in requests {
                if case let .open(_, local, _, _, _, _, _, _) = plan, local == wifiAddress { return plan }
            }
            return nil
        }
        // The connection's first subflow, closed, stays listed: not a subflow to keep.
        var closedFirst = wifiSubflow
        closedFirst.isOpen = false
        closedFirst.isEstablished = false
        var time = Duration.seconds(2)
        var opened: HandoverSession.SubflowRequest?
        var probes = 0
        while opened == nil, time < .seconds(8) {
            time += ms(50)
            // The stream flows over the cellular subflow meanwhile.
            var requests = session.handle(.received(bytes: 1000, at: time))
            requests += session.handle(.subflowsSampled([closedFirst, cellSubflow], at: time))
            requests += session.handle(.tick(at: time, transport: .init(smoothedRTT: ms(40), unacknowledged: 0), awaitingDataSince: nil))
            for case .probe(let interface, _, _) in requests where interface.name == "wifi" {
                probes += 1
                requests += session.handle(.probeFinished(interface: "wifi", connected: true, at: time + ms(10)))
            }
            opened = opensWiFi(requests)
            if opened != nil { #expect(requests.contains(.restore(interface: "wifi")), "opened only once restored") }
        }
        #expect(probes == 3)
        #expect(opened.map { if case .open(_, _, _, _, _, false, _, _) = $0 { true } else { false } } ?? false, "\(String(describing: opened))")
        #expect(session.currentInterface == "wifi")
    }
}
