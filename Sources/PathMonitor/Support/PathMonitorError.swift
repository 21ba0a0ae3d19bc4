import Glibc
import Netlink

/// The one error type of the PathMonitor module.
public struct PathMonitorError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it was. A struct of constants rather than an enum, so that a new kind
    /// is not a breaking change for code that switches over them (as in SwiftNIO's errors).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The namespace to watch does not exist or is not a network namespace.
        public static let namespaceUnavailable = Code("namespaceUnavailable")
        /// Watching needs privileges the process does not have.
        public static let permissionDenied = Code("permissionDenied")
        /// The interfaces file cannot be read or parsed.
        public static let invalidInterfacesFile = Code("invalidInterfacesFile")
        /// A file could not be read.
        public static let io = Code("io")
        /// A netlink operation failed.
        public static let netlink = Code("netlink")
        /// The monitor was used in a way its state does not allow (started twice, started after cancel).
        public static let invalidState = Code("invalidState")
        /// The configuration cannot work (a connectivity probe URL that is not `http://`).
        public static let invalidConfiguration = Code("invalidConfiguration")

        public var description: String { name }
    }

    public var code: Code
    /// A message a user can act on.
    public var message: String
    /// The netlink failure behind this error, if any.
    public var underlying: NetlinkError?

    /// An error.
    ///
    /// - Parameters:
    ///   - code: What kind of failure it was.
    ///   - message: A message a user can act on.
    ///   - underlying: The netlink failure behind it, if any.
    public init(_ code: Code, _ message: String, underlying: NetlinkError? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Classifies a netlink failure that happened while starting to watch `namespace`.
    init(starting namespace: NetworkNamespace, _ error: NetlinkError) {
        if error.isPermissionDenied {
            self.init(.permissionDenied, "watching \(namespace) requires root (CAP_SYS_ADMIN to enter another network namespace): \(error)", underlying: error)
        } else if error.isNotFound || error.errno == EINVAL {
            self.init(.namespaceUnavailable, "cannot watch \(namespace): \(error)", underlying: error)
        } else {
            self.init(.netlink, "cannot watch \(namespace): \(error)", underlying: error)
        }
    }

    public var description: String { message }
}
