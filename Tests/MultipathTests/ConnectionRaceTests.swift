import Netlink
import PathMonitor
import Testing
@testable import Multipath

let wifi = ConnectionRace.Route(interface: "wifi", index: 2, type: .wifi, ipv4: IPAddress("198.18.0.1")!, ipv6: IPAddress("fd72:6f61:6d00::1")!)
let cell = ConnectionRace.Route(interface: "cell", index: 3, type: .cellular, isExpensive: true,
                                ipv4: IPAddress("198.18.1.1")!, ipv6: IPAddress("fd72:6f61:6d00:1::1")!)
let v6 = [IPAddress("fd72:6f61:6d00:ffff::2")!, IPAddress("fd72:6f61:6d00:ffff::3")!]
let v4 = [IPAddress("198.19.255.2")!]

func ms(_ value: Int) -> Duration { .milliseconds(value) }

extension ConnectionRace.Action {
    var started: (Int, String)? {
        if case let .startAttempt(id, candidate) = self { return (id, "\(candidate.route.interface) \(candidate.destination)") }
        return nil
    }
}

@Suite struct ConnectionRaceTests {
    @Test func ordersByInterfaceThenFamilyThenTheOtherAddresses() {
        let order = ConnectionRace.order(routes: [wifi, cell], ipv6: v6, ipv4: v4).map { "\($0.route.interface) \($0.destination)" }
        #expect(order == ["wifi fd72:6f61:6d00:ffff::2", "wifi 198.19.255.2", "cell fd72:6f61:6d00:ffff::2", "cell 198.19.255.2",
                          "wifi fd72:6f61:6d00:ffff::3", "cell fd72:6f61:6d00:ffff::3"])
        // An IPv4-only Wi-Fi comes before an IPv6-only cellular: the family never outranks the interface.
        let wifi4 = ConnectionRace.Route(interface: "wifi", index: 2, type: .wifi, ipv4: IPAddress("198.18.0.1")!)
        let cell6 = ConnectionRace.Route(interface: "cell", index: 3, type: .cellular, isExpensive: true, ipv6: IPAddress("fd72:6f61:6d00:1::1")!)
        #expect(ConnectionRace.order(routes: [wifi4, cell6], ipv6: [v6[0]], ipv4: v4).map { "\($0.route.interface) \($0.destination)" }
                == ["wifi 198.19.255.2", "cell fd72:6f61:6d00:ffff::2"])
        // An interface without an address of the family is skipped for it.
        let v4Only = ConnectionRace.Route(interface: "eth0", index: 4, type: .wiredEthernet, ipv4: IPAddress("10.0.0.1")!)
        #expect(ConnectionRace.order(routes: [v4Only], ipv6: v6, ipv4: v4).map(\.destination) == v4)
    }

    @Test func aaaaFirstStartsAtOnce() {
        var race = ConnectionRace(routes: [wifi, cell])
        let actions = race.handle(.resolved(.inet6, [v6[0]]), at: ms(5))
        #expect(actions.first?.started?.1 == "wifi fd72:6f61:6d00:ffff::2")
        #expect(actions.contains(.scheduleTimer(at: ms(255))))
    }

    @Test func aFirstWaitsTheResolutionDelayForAAAA() {
        var race = ConnectionRace(routes: [wifi])
        #expect(race.handle(.resolved(.inet, v4), at: ms(10)) == [.scheduleTimer(at: ms(60))])
        #expect(race.handle(.timer, at: ms(40)).isEmpty, "an early timer does nothing")
        let actions = race.handle(.timer, at: ms(60))
        #expect(actions.first?.started?.1 == "wifi 198.19.255.2")
        // AAAA arriving within the delay starts at once instead, IPv6 first.
        var other = ConnectionRace(routes: [wifi])
        _ = other.handle(.resolved(.inet, v4), at: ms(10))
        #expect(other.handle(.resolved(.inet6, [v6[0]]), at: ms(30)).first?.started?.1 == "wifi fd72:6f61:6d00:ffff::2")
    }

    @Test func staggersAttemptsByTheAttemptDelay() {
        var race = ConnectionRace(routes: [wifi, cell], configuration: .init(attemptDelay: ms(250)))
        _ = race.handle(.resolved(.inet6, [v6[0]]), at: .zero)
        _ = race.handle(.resolved(.inet, v4), at: ms(1))
        // Wi-Fi's IPv6 is silent: its IPv4 goes after one attempt delay, then cellular (Wi-Fi Assist).
        let second = race.handle(.timer, at: ms(250))
        #expect(second.first?.started?.1 == "wifi 198.19.255.2")
        #expect(second.contains(.scheduleTimer(at: ms(500))))
        let third = race.handle(.timer, at: ms(500))
        #expect(third.first?.started?.1 == "cell fd72:6f61:6d00:ffff::2")
        // The cellular attempt connects: it wins, the others are cancelled.
        let done = race.handle(.connected(attempt: 3), at: ms(560))
        #expect(done == [.cancelAttempt(1), .cancelAttempt(2), .succeed(attempt: 3)])
        #expect(race.isFinished)
        #expect(race.attempts.map(\.outcome) == [.cancelled, .cancelled, .connected])
        #expect(race.handle(.connected(attempt: 1), at: ms(600)) == [.cancelAttempt(1)], "a late winner is closed")
    }

    @Test func aFailureStartsTheNextAttemptAtOnce() {
        var race = ConnectionRace(routes: [wifi, cell])
        _ = race.handle(.resolved(.inet6, [v6[0]]), at: .zero)
        let next = race.handle(.failed(attempt: 1, error: 113), at: ms(3))
        #expect(next.first?.started?.1 == "cell fd72:6f61:6d00:ffff::2")
        #expect(next.contains(.scheduleTimer(at: ms(253))) == false, "no candidate left after it, so no timer")
    }

    @Test func failsWhenEveryAttemptFailed() {
        var race = ConnectionRace(routes: [wifi])
        _ = race.handle(.resolved(.inet6, [v6[0]]), at: .zero)
        _ = race.handle(.resolutionFailed(.inet), at: ms(1))
        #expect(race.handle(.failed(attempt: 1, error: 111), at: ms(2)) == [.fail(.allAttemptsFailed(lastError: 111))])
    }

    @Test func waitsForPendingResolutionBeforeFailing() {
        var race = ConnectionRace(routes: [wifi])
        _ = race.handle(.resolved(.inet6, [v6[0]]), at: .zero)
        #expect(race.handle(.failed(attempt: 1, error: 111), at: ms(2)).isEmpty, "A may still bring candidates")
        #expect(race.handle(.resolved(.inet, v4), at: ms(20)).first?.started?.1 == "wifi 198.19.255.2")
    }

    @Test func resolutionAndRouteFailures() {
        var nothing = ConnectionRace(routes: [wifi])
        _ = nothing.handle(.resolutionFailed(.inet6), at: .zero)
        #expect(nothing.handle(.resolutionFailed(.inet), at: ms(1)) == [.fail(.resolutionFailed)])
        var noRoute = ConnectionRace(routes: [])
        #expect(noRoute.handle(.resolved(.inet6, v6), at: .zero).isEmpty)
        #expect(noRoute.handle(.resolved(.inet, v4), at: ms(1)) == [.fail(.noRoute)])
        let v6Only = ConnectionRace.Route(interface: "wifi", index: 2, type: .wifi, ipv6: IPAddress("fd72:6f61:6d00::1")!)
        var mismatch = ConnectionRace(routes: [v6Only])
        _ = mismatch.handle(.resolutionFailed(.inet6), at: .zero)
        #expect(mismatch.handle(.resolved(.inet, v4), at: ms(1)) == [.fail(.noUsableAddress)])
    }

    @Test func theAttemptDelayIsClamped() {
        #expect(ConnectionRace.Configuration(attemptDelay: .milliseconds(1)).attemptDelay == .milliseconds(10))
        #expect(ConnectionRace.Configuration(attemptDelay: .seconds(9)).attemptDelay == .seconds(2))
    }
}

@Suite struct ConnectionPolicyTests {
    func interface(_ name: String, _ type: InterfaceType, expensive: Bool = false, constrained: Bool = false) -> NetworkInterface {
        NetworkInterface(name: name, index: 1, type: type, isExpensive: expensive, isConstrained: constrained,
                         addresses: [IPPrefix("198.18.0.1/24")!])
    }

    func path(_ interfaces: [NetworkInterface]) -> NetworkPath {
        NetworkPath(status: interfaces.isEmpty ? .unsatisfied : .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces,
                    primaryInterface: interfaces.first, isExpensive: interfaces.first?.isExpensive ?? false,
                    isConstrained: interfaces.first?.isConstrained ?? false, supportsIPv4: true, supportsIPv6: false, supportsDNS: false, gateways: [])
    }

    @Test func keepsThePathsOrderAndDropsWhatItForbids() throws {
        let both = path([interface("wifi", .wifi), interface("cell", .cellular, expensive: true)])
        #expect(try PathPolicy().permittedInterfaces(of: both).get().map(\.name) == ["wifi", "cell"])
        #expect(try PathPolicy(allowsExpensive: false).permittedInterfaces(of: both).get().map(\.name) == ["wifi"])
        #expect(try PathPolicy(requiredInterfaceType: .cellular).permittedInterfaces(of: both).get().map(\.name) == ["cell"])
    }

    @Test func saysWhyNoPathIsPermitted() throws {
        /// The refusal `policy` gives `path`; a failed test if it permits something.
        func refusal(_ policy: PathPolicy, _ path: NetworkPath) throws -> PathRefusal {
            switch policy.permittedInterfaces(of: path) {
            case .failure(let refusal): return refusal
            case .success(let permitted): throw RefusalExpected(permitted: permitted.map(\.name))
            }
        }
        let hotspot = path([interface("cell", .cellular, expensive: true)])
        let expensive = try refusal(PathPolicy(allowsExpensive: false), hotspot)
        #expect(expensive.onlyExpensive)
        #expect(expensive.description == "the only paths are expensive and the policy forbids them: cell (expensive)")
        #expect(try refusal(PathPolicy(allowsCellular: false), hotspot).onlyCellular)
        let lowData = path([interface("wifi", .wifi, constrained: true)])
        #expect(try refusal(PathPolicy(allowsConstrained: false), lowData).onlyConstrained)
        #expect(try refusal(PathPolicy(), path([])).isNoPath)
        let mixed = path([interface("wifi", .wifi, constrained: true), interface("cell", .cellular, expensive: true)])
        let both = try refusal(PathPolicy(allowsExpensive: false, allowsConstrained: false), mixed)
        #expect(both.reasons == [.expensive, .constrained] && !both.onlyExpensive)
    }
}

/// A policy permitted interfaces where the test expected a refusal.
struct RefusalExpected: Error, CustomStringConvertible {
    var permitted: [String]
    var description: String { "expected a refusal, the policy permitted \(permitted)" }
}
