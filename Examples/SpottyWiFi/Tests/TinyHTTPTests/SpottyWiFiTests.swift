import RoamTesting
import ScenarioModel
import Testing
import TinyHTTP

/// The client against the scenario in `scenarios/spotty-wifi.yaml`: Wi-Fi drops out every few
/// seconds and LTE stays. Runs with Roam's userspace emulator and the scenario's seed; a
/// failure prints the seed (`ROAM_SEED=N swift test` replays it) and the report's directory.
@Suite(.enabled(if: RoamTesting.isAvailable, "Roam scenarios need root or user namespaces, and /dev/net/tun"))
struct SpottyWiFiTests {
    @Test func everyRequestSucceedsWhileWiFiComesAndGoes() async throws {
        let scenario = try Scenario.load("scenarios/spotty-wifi.yaml")
        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let http = try await server.run { try TestServer(address: server.address, port: 8080) }
            async let served = server.run { http.serve() }
            let responses = try await phone.run {
                let client = HTTPClient(timeout: .milliseconds(800), attempts: 5)
                var responses: [HTTPClient.Response] = []
                for _ in 0..<24 {
                    responses.append(try await client.get(host: server.address, port: 8080, path: "/bytes/262144"))
                    try await Task.sleep(for: .milliseconds(250))
                }
                return responses
            }
            http.stop()
            #expect(try await served >= responses.count)
            return responses
        }
        #expect(run.value.count == 24, run.comment)
        #expect(run.value.allSatisfy { $0.status == 200 && $0.body.count == 262_144 }, run.comment)
        // The flaps really happened while the client ran: the phone's path changed each time.
        run.expect(.pathUpdates(of: "phone", atLeast: 4))
        run.expect(.scenarioExpectations)
    }
}
