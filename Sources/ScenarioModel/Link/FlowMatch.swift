import Glibc

/// Which packets of a link a flow-scoped impairment acts on (`match:`). Every field it names
/// must hold; a field it leaves out matches anything.
///
/// Ports and addresses are the *far end's*, as the link's first node sees it (the phone, on a
/// network's access link): `port: 53` is the destination port of what the first node sends
/// (`up`) and the source port of what it receives (`down`), so one match covers both ways of
/// a conversation. ``localPorts`` are the first node's own.
public struct FlowMatch: Sendable, Hashable, CustomStringConvertible {
    /// A transport protocol, as scenarios name it.
    public enum TransportProtocol: String, Sendable, Hashable, CaseIterable, Comparable {
        case tcp, udp, icmp
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Sorted, each once; empty: any protocol. `icmp` is ICMP and ICMPv6.
    public var protocols: [TransportProtocol] = []
    /// The far end's ports (TCP and UDP); empty: any.
    public var ports: [PortRange] = []
    /// The first node's own ports; empty: any.
    public var localPorts: [PortRange] = []
    /// Nodes of the scenario whose addresses (every address the run gives them) are the far end.
    public var servers: [String] = []
    /// Prefixes the far end's address is in. With ``servers``, either may hold.
    public var prefixes: [AddressPrefix] = []
    /// DNS: TCP and UDP to port 53 of the network's resolver (of any address on a link that is
    /// not a network's). Takes the place of ``protocols``, ``ports`` and the far end.
    public var dns = false

    public init(protocols: [TransportProtocol] = [], ports: [PortRange] = [], localPorts: [PortRange] = [], servers: [String] = [],
                prefixes: [AddressPrefix] = [], dns: Bool = false) {
        self.protocols = Array(Set(protocols)).sorted()
        self.ports = ports
        self.localPorts = localPorts
        self.servers = servers
        self.prefixes = prefixes
        self.dns = dns
    }

    /// Whether it names nothing (and so would match every packet).
    public var isEmpty: Bool { !dns && protocols.isEmpty && ports.isEmpty && localPorts.isEmpty && servers.isEmpty && prefixes.isEmpty }

    /// As a scenario writes it, in one line: `{protocol: udp, port: 53}`.
    public var description: String {
        var parts: [String] = []
        if dns { parts.append("dns: true") }
        if !protocols.isEmpty { parts.append("protocol: " + Self.list(protocols.map(\.rawValue))) }
        if !ports.isEmpty { parts.append("port: " + Self.list(ports.map(\.description))) }
        if !localPorts.isEmpty { parts.append("localPort: " + Self.list(localPorts.map(\.description))) }
        if !servers.isEmpty { parts.append("server: " + Self.list(servers)) }
        if !prefixes.isEmpty { parts.append("to: " + Self.list(prefixes.map(\.description))) }
        return "{" + parts.joined(separator: ", ") + "}"
    }

    private static func list(_ items: [String]) -> String { items.count == 1 ? items[0] : "[" + items.joined(separator: ", ") + "]" }
}

/// A range of TCP or UDP ports, `53` or `8000-8100`.
public struct PortRange: Sendable, Hashable, CustomStringConvertible {
    public var lower: UInt16
    public var upper: UInt16

    public init(_ lower: UInt16, _ upper: UInt16? = nil) {
        self.lower = lower
        self.upper = upper ?? lower
    }

    public func contains(_ port: UInt16) -> Bool { (lower...upper).contains(port) }

    public var description: String { lower == upper ? "\(lower)" : "\(lower)-\(upper)" }

    /// `53`, `8000-8100`; nil unless both ends are ports (1...65535) in order.
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count) else { return nil }
        func port(_ part: Substring) -> UInt16? {
            guard !part.isEmpty, part.count <= 5, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(part), (1...65535).contains(value) else { return nil }
            return UInt16(value)
        }
        guard let lower = port(parts[0]), let upper = parts.count == 2 ? port(parts[1]) : lower, lower <= upper else { return nil }
        self.init(lower, upper)
    }
}

/// An IPv4 or IPv6 prefix as a scenario writes it (`198.18.5.0/24`, `fd00::/8`, or an address
/// alone): its bits past the length are zero.
public struct AddressPrefix: Sendable, Hashable, CustomStringConvertible {
    public var family: IPFamily
    /// 4 or 16 bytes.
    public var bytes: [UInt8]
    public var length: Int

    public init?(parsing text: String) {
        // Printable ASCII only: a NUL would end the text inet_pton reads early.
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return nil }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts[0].count <= 45 else { return nil }
        let address = String(parts[0])
        var storage = [UInt8](repeating: 0, count: 16)
        let family: IPFamily
        if address.contains(":") {
            guard inet_pton(AF_INET6, address, &storage) == 1 else { return nil }
            family = .ipv6
        } else {
            guard inet_pton(AF_INET, address, &storage) == 1 else { return nil }
            family = .ipv4
            storage.removeLast(12)
        }
        let bits = storage.count * 8
        var length = bits
        if parts.count == 2 {
            guard parts[1].count <= 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(parts[1]), value <= bits else { return nil }
            length = value
        }
        self.init(family: family, bytes: storage, length: length)
    }

    /// The prefix of `length` bits of `bytes` (4 or 16 of them); the bits past it are cleared.
    public init(family: IPFamily, bytes: [UInt8], length: Int) {
        self.family = family
        self.length = max(0, min(length, bytes.count * 8))
        var masked = bytes
        for index in masked.indices {
            let kept = max(0, min(8, self.length - index * 8))
            masked[index] &= kept == 0 ? 0 : UInt8(truncatingIfNeeded: 0xff << (8 - kept))
        }
        self.bytes = masked
    }

    /// Whether `address` (4 or 16 bytes, of this family) is in it.
    public func contains<Bytes: Collection<UInt8>>(_ address: Bytes) -> Bool {
        guard address.count == bytes.count else { return false }
        var remaining = length
        for (have, want) in zip(address, bytes) {
            guard remaining > 0 else { return true }
            let kept = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xff << (8 - kept))
            if have & mask != want { return false }
            remaining -= kept
        }
        return true
    }

    public var description: String {
        var text = [CChar](repeating: 0, count: 64)
        var copy = bytes
        _ = inet_ntop(family == .ipv4 ? AF_INET : AF_INET6, &copy, &text, socklen_t(text.count))
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(address)/\(length)"
    }
}

/// One flow-scoped impairment: the packets ``match`` selects get the link's conditions with
/// ``impairment``'s settings over them, in a queue of their own. What it does not set follows
/// the link, as the link changes.
public struct FlowConditions: Sendable, Hashable {
    public var match: FlowMatch
    /// The settings it changes; the rest are the link's.
    public var impairment: Impairment
    /// Blackholed whatever the link does (a blackholed link passes none of its flows either).
    public var isBlackholed: Bool

    public init(match: FlowMatch, impairment: Impairment = Impairment(), isBlackholed: Bool = false) {
        self.match = match
        self.impairment = impairment
        self.isBlackholed = isBlackholed
    }

    /// What the flow's packets get on a link whose own conditions are `link`.
    public func effective(on link: LinkConditions) -> LinkConditions {
        LinkConditions(impairment: link.impairment.overridden(by: impairment), isBlackholed: isBlackholed || link.isBlackholed)
    }
}

/// A flow-scoped impairment as a link or a network sets it at the start (`flows:`).
public struct FlowSetting: Sendable, Hashable {
    public var match: FlowMatch
    public var direction: LinkDirection
    public var impairment: Impairment
    public var isBlackholed: Bool

    public init(match: FlowMatch, direction: LinkDirection = .both, impairment: Impairment = Impairment(), isBlackholed: Bool = false) {
        self.match = match
        self.direction = direction
        self.impairment = impairment
        self.isBlackholed = isBlackholed
    }

    /// Whether it acts on `direction`.
    public func applies(to direction: TrafficDirection) -> Bool {
        self.direction == .both || self.direction.rawValue == direction.rawValue
    }
}

extension LinkConditions {
    /// The flow conditions for `match`, if the link has them.
    public func flow(_ match: FlowMatch) -> FlowConditions? { flows.first { $0.match == match } }

    /// Changes what `match` selects (the link itself for nil): its settings and its blackhole.
    /// A flow not yet there is added after the others.
    public mutating func modify(_ match: FlowMatch?, _ body: (inout Impairment, inout Bool) -> Void) {
        guard let match else {
            body(&impairment, &isBlackholed)
            return
        }
        if !flows.contains(where: { $0.match == match }) { flows.append(FlowConditions(match: match)) }
        let index = flows.firstIndex { $0.match == match }!
        var flow = flows[index]
        body(&flow.impairment, &flow.isBlackholed)
        flows[index] = flow
    }

    /// The settings `match`'s packets get now (the link's own for nil).
    public func effectiveImpairment(_ match: FlowMatch?) -> Impairment {
        guard let match, let flow = flow(match) else { return impairment }
        return impairment.overridden(by: flow.impairment)
    }
}
