/// One direction of a link: `up` from the first node of `between` to the second, `down` back.
public enum TrafficDirection: String, Sendable, Hashable, CaseIterable {
    case up, down
}

/// What one direction of a link does to packets at one moment: the impairment in force and
/// whether the link is blackholed (up, but passing nothing).
public struct LinkConditions: Sendable, Hashable {
    public var impairment: Impairment
    public var isBlackholed: Bool

    public init(impairment: Impairment = Impairment(), isBlackholed: Bool = false) {
        self.impairment = impairment
        self.isBlackholed = isBlackholed
    }
}
