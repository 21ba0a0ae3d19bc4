import Netlink

extension NetworkInterface {
    /// The JSON object of `roam monitor --json`.
    public var json: JSONValue {
        .object([
            ("name", .string(name)),
            ("index", .int(Int64(index))),
            ("type", .string(type.rawValue)),
            ("isExpensive", .bool(isExpensive)),
            ("isConstrained", .bool(isConstrained)),
            ("state", .string(state.description)),
            ("mtu", .int(Int64(mtu))),
            ("addresses", .array(addresses.map { .string($0.description) })),
            ("isUltraConstrained", .bool(isUltraConstrained)),
            ("linkQuality", .string(linkQuality.rawValue)),
            ("connectivity", connectivity.json),
        ])
    }
}

extension InterfaceConnectivity {
    /// `{"state": "portal", "portalURL": "http://…", "reason": "…", "sessionRemainingSeconds": null}`.
    public var json: JSONValue {
        .object([("state", .string(state.rawValue)), ("portalURL", portalURL.map { .string($0) } ?? .null),
                 ("reason", reason.map { .string($0) } ?? .null),
                 ("sessionRemainingSeconds", sessionRemaining.map { .int($0.components.seconds) } ?? .null)])
    }
}

extension NetworkPath {
    /// The JSON object of `roam monitor --json`, with `time` first. Keys added after the first
    /// release come last (`isUltraConstrained`, `linkQuality`), so the order of the others holds.
    public func json(time: String) -> JSONValue {
        .object([
            ("time", .string(time)),
            ("status", .string(status.rawValue)),
            ("unsatisfiedReason", unsatisfiedReason.map { .string($0.rawValue) } ?? .null),
            ("isExpensive", .bool(isExpensive)),
            ("isConstrained", .bool(isConstrained)),
            ("supportsIPv4", .bool(supportsIPv4)),
            ("supportsIPv6", .bool(supportsIPv6)),
            ("supportsDNS", .bool(supportsDNS)),
            ("primaryInterface", primaryInterface.map { .string($0.name) } ?? .null),
            ("gateways", .array(gateways.map { .string($0.description) })),
            ("interfaces", .array(availableInterfaces.map(\.json))),
            ("isUltraConstrained", .bool(isUltraConstrained)),
            ("linkQuality", .string(linkQuality.rawValue)),
            ("connectivity", .string(connectivity.rawValue)),
        ])
    }

    /// One readable line: status, primary interface and its costs, what the path supports,
    /// gateways, then each available interface.
    ///
    /// `satisfied via wlan0 (wifi) ipv4 ipv6 dns gw 198.18.0.1 | wlan0 wifi up mtu 1500 198.18.0.2/24`
    public var summary: String {
        var words: [String] = [status.rawValue]
        if let unsatisfiedReason { words.append("(\(unsatisfiedReason.rawValue))") }
        if let primaryInterface { words.append("via \(primaryInterface.name) (\(primaryInterface.type))") }
        if isExpensive { words.append("expensive") }
        if isUltraConstrained { words.append("ultra-constrained") } else if isConstrained { words.append("constrained") }
        if linkQuality != .unknown { words.append("quality \(linkQuality.rawValue)") }
        if connectivity != .unknown { words.append(connectivity.rawValue) }
        if supportsIPv4 { words.append("ipv4") }
        if supportsIPv6 { words.append("ipv6") }
        if supportsDNS { words.append("dns") }
        if !gateways.isEmpty { words.append("gw " + gateways.map(\.description).joined(separator: ",")) }
        let interfaces = availableInterfaces.map { interface in
            var parts = [interface.name, interface.type.rawValue]
            if interface.isExpensive { parts.append("expensive") }
            if interface.isUltraConstrained { parts.append("ultra-constrained") } else if interface.isConstrained { parts.append("constrained") }
            if interface.linkQuality != .unknown { parts.append("quality \(interface.linkQuality.rawValue)") }
            if interface.connectivity.state != .unknown { parts.append(interface.connectivity.description) }
            parts.append(interface.state.description)
            parts.append("mtu \(interface.mtu)")
            parts.append(contentsOf: interface.addresses.map(\.description))
            return parts.joined(separator: " ")
        }
        return words.joined(separator: " ") + " | " + (interfaces.isEmpty ? "no interfaces" : interfaces.joined(separator: "; "))
    }
}
