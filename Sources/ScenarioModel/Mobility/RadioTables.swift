import Glibc

/// What a Wi-Fi link carries at a signal level: the modulation and coding scheme a rate
/// controller settles on, its rate, and the loss left after the MAC's retries.
///
/// - The highest MCS whose minimum sensitivity the signal reaches (IEEE 802.11-2016, table 19-23
///   for HT (802.11n) and 21-25 for VHT (802.11ac): at 20 MHz -82, -79, -77, -74, -70, -66, -65,
///   -64 dBm for MCS 0-7 and -59, -57 for VHT MCS 8-9; 3 dB more at 40 MHz, 6 dB more at 80 MHz).
///   802.11n on 2.4 GHz stops at MCS 7; VHT MCS 9 does not exist at 20 MHz with one stream.
/// - Its rate with one spatial stream and an 800 ns guard interval (the same tables), of which
///   ``efficiency`` reaches the transport (MAC, acknowledgements, contention: with A-MPDU
///   aggregation about two thirds).
/// - Loss: the standard defines sensitivity as the level where 10% of 4,095-byte frames fail.
///   Below MCS 0's, the frame error rate rises a decade every ``fadeMargin`` dB,
///   `p = min(1, 0.1 · 10^(-m / fadeMargin))` at m dB under it, and a packet is lost when every
///   one of ``attempts`` transmissions fails: `loss = p^attempts`. Above it the rate controller
///   keeps the loss after retries negligible, and none is set.
package enum WiFiRates {
    public static let sensitivity20MHz: [Double] = [-82, -79, -77, -74, -70, -66, -65, -64, -59, -57]
    public static let rates: [AccessPoint.Width: [Double]] = [
        .mhz20: [6.5, 13, 19.5, 26, 39, 52, 58.5, 65, 78],
        .mhz40: [13.5, 27, 40.5, 54, 81, 108, 121.5, 135, 162, 180],
        .mhz80: [29.3, 58.5, 87.8, 117, 175.5, 234, 263.3, 292.5, 351, 390],
    ]
    public static let efficiency = 0.65
    public static let fadeMargin = 4.0
    /// 802.11's default retry limit (dot11ShortRetryLimit, 7 attempts).
    public static let attempts = 7.0

    /// The MCS indices an access point offers.
    public static func indices(_ accessPoint: AccessPoint) -> Range<Int> {
        if accessPoint.channel <= 14 { return 0..<8 }
        return 0..<(rates[accessPoint.width]!.count)
    }

    public static func sensitivity(mcs: Int, width: AccessPoint.Width) -> Double {
        sensitivity20MHz[mcs] + (width == .mhz20 ? 0 : width == .mhz40 ? 3 : 6)
    }

    /// The MCS for `signal` dBm (0 below every sensitivity). Moving up needs `hysteresis` dB
    /// above the next MCS's sensitivity when `current` is lower, so that shadowing does not
    /// flip the rate at every step.
    public static func mcs(signal: Double, accessPoint: AccessPoint, current: Int? = nil, hysteresis: Double = 2) -> Int {
        var best = 0
        for index in indices(accessPoint) where signal >= sensitivity(mcs: index, width: accessPoint.width) {
            best = index
        }
        if let current, best > current {
            while best > current, signal < sensitivity(mcs: best, width: accessPoint.width) + hysteresis { best -= 1 }
        }
        return best
    }

    /// Goodput at an MCS, bits per second.
    public static func goodput(mcs: Int, width: AccessPoint.Width) -> Double {
        rates[width]![mcs] * 1e6 * efficiency
    }

    /// Loss left after the MAC's retries at `signal` dBm (0 above MCS 0's sensitivity).
    public static func loss(signal: Double, width: AccessPoint.Width) -> Double {
        let margin = signal - sensitivity(mcs: 0, width: width)
        guard margin < 0 else { return 0 }
        let frameError = min(1, 0.1 * pow(10, -margin / fadeMargin))
        return pow(frameError, attempts)
    }
}

/// What a cellular link carries at a reference signal received power (RSRP). The bands are the
/// ones operators and modem tools name (excellent ≥ -80 dBm, good ≥ -90, fair ≥ -100, poor
/// ≥ -110, edge below, no service below the handover policy's minimum); the rates and delays
/// are Roam's illustrative figures for an LTE carrier shared with other users (at the edge the
/// modulation drops and HARQ retransmits, which costs rate and adds delay), not a standard's.
package enum CellularBands {
    public struct Band: Sendable, Hashable {
        public var name: String
        /// The lowest RSRP of the band, dBm.
        public var from: Double
        public var down: Rate
        public var up: Rate
        /// One-way delay of the radio access.
        public var delay: Duration
    }

    public static let bands: [Band] = [
        Band(name: "excellent", from: -80, down: .mbit(60), up: .mbit(20), delay: .milliseconds(15)),
        Band(name: "good", from: -90, down: .mbit(30), up: .mbit(10), delay: .milliseconds(20)),
        Band(name: "fair", from: -100, down: .mbit(12), up: .mbit(4), delay: .milliseconds(28)),
        Band(name: "poor", from: -110, down: .mbit(4), up: .mbit(1), delay: .milliseconds(40)),
        Band(name: "edge", from: -.infinity, down: .mbit(1), up: .kbit(250), delay: .milliseconds(60)),
    ]

    /// The band of `rsrp`; moving to a better band than `current` needs `hysteresis` dB more.
    public static func band(rsrp: Double, current: Int? = nil, hysteresis: Double = 2) -> Int {
        var index = bands.firstIndex { rsrp >= $0.from }!
        if let current, index < current {
            while index < current, rsrp < bands[index].from + hysteresis { index += 1 }
        }
        return index
    }

    /// RSRP from a carrier's total power: per resource element, of 1,200 in a 20 MHz carrier
    /// (100 resource blocks of 12 subcarriers): RSRP = P − 10·log10(1200) − path loss.
    public static let resourceElementOffset = 10 * log10(1_200.0)
}
