/// The kind of network an interface connects to, with the names of Network.framework's
/// `NWInterface.InterfaceType`.
public enum InterfaceType: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Wi-Fi (802.11).
    case wifi
    /// A cellular modem (LTE, 5G).
    case cellular
    /// Wired Ethernet, and interfaces that present themselves as Ethernet (veth, bridges).
    case wiredEthernet
    /// The loopback interface.
    case loopback
    /// Anything else: tunnels, TUN devices, PPP.
    case other

    /// Parses a type name: the case names, plus `wired` and `ethernet` for ``wiredEthernet``
    /// and `wlan` for ``wifi``. Case does not matter.
    public init?(name: some StringProtocol) {
        switch name.lowercased() {
        case "wifi", "wi-fi", "wlan": self = .wifi
        case "cellular", "cell", "wwan": self = .cellular
        case "wiredethernet", "wired", "ethernet": self = .wiredEthernet
        case "loopback": self = .loopback
        case "other": self = .other
        default: return nil
        }
    }

    /// The order in which interfaces of equal cost are preferred: wired, Wi-Fi, cellular, other, loopback.
    package var preferenceRank: Int {
        switch self {
        case .wiredEthernet: 0
        case .wifi: 1
        case .cellular: 2
        case .other: 3
        case .loopback: 4
        }
    }

    public var description: String { rawValue }
}
