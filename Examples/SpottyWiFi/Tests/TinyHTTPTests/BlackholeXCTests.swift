import RoamTesting
import ScenarioModel
import TinyHTTP
import XCTest

/// The same client under XCTest, with the scenario built in Swift: Wi-Fi stays up but passes
/// nothing for two seconds (nothing tells the app), and the client's retries must outlast it.
final class BlackholeXCTests: XCTestCase {
    func testRetriesOutlastABlackholedWiFi() async throws {
        try XCTSkipIf(!RoamTesting.isAvailable, RoamTesting.unavailableReason ?? "")
        let scenario = Scenario(
            name: "blackholed-wifi-client", seed: 5, duration: .seconds(10),
            nodes: [ScenarioNode("phone"), ScenarioNode("server")],
            links: [LinkSpec("wifi", between: ("phone", "server"), profile: "wifi"),
                    LinkSpec("cell", between: ("phone", "server"), profile: "lte")],
            timeline: [TimelineEvent(at: .seconds(1), link: "wifi", .blackhole(true)),
                       TimelineEvent(at: .seconds(3), link: "wifi", .blackhole(false))])
        let run = try await scenario.run { network in
            let phone = try network.node("phone"), server = try network.node("server")
            let http = try await server.run { try TestServer(address: server.address, port: 8080) }
            async let served = server.run { http.serve() }
            // One request before the blackhole and one in it.
            let before = try await phone.run {
                try await HTTPClient(timeout: .milliseconds(800), attempts: 5).get(host: server.address, port: 8080, path: "/bytes/1000")
            }
            try await network.wait(until: .milliseconds(1200))
            let during = try await phone.run {
                try await HTTPClient(timeout: .milliseconds(800), attempts: 5).get(host: server.address, port: 8080, path: "/bytes/1000")
            }
            http.stop()
            _ = try await served
            return [before, during]
        }
        XCTAssertEqual(run.value.map(\.status), [200, 200], run.replayHint)
        XCTAssertEqual(run.value[0].attempts, 1, run.replayHint)
        // The routes still point at Wi-Fi, so the first attempts time out; a later one gets through.
        XCTAssertGreaterThan(run.value[1].attempts, 1, run.replayHint)
        run.assert(.pathUpdates(of: "phone", atLeast: 1))
    }
}
