import CNetlink
import CRoamLinux
import Glibc
import SystemPackage

/// The one error type of the Netlink module: every failed libnl call or system call
/// becomes a `NetlinkError` carrying the failing operation and its code.
///
/// Codes keep their origin: a libnl code (`NLE_*`) or an `errno` value. Use
/// ``errno`` to compare either against a POSIX error, for example to tell
/// "does not exist" from "not permitted".
public struct NetlinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The code, and where it came from: libnl or the kernel's `errno`. A struct rather than an
    /// enum, so that another origin would not break code that switches over codes (as in
    /// SwiftNIO's errors); compare with ``NetlinkError/errno`` or the `is…` properties.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let fromLibnl: Bool
        /// The number: an `NLE_*` code or an `errno` value.
        public let value: Int32

        private init(fromLibnl: Bool, value: Int32) {
            self.fromLibnl = fromLibnl
            self.value = value
        }

        /// A libnl error code, positive (`NLE_PERM` is 28). The corresponding C constants are `NLE_*`.
        public static func libnl(_ value: Int32) -> Code { Code(fromLibnl: true, value: value) }
        /// A POSIX `errno` value from a system call.
        public static func errno(_ value: Int32) -> Code { Code(fromLibnl: false, value: value) }

        /// The libnl code, when the code is one.
        public var libnlCode: Int32? { fromLibnl ? value : nil }
        /// The `errno` value, when the code is one (``NetlinkError/errno`` also maps libnl's).
        public var errnoCode: Int32? { fromLibnl ? nil : value }

        /// `libnl 28` or `errno 1`.
        public var description: String { fromLibnl ? "libnl \(value)" : "errno \(value)" }
    }

    /// The code reported by libnl or the kernel.
    public var code: Code
    /// What was being done, for example `rtnl_link_add(veth0)` or `setns(/run/netns/phone)`.
    public var operation: String
    /// An optional hint that tells the user what to do about it.
    public var hint: String?

    public init(_ code: Code, operation: String, hint: String? = nil) {
        self.code = code
        self.operation = operation
        self.hint = hint
    }

    /// Makes an error from a libnl return value (negative or positive `NLE_*`).
    public static func libnl(_ value: Int32, _ operation: String) -> NetlinkError {
        NetlinkError(.libnl(abs(value)), operation: operation)
    }

    /// Makes an error from the current `errno`.
    public static func posix(_ operation: String, errno value: Int32 = Glibc.errno) -> NetlinkError {
        NetlinkError(.errno(value), operation: operation)
    }

    /// The POSIX error this code stands for, when there is one.
    ///
    /// libnl folds several errno values into one code (`ENOMEM` and `ENOBUFS` both become
    /// `NLE_NOMEM`); the mapping returns the most common of them.
    public var errno: Int32? {
        if let value = code.errnoCode { return value }
        do {
            switch code.value {
            case NLE_INTR: return EINTR
            case NLE_AGAIN: return EAGAIN
            case NLE_NOMEM: return ENOMEM
            case NLE_EXIST: return EEXIST
            case NLE_INVAL: return EINVAL
            case NLE_RANGE: return ERANGE
            case NLE_MSGSIZE: return EMSGSIZE
            case NLE_OPNOTSUPP: return EOPNOTSUPP
            case NLE_AF_NOSUPPORT: return EAFNOSUPPORT
            case NLE_OBJ_NOTFOUND: return ENOENT
            case NLE_NOADDR: return EADDRNOTAVAIL
            case NLE_BUSY: return EBUSY
            case NLE_NOACCESS: return EACCES
            case NLE_PERM: return EPERM
            case NLE_NODEV: return ENODEV
            default: return nil
            }
        }
    }

    /// True when the kernel refused for lack of privilege (`EPERM` or `EACCES`).
    public var isPermissionDenied: Bool { errno == EPERM || errno == EACCES }
    /// True when the object does not exist (`ENOENT`, `ENODEV`, `ESRCH`).
    public var isNotFound: Bool { errno == ENOENT || errno == ENODEV || errno == ESRCH }
    /// True when the object exists already (`EEXIST`).
    public var isAlreadyExists: Bool { errno == EEXIST }

    /// The text of the code, as libnl or `strerror` (through swift-system's `Errno`) gives it.
    public var reason: String {
        if let value = code.libnlCode { return String(cString: nl_geterror(value)) }
        return Errno(rawValue: code.value).description
    }

    /// The hint when there is one (it says what went wrong in the user's terms), else ``reason``.
    public var explanation: String { hint ?? reason }

    public var description: String {
        var text = "\(operation): \(reason) (\(code))"
        if let hint { text += "; \(hint)" }
        return text
    }
}

extension NetlinkError {
    /// Returns a copy with a hint attached.
    public func withHint(_ hint: String) -> NetlinkError {
        var copy = self
        copy.hint = hint
        return copy
    }
}
