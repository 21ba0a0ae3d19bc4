import Netlink
import RoamCore

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

    /// The grade of a Wi-Fi link from its access point's station entry; `unknown` when the
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
