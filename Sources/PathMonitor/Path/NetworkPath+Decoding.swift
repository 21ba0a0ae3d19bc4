import RoamCore

extension NetworkPath {
    /// The path a `roam monitor --json` line or `roam daemon`'s API holds (what
    /// ``json(time:)`` writes), or nil when `json` is not one: every field must be there with its
    /// type and a value this version knows.
    package init?(json: JSONValue) {
        guard let status = json["status"]?.stringValue.flatMap(PathStatus.init(rawValue:)),
              let interfaces = json["interfaces"]?.arrayValue?.map(NetworkInterface.init(json:)), !interfaces.contains(nil),
              let isExpensive = json["isExpensive"]?.boolValue, let isConstrained = json["isConstrained"]?.boolValue,
              let supportsIPv4 = json["supportsIPv4"]?.boolValue, let supportsIPv6 = json["supportsIPv6"]?.boolValue,
              let supportsDNS = json["supportsDNS"]?.boolValue,
              let gateways = json["gateways"]?.arrayValue?.map({ $0.stringValue.flatMap(IPAddress.init) }), !gateways.contains(nil)
        else { return nil }
        let available = interfaces.compactMap { $0 }
        var reason: UnsatisfiedReason?
        if let text = json["unsatisfiedReason"]?.stringValue {
            guard let known = UnsatisfiedReason(rawValue: text) else { return nil }
            reason = known
        }
        var primary: NetworkInterface?
        if let name = json["primaryInterface"]?.stringValue {
            guard let found = available.first(where: { $0.name == name }) else { return nil }
            primary = found
        }
        self.init(status: status, unsatisfiedReason: reason, availableInterfaces: available, primaryInterface: primary,
                  isExpensive: isExpensive, isConstrained: isConstrained,
                  isUltraConstrained: json["isUltraConstrained"]?.boolValue ?? false,
                  linkQuality: json["linkQuality"]?.stringValue.flatMap(LinkQuality.init(rawValue:)) ?? .unknown,
                  supportsIPv4: supportsIPv4, supportsIPv6: supportsIPv6, supportsDNS: supportsDNS, gateways: gateways.compactMap { $0 })
        connectivity = json["connectivity"]?.stringValue.flatMap(InterfaceConnectivity.State.init(rawValue:)) ?? .unknown
    }
}

extension NetworkInterface {
    /// The interface an element of a path's `interfaces` holds, or nil.
    package init?(json: JSONValue) {
        guard let name = json["name"]?.stringValue, let index = json["index"]?.intValue.flatMap(Int32.init(exactly:)),
              let type = json["type"]?.stringValue.flatMap(InterfaceType.init(rawValue:)),
              let isExpensive = json["isExpensive"]?.boolValue, let isConstrained = json["isConstrained"]?.boolValue,
              let state = json["state"]?.stringValue.flatMap(OperationalState.init(name:)),
              let mtu = json["mtu"]?.intValue.flatMap(UInt32.init(exactly:)),
              let addresses = json["addresses"]?.arrayValue?.map({ $0.stringValue.flatMap(IPPrefix.init) }), !addresses.contains(nil)
        else { return nil }
        self.init(name: name, index: index, type: type, isExpensive: isExpensive, isConstrained: isConstrained,
                  isUltraConstrained: json["isUltraConstrained"]?.boolValue ?? false,
                  linkQuality: json["linkQuality"]?.stringValue.flatMap(LinkQuality.init(rawValue:)) ?? .unknown,
                  state: state, mtu: mtu, addresses: addresses.compactMap { $0 })
        if let connectivity = json["connectivity"], case .object = connectivity {
            guard let state = connectivity["state"]?.stringValue.flatMap(InterfaceConnectivity.State.init(rawValue:)) else { return nil }
            self.connectivity = InterfaceConnectivity(state: state, portalURL: connectivity["portalURL"]?.stringValue,
                                                      reason: connectivity["reason"]?.stringValue)
            self.connectivity.sessionRemaining = connectivity["sessionRemainingSeconds"]?.intValue.map { .seconds($0) }
        }
    }
}

extension OperationalState {
    /// The state its ``description`` names.
    package init?(name: String) {
        guard let state = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = state
    }
}
