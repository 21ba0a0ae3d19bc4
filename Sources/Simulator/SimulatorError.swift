import LinkEmulation
import Netlink
import SystemPackage

/// The one error type of the Simulator module.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it was. A struct of constants rather than an enum, so that a new kind
    /// is not a breaking change for code that switches over them (as in SwiftNIO's errors).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The scenario cannot be played as written.
        public static let invalidScenario = Code("invalidScenario")
        /// The machine cannot run it: no privileges, a missing kernel feature.
        public static let environment = Code("environment")
        /// A kernel operation failed while building or changing the network.
        public static let netlink = Code("netlink")

        public var description: String { name }
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
    package init(_ what: String, _ error: NetlinkError) {
        if error.isPermissionDenied {
            self.init(.environment, "\(what): \(error); building a scenario's network needs root", underlying: error)
        } else {
            self.init(.netlink, "\(what): \(error)", underlying: error)
        }
    }

    /// The machine refused a system call while `what` (for example "cannot write summary.json").
    package init(_ what: String, _ error: Errno) {
        self.init(.environment, "\(what): \(error)")
    }

    /// The link emulator could not do what the run needed.
    package init(_ error: LinkEmulationError) {
        self.init(.environment, error.message)
    }

    public var description: String { message }
}
