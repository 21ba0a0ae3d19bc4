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
        let run = try await playScene("nio-http-blackhole", timeline: """
              - { at: 1s, link: wifi, blackhole: true }
            """) { scene in
            let (network, phone, server, http) = (scene.network, scene.phone, scene.server, scene.http)
            try await network.wait(until: .milliseconds(1500))
            #expect(phone.path?.availableInterfaces.contains { $0.name == "wifi" } == true, "a blackholed Wi-Fi is still in the path")

            let connection = try await scene.connect()
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
        let run = try await playScene("nio-mptcp", mptcpServer: serverSpeaksMPTCP) { scene in
            let connection = try await scene.connect(with: scene.bootstrap.multipathServiceType(.handover))
            #expect(connection.metrics.mode == (serverSpeaksMPTCP ? .multipath : .fallback))
            try await connection.channel.executeThenClose { inbound, outbound in
                var exchange = HTTPExchange(inbound: inbound.makeAsyncIterator(), outbound: outbound, host: scene.server.address)
                let response = try await exchange.get(50_000)
                #expect(response.status == .ok && response.bytes == 50_000)
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func aBadPortAndARefusedConnectionSayWhy() async throws {
        let run = try await playScene("nio-refused") { scene in
            let (bootstrap, server) = (scene.bootstrap, scene.server)
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
