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

/// The policy of 0.3.0's races and handovers, now the one `PathPolicy` that the monitor,
/// races, handovers and MPTCP subflows share. Its `serviceType` is gone (only RoamNIO read
/// it, to pick MPTCP sockets): `RoamClientBootstrap.multipathServiceType(_:)`,
/// `MPTCPPathManager` and ``HandoverStateMachine/Configuration/serviceType`` take the service
/// type.
@available(*, deprecated, renamed: "PathPolicy")
public typealias ConnectionPolicy = PathPolicy
