import Multipath
import NIOTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import RoamNIO
import RoamTesting
import ScenarioModel
import Testing

/// An HTTP/1 client on swift-nio's codec, connected by Roam's bootstrap, on a Wi-Fi that stays
/// up and passes nothing: its requests go over LTE after one attempt delay, where a plain
/// `ClientBootstrap` waits out its connect timeout. (The time it takes, side by side with the
/// plain bootstrap, is `RoamNIOBenchmark`'s; tests do not assert on time.)
@Suite(.enabled(if: RoamTesting.isAvailable, "Roam scenarios need root or user namespaces, and /dev/net/tun"), .serialized)
struct HTTPClientTests {
    let group = MultiThreadedEventLoopGroup.singleton

    @Test func onABlackholedWiFiTheRequestsGoOverCellularAfterOneAttemptDelay() async throws {
        let scenario = try phoneAndServer("nio-http-blackhole", timeline: """
              - { at: 1s, link: wifi, blackhole: true }
            """)
        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let http = try await server.run { try HTTPServer(group: group) }
            defer { http.close() }
            try await network.wait(until: .milliseconds(1500))
            #expect(phone.path?.availableInterfaces.contains { $0.name == "wifi" } == true, "a blackholed Wi-Fi is still in the path")

            let bootstrap = try RoamClientBootstrap(group: group, monitor: #require(phone.monitor))
            let connection = try await phone.run {
                try await HTTPConnection.connect(bootstrap, to: server.address, port: http.port, clock: { network.elapsed })
            }
            #expect(connection.interface == "cell")
            let attempts = connection.metrics.attempts
            #expect(attempts.first?.candidate.route.interface == "wifi", "Wi-Fi, the first choice, was tried first: \(attempts)")
            let winner = try #require(connection.metrics.winner)
            #expect(winner.candidate.route.interface == "cell")
            #expect(winner.started >= ConnectionRace.Configuration().attemptDelay, "LTE started one attempt delay later")
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: server.address)
                for size in [1000, 100_000] {
                    let response = try await exchange.get(size)
                    #expect(response.status == .ok && response.bytes == size)
                }
            }
            #expect(http.requestsServed == 2)

            // The same from a plain ClientBootstrap: the kernel's route takes the Wi-Fi, and
            // the connect waits out its timeout.
            let plain = try await phone.run {
                let address = try SocketAddress(ipAddress: server.address, port: http.port)
                return await Result(catching: {
                    try await ClientBootstrap(group: group).connectTimeout(.seconds(1)).connect(to: address).get()
                })
            }
            #expect(throws: ChannelError.connectTimeout(.seconds(1))) { _ = try plain.get() }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test(arguments: [true, false])
    func aMultipathServiceTypeMakesAnMPTCPConnectionOrSaysItFellBack(serverSpeaksMPTCP: Bool) async throws {
        let scenario = try phoneAndServer("nio-mptcp")
        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let http = try await server.run { try HTTPServer(group: group, mptcp: serverSpeaksMPTCP) }
            defer { http.close() }
            let bootstrap = try RoamClientBootstrap(group: group, monitor: #require(phone.monitor))
                .policy(ConnectionPolicy(serviceType: .handover))
            let connection = try await phone.run {
                try await HTTPConnection.connect(bootstrap, to: server.address, port: http.port, clock: { network.elapsed })
            }
            #expect(connection.metrics.mode == (serverSpeaksMPTCP ? .multipath : .fallback))
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: server.address)
                let response = try await exchange.get(50_000)
                #expect(response.status == .ok && response.bytes == 50_000)
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func aBadPortAndARefusedConnectionSayWhy() async throws {
        let scenario = try phoneAndServer("nio-refused")
        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let bootstrap = try RoamClientBootstrap(group: group, monitor: #require(phone.monitor))
            #expect(throws: RoamNIOError.self) { _ = try bootstrap.connect(host: server.address, port: 70_000).wait() }
            // Nothing listens on port 9: every attempt is refused, which no network change cures.
            let error = try #require(throws: RoamNIOError.self) {
                _ = try bootstrap.connect(host: server.address, port: 9).wait()
            }
            #expect("\(error)".contains("every attempt failed"), "\(error)")
            #expect(error.metrics?.attempts.count == 2, "one attempt per interface: \(String(describing: error.metrics?.attempts))")
        }
        #expect(run.report.passed, run.comment)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
