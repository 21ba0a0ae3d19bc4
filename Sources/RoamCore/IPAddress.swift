import Glibc

/// An IPv4 or IPv6 address.
public enum IPAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// An IPv4 address, 4 bytes in network order.
    case v4(UInt8, UInt8, UInt8, UInt8)
    /// An IPv6 address, 16 bytes in network order.
    case v6(IPv6Bytes)

    /// The 16 bytes of an IPv6 address.
    public struct IPv6Bytes: Sendable, Hashable {
        public var bytes: [UInt8]
        public init?(_ bytes: [UInt8]) {
            guard bytes.count == 16 else { return nil }
            self.bytes = bytes
        }
    }

    /// Makes an address from its bytes: 4 for IPv4, 16 for IPv6.
    ///
    /// Inlinable, so that a caller in another module gets it specialized for its collection (a
    /// slice of a packet, an array) and an IPv4 address is made without an array.
    @inlinable
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 4:
            var iterator = bytes.makeIterator()
            self = .v4(iterator.next()!, iterator.next()!, iterator.next()!, iterator.next()!)
        case 16:
            self = .v6(IPv6Bytes(Array(bytes))!)
        default:
            return nil
        }
    }

    /// Parses the textual form, `198.18.0.1` or `fd00::1`.
    public init?(_ text: some StringProtocol) {
        var v4 = in_addr()
        var v6 = in6_addr()
        let string = String(text)
        if inet_pton(AF_INET, string, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v4) { Array($0) })
        } else if inet_pton(AF_INET6, string, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
        } else {
            return nil
        }
    }

    /// The address bytes in network order.
    public var bytes: [UInt8] {
        switch self {
        case let .v4(a, b, c, d): return [a, b, c, d]
        case let .v6(v6): return v6.bytes
        }
    }

    /// The address family.
    public var family: AddressFamily { if case .v4 = self { .inet } else { .inet6 } }

    /// The length of an address of this family in bits (32 or 128).
    public var bitWidth: Int { if case .v4 = self { 32 } else { 128 } }

    /// True for `127.0.0.0/8` and `::1`.
    public var isLoopback: Bool {
        switch self {
        case let .v4(a, _, _, _): return a == 127
        case let .v6(v6): return v6.bytes == [UInt8](repeating: 0, count: 15) + [1]
        }
    }

    /// True for link-local addresses: `169.254.0.0/16` and `fe80::/10`.
    public var isLinkLocal: Bool {
        switch self {
        case let .v4(a, b, _, _): return a == 169 && b == 254
        case let .v6(v6): return v6.bytes[0] == 0xfe && (v6.bytes[1] & 0xc0) == 0x80
        }
    }

    /// True when the first `length` bits of both addresses agree (and they are of one family).
    public func hasPrefix(_ other: IPAddress, length: Int) -> Bool {
        guard family == other.family else { return false }
        let mine = bytes, theirs = other.bytes
        var remaining = max(0, min(length, bitWidth))
        var index = 0
        while remaining >= 8 {
            if mine[index] != theirs[index] { return false }
            remaining -= 8
            index += 1
        }
        if remaining > 0 {
            let mask = UInt8(0xff) << (8 - remaining)
            if mine[index] & mask != theirs[index] & mask { return false }
        }
        return true
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var raw = bytes
        let family = self.family == .inet ? AF_INET : AF_INET6
        guard inet_ntop(family, &raw, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public static func < (lhs: IPAddress, rhs: IPAddress) -> Bool {
        if lhs.family != rhs.family { return lhs.family == .inet }
        return lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

/// An address with a prefix length, `198.18.0.1/30`.
public struct IPPrefix: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var address: IPAddress
    public var length: Int

    public init(_ address: IPAddress, length: Int) {
        self.address = address
        self.length = length
    }

    /// Parses `198.18.0.0/15`; an address without `/` gets the full length.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1)
        guard let first = parts.first, let address = IPAddress(first) else { return nil }
        if parts.count == 2 {
            guard let length = Int(parts[1]), (0...address.bitWidth).contains(length) else { return nil }
            self.init(address, length: length)
        } else {
            self.init(address, length: address.bitWidth)
        }
    }

    /// The "any address" prefix of a family: `0.0.0.0/0` or `::/0`.
    public static func any(_ family: AddressFamily) -> IPPrefix {
        family == .inet ? IPPrefix(.v4(0, 0, 0, 0), length: 0) : IPPrefix(.v6(.init([UInt8](repeating: 0, count: 16))!), length: 0)
    }

    /// True when `address` lies inside this prefix.
    public func contains(_ address: IPAddress) -> Bool {
        address.hasPrefix(self.address, length: length)
    }

    public var description: String { "\(address)/\(length)" }

    public static func < (lhs: IPPrefix, rhs: IPPrefix) -> Bool {
        (lhs.address, lhs.length) < (rhs.address, rhs.length)
    }
}
