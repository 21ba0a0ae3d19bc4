import AsyncHTTPClient
import Catalog
import NIOPosix
import RoamNIO
import RoamTesting
import ScenarioModel
import Testing

/// AsyncHTTPClient and a Hummingbird service on a Wi-Fi that stays associated and passes
/// nothing from 3 s to 13 s (`scenarios/blackholed-wifi.yaml`), LTE always there.
///
/// What AsyncHTTPClient does on its own: its routes still point at the Wi-Fi, so a request on
/// a pooled connection waits out the read timeout, and a new connection waits out the connect
/// timeout (retrying the connection meanwhile, as `retryConnectionEstablishment` does). It has
/// no hook to take a connection from elsewhere, but lets each request choose its local
/// address: with the address Roam's race picks, the requests go over LTE.
@Suite(.enabled(if: RoamTesting.isAvailable, "Roam scenarios need root or user namespaces, and /dev/net/tun"), .serialized)
struct BlackholedWiFiTests {
    @Test func onItsOwnAsyncHTTPClientWaitsOutItsTimeoutsWhileTheWiFiPassesNothing() async throws {
        let scenario = try Scenario.load("scenarios/blackholed-wifi.yaml")
        let run = try await scenario.run { network in
            try await withServiceAndClient(network, configuration: clientConfiguration()) { phone, _, client in
                let wifi = phone.address(on: "wifi")
                var outcomes = [await client.catalog.outcome(20_000, network: network)]
                try await network.wait(until: .seconds(4))
                // The pooled connection first, then a new one.
                outcomes.append(await client.catalog.outcome(20_000, network: network))
                outcomes.append(await client.catalog.outcome(20_000, network: network))
                try await network.wait(until: .milliseconds(13_500))
                outcomes.append(await client.catalog.outcome(20_000, network: network))
                print("AsyncHTTPClient alone:\n  " + outcomes.map(\.description).joined(separator: "\n  "))

                #expect(outcomes[0].succeeded && outcomes[0].reply?.clientAddress == wifi, "\(outcomes[0])")
                #expect(outcomes[1].error?.contains("readTimeout") == true, "the pooled Wi-Fi connection: \(outcomes[1])")
                #expect(outcomes[2].error?.contains("connectTimeout") == true, "a new connection, routed to the Wi-Fi: \(outcomes[2])")
                #expect(outcomes[3].succeeded && outcomes[3].reply?.clientAddress == wifi, "Wi-Fi works again: \(outcomes[3])")
                return outcomes
            }
        }
        #expect(run.report.passed, run.comment)
    }

    @Test func withTheLocalAddressRoamsRacePicksTheRequestsGoOverLTE() async throws {
        let scenario = try Scenario.load("scenarios/blackholed-wifi.yaml")
        let run = try await scenario.run { network in
            try await withServiceAndClient(network, configuration: clientConfiguration()) { phone, service, client in
                let roam = try RoamClientBootstrap(group: client.group, monitor: #require(phone.monitor))
                let host = try network.node("server").address
                let wifi = phone.address(on: "wifi"), cell = phone.address(on: "cell")
                var outcomes: [Outcome] = []
                for at in [Duration.milliseconds(500), .seconds(4), .seconds(6), .milliseconds(13_500)] {
                    try await network.wait(until: at)
                    let local = try await roam.localAddress(racingTo: host, port: 8080)
                    outcomes.append(await client.catalog.outcome(20_000, from: local, network: network))
                }
                print("AsyncHTTPClient with Roam's local address:\n  " + outcomes.map(\.description).joined(separator: "\n  "))
                #expect(outcomes.allSatisfy { $0.succeeded }, "\(outcomes)")
                #expect(outcomes.map { $0.reply?.clientAddress } == [wifi, cell, cell, wifi])
                return outcomes
            }
        }
        #expect(run.report.passed, run.comment)
    }
}
