import AsyncHTTPClient
import Catalog
import RoamNIO
import RoamTesting
import ScenarioModel
import Testing

/// AsyncHTTPClient and a Hummingbird service on Wi-Fi at the edge of its range: it drops out for
/// a second and a half every three seconds (`scenarios/spotty-wifi.yaml`), LTE always there. A
/// request every 250 ms; the app retries a failed request once.
@Suite(.enabled(if: RoamTesting.isAvailable, "Roam scenarios need root or user namespaces, and /dev/net/tun"), .serialized)
struct SpottyWiFiTests {
    /// AsyncHTTPClient on its own: new connections follow the kernel's routes (LTE while the
    /// Wi-Fi's carrier is down); a request in flight when the carrier drops waits for it to come
    /// back (TCP retransmits), or fails with the read timeout if that comes first. Whatever
    /// fails, fails with one of AsyncHTTPClient's timeouts, never hangs.
    @Test func onItsOwnAsyncHTTPClientFailsOnlyByItsTimeouts() async throws {
        let outcomes = try await play { client, _, network in
            await client.catalog.outcome(100_000, network: network)
        }
        let failures = outcomes.filter { !$0.succeeded }
        #expect(failures.allSatisfy { $0.error?.contains("Timeout") == true || $0.error?.contains("deadlineExceeded") == true }, "\(failures)")
        let longest = outcomes.map(\.took).max() ?? .zero
        print("AsyncHTTPClient alone: \(outcomes.count - failures.count) of \(outcomes.count) requests succeeded, the longest in \(longest)")
    }

    /// With the local address from Roam's race, asked again after a failure and whenever the
    /// path changed: every request succeeds (a retried one over the interface that works). A
    /// request already in flight when the carrier drops still waits, as without Roam: the local
    /// address is chosen before a connection, and AsyncHTTPClient cannot be told to leave one.
    @Test func withRoamsLocalAddressEveryRequestSucceeds() async throws {
        let outcomes = try await play { client, roam, network in
            let host = try? network.node("server").address
            guard let roam, let host, let local = try? await roam.address(host) else {
                return Outcome(at: network.elapsed, took: .zero, error: "no local address")
            }
            return await client.catalog.outcome(100_000, from: local, network: network)
        }
        #expect(outcomes.allSatisfy { $0.succeeded }, "\(outcomes.filter { !$0.succeeded })")
        let byAddress = Dictionary(grouping: outcomes.compactMap { $0.reply?.clientAddress }, by: { $0 }).mapValues(\.count)
        let longest = outcomes.map(\.took).max() ?? .zero
        print("AsyncHTTPClient with Roam's local address: \(outcomes.filter(\.succeeded).count) of \(outcomes.count) succeeded, the longest in \(longest), from \(byAddress)")
    }

    /// Plays the scenario with a request every 250 ms, each retried once.
    func play(_ request: @escaping @Sendable (PhoneClient, LocalAddressCache?, TestNetwork) async -> Outcome) async throws -> [Outcome] {
        let scenario = try Scenario.load("scenarios/spotty-wifi.yaml")
        let run = try await scenario.run { network in
            try await withServiceAndClient(network, configuration: clientConfiguration()) { phone, _, client in
                let cache = LocalAddressCache(try RoamClientBootstrap(group: client.group, monitor: #require(phone.monitor)))
                var outcomes: [Outcome] = []
                for index in 0..<24 {
                    try await network.wait(until: .milliseconds(250 * Int64(index)))
                    var outcome = await request(client, cache, network)
                    if !outcome.succeeded {
                        await cache.forget()
                        let retry = await request(client, cache, network)
                        outcome = retry.succeeded ? retry : outcome
                        if !retry.succeeded { outcome.error = "\(outcome.error ?? "") then \(retry.error ?? "")" }
                    }
                    outcomes.append(outcome)
                }
                return outcomes
            }
        }
        #expect(run.report.passed, run.comment)
        run.expect(.pathUpdates(of: "phone", atLeast: 4))
        return run.value
    }
}

/// The local address from Roam's race, kept until the phone's path changes or a request failed.
actor LocalAddressCache {
    let roam: RoamClientBootstrap
    private var cached: (address: String, path: NetworkPathSnapshot)?

    init(_ roam: RoamClientBootstrap) { self.roam = roam }

    func address(_ host: String) async throws -> String {
        let path = NetworkPathSnapshot(roam.monitor.currentPath?.availableInterfaces.map(\.name) ?? [])
        if let cached, cached.path == path { return cached.address }
        let address = try await roam.localAddress(racingTo: host, port: 8080)
        cached = (address, path)
        return address
    }

    func forget() { cached = nil }
}

struct NetworkPathSnapshot: Equatable, Sendable {
    let interfaces: [String]
    init(_ interfaces: [String]) { self.interfaces = interfaces }
}
