/// One direction of a link: `up` from the first node of `between` to the second, `down` back.
public enum TrafficDirection: String, Sendable, Hashable, CaseIterable {
    case up, down
}

/// What one direction of a link does to packets at one moment: the impairment in force,
/// whether the link is blackholed (up, but passing nothing), and the flows that get conditions
/// of their own (`match:`), the first that matches a packet taking it.
public struct LinkConditions: Sendable, Hashable {
    public var impairment: Impairment
    public var isBlackholed: Bool
    /// At most ``ScenarioLimits/maximumFlows``, in the order they were set.
    public var flows: [FlowConditions]

    public init(impairment: Impairment = Impairment(), isBlackholed: Bool = false) {
        self.init(impairment: impairment, isBlackholed: isBlackholed, flows: [])
    }

    /// Conditions with flows of their own (`match:`).
    public init(impairment: Impairment = Impairment(), isBlackholed: Bool = false, flows: [FlowConditions]) {
        self.impairment = impairment
        self.isBlackholed = isBlackholed
        self.flows = flows
    }

    /// The link's own conditions, without its flows.
    public var withoutFlows: LinkConditions { LinkConditions(impairment: impairment, isBlackholed: isBlackholed) }
}
