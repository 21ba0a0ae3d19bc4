import Multipath
import PathMonitor

/// An event RoamNIO fires into a channel's pipeline as a user inbound event.
public protocol RoamNetworkEvent: Hashable, Sendable {}

/// The path events of a channel made by ``RoamClientBootstrap``, with the meaning of
/// swift-nio-transport-services' `NIOTSNetworkEvents` (Network.framework's better-path,
/// viability and path handlers), on Linux: fired into the pipeline with
/// `fireUserInboundEventTriggered`, so a handler sees them in `userInboundEventTriggered`; an
/// `NIOAsyncChannel` user reads them from `RoamPathEvents`.
///
/// The rules behind them are Roam's handover rules (`PathAdvisor`): the events are advice, and
/// the channel stays as it is until the app acts.
public enum RoamNetworkEvents: Sendable {
    /// A better path than the channel's is available: a new connection made now would take
    /// `interface`. Fired when the channel's interface is no longer viable (left the path, or
    /// stalled) and the policy permits another; and when the channel runs over an expensive
    /// interface (cellular, a hotspot) and a free one is back and answered probes in a row.
    ///
    /// As with `NIOTSNetworkEvents.BetterPathAvailable`: make a new connection, move the work
    /// to it, then close this one.
    public struct BetterPathAvailable: RoamNetworkEvent {
        /// The interface a new connection would take.
        public var interface: String
        /// Why it is better: the channel's interface stalled or left the path, or a free
        /// interface proved itself (`HandoverStateMachine/Reason/betterPath(interface:probes:)`).
        public var reason: HandoverStateMachine.Reason

        /// The event.
        ///
        /// - Parameters:
        ///   - interface: The interface a new connection would take.
        ///   - reason: Why it is better.
        public init(interface: String, reason: HandoverStateMachine.Reason) {
            self.interface = interface
            self.reason = reason
        }
    }

    /// No better path than the channel's is available (any more): the one announced went, or
    /// the channel became viable again.
    public struct BetterPathUnavailable: RoamNetworkEvent {
        /// The event.
        public init() {}
    }

    /// Whether the channel can carry data: false when its interface left the path (over MPTCP:
    /// every interface) or when it stalled (data was written and nothing came back for the
    /// stall threshold); true again when data arrives or the interface is back.
    public struct ViabilityUpdate: RoamNetworkEvent {
        public var isViable: Bool
        /// Why it is not viable (nil when viable).
        public var reason: HandoverStateMachine.Reason?

        /// The event.
        ///
        /// - Parameters:
        ///   - isViable: Whether the channel can carry data.
        ///   - reason: Why it is not viable (nil when viable).
        public init(isViable: Bool, reason: HandoverStateMachine.Reason? = nil) {
            self.isViable = isViable
            self.reason = reason
        }
    }

    /// The path changed: the monitor of the channel's namespace published `newPath`.
    public struct PathChanged: RoamNetworkEvent {
        public let newPath: NetworkPath

        /// The event.
        ///
        /// - Parameter newPath: The path the monitor published.
        public init(newPath: NetworkPath) {
            self.newPath = newPath
        }
    }

    /// The connection cannot be made now, but a change of the network may allow it (no
    /// permitted interface, no route, the attempts could not reach the peer): the bootstrap
    /// waits for the path to change and races again, until its connect timeout. As with
    /// Network.framework, not fatal: for telling the user, not for giving up.
    ///
    /// A channel exists only once connected, so this goes to the bootstrap's
    /// ``RoamClientBootstrap/onWaitingForConnectivity(_:)`` handler rather than to a pipeline.
    public struct WaitingForConnectivity: RoamNetworkEvent {
        /// What stood in the way, as the racer said it.
        public var transientError: String
        /// When the policy permitted no interface: why each was refused.
        public var refusal: PathRefusal?

        /// The event.
        ///
        /// - Parameters:
        ///   - transientError: What stood in the way, as the racer said it.
        ///   - refusal: Why each interface was refused, when the policy permitted none.
        public init(transientError: String, refusal: PathRefusal? = nil) {
            self.transientError = transientError
            self.refusal = refusal
        }
    }
}

/// One of the ``RoamNetworkEvents``, for a `switch`.
public enum RoamPathEvent: Hashable, Sendable {
    case betterPathAvailable(RoamNetworkEvents.BetterPathAvailable)
    case betterPathUnavailable
    case viabilityUpdate(RoamNetworkEvents.ViabilityUpdate)
    case pathChanged(RoamNetworkEvents.PathChanged)

    /// The event a user inbound event is, if it is one of Roam's.
    ///
    /// - Parameter event: A user inbound event of a channel's pipeline.
    public init?(_ event: Any) {
        switch event {
        case let event as RoamNetworkEvents.BetterPathAvailable: self = .betterPathAvailable(event)
        case is RoamNetworkEvents.BetterPathUnavailable: self = .betterPathUnavailable
        case let event as RoamNetworkEvents.ViabilityUpdate: self = .viabilityUpdate(event)
        case let event as RoamNetworkEvents.PathChanged: self = .pathChanged(event)
        default: return nil
        }
    }
}
