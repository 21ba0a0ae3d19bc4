import PathMonitor

/// A named set of link settings, usable as `profile:` on a link or in the timeline.
///
/// `up` is from the first node of the link to the second: with `between: [phone, server]`,
/// from the phone. The figures are Roam's own, chosen to resemble each kind of network.
public struct LinkProfile: Sendable, Hashable {
    public var name: String
    public var summary: String
    public var type: InterfaceType?
    public var isExpensive: Bool?
    public var isConstrained: Bool?
    public var up: Impairment
    public var down: Impairment

    public static let all: [LinkProfile] = [
        LinkProfile(name: "home-wifi", summary: "a good home Wi-Fi", type: .wifi, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(4), jitter: .milliseconds(1), rate: .mbit(40), loss: .random(rate: 0.001, correlation: 0)),
                    down: Impairment(delay: .milliseconds(4), jitter: .milliseconds(1), rate: .mbit(100), loss: .random(rate: 0.001, correlation: 0))),
        LinkProfile(name: "wifi", summary: "an ordinary Wi-Fi", type: .wifi, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(2), rate: .mbit(33)),
                    down: Impairment(delay: .milliseconds(2), rate: .mbit(40))),
        LinkProfile(name: "airplane-wifi", summary: "satellite Wi-Fi on a plane, metered by the airline", type: .wifi, isExpensive: nil, isConstrained: true,
                    up: Impairment(delay: .milliseconds(300), jitter: .milliseconds(50), rate: .kbit(512), loss: .random(rate: 0.01, correlation: 0.25)),
                    down: Impairment(delay: .milliseconds(300), jitter: .milliseconds(50), rate: .mbit(2), loss: .random(rate: 0.01, correlation: 0.25))),
        LinkProfile(name: "lte", summary: "a good LTE cell", type: .cellular, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(30), jitter: .milliseconds(5), rate: .mbit(10)),
                    down: Impairment(delay: .milliseconds(25), jitter: .milliseconds(5), rate: .mbit(50))),
        LinkProfile(name: "3g", summary: "a 3G cell", type: .cellular, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(100), rate: .kbit(330)),
                    down: Impairment(delay: .milliseconds(100), rate: .kbit(780))),
        LinkProfile(name: "edge", summary: "EDGE (2.5G)", type: .cellular, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(440), rate: .kbit(200)),
                    down: Impairment(delay: .milliseconds(400), rate: .kbit(240))),
        LinkProfile(name: "dsl", summary: "an ADSL line", type: .wiredEthernet, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(5), rate: .kbit(256)),
                    down: Impairment(delay: .milliseconds(5), rate: .mbit(2))),
        LinkProfile(name: "very-bad-network", summary: "slow, far and lossy", type: nil, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0)),
                    down: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0))),
        LinkProfile(name: "total-loss", summary: "every packet lost", type: nil, isExpensive: nil, isConstrained: nil,
                    up: Impairment(loss: .random(rate: 1, correlation: 0)),
                    down: Impairment(loss: .random(rate: 1, correlation: 0))),
    ]

    public static func named(_ name: String) -> LinkProfile? {
        all.first { $0.name == name.lowercased() }
    }
}
