import Glibc

/// An address family. The corresponding C constants are `AF_INET`, `AF_INET6` and `AF_UNSPEC`.
public struct AddressFamily: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `AF_UNSPEC`: any family.
    public static let unspecified = AddressFamily(rawValue: AF_UNSPEC)
    /// `AF_INET`: IPv4.
    public static let inet = AddressFamily(rawValue: AF_INET)
    /// `AF_INET6`: IPv6.
    public static let inet6 = AddressFamily(rawValue: AF_INET6)

    public var description: String {
        switch self {
        case .inet: "ipv4"
        case .inet6: "ipv6"
        case .unspecified: "unspec"
        default: "af\(rawValue)"
        }
    }
}

/// The RFC 2863 operational state of an interface (`IFLA_OPERSTATE`). The corresponding C
/// constants are `IF_OPER_*`.
public enum OperationalState: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case unknown = 0
    case notPresent = 1
    case down = 2
    case lowerLayerDown = 3
    case testing = 4
    case dormant = 5
    case up = 6

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .notPresent: "notPresent"
        case .down: "down"
        case .lowerLayerDown: "lowerLayerDown"
        case .testing: "testing"
        case .dormant: "dormant"
        case .up: "up"
        }
    }
}
