import RoamCore

extension LinkQuality {
    /// The bounds below which a direction of a link grades `moderate`, and `minimal`.
    ///
    /// Apple publishes no thresholds for `NWPath.linkQuality`; these follow what the grades are
    /// for (tuning an app's first bitrate and prefetch): `good` carries HD video with
    /// interactive delay, `moderate` carries audio and web pages with a noticeable wait,
    /// `minimal` barely carries messages.
    ///
    /// | grade | rate | one-way delay | loss |
    /// |---|---|---|---|
    /// | `minimal` | under 1 Mbit/s | 250 ms or more | 10% or more |
    /// | `moderate` | under 10 Mbit/s | 50 ms or more | 2% or more |
    /// | `good` | otherwise | | |
    ///
    /// A direction grades as its worst measure; a link as its worse direction.
    public enum Grading {
        public static let moderateBelowRate = Rate.mbit(10)
        public static let minimalBelowRate = Rate.mbit(1)
        public static let moderateFromDelay = Duration.milliseconds(50)
        public static let minimalFromDelay = Duration.milliseconds(250)
        public static let moderateFromLoss = 0.02
        public static let minimalFromLoss = 0.10
    }

    /// The grade of one direction's impairment: its rate (a trace's mean rate, which comes first,
    /// as in the userspace emulator: a trace the netem backend steps keeps one grade), delay and
    /// long-run loss against ``Grading``. An unimpaired direction is `good`.
    public init(grading impairment: Impairment) {
        let rate = impairment.trace?.trace.meanRate ?? impairment.rate?.bitsPerSecond
        let delay = impairment.delay ?? .zero
        let loss = impairment.loss?.meanLoss ?? 0
        if rate.map({ $0 < Grading.minimalBelowRate.bitsPerSecond }) == true || delay >= Grading.minimalFromDelay
            || loss >= Grading.minimalFromLoss {
            self = .minimal
        } else if rate.map({ $0 < Grading.moderateBelowRate.bitsPerSecond }) == true || delay >= Grading.moderateFromDelay
            || loss >= Grading.moderateFromLoss {
            self = .moderate
        } else {
            self = .good
        }
    }

    /// The grade of a link whose directions are impaired as given: the worse of the two.
    ///
    /// A blackhole does not count: it stands for a network that stays up and passes nothing,
    /// which is exactly what a device's radio cannot see (the signal is fine), so a path monitor
    /// must not learn of it from the link's quality either.
    public init(grading up: LinkConditions, _ down: LinkConditions) {
        self = LinkQuality.worse(LinkQuality(grading: up.impairment), LinkQuality(grading: down.impairment))
    }

    /// The worse of two grades (`unknown` counts as neither).
    static func worse(_ a: LinkQuality, _ b: LinkQuality) -> LinkQuality {
        let order: [LinkQuality] = [.minimal, .moderate, .good, .unknown]
        return order.firstIndex(of: a)! <= order.firstIndex(of: b)! ? a : b
    }
}
