/// How a path's interfaces that are not validated are used: the one connectivity rule of the
/// monitor, of connection races, of handovers and of MPTCP subflows (under the kernel's path
/// manager and under Roam's userspace one alike).
///
/// Interfaces rank by what their connectivity check found: `validated`, then `unknown` (not
/// checked yet, or validation is off), then `portal` and `limited`
/// (``rank(_:)``). The rule says what the ranks mean:
///
/// | | validated | unknown | portal, limited |
/// |---|---|---|---|
/// | ``ignore`` | carries | carries | carries |
/// | ``prefer``, while one is validated | carries | stands by | left out |
/// | ``prefer``, none validated, one unknown | — | carries | stands by |
/// | ``prefer``, only portal or limited | — | — | carries |
/// | ``require`` | carries | left out | left out |
///
/// An interface that **carries** may be raced, be the primary a flow is on or moves back to,
/// and have MPTCP subflows (an endpoint of the kernel's path manager, a subflow Roam's opens).
/// One that **stands by** is raced only after every carrier, for a flow that has nowhere else
/// to go: it gets no subflow (a portal found a moment later would hold it) and no flow moves
/// onto it from a carrier; a flow already on it stays. One **left out** is not raced and gets
/// no subflow, and a flow on it leaves it for a carrier (``Role``).
///
/// ``prefer`` is Android's default network (a validated network is preferred, one still being
/// checked is used only when no validated one is, one with a portal or no internet only when
/// nothing better is there) and iOS's, which keeps apps on cellular while a hotel's Wi-Fi holds
/// them at its portal. ``require`` is Android's `NET_CAPABILITY_VALIDATED` requested
/// explicitly. Without validation every interface is `unknown`, and ``prefer`` changes nothing.
public enum ValidationRule: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Connectivity plays no part: every permitted interface carries.
    case ignore
    /// The best rank present carries, the next stands by, the rest are left out.
    case prefer
    /// Only validated interfaces (and loopback) may be used.
    case require

    /// What an interface may do under the rule (see ``ValidationRule``).
    public enum Role: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
        /// Raced, chosen, moved back to, a subflow that carries data.
        case carries
        /// Raced after every carrier; no subflow, not moved onto from a carrier.
        case standsBy
        /// Not used; a flow on it leaves it for a carrier.
        case leftOut

        public static func < (lhs: Role, rhs: Role) -> Bool { lhs.rawValue < rhs.rawValue }

        public var description: String {
            switch self {
            case .carries: "carries"
            case .standsBy: "stands by"
            case .leftOut: "left out"
            }
        }
    }

    /// The rank of a connectivity state: 0 validated, 1 unknown, 2 portal or limited. The path's
    /// order (the monitor's) puts lower ranks first, whatever the rule.
    ///
    /// - Parameter state: What the interface's connectivity check found.
    /// - Returns: Its rank; lower is better.
    public static func rank(_ state: InterfaceConnectivity.State) -> Int {
        switch state {
        case .validated: 0
        case .unknown: 1
        case .portal, .limited: 2
        }
    }

    /// The best rank among `interfaces` that are not loopback (nil when there are none).
    ///
    /// - Parameter interfaces: The interfaces a policy permits.
    /// - Returns: The lowest ``rank(_:)`` of their connectivity.
    public static func bestRank(among interfaces: some Sequence<NetworkInterface>) -> Int? {
        var best: Int?
        for interface in interfaces where interface.type != .loopback {
            let rank = rank(interface.connectivity.state)
            if rank < best ?? .max { best = rank }
        }
        return best
    }

    /// What `interface` may do, given the best rank among the interfaces permitted with it.
    ///
    /// - Parameters:
    ///   - interface: One of the permitted interfaces.
    ///   - bestRank: ``bestRank(among:)`` of the permitted interfaces.
    /// - Returns: Its ``Role``; loopback always carries.
    public func role(of interface: NetworkInterface, bestRank: Int?) -> Role {
        guard interface.type != .loopback else { return .carries }
        let rank = Self.rank(interface.connectivity.state)
        switch self {
        case .ignore:
            return .carries
        case .require:
            return interface.connectivity.state == .validated ? .carries : .leftOut
        case .prefer:
            let best = bestRank ?? rank
            return rank <= best ? .carries : rank == best + 1 ? .standsBy : .leftOut
        }
    }

    public var description: String { rawValue }
}

/// What a path or a flow may use: the counterpart of URLSession's
/// `allowsExpensiveNetworkAccess`, `allowsConstrainedNetworkAccess`,
/// `allowsUltraConstrainedNetworkAccess` and `allowsCellularAccess`, and of
/// `NWParameters.requiredInterfaceType` and `prohibitedInterfaceTypes`, with the connectivity
/// rule (``validation``). One policy for the monitor's path (`NetworkPathMonitor`), connection
/// races, handovers and MPTCP subflows.
public struct PathPolicy: Sendable, Hashable {
    /// Whether expensive interfaces (cellular, a phone's hotspot) may be used.
    public var allowsExpensive: Bool
    /// Whether interfaces in Low Data Mode (constrained) may be used.
    public var allowsConstrained: Bool
    /// Whether a carrier's satellite network (ultra-constrained) may be used. Apple's URLSession
    /// forbids it unless asked; Roam permits it unless told not to, as it does every other
    /// kind, and an app that would rather wait for a better network sets this to false.
    public var allowsUltraConstrained: Bool
    /// Whether cellular interfaces may be used.
    public var allowsCellular: Bool
    /// Only interfaces of this type may be used.
    public var requiredInterfaceType: InterfaceType?
    /// Interfaces of these types may not be used.
    public var prohibitedInterfaceTypes: Set<InterfaceType>
    /// How interfaces that are not validated are used (needs the monitor's
    /// `NetworkPathMonitor.Configuration.validation`; without it every interface is `unknown`).
    /// ``ValidationRule/prefer`` by default; the monitor's own default is
    /// ``ValidationRule/ignore``, so that its path shows every interface there is.
    public var validation: ValidationRule

    /// A policy that permits what it is not told to refuse.
    ///
    /// - Parameters:
    ///   - allowsExpensive: Whether expensive interfaces may be used.
    ///   - allowsConstrained: Whether interfaces in Low Data Mode may be used.
    ///   - allowsUltraConstrained: Whether a satellite network may be used.
    ///   - allowsCellular: Whether cellular interfaces may be used.
    ///   - requiredInterfaceType: The only type of interface that may be used, if any.
    ///   - prohibitedInterfaceTypes: Types of interface that may not be used.
    ///   - validation: How interfaces that are not validated are used.
    public init(allowsExpensive: Bool = true, allowsConstrained: Bool = true, allowsUltraConstrained: Bool = true, allowsCellular: Bool = true,
                requiredInterfaceType: InterfaceType? = nil, prohibitedInterfaceTypes: Set<InterfaceType> = [],
                validation: ValidationRule = .prefer) {
        self.allowsExpensive = allowsExpensive
        self.allowsConstrained = allowsConstrained
        self.allowsUltraConstrained = allowsUltraConstrained
        self.allowsCellular = allowsCellular
        self.requiredInterfaceType = requiredInterfaceType
        self.prohibitedInterfaceTypes = prohibitedInterfaceTypes
        self.validation = validation
    }

    /// Why `interface` may not be used on its own account, if it may not: its type, its cost, or
    /// (with ``ValidationRule/require``) its connectivity. ``ValidationRule/prefer`` depends on
    /// the other interfaces: see ``role(of:in:)``.
    ///
    /// - Parameter interface: An interface of a path.
    /// - Returns: The first rule it breaks (type rules first, then cost, then connectivity), or
    ///   nil when it is permitted.
    public func refusal(of interface: NetworkInterface) -> PathRefusal.Reason? {
        if let required = requiredInterfaceType, interface.type != required { return .notRequiredType(required) }
        if prohibitedInterfaceTypes.contains(interface.type) { return .prohibitedType(interface.type) }
        if !allowsCellular, interface.type == .cellular { return .cellular }
        if !allowsExpensive, interface.isExpensive { return .expensive }
        if !allowsUltraConstrained, interface.isUltraConstrained { return .ultraConstrained }
        if !allowsConstrained, interface.isConstrained { return .constrained }
        if validation == .require, interface.type != .loopback, interface.connectivity.state != .validated {
            return .notValidated(interface.connectivity.state)
        }
        return nil
    }

    /// ``refusal(of:)`` as the monitor reports it (`NetworkPath.unsatisfiedReason`).
    ///
    /// - Parameter interface: An interface of a path.
    /// - Returns: Why the policy forbids it, or nil when it permits it.
    public func prohibition(of interface: NetworkInterface) -> UnsatisfiedReason? {
        refusal(of: interface).map(\.unsatisfiedReason)
    }

    /// What `interface` may do on `path` under ``validation``, among the interfaces this policy
    /// permits there.
    ///
    /// - Parameters:
    ///   - interface: An interface of `path`.
    ///   - path: The path as the monitor gives it.
    /// - Returns: ``ValidationRule/Role/leftOut`` for an interface the policy refuses, else its
    ///   role under the connectivity rule.
    public func role(of interface: NetworkInterface, in path: NetworkPath) -> ValidationRule.Role {
        guard refusal(of: interface) == nil else { return .leftOut }
        let best = ValidationRule.bestRank(among: path.availableInterfaces.lazy.filter { refusal(of: $0) == nil })
        return validation.role(of: interface, bestRank: best)
    }

    /// The interfaces of `path` this policy permits, in the order they are to be tried, or why
    /// there are none.
    ///
    /// - Parameter path: The path as the monitor gives it.
    /// - Returns: The permitted interfaces that are up with an address: those that carry in the
    ///   path's order (the primary first, then free before costly), then those that stand by;
    ///   those left out are not there (``validation``). Or a ``PathRefusal`` that says why none is.
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
        let best = ValidationRule.bestRank(among: permitted)
        let roles = permitted.map { validation.role(of: $0, bestRank: best) }
        return .success(zip(permitted, roles).filter { $0.1 == .carries }.map(\.0) + zip(permitted, roles).filter { $0.1 == .standsBy }.map(\.0))
    }

    // MARK: The names of 0.3.0

    /// Expensive interfaces may not be used: `!allowsExpensive`.
    @available(*, deprecated, message: "use allowsExpensive (its opposite), as URLSession's allowsExpensiveNetworkAccess")
    public var prohibitsExpensive: Bool {
        get { !allowsExpensive }
        set { allowsExpensive = !newValue }
    }

    /// Constrained interfaces may not be used: `!allowsConstrained`.
    @available(*, deprecated, message: "use allowsConstrained (its opposite), as URLSession's allowsConstrainedNetworkAccess")
    public var prohibitsConstrained: Bool {
        get { !allowsConstrained }
        set { allowsConstrained = !newValue }
    }

    /// Ultra-constrained interfaces may not be used: `!allowsUltraConstrained`.
    @available(*, deprecated, message: "use allowsUltraConstrained (its opposite)")
    public var prohibitsUltraConstrained: Bool {
        get { !allowsUltraConstrained }
        set { allowsUltraConstrained = !newValue }
    }

    /// Only validated interfaces may be used: `validation == .require`.
    @available(*, deprecated, message: "use validation = .require")
    public var requiresValidated: Bool {
        get { validation == .require }
        set { validation = newValue ? .require : .ignore }
    }

    /// Validated interfaces are preferred: `validation != .ignore`.
    @available(*, deprecated, message: "use validation = .prefer (or .ignore for false)")
    public var prefersValidated: Bool {
        get { validation != .ignore }
        set { validation = newValue ? .prefer : .ignore }
    }
}

/// Why no path was permitted, in the terms an app needs to fall back: only expensive, only
/// constrained, only cellular paths exist and the policy forbids them; or there is no path at all.
public struct PathRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// A rule of ``PathPolicy`` an interface breaks.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        case expensive, constrained, ultraConstrained, cellular
        case prohibitedType(InterfaceType)
        case notRequiredType(InterfaceType)
        /// ``ValidationRule/require``, and the interface's connectivity is this.
        case notValidated(InterfaceConnectivity.State)

        public var description: String {
            switch self {
            case .expensive: "expensive"
            case .constrained: "constrained (Low Data Mode)"
            case .ultraConstrained: "ultra-constrained (a satellite network)"
            case .cellular: "cellular"
            case .prohibitedType(let type): "\(type), a prohibited type"
            case .notRequiredType(let type): "not \(type), the required type"
            case .notValidated(let state): "not validated (\(state))"
            }
        }

        /// The reason as the monitor reports it.
        public var unsatisfiedReason: UnsatisfiedReason {
            switch self {
            case .expensive: .prohibitedExpensive
            case .constrained: .prohibitedConstrained
            case .ultraConstrained: .prohibitedUltraConstrained
            case .cellular, .prohibitedType, .notRequiredType: .prohibitedInterfaceType
            case .notValidated(let state): state == .portal ? .portal : .noInternet
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
    /// Every available path is cellular and the policy forbids cellular.
    public var onlyCellular: Bool { reasons == [.cellular] }

    public var description: String {
        if isNoPath { return "no network path: no interface is up with an address and a route" }
        if reasons.count == 1, let reason = reasons.first {
            return "the only paths are \(reason) and the policy forbids them: \(refused.joined(separator: ", "))"
        }
        return "no permitted path: \(refused.joined(separator: ", "))"
    }
}
