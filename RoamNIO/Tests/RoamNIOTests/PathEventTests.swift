import Multipath
import NIOTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import PathMonitor
import RoamNIO
import RoamTesting
import ScenarioModel
import Synchronization
import Testing

/// Each path event of a RoamNIO channel, in a scenario's namespaces with real sockets, NIO's
/// HTTP/1 codec and the phone's own path monitor: it fires when it should, and not otherwise.
@Suite(.enabled(if: RoamTesting.isAvailable, "Roam scenarios need root or user namespaces, and /dev/net/tun"), .serialized)
struct PathEventTests {
    let group = MultiThreadedEventLoopGroup.singleton

    @Test func aBlackholedWiFiMakesTheChannelUnviableAndPointsToCellularUntilDataFlowsAgain() async throws {
        let run = try await playScene("nio-blackhole", timeline: """
              - { at: 3s, link: wifi, blackhole: true }
              - { at: 7s, link: wifi, blackhole: false }
            """) { scene in
            let (network, server) = (scene.network, scene.server)
            let connection = try await scene.connect()
            #expect(connection.interface == "wifi", "Wi-Fi is the first choice while it works")
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: server.address)
                // Healthy: requests answered, nothing advised.
                for _ in 0..<10 {
                    let response = try await exchange.get(1000)
                #expect(response.status == .ok && response.bytes == 1000)
                }
                #expect(await connection.events.advice.isEmpty, "nothing to advise on a healthy path")
                try await network.wait(until: .milliseconds(3300))
                // A request into the blackhole: the channel stalls.
                async let answer = exchange.get(2000)
                let unviable = try #require(await connection.events.first(within: .seconds(5)) { $0.isUnviable })
                #expect(unviable >= .seconds(3), "not before the blackhole")
                let better = try #require(await connection.events.first(within: .seconds(1)) { $0.betterInterface != nil })
                #expect(better >= unviable)
                let advice = await connection.events.advice
                #expect(advice.first == .viabilityUpdate(.init(isViable: false, reason: .stalled(interface: "wifi", threshold: advice.stallThreshold ?? .zero))))
                #expect(advice.contains { $0.betterInterface == "cell" })
                // What the app should do: connect again. The stalled Wi-Fi is held down, so the
                // new connection takes LTE and is answered while the Wi-Fi still passes nothing.
                let moved = try await scene.connect()
                #expect(moved.interface == "cell")
                try await moved.channel.executeThenClose { inbound, outbound in
                    var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: server.address)
                    let response = try await exchange.get(2000)
                    #expect(response.status == .ok && response.bytes == 2000)
                }
                #expect(network.elapsed < .seconds(7), "answered over LTE while the Wi-Fi was still blackholed")
                // The blackhole lifts, TCP retransmits, the answer comes: viable again, and no better path.
                let answered = try await answer
                #expect(answered.status == .ok && answered.bytes == 2000)
                let viable = try #require(await connection.events.first(within: .seconds(5)) { $0.isViable })
                #expect(viable >= .seconds(7))
                #expect(await connection.events.first(within: .seconds(1)) { $0.isBetterPathUnavailable } != nil)
            }
        }
        #expect(run.report.passed, run.comment)
    }

    /// A server that takes its time over a request it received is not a dead path: the request is
    /// acknowledged at once, so nothing the app wrote is left unacknowledged (issue 31: a 1 s
    /// response on a healthy Wi-Fi made the channel unviable 300 ms after the request).
    @Test func aSlowServerOnAHealthyPathIsNotAStall() async throws {
        let run = try await playScene("nio-slow-server", wifi: "type: wifi, delay: 10ms, rate: 50mbit") { scene in
            let connection = try await scene.connect()
            #expect(connection.interface == "wifi")
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: scene.server.address)
                for delay in [Duration.milliseconds(1000), .milliseconds(2500)] {
                    let response = try await exchange.get(1000, serverDelay: delay)
                    #expect(response.status == .ok && response.bytes == 1000)
                }
                let advice = await connection.events.advice
                #expect(advice.isEmpty, "a slow answer on a healthy path advised: \(advice)")
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func aWiFiCarrierLossIsUnviableWithCellularBetterAndBothEndWhenItReturns() async throws {
        let run = try await playScene("nio-carrier", timeline: """
              - { at: 2s, link: wifi, down: true }
              - { at: 4s, link: wifi, up: true }
            """) { scene in
            let server = scene.server
            let connection = try await scene.connect()
            #expect(connection.interface == "wifi")
            let events = connection.events
            let lost = try #require(await events.first(within: .seconds(5)) {
                $0 == .viabilityUpdate(.init(isViable: false, reason: .pathLost(interface: "wifi")))
            })
            #expect(lost >= .seconds(2))
            #expect(await events.first(within: .seconds(1)) { $0.betterInterface == "cell" } != nil)
            let back = try #require(await events.first(within: .seconds(5)) { $0.isViable })
            #expect(back >= .seconds(4))
            #expect(await events.first(within: .seconds(1)) { $0.isBetterPathUnavailable } != nil)
            // The path changes came too: Wi-Fi gone, then back.
            let changes = await events.entries.compactMap { entry -> [String]? in
                if case .pathChanged(let change) = entry.event { change.newPath.availableInterfaces.map(\.name) } else { nil }
            }
            #expect(changes.contains { !$0.contains("wifi") } && changes.last?.contains("wifi") == true, "\(changes)")
            // A lost carrier is no stall: the same TCP connection carries on over Wi-Fi.
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: server.address)
                let response = try await exchange.get(5000)
                #expect(response.status == .ok && response.bytes == 5000)
            }
            let advice = await events.advice
            #expect(advice.count == 4, "\(advice)")
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func onCellularAWiFiThatReturnsIsABetterPathOnceItAnswersProbes() async throws {
        let run = try await playScene("nio-wifi-returns", timeline: """
              - { at: 0s, link: wifi, down: true }
              - { at: 2s, link: wifi, up: true }
            """) { scene in
            let phone = scene.phone
            let monitor = try #require(phone.monitor)
            await Self.waitForPath(of: monitor) { !$0.contains("wifi") }
            let connection = try await scene.connect()
            #expect(connection.interface == "cell", "Wi-Fi is down: the race takes LTE")
            try await connection.closing {
                let better = try #require(await connection.events.first(within: .seconds(6)) { $0.betterInterface == "wifi" })
                #expect(better >= .seconds(2))
                let advice = await connection.events.advice
                #expect(advice == [.betterPathAvailable(.init(interface: "wifi", reason: .betterPath(interface: "wifi", probes: 3)))],
                        "moving back is advice: the LTE channel stays viable")
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func aWiFiThatStopsBeingExpensiveBecomesTheBetterPathNotBefore() async throws {
        let run = try await playScene("nio-cost-change", timeline: """
              - { at: 0s, link: wifi, down: true }
              - { at: 1s, link: wifi, up: true }
            """, wifi: "profile: wifi, expensive: true") { scene in
            let (network, phone) = (scene.network, scene.phone)
            let monitor = try #require(phone.monitor)
            await Self.waitForPath(of: monitor) { !$0.contains("wifi") }
            let connection = try await scene.connect()
            #expect(connection.interface == "cell")
            try await connection.closing {
                // The Wi-Fi is back but expensive (a hotspot): no better path, for as long as it stays so.
                await Self.waitForPath(of: monitor) { $0.contains("wifi") }
                #expect(await connection.events.first(within: .seconds(2)) { $0.betterInterface != nil } == nil)
                // Its cost changes: the hotspot is free now.
                let retag = try await phone.spawn(["ip", "link", "set", "dev", "wifi", "alias", "roam:type=wifi,expensive=false"])
                #expect(retag.succeeded, "\(retag.standardError)")
                let changed = network.elapsed
                let better = try #require(await connection.events.first(within: .seconds(6)) { $0.betterInterface == "wifi" })
                #expect(better >= changed)
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func withNoNetworkTheConnectWaitsForConnectivityAndConnectsWhenWiFiComes() async throws {
        let run = try await playScene("nio-waiting", timeline: """
              - { at: 0s, link: wifi, down: true }
              - { at: 0s, link: cell, down: true }
              - { at: 3s, link: wifi, up: true }
            """) { scene in
            let (network, phone, server, http) = (scene.network, scene.phone, scene.server, scene.http)
            let monitor = try #require(phone.monitor)
            await Self.waitForPath(of: monitor) { $0.filter { $0 != "lo" }.isEmpty }
            let waiting = WaitingLog()
            let bootstrap = scene.bootstrap.connectTimeout(.seconds(20)).onWaitingForConnectivity { event in
                waiting.record(event, at: network.elapsed)
            }
            let connection = try await scene.connect(with: bootstrap)
            let connected = network.elapsed
            #expect(connected >= .seconds(3), "not before Wi-Fi came back")
            #expect(connection.interface == "wifi")
            try await connection.closing {}
            let events = waiting.events
            #expect(!events.isEmpty)
            #expect(events.allSatisfy { $0.at < .seconds(3) })
            #expect(events.first?.event.refusal?.isNoPath == true, "\(events)")
            // Without waiting, the same connect fails at once and says why.
            #expect(throws: RoamNIOError.self) {
                _ = try bootstrap.waitsForConnectivity(false).policy(PathPolicy(requiredInterfaceType: .cellular))
                    .connect(host: server.address, port: http.port).wait()
            }
        }
        #expect(run.report.passed, run.comment)
    }

    /// A hotel's captive portal (a scenario's networks; the phone's monitor validates them): the
    /// race takes LTE while the Wi-Fi is held, the channel hears of the Wi-Fi as a better path
    /// once the login validates it, and a channel over the Wi-Fi is told it is no longer viable
    /// when the session ends (the portal's API said when), with LTE the better path.
    @Test func aCaptivePortalKeepsTheChannelOnCellularUntilTheLoginAndSendsItBackWhenTheSessionEnds() async throws {
        let scenario = try Scenario.parse(yaml: """
            name: nio-portal
            seed: 5
            duration: 30s
            nodes:
              phone: {}
              server: { internet: true }
            networks:
              - { name: hotel, type: wifi, profile: wifi, members: [phone], portal: { expires: 5s } }
              - { name: lte, type: cellular, profile: lte, members: [phone] }
            timeline:
              - { at: 3s, network: hotel, node: phone, portal: login }
            """)
        let run = try await playScene(scenario) { scene in
            let monitor = try #require(scene.phone.monitor)
            for await path in monitor.paths where path.availableInterfaces.first(where: { $0.name == "hotel" })?.connectivity.state == .portal { break }
            let held = try await scene.connect()
            #expect(held.interface == "lte", "the hotel's Wi-Fi is held by its portal")
            try await held.closing {
                let better = try #require(await held.events.first(within: .seconds(8)) { $0.betterInterface == "hotel" })
                #expect(better >= .seconds(3), "not before the login")
            }
            let online = try await scene.connect()
            #expect(online.interface == "hotel")
            try await online.closing {
                let unviable = try #require(await online.events.first(within: .seconds(10)) { $0.isUnviable })
                #expect(unviable >= .seconds(8), "not before the session ends")
                let advice = await online.events.advice
                #expect(advice.first == .viabilityUpdate(.init(isViable: false, reason: .connectivityLost(interface: "hotel", connectivity: .portal))),
                        "\(advice)")
                #expect(await online.events.first(within: .seconds(2)) { $0.betterInterface == "lte" } != nil, "\(advice)")
            }
        }
        #expect(run.report.passed, run.comment)
    }

    /// Waits for the monitor to publish a path whose interface names satisfy `condition`.
    static func waitForPath(of monitor: NetworkPathMonitor, _ condition: ([String]) -> Bool) async {
        for await path in monitor.paths where condition(path.availableInterfaces.map(\.name)) { return }
    }
}

/// The waiting-for-connectivity events a connect reported.
final class WaitingLog: Sendable {
    private let recorded = Mutex<[(at: Duration, event: RoamNetworkEvents.WaitingForConnectivity)]>([])
    func record(_ event: RoamNetworkEvents.WaitingForConnectivity, at time: Duration) { recorded.withLock { $0.append((time, event)) } }
    var events: [(at: Duration, event: RoamNetworkEvents.WaitingForConnectivity)] { recorded.withLock { $0 } }
}

extension [RoamPathEvent] {
    /// The stall threshold the first stall reported.
    var stallThreshold: Duration? {
        for event in self {
            if case .viabilityUpdate(let update) = event, case .stalled(_, let threshold)? = update.reason { return threshold }
        }
        return nil
    }
}
