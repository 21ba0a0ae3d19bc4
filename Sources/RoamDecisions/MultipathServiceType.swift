import RoamCore

/// How a connection may use multiple paths, as URLSession's `multipathServiceType`.
public enum MultipathServiceType: String, Sendable, Hashable, CaseIterable {
    /// One path at a time, the primary.
    case none
    /// The primary path carries the data; another takes over when it is lost or stalls (Wi-Fi
    /// Assist's behavior), and the flow moves back when the primary returns.
    case handover
    /// Paths stay open; the one with the lowest latency carries the data.
    case interactive
    /// All permitted paths carry data at once.
    case aggregate
}

/// Which paths a connection may use: the counterpart of URLSession's
/// `allowsExpensiveNetworkAccess`, `allowsConstrainedNetworkAccess`,
/// `allowsUltraConstrainedNetworkAccess` and `allowsCellularAccess`,
/// of `NWParameters.requiredInterfaceType` and `prohibitedInterfaceTypes`, and of
/// `multipathServiceType`.
public struct ConnectionPolicy: Sendable, Hashable {
    public var allowsExpensive = true
    /// Whether paths in Low Data Mode may be used.
    public var allowsConstrained = true
    /// Whether a carrier's satellite network (ultra-constrained) may be used. Apple's URLSession
    /// forbids it unless asked; Roam permits it unless told not to, as `PathPolicy` does, and
    /// an app that would rather wait for a better network sets this to false.
    public var allowsUltraConstrained = true
    public var allowsCellular = true
    public var requiredInterfaceType: InterfaceType?
    public var prohibitedInterfaceTypes: Set<InterfaceType> = []
    public var serviceType: MultipathServiceType = .none
    /// While an interface is validated (`InterfaceConnectivity`, when the monitor validates
    /// connectivity), interfaces behind a captive portal or without internet (`portal`,
    /// `limited`) are not raced, and one whose check has not answered yet is raced after the
    /// validated ones, as iOS keeps apps on cellular until a portal is passed and Android's
    /// default network is a validated one. Without validation every interface is `unknown`,
    /// and this changes nothing. True by default.
    public var prefersValidated = true

    /// A policy that permits what it is not told to refuse.
    ///
    /// - Parameters:
    ///   - allowsExpensive: Whether expensive interfaces may be used.
    ///   - allowsConstrained: Whether interfaces in Low Data Mode may be used.
    ///   - allowsUltraConstrained: Whether a satellite network may be used.
    ///   - allowsCellular: Whether cellular interfaces may be used.
    ///   - requiredInterfaceType: The only type of interface that may be used, if any.
    ///   - prohibitedInterfaceTypes: Types of interface that may not be used.
    ///   - serviceType: How MPTCP uses the paths.
    public init(allowsExpensive: Bool = true, allowsConstrained: Bool = true, allowsUltraConstrained: Bool = true, allowsCellular: Bool = true,
                requiredInterfaceType: InterfaceType? = nil, prohibitedInterfaceTypes: Set<InterfaceType> = [],
                serviceType: MultipathServiceType = .none) {
        self.allowsExpensive = allowsExpensive
        self.allowsConstrained = allowsConstrained
        self.allowsUltraConstrained = allowsUltraConstrained
        self.allowsCellular = allowsCellular
        self.requiredInterfaceType = requiredInterfaceType
        self.prohibitedInterfaceTypes = prohibitedInterfaceTypes
        self.serviceType = serviceType
    }

    /// Why an interface is not permitted, if it is not.
    ///
    /// - Parameter interface: An interface of a path.
    /// - Returns: The first rule it breaks (type rules first, then cost), or nil when it is
    ///   permitted.
    public func refusal(of interface: NetworkInterface) -> PathRefusal.Reason? {
        if let required = requiredInterfaceType, interface.type != required { return .notRequiredType(required) }
        if prohibitedInterfaceTypes.contains(interface.type) { return .prohibitedType(interface.type) }
        if !allowsCellular, interface.type == .cellular { return .cellular }
        if !allowsExpensive, interface.isExpensive { return .expensive }
        if !allowsUltraConstrained, interface.isUltraConstrained { return .ultraConstrained }
        if !allowsConstrained, interface.isConstrained { return .constrained }
        return nil
    }

    /// The interfaces of `path` this policy permits, in the path's order of preference (the
    /// primary first, then free before costly), or why there are none.
    ///
    /// - Parameter path: The path as the monitor gives it.
    /// - Returns: The permitted interfaces that are up with an address (validated ones first,
    ///   with ``prefersValidated``), or a ``PathRefusal`` that says why none is.
    public func permittedInterfaces(of path: NetworkPath) -> Result<[NetworkInterface], PathRefusal> {
        let candidates = path.availableInterfaces.filter { $0.type != .loopback && !$0.addresses.isEmpty }
        guard !candidates.isEmpty else { return .failure(PathRefusal(reasons: [], refused: [])) }
        var permitted: [NetworkInterface] = []
        var refused: [(String, PathRefusal.Reason)] = []
        for interface in candidates {
            if let reason = refusal(of: interface) { refused.append((interface.name, reason)) } else { permitted.append(interface) }
        }
        if permitted.isEmpty {
            return .failure(PathRefusal(reasons: Set(refused.map(\.1)), refused: refused.map { "\($0.0) (\($0.1))" }))
        }
        if prefersValidated, permitted.contains(where: { $0.connectivity.state == .validated }) {
            // Android's default network and iOS's primary: a network behind a portal or without
            // internet is not used, and one still being checked comes after those that passed.
            permitted.removeAll { $0.connectivity.state == .portal || $0.connectivity.state == .limited }
            permitted = permitted.filter { $0.connectivity.state == .validated } + permitted.filter { $0.connectivity.state != .validated }
        }
        return .success(permitted)
    }
}

/// Why no path was permitted, in the terms an app needs to fall back: only expensive, only
/// constrained, only cellular paths exist and the policy forbids them; or there is no path at all.
public struct PathRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        case expensive, constrained, ultraConstrained, cellular
        case prohibitedType(InterfaceType)
        case notRequiredType(InterfaceType)

        public var description: String {
            switch self {
            case .expensive: "expensive"
            case .constrained: "constrained (Low Data Mode)"
            case .ultraConstrained: "ultra-constrained (a satellite network)"
            case .cellular: "cellular"
            case .prohibitedType(let type): "\(type), a prohibited type"
            case .notRequiredType(let type): "not \(type), the required type"
            }
        }
    }

    /// Every reason an available path was refused; empty when there was no path at all.
    public var reasons: Set<Reason>
    /// The interfaces refused, with their reason.
    public var refused: [String]

    package init(reasons: Set<Reason>, refused: [String]) {
        self.reasons = reasons
        self.refused = refused
    }

    /// No interface is up with an address and a route.
    public var isNoPath: Bool { reasons.isEmpty }
    /// Every available path is expensive and the policy forbids that: retry allowing it, or ask for less.
    public var onlyExpensive: Bool { reasons == [.expensive] }
    /// Every available path is in Low Data Mode: retry with a smaller request, as Apple's guidance says.
    public var onlyConstrained: Bool { reasons == [.constrained] }
    /// Every available path is a satellite network: defer what can wait, or send only small messages.
    public var onlyUltraConstrained: Bool { reasons == [.ultraConstrained] }
    public var onlyCellular: Bool { reasons == [.cellular] }

    public var description: String {
        if isNoPath { return "no network path: no interface is up with an address and a route" }
        if reasons.count == 1, let reason = reasons.first {
            return "the only paths are \(reason) and the policy forbids them: \(refused.joined(separator: ", "))"
        }
        return "no permitted path: \(refused.joined(separator: ", "))"
    }
}
