/// A cellular radio's RRC states on a link (`radio:`): a phone whose radio has been idle pays a
/// promotion before its first packet moves, and the network keeps the radio connected for a tail
/// after the last one. Played by the userspace emulator only: netem delays every packet alike and
/// cannot wake on traffic.
///
/// The model (3GPP TS 36.331's RRC_IDLE and RRC_CONNECTED, with the timers measured by Huang et
/// al., "A Close Examination of Performance and Power Characteristics of 4G LTE Networks",
/// MobiSys 2012, table 3):
/// - The radio starts idle, and goes idle again `tail` after its last packet in either direction
///   (the inactivity timer; packets still waiting for the radio keep it connected).
/// - A packet the phone sends while idle waits `promotion` (the RRC connection set-up); every
///   packet in either direction during the promotion waits for its end.
/// - A packet for an idle phone waits for the phone's next paging occasion (every `pagingCycle`
///   from the run's start), then the promotion.
/// - A carrier that comes back (the phone found coverage again) finds the radio idle.
///
/// DRX within RRC_CONNECTED (a few tens of milliseconds for a packet after 100 ms of silence) is
/// not modelled.
public struct RadioStates: Sendable, Hashable {
    /// The preset the values came from (`lte`, `5g-nsa`), for messages and reports.
    public var preset: String?
    /// RRC_IDLE → RRC_CONNECTED: what the first packet after idle waits.
    public var promotion: Duration
    /// How long after the last packet the radio goes idle.
    public var tail: Duration
    /// How often an idle phone listens for paging: a packet for it waits for the next occasion.
    public var pagingCycle: Duration

    /// States with these timers (`preset`: the name they came from, if any).
    public init(preset: String? = nil, promotion: Duration, tail: Duration, pagingCycle: Duration) {
        self.preset = preset
        self.promotion = promotion
        self.tail = tail
        self.pagingCycle = pagingCycle
    }

    /// LTE, as measured on a commercial network by Huang et al. (MobiSys 2012, table 3):
    /// promotion 260 ms, tail 11.576 s, paging cycle 1.28 s.
    public static let lte = RadioStates(preset: "lte", promotion: .milliseconds(260), tail: .milliseconds(11_576), pagingCycle: .milliseconds(1280))

    /// 5G non-standalone (EN-DC, 3GPP TS 37.340): the phone has one RRC state machine, the LTE
    /// anchor's, and NR is added as a secondary node once connected; so the promotion, tail and
    /// paging are LTE's. The NR leg's addition (which changes the rate, not when the first packet
    /// moves) is not modelled: set measured values of your own where you have them.
    public static let nr5gNonStandalone = RadioStates(preset: "5g-nsa", promotion: lte.promotion, tail: lte.tail, pagingCycle: lte.pagingCycle)

    /// The presets by name.
    public static let presets: [String: RadioStates] = ["lte": .lte, "5g-nsa": .nr5gNonStandalone]

    /// What a scenario may set: a promotion up to 10 s, a tail from 1 ms to an hour, a paging
    /// cycle up to 10.24 s (TS 36.304's longest default cycle is 2.56 s; eDRX aside).
    public static let maximumPromotion = Duration.seconds(10)
    /// See ``maximumPromotion``.
    public static let tailRange = Duration.milliseconds(1)...Duration.seconds(3600)
    /// See ``maximumPromotion``.
    public static let maximumPagingCycle = Duration.milliseconds(10_240)
}
