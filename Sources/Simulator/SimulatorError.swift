import LinkEmulation
import Netlink
import SystemPackage

/// The one error type of the Simulator module.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The scenario cannot be played as written.
        case invalidScenario
        /// The machine cannot run it: no privileges, a missing kernel feature.
        case environment
        /// A kernel operation failed while building or changing the network.
        case netlink
    }

    public var code: Code
    /// A message a user can act on.
    public var message: String
    public var underlying: NetlinkError?
    /// The line of the scenario file the problem is at, when it is at one.
    public var line: Int?

    public init(_ code: Code, _ message: String, underlying: NetlinkError? = nil, line: Int? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.line = line.flatMap { $0 > 0 ? $0 : nil }
    }

    /// Wraps a netlink failure of `what`, classifying missing privileges as an environment problem.
    public init(_ what: String, _ error: NetlinkError) {
        if error.isPermissionDenied {
            self.init(.environment, "\(what): \(error); building a scenario's network needs root", underlying: error)
        } else {
            self.init(.netlink, "\(what): \(error)", underlying: error)
        }
    }

    /// The machine refused a system call while `what` (for example "cannot write summary.json").
    public init(_ what: String, _ error: Errno) {
        self.init(.environment, "\(what): \(error)")
    }

    /// The link emulator could not do what the run needed.
    public init(_ error: LinkEmulationError) {
        self.init(.environment, error.message)
    }

    public var description: String { message }
}
