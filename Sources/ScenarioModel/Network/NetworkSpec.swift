import RoamCore

/// An access network a phone joins (`networks:`): a Wi-Fi, a cellular or a wired network with a
/// gateway node that routes it to a shared internet, where the scenario's servers live.
///
/// A network is made of links and nodes the reader adds to the scenario (see ``Scenario/networks``):
/// - an access link from each phone that ever joins it to the gateway (the radio: every
///   impairment, event and profile applies, as to a link), its interface in the phone named after
///   the network;
/// - a gateway node `NAME-gw`, which hands out addresses (IPv4 private behind NAT44, or carrier-grade
///   NAT in 100.64.0.0/10; an IPv6 prefix of the network's own), resolves names, and translates
///   IPv6 to IPv4 (NAT64 with DNS64) where the network does;
/// - an uplink from the gateway to the node `internet`.
public struct NetworkSpec: Sendable, Hashable {
    /// How a network gives its phones IPv4.
    public enum IPv4Service: String, Sendable, Hashable, CaseIterable {
        /// A private address (192.168.0.0/16) translated by the gateway (`masquerade`).
        case nat44
        /// A carrier-grade NAT address (100.64.0.0/10, RFC 6598), translated by the carrier.
        case cgnat
        /// No IPv4 at all: an IPv6-only network.
        case none
    }

    public var name: String
    public var type: InterfaceType
    public var ipv4: IPv4Service
    /// The network gives an IPv6 prefix of its own (`fd72:6f61:6eNN::/64`), routed without
    /// translation.
    public var ipv6: Bool
    /// The gateway translates IPv6 to IPv4 for `64:ff9b::/96` (RFC 6052, the well-known prefix)
    /// and its resolver synthesizes AAAA records for IPv4-only names (DNS64, RFC 6147), as
    /// IPv6-only cellular carriers do.
    public var nat64: Bool
    /// The nodes with a radio for the network (`members:`), each with an access link to the
    /// gateway, in order.
    public var members: [String]
    /// The members joined when the scenario starts: all but those whose first membership event
    /// on the timeline is a `join`.
    public var joinedAtStart: [String]
    /// The network's captive portal (`portal:`), if it has one: until a phone logs in, its
    /// traffic goes no further than the gateway.
    public var portal: CaptivePortal?
    /// The line of the scenario file that defines it (0: not read from a file).
    public var line = 0

    public init(name: String, type: InterfaceType, ipv4: IPv4Service, ipv6: Bool = true, nat64: Bool = false, members: [String] = [],
                joinedAtStart: [String]? = nil) {
        self.name = name
        self.type = type
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.nat64 = nat64
        self.members = members
        self.joinedAtStart = joinedAtStart ?? members
    }

    /// The address families the network gives its phones.
    public var families: Set<IPFamily> {
        var families: Set<IPFamily> = []
        if ipv4 != .none { families.insert(.ipv4) }
        if ipv6 { families.insert(.ipv6) }
        return families
    }

    /// The gateway node's name.
    public var gateway: String { Self.gatewayName(of: name) }

    /// `NAME-gw`.
    public static func gatewayName(of network: String) -> String { "\(network)-gw" }

    /// The name of the access link of `node`: `NETWORK.NODE`.
    public static func accessLinkName(network: String, node: String) -> String { "\(network).\(node)" }

    /// The name of the gateway's uplink: `NETWORK.uplink`.
    public static func uplinkName(network: String) -> String { "\(network).uplink" }

    /// The node every network's gateway and every server is attached to.
    public static let internetNode = "internet"

    /// The name of a server's link to the internet: `NODE.internet`.
    public static func attachmentName(server: String) -> String { "\(server).internet" }

    /// The most members a network has.
    public static let maximumMembers = 40

    /// The longest network name: it names the phone's interface.
    public static let maximumNameLength = 12
}

/// A network's captive portal (`portal:`), as hotels, trains and cafés have: until a phone
/// logs in, the gateway answers its HTTP (port 80) with a redirect to the portal's page and
/// stops everything else it would forward; the portal's API (RFC 8908) tells the phone's
/// monitor whether it is held and how long its session lasts. A phone logs in by a timeline
/// event (`portal: login`) or by POSTing to the portal's page, as a browser does.
public struct CaptivePortal: Sendable, Hashable {
    /// What the portal does with a phone's DNS before login.
    public enum DNS: String, Sendable, Hashable, CaseIterable {
        /// Queries reach the network's resolver: names resolve as after login.
        case through
        /// The gateway answers every query itself with its own address (many portals do), so
        /// that any HTTP request reaches the portal.
        case hijack
    }

    /// What the portal does with traffic it does not redirect.
    public enum Blocking: String, Sendable, Hashable, CaseIterable {
        /// Dropped: connections time out.
        case drop
        /// Refused: TCP gets a reset, the rest an ICMP "administratively prohibited".
        case reset
    }

    public var dns: DNS
    public var others: Blocking
    /// How long a login lasts (nil: until a `portal: logout`, or the run's end).
    public var expires: Duration?
    /// Whether the network announces the portal's API (RFC 8910; a phone's monitor then asks it).
    public var announcesAPI: Bool

    public init(dns: DNS = .through, others: Blocking = .drop, expires: Duration? = nil, announcesAPI: Bool = true) {
        self.dns = dns
        self.others = others
        self.expires = expires
        self.announcesAPI = announcesAPI
    }

    /// The host name of every network's portal: each network's resolver answers it with its own
    /// gateway.
    public static let host = "portal.roam.test"

    /// The shortest session a portal gives.
    public static let minimumExpiry = Duration.seconds(1)
}

/// What a node is in a scenario with networks.
public enum NodeRole: Sendable, Hashable {
    /// A node of the scenario's own: a phone, or either end of a link.
    case host
    /// A server on the internet, reached through the networks' gateways: `names` are its host
    /// names (A and AAAA records of the scenario's zone), `families` the addresses it has.
    case server(names: [String], families: Set<IPFamily>)
    /// The gateway of a network (added by the reader).
    case gateway(network: String)
    /// The internet every gateway and server is attached to (added by the reader).
    case internet
}

/// What a link is in a scenario with networks.
public enum LinkRole: Sendable, Hashable {
    /// A direct link between two nodes, as written under `links:`.
    case direct
    /// A phone's radio to a network's gateway: `index` is the phone's place among the network's phones.
    case access(network: String, node: String, index: Int)
    /// A gateway's link to the internet.
    case uplink(network: String)
    /// A server's link to the internet.
    case attachment(server: String)
}
