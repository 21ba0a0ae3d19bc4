/// What a monitor's client allows a path to use: the requirements of `NWPathMonitor`
/// (`requiredInterfaceType`, `prohibitedInterfaceTypes`) and of `URLSessionConfiguration`
/// (`allowsExpensiveNetworkAccess`, `allowsConstrainedNetworkAccess`).
public struct PathPolicy: Sendable, Hashable {
    /// Only interfaces of this type may be used.
    public var requiredInterfaceType: InterfaceType?
    /// Interfaces of these types may not be used.
    public var prohibitedInterfaceTypes: Set<InterfaceType>
    /// Expensive interfaces may not be used.
    public var prohibitsExpensive: Bool
    /// Constrained (Low Data Mode) interfaces may not be used.
    public var prohibitsConstrained: Bool
    /// Ultra-constrained (satellite) interfaces may not be used, as with Network.framework's
    /// `allowUltraConstrainedPaths = false`. Apple's default prohibits them; Roam's permits them,
    /// as it does every other kind, so that a monitor shows what is there unless asked not to.
    public var prohibitsUltraConstrained: Bool
    /// Only interfaces whose connectivity is validated may be used, as Android's default network
    /// requires `NET_CAPABILITY_VALIDATED`: a Wi-Fi behind a captive portal, or one that reaches
    /// nothing, is left out, and with no validated interface the path is unsatisfied (`portal`
    /// or `noInternet`). Needs the monitor's `NetworkPathMonitor.Configuration.validation`;
    /// without it no interface is ever validated.
    public var requiresValidated = false

    public init(requiredInterfaceType: InterfaceType? = nil, prohibitedInterfaceTypes: Set<InterfaceType> = [],
                prohibitsExpensive: Bool = false, prohibitsConstrained: Bool = false, prohibitsUltraConstrained: Bool = false) {
        self.requiredInterfaceType = requiredInterfaceType
        self.prohibitedInterfaceTypes = prohibitedInterfaceTypes
        self.prohibitsExpensive = prohibitsExpensive
        self.prohibitsConstrained = prohibitsConstrained
        self.prohibitsUltraConstrained = prohibitsUltraConstrained
    }

    /// Why the policy forbids `interface`, or nil when it permits it. Type rules are checked
    /// first, then cost.
    public func prohibition(of interface: NetworkInterface) -> UnsatisfiedReason? {
        if let requiredInterfaceType, interface.type != requiredInterfaceType { return .prohibitedInterfaceType }
        if prohibitedInterfaceTypes.contains(interface.type) { return .prohibitedInterfaceType }
        if prohibitsExpensive && interface.isExpensive { return .prohibitedExpensive }
        if prohibitsUltraConstrained && interface.isUltraConstrained { return .prohibitedUltraConstrained }
        if prohibitsConstrained && interface.isConstrained { return .prohibitedConstrained }
        if requiresValidated, interface.type != .loopback, interface.connectivity.state != .validated {
            return interface.connectivity.state == .portal ? .portal : .noInternet
        }
        return nil
    }
}
