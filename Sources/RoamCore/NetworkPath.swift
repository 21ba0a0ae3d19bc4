
/// One interface as a path presents it: what kind of network it is, what it costs, and its state.
public struct NetworkInterface: Sendable, Hashable, CustomStringConvertible {
    /// The interface name, `wlan0`.
    public var name: String
    /// The interface index.
    public var index: Int32
    /// The kind of network.
    public var type: InterfaceType
    /// Traffic on this interface costs money (cellular, a phone's hotspot).
    public var isExpensive: Bool
    /// The user asked to save data on this interface (Low Data Mode).
    public var isConstrained: Bool
    /// A carrier's satellite network: send small, infrequent messages, defer the rest.
    public var isUltraConstrained: Bool
    /// How good the link is; `LinkQuality/unknown` unless a tag, a rule or the simulator says.
    public var linkQuality: LinkQuality
    /// The RFC 2863 operational state.
    public var state: OperationalState
    /// The MTU.
    public var mtu: UInt32
    /// The addresses, with prefix lengths, IPv4 first.
    public var addresses: [IPPrefix]
    /// Whether the interface reaches the internet, when the monitor validates connectivity
    /// (`NetworkPathMonitor.Configuration.validation`); `unknown` otherwise.
    public var connectivity = InterfaceConnectivity()

    public init(name: String, index: Int32, type: InterfaceType, isExpensive: Bool = false, isConstrained: Bool = false,
                isUltraConstrained: Bool = false, linkQuality: LinkQuality = .unknown,
                state: OperationalState = .up, mtu: UInt32 = 1500, addresses: [IPPrefix] = []) {
        self.name = name
        self.index = index
        self.type = type
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.isUltraConstrained = isUltraConstrained
        self.linkQuality = linkQuality
        self.state = state
        self.mtu = mtu
        self.addresses = addresses
    }

    public var description: String { "\(name)(\(type))" }
}

/// The status of a path, as with `NWPath.Status`.
public enum PathStatus: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// A permitted interface is up and has a route: connections can be attempted.
    case satisfied
    /// No permitted interface can carry traffic now; ``NetworkPath/unsatisfiedReason`` says why.
    case unsatisfied
    /// No permitted interface carries traffic now, but one is waiting to connect (an interface
    /// in the `dormant` state, such as Wi-Fi during 802.1X authentication).
    case requiresConnection
    public var description: String { rawValue }
}

/// Why a path is not satisfied, in terms an app can act on.
public enum UnsatisfiedReason: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// No interface other than loopback is up and running with an address.
    case noUsableInterface
    /// Interfaces are up, but none has a default route.
    case noRoute
    /// The interface that would carry traffic is of a type the monitor requires not to use
    /// (see `requiredInterfaceType` and `prohibitedInterfaceTypes`).
    case prohibitedInterfaceType
    /// The interface that would carry traffic is expensive and the monitor prohibits expensive paths.
    case prohibitedExpensive
    /// The interface that would carry traffic is constrained and the monitor prohibits constrained paths.
    case prohibitedConstrained
    /// The interface that would carry traffic is ultra-constrained (satellite) and the monitor
    /// prohibits ultra-constrained paths.
    case prohibitedUltraConstrained
    /// The policy requires a validated interface (``PathPolicy/validation`` `.require`), and the best
    /// left is behind a captive portal.
    case portal
    /// The policy requires a validated interface, and none is: their probes found no internet,
    /// or have not answered yet.
    case noInternet
    public var description: String { rawValue }
}

/// A snapshot of the network path of a namespace, under a monitor's policy: the counterpart of
/// Network.framework's `NWPath`.
public struct NetworkPath: Sendable, Hashable {
    /// Whether connections can be attempted now.
    public var status: PathStatus
    /// Why ``status`` is not satisfied; nil when it is.
    public var unsatisfiedReason: UnsatisfiedReason?
    /// The interfaces the policy permits and that are up with an address, in preference order:
    /// the primary interface first, then those that are free before those that cost
    /// (not expensive, then not constrained), then wired, Wi-Fi, cellular, other, then by route
    /// metric. Loopback, when present, is last.
    public var availableInterfaces: [NetworkInterface]
    /// The interface of the best default route among the permitted ones (lowest metric,
    /// main table first): what an unbound socket would use.
    public var primaryInterface: NetworkInterface?
    /// The primary interface is expensive.
    public var isExpensive: Bool
    /// The primary interface is constrained (Low Data Mode, or ultra-constrained).
    public var isConstrained: Bool
    /// The primary interface is ultra-constrained: a carrier's satellite network, where an app
    /// should defer what can wait and send small, infrequent messages (`NWPath.isUltraConstrained`).
    public var isUltraConstrained: Bool
    /// The link quality of the primary interface; `LinkQuality/unknown` without one
    /// (`NWPath.linkQuality`). Tune initial values with it; never gate connection attempts on it.
    public var linkQuality: LinkQuality
    /// A permitted interface has an IPv4 address and an IPv4 default route.
    public var supportsIPv4: Bool
    /// A permitted interface has a usable non-link-local IPv6 address and an IPv6 default route.
    public var supportsIPv6: Bool
    /// A resolver is configured and a route over a permitted interface reaches it.
    public var supportsDNS: Bool
    /// The gateways of the permitted default routes, the primary interface's first.
    public var gateways: [IPAddress]
    /// The primary interface's connectivity, when the monitor validates it; `unknown` otherwise.
    public var connectivity: InterfaceConnectivity.State = .unknown

    public init(status: PathStatus, unsatisfiedReason: UnsatisfiedReason?, availableInterfaces: [NetworkInterface],
                primaryInterface: NetworkInterface?, isExpensive: Bool, isConstrained: Bool, isUltraConstrained: Bool = false,
                linkQuality: LinkQuality = .unknown, supportsIPv4: Bool, supportsIPv6: Bool, supportsDNS: Bool, gateways: [IPAddress]) {
        self.status = status
        self.unsatisfiedReason = unsatisfiedReason
        self.availableInterfaces = availableInterfaces
        self.primaryInterface = primaryInterface
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.isUltraConstrained = isUltraConstrained
        self.linkQuality = linkQuality
        self.supportsIPv4 = supportsIPv4
        self.supportsIPv6 = supportsIPv6
        self.supportsDNS = supportsDNS
        self.gateways = gateways
    }

    /// True when the path uses an interface of `type`: the primary one, or when there is no
    /// primary, any available one (as `NWPath.usesInterfaceType(_:)`).
    public func usesInterfaceType(_ type: InterfaceType) -> Bool {
        if let primaryInterface { return primaryInterface.type == type }
        return availableInterfaces.contains { $0.type == type }
    }
}
