import Netlink

/// How good an interface's link is, in the four grades of Network.framework's
/// `NWPath.LinkQuality` (iOS and macOS 26).
///
/// As Apple advises: use it to pick initial values of algorithms (a first video bitrate, how
/// much to prefetch), never to decide whether to try a connection.
///
/// Sources, first found wins: the interfaces file, then an alias tag (`roam:quality=minimal`;
/// in a scenario, the simulator tags each link from its current conditions), then what the
/// kernel's Wi-Fi stack says of an associated Wi-Fi interface (``init(grading:)``); otherwise
/// ``unknown``.
public enum LinkQuality: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Nothing is known of the link's quality.
    case unknown
    /// The link barely works: expect long delays, little throughput or heavy loss.
    case minimal
    /// The link works, with noticeable delay or limited throughput.
    case moderate
    /// The link is good.
    case good

    public var description: String { rawValue }
}

extension LinkQuality {
    /// The bounds of the grades of a Wi-Fi link, from what nl80211 says of its access point.
    ///
    /// | grade | signal | bitrate |
    /// |---|---|---|
    /// | `good` | -67 dBm or stronger | 24 Mbit/s or more |
    /// | `moderate` | -75 dBm or stronger | 6 Mbit/s or more |
    /// | `minimal` | weaker | slower |
    ///
    /// -67 dBm is the signal enterprise Wi-Fi is planned for voice and video; below about -75 dBm
    /// rate control falls back to the slowest rates and retries climb. 6 Mbit/s is 802.11's lowest
    /// OFDM rate: slower means the old DSSS rates of a link at the edge of its range. The link
    /// grades as the worse of the two; the signal is the average where the driver gives one,
    /// and the bitrate the transmit rate, else the receive rate.
    public enum WirelessGrading {
        public static let goodFromSignal = -67
        public static let moderateFromSignal = -75
        public static let goodFromBitrate: UInt64 = 24_000_000
        public static let moderateFromBitrate: UInt64 = 6_000_000
    }

    /// The grade of a Wi-Fi link from its access point's station entry; ``unknown`` when the
    /// driver reports neither signal nor bitrate.
    public init(grading station: WirelessStation) {
        var grades: [LinkQuality] = []
        if let signal = station.signalAverage ?? station.signal {
            grades.append(signal >= WirelessGrading.goodFromSignal ? .good : signal >= WirelessGrading.moderateFromSignal ? .moderate : .minimal)
        }
        if let bitrate = station.transmitBitrate ?? station.receiveBitrate {
            grades.append(bitrate >= WirelessGrading.goodFromBitrate ? .good : bitrate >= WirelessGrading.moderateFromBitrate ? .moderate : .minimal)
        }
        self = grades.contains(.minimal) ? .minimal : grades.contains(.moderate) ? .moderate : grades.isEmpty ? .unknown : .good
    }
}
