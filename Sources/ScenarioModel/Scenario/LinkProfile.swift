import RoamCore

/// A named set of link settings, usable as `profile:` on a link or in the timeline.
///
/// `up` is from the first node of the link to the second: with `between: [phone, server]`,
/// from the phone. Roam's own presets have figures chosen to resemble each kind of network;
/// the `nlc-` presets carry the figures of Apple's Network Link Conditioner profiles of the
/// same names (uplink as `up`, downlink as `down`), reachable by those names too
/// (`profile: "nlc:Very Bad Network"`). A scenario can define more (`profiles:`).
public struct LinkProfile: Sendable, Hashable {
    public var name: String
    public var summary: String
    public var type: InterfaceType?
    public var isExpensive: Bool?
    public var isConstrained: Bool?
    public var isUltraConstrained: Bool?
    public var up: Impairment
    public var down: Impairment

    public init(name: String, summary: String, type: InterfaceType? = nil, isExpensive: Bool? = nil, isConstrained: Bool? = nil,
                isUltraConstrained: Bool? = nil, up: Impairment, down: Impairment) {
        self.name = name
        self.summary = summary
        self.type = type
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.isUltraConstrained = isUltraConstrained
        self.up = up
        self.down = down
    }

    public static let all: [LinkProfile] = roam + networkLinkConditioner

    /// The figures of Network Link Conditioner's built-in profiles (Additional Tools for Xcode),
    /// as its pane shows them: bandwidth and delay per direction, and packet loss. A bandwidth of
    /// 0 there means "not limited", as no `rate` here. Its "High Latency DNS" delays only DNS
    /// answers, which a link cannot single out; it is not here.
    public static let networkLinkConditioner: [LinkProfile] = [
        LinkProfile(name: "nlc-3g", summary: "Network Link Conditioner's 3G", type: .cellular,
                    up: Impairment(delay: .milliseconds(100), rate: .kbit(330)),
                    down: Impairment(delay: .milliseconds(100), rate: .kbit(780))),
        LinkProfile(name: "nlc-dsl", summary: "Network Link Conditioner's DSL", type: .wiredEthernet,
                    up: Impairment(delay: .milliseconds(5), rate: .kbit(256)),
                    down: Impairment(delay: .milliseconds(5), rate: .mbit(2))),
        LinkProfile(name: "nlc-edge", summary: "Network Link Conditioner's Edge", type: .cellular,
                    up: Impairment(delay: .milliseconds(440), rate: .kbit(200)),
                    down: Impairment(delay: .milliseconds(400), rate: .kbit(240))),
        LinkProfile(name: "nlc-lte", summary: "Network Link Conditioner's LTE", type: .cellular,
                    up: Impairment(delay: .milliseconds(65), rate: .mbit(10)),
                    down: Impairment(delay: .milliseconds(50), rate: .mbit(50))),
        LinkProfile(name: "nlc-very-bad-network", summary: "Network Link Conditioner's Very Bad Network", type: nil,
                    up: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0)),
                    down: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0))),
        LinkProfile(name: "nlc-100-loss", summary: "Network Link Conditioner's 100% Loss", type: nil,
                    up: Impairment(loss: .random(rate: 1, correlation: 0)),
                    down: Impairment(loss: .random(rate: 1, correlation: 0))),
        LinkProfile(name: "nlc-wi-fi", summary: "Network Link Conditioner's Wi-Fi", type: .wifi,
                    up: Impairment(delay: .milliseconds(1), rate: .mbit(33)),
                    down: Impairment(delay: .milliseconds(1), rate: .mbit(40))),
    ]

    /// A name as profiles are looked up: lower case, `nlc:` as `nlc-`, spaces and `_` as `-`,
    /// `%` dropped (`nlc:Very Bad Network` is `nlc-very-bad-network`, `nlc:100% Loss` is `nlc-100-loss`).
    public static func normalized(_ name: String) -> String {
        var text = name.lowercased().replacing("%", with: "")
        text = String(text.map { $0 == " " || $0 == "_" || $0 == ":" ? "-" : $0 })
        while text.contains("--") { text = text.replacing("--", with: "-") }
        return text
    }

    /// Roam's own presets.
    public static let roam: [LinkProfile] = [
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
        // Direct-to-cell satellite service (a phone's own radio reaching a satellite when no cell
        // tower is in range): a few hundred kbit/s at most, long and variable delay. Carriers
        // sell it for messages; Network.framework marks such paths ultra-constrained.
        LinkProfile(name: "satellite", summary: "a carrier's direct-to-cell satellite service", type: .cellular, isExpensive: true,
                    isConstrained: nil, isUltraConstrained: true,
                    up: Impairment(delay: .milliseconds(150), jitter: .milliseconds(30), rate: .kbit(64), loss: .random(rate: 0.01, correlation: 0)),
                    down: Impairment(delay: .milliseconds(150), jitter: .milliseconds(30), rate: .kbit(256), loss: .random(rate: 0.01, correlation: 0))),
        LinkProfile(name: "very-bad-network", summary: "slow, far and lossy", type: nil, isExpensive: nil, isConstrained: nil,
                    up: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0)),
                    down: Impairment(delay: .milliseconds(500), rate: .mbit(1), loss: .random(rate: 0.10, correlation: 0))),
        LinkProfile(name: "total-loss", summary: "every packet lost", type: nil, isExpensive: nil, isConstrained: nil,
                    up: Impairment(loss: .random(rate: 1, correlation: 0)),
                    down: Impairment(loss: .random(rate: 1, correlation: 0))),
    ]

    public static func named(_ name: String) -> LinkProfile? {
        let key = normalized(name)
        return all.first { $0.name == key }
    }
}
