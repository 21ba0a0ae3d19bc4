import CNetlink
import CRoamLinux
import Glibc

/// What the kernel's Wi-Fi stack (cfg80211, through nl80211) says of one station an interface
/// talks to: for a client interface, the access point it is associated with.
public struct WirelessStation: Sendable, Hashable {
    /// The station's hardware address.
    public var address: [UInt8]
    /// The signal of the last frames received from it, in dBm (`NL80211_STA_INFO_SIGNAL`).
    public var signal: Int?
    /// The average signal, in dBm (`NL80211_STA_INFO_SIGNAL_AVG`).
    public var signalAverage: Int?
    /// The rate of the last frames sent to it and received from it, in bits per second
    /// (`NL80211_STA_INFO_TX_BITRATE`, `NL80211_STA_INFO_RX_BITRATE`).
    public var transmitBitrate: UInt64?
    public var receiveBitrate: UInt64?

    public init(address: [UInt8] = [], signal: Int? = nil, signalAverage: Int? = nil, transmitBitrate: UInt64? = nil, receiveBitrate: UInt64? = nil) {
        self.address = address
        self.signal = signal
        self.signalAverage = signalAverage
        self.transmitBitrate = transmitBitrate
        self.receiveBitrate = receiveBitrate
    }
}

/// The mode of a Wi-Fi interface. The corresponding C constants are `NL80211_IFTYPE_*`.
public struct WirelessInterfaceMode: RawRepresentable, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// A client of an access point (`NL80211_IFTYPE_STATION`).
    public static let station = WirelessInterfaceMode(rawValue: NL80211_IFTYPE_STATION.rawValue)
    /// An access point (`NL80211_IFTYPE_AP`).
    public static let accessPoint = WirelessInterfaceMode(rawValue: NL80211_IFTYPE_AP.rawValue)
    /// A Wi-Fi Direct client (`NL80211_IFTYPE_P2P_CLIENT`).
    public static let p2pClient = WirelessInterfaceMode(rawValue: NL80211_IFTYPE_P2P_CLIENT.rawValue)

    /// A mode whose link runs to one access point, so that the link has one quality.
    public var isClient: Bool { self == .station || self == .p2pClient }
}

/// nl80211 over generic netlink (what `iw` speaks). The socket must be a
/// ``NetlinkProtocol/generic`` one; it sees the Wi-Fi interfaces of its namespace.
extension NetlinkSocket {
    /// Whether the kernel has cfg80211 (the `nl80211` family).
    public func hasWireless() -> Bool {
        (try? wirelessFamily()) != nil
    }

    /// The stations of the interface with index `interfaceIndex` (`iw dev X station dump`):
    /// for a client interface, the access point; empty when it is not associated.
    public func wirelessStations(interfaceIndex: Int32) throws(NetlinkError) -> [WirelessStation] {
        try genericRequest(family: try wirelessFamily(), command: Int(NL80211_CMD_GET_STATION.rawValue), version: 0,
                           "read the Wi-Fi stations of interface \(interfaceIndex)", flags: NLM_F_DUMP) { message throws(NetlinkError) in
            try putAttribute("NL80211_ATTR_IFINDEX") { nla_put_u32(message, Int32(NL80211_ATTR_IFINDEX.rawValue), UInt32(bitPattern: interfaceIndex)) }
        } parse: { message in
            WirelessStation(message)
        }
    }

    /// The mode of the Wi-Fi interface with index `interfaceIndex` (`iw dev X info`'s type).
    public func wirelessInterfaceMode(interfaceIndex: Int32) throws(NetlinkError) -> WirelessInterfaceMode {
        let modes = try genericRequest(family: try wirelessFamily(), command: Int(NL80211_CMD_GET_INTERFACE.rawValue), version: 0,
                                       "read the Wi-Fi mode of interface \(interfaceIndex)") { message throws(NetlinkError) in
            try putAttribute("NL80211_ATTR_IFINDEX") { nla_put_u32(message, Int32(NL80211_ATTR_IFINDEX.rawValue), UInt32(bitPattern: interfaceIndex)) }
        } parse: { message -> WirelessInterfaceMode? in
            let maximum = Int(NL80211_ATTR_IFTYPE.rawValue)
            var attributes = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: maximum + 1)
            guard let header = nlmsg_hdr(message), genlmsg_parse(header, 0, &attributes, Int32(maximum), nil) == 0,
                  let type = attributes[Int(NL80211_ATTR_IFTYPE.rawValue)] else { return nil }
            return WirelessInterfaceMode(rawValue: nla_get_u32(type))
        }
        guard let mode = modes.first else {
            throw NetlinkError(.errno(EPROTO), operation: "read the Wi-Fi mode of interface \(interfaceIndex)", hint: "the kernel answered without one")
        }
        return mode
    }

    private func wirelessFamily() throws(NetlinkError) -> Int32 {
        try genericFamily(NL80211_GENL_NAME, hint: "this kernel has no cfg80211 (no Wi-Fi stack), so there is nothing to read")
    }
}

extension WirelessStation {
    /// Reads an `NL80211_CMD_NEW_STATION` message (the answer to a station dump).
    init?(_ message: OpaquePointer) {
        let maximum = Int(NL80211_ATTR_STA_INFO.rawValue)
        var attributes = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: maximum + 1)
        guard let header = nlmsg_hdr(message), genlmsg_parse(header, 0, &attributes, Int32(maximum), nil) == 0,
              let nested = attributes[Int(NL80211_ATTR_STA_INFO.rawValue)] else { return nil }
        self.init()
        if let mac = attributes[Int(NL80211_ATTR_MAC.rawValue)], nla_len(mac) == 6 {
            address = Array(UnsafeRawBufferPointer(start: nla_data(mac), count: 6))
        }
        let infoMaximum = Int(NL80211_STA_INFO_RX_BITRATE.rawValue)
        var info = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: infoMaximum + 1)
        guard nla_parse_nested(&info, Int32(infoMaximum), nested, nil) == 0 else { return nil }
        // Signals are u8 attributes holding a signed dBm value.
        if let value = info[Int(NL80211_STA_INFO_SIGNAL.rawValue)] { signal = Int(Int8(bitPattern: nla_get_u8(value))) }
        if let value = info[Int(NL80211_STA_INFO_SIGNAL_AVG.rawValue)] { signalAverage = Int(Int8(bitPattern: nla_get_u8(value))) }
        transmitBitrate = info[Int(NL80211_STA_INFO_TX_BITRATE.rawValue)].flatMap(Self.bitrate)
        receiveBitrate = info[Int(NL80211_STA_INFO_RX_BITRATE.rawValue)].flatMap(Self.bitrate)
    }

    /// A rate-info attribute in bits per second: `BITRATE32`, else the older 16-bit
    /// `BITRATE`, both in units of 100 kbit/s.
    private static func bitrate(_ nested: UnsafeMutablePointer<nlattr>) -> UInt64? {
        let maximum = Int(NL80211_RATE_INFO_BITRATE32.rawValue)
        var rate = [UnsafeMutablePointer<nlattr>?](repeating: nil, count: maximum + 1)
        guard nla_parse_nested(&rate, Int32(maximum), nested, nil) == 0 else { return nil }
        if let value = rate[Int(NL80211_RATE_INFO_BITRATE32.rawValue)] { return UInt64(nla_get_u32(value)) * 100_000 }
        if let value = rate[Int(NL80211_RATE_INFO_BITRATE.rawValue)] { return UInt64(nla_get_u16(value)) * 100_000 }
        return nil
    }
}
