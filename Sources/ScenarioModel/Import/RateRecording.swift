import RoamCore

/// What a phone measured its links carry, second by second, made into a scenario whose links
/// play it: the common part of `roam import gnettrack` (``GNetTrackImport``) and `roam import
/// mp-traces` (``MPTracesImport``).
///
/// Each recorded interface becomes one link between `phone` and `server`, all on the
/// recording's one clock. The recording is cut into windows; in each, a direction's rate is the
/// mean of the rates recorded in it, its delay half the mean round trip recorded in it, its loss
/// the share of round trips lost. A window with nothing recorded for a direction (a gap, or a
/// sample that says nothing of the link's capacity, as an idle phone's) keeps what came before.
/// A rate of zero is a link that passes nothing: the direction loses everything until a rate
/// comes back. The changes are timeline events (`set:`), which every backend plays: the
/// userspace emulator, and netem, which steps its tbf and netem qdiscs at each window.
public enum RateRecording {
    /// One sample of one interface, on the recording's clock.
    public struct Sample: Sendable, Hashable {
        /// From the recording's first sample.
        public var at: Duration
        /// What the link carried toward the phone and from it; nil when the sample says nothing
        /// of it.
        public var down: Rate?
        public var up: Rate?
        /// A round trip measured then, and the share of round trips lost.
        public var roundTrip: Duration?
        public var loss: Double?
        /// Whether the link passed nothing at all then (its carrier down: true) or could pass
        /// (false); nil when the sample does not say.
        public var blocked: Bool?

        /// A sample.
        ///
        /// - Parameters:
        ///   - at: When, from the recording's first sample.
        ///   - down: The rate toward the phone, if recorded.
        ///   - up: The rate from the phone, if recorded.
        ///   - roundTrip: A round-trip time, if recorded.
        ///   - loss: The share of round trips lost (0 to 1), if recorded.
        ///   - blocked: Whether the link passed nothing at all (true) or could pass (false), if
        ///     recorded.
        public init(at: Duration, down: Rate?, up: Rate?, roundTrip: Duration? = nil, loss: Double? = nil, blocked: Bool? = nil) {
            self.at = at
            self.down = down
            self.up = up
            self.roundTrip = roundTrip
            self.loss = loss
            self.blocked = blocked
        }
    }

    /// The delay a loaded link plays: while a download loaded the link as it was recorded, its
    /// echoes measured the download's queue too, which the replay's own traffic builds again;
    /// such a sample plays the least round trip recorded in the ``window`` before it (as BBR
    /// estimates a path's delay), not its own mean. One rule for every recording that knows
    /// when it was loaded (`roam record --throughput`, G-NetTrack's `State D`).
    struct LoadedRoundTrip {
        /// How far back a loaded sample looks (BBR's window for a path's minimum round trip).
        static let window: Duration = .seconds(10)

        private var recent: [(at: Duration, roundTrip: Duration)] = []
        /// How many samples played the window's least instead of their own round trip.
        private(set) var replaced = 0

        /// Takes in a sample's least round trip (its only one where it has no least) at `at`,
        /// in time order.
        mutating func record(_ least: Duration?, at: Duration) {
            if let least { recent.append((at, least)) }
            recent.removeAll { $0.at <= at - Self.window }
        }

        /// The round trip a sample at the last recorded time plays: `roundTrip` where the link
        /// was not loaded or nothing was measured, else the window's least.
        mutating func played(_ roundTrip: Duration?, loaded: Bool) -> Duration? {
            guard loaded, roundTrip != nil, let least = recent.map(\.roundTrip).min() else { return roundTrip }
            replaced += 1
            return least
        }
    }

    /// One recorded interface: the link it becomes.
    public struct Interface: Sendable, Hashable {
        /// The link's name and interface type (`wifi`, `cellular`).
        public var link: String
        public var type: String
        public var samples: [Sample]
        /// A one-way delay the recording does not carry, given by the user: each direction's
        /// delay where no round trip was recorded.
        public var delay: Duration?

        /// An interface.
        ///
        /// - Parameters:
        ///   - link: The link's name.
        ///   - type: Its interface type.
        ///   - samples: Its samples, in time order.
        ///   - delay: A one-way delay to play where the recording has no round trip.
        public init(link: String, type: String, samples: [Sample], delay: Duration? = nil) {
            self.link = link
            self.type = type
            self.samples = samples
            self.delay = delay
        }
    }

    /// One window of one interface.
    public struct Window: Sendable, Hashable {
        public var start: Duration
        /// How many samples fell in it.
        public var samples: Int
        /// The mean of the rates recorded in it, each direction; nil when none was.
        public var down: Rate?
        public var up: Rate?
        /// The mean round trip and the mean share lost, where recorded.
        public var roundTrip: Duration?
        public var loss: Double?
        /// Whether a sample in it passed nothing at all (true), else whether one said the link
        /// could pass (false); nil when none said.
        public var blocked: Bool?
    }

    /// `samples` cut into `count` windows of `width` from the recording's start.
    ///
    /// - Parameters:
    ///   - samples: One interface's samples.
    ///   - width: Each window's length.
    ///   - count: How many windows (the longest interface's span decides it for all).
    /// - Returns: The windows, in order.
    public static func windows(_ samples: [Sample], width: Duration, count: Int) -> [Window] {
        var sums = [(samples: Int, down: Double, downs: Int, up: Double, ups: Int, rtt: Double, rtts: Int, loss: Double, losses: Int, blocked: Bool?)](
            repeating: (0, 0, 0, 0, 0, 0, 0, 0, 0, nil), count: max(count, 1))
        let widthSeconds = width.seconds
        for sample in samples {
            let index = min(sums.count - 1, max(0, Int(sample.at.seconds / widthSeconds)))
            sums[index].samples += 1
            if let down = sample.down { sums[index].down += down.bitsPerSecond; sums[index].downs += 1 }
            if let up = sample.up { sums[index].up += up.bitsPerSecond; sums[index].ups += 1 }
            if let rtt = sample.roundTrip { sums[index].rtt += rtt.seconds; sums[index].rtts += 1 }
            if let loss = sample.loss { sums[index].loss += loss; sums[index].losses += 1 }
            if let blocked = sample.blocked { sums[index].blocked = (sums[index].blocked ?? false) || blocked }
        }
        return sums.enumerated().map { index, sum in
            Window(start: width * index, samples: sum.samples,
                   down: sum.downs > 0 ? Rate(bitsPerSecond: sum.down / Double(sum.downs)) : nil,
                   up: sum.ups > 0 ? Rate(bitsPerSecond: sum.up / Double(sum.ups)) : nil,
                   roundTrip: sum.rtts > 0 ? .seconds(sum.rtt / Double(sum.rtts)) : nil,
                   loss: sum.losses > 0 ? sum.loss / Double(sum.losses) : nil, blocked: sum.blocked)
        }
    }

    /// The most windows a scenario is made of: with an event per window, direction and link,
    /// two links stay within the timeline's bound (`ScenarioLimits.maximumChanges`).
    public static let maximumWindows = 24_000

    /// How many windows of `width` cover every interface's samples.
    ///
    /// - Parameters:
    ///   - interfaces: The recorded interfaces.
    ///   - width: Each window's length.
    /// - Returns: The count (at least one).
    public static func windowCount(_ interfaces: [Interface], width: Duration) -> Int {
        let last = interfaces.flatMap { $0.samples.map(\.at) }.max() ?? .zero
        return Int(last.seconds / width.seconds) + 1
    }

    /// What one direction of a link plays in a window.
    struct Played: Equatable {
        var rate: String?
        var delay: String
        var loss: String
    }

    /// A scenario whose links play the interfaces' windows.
    ///
    /// - Parameters:
    ///   - name: The scenario's name.
    ///   - interfaces: The recorded interfaces, each a link between `phone` and `server`.
    ///   - width: Each window's length.
    ///   - start: When the recording's first sample falls in the scenario: each link holds its
    ///     first window's conditions until then (time for the scenario's programs to start).
    ///   - header: Comment lines that say where it came from (escaped here).
    ///   - notes: What could not be carried over, written as comments.
    /// - Returns: The scenario's YAML.
    public static func scenarioYAML(name: String, interfaces: [Interface], width: Duration, start: Duration = .zero,
                                    header: [String], notes: [String]) -> String {
        let count = windowCount(interfaces, width: width)
        let duration = start + width * count
        var lines = header.map { "# \(sanitizedComment($0))" }
        lines += notes.map { "# Note: \(sanitizedComment($0))" }
        lines += ["name: \(name)", "duration: \(milliseconds(duration))", "nodes:", "  phone: {}", "  server: {}", "links:"]
        var events: [(at: Duration, order: Int, text: String)] = []
        for (order, interface) in interfaces.enumerated() {
            let windows = self.windows(interface.samples, width: width, count: count)
            // Each direction's state: the last rate, round trip and loss recorded, carried
            // across windows that recorded none.
            func states(_ rate: KeyPath<Window, Rate?>, lossApplies: Bool) -> [Played] {
                var lastRate = windows.lazy.compactMap { $0[keyPath: rate] }.first { $0.bitsPerSecond > 0 }
                var lastZero = false
                var lastDelay = windows.lazy.compactMap(\.roundTrip).first.map { $0 / 2 } ?? interface.delay ?? .zero
                var lastLoss = lossApplies ? (windows.lazy.compactMap(\.loss).first ?? 0) : 0
                return windows.map { window in
                    if let recorded = window[keyPath: rate] {
                        lastZero = recorded.bitsPerSecond <= 0
                        if !lastZero { lastRate = recorded }
                    }
                    // A link that passed nothing at all, and one that could pass again where no
                    // rate says otherwise (a link whose rate was never recorded is unlimited).
                    if let blocked = window.blocked {
                        if blocked { lastZero = true } else if window[keyPath: rate] == nil { lastZero = false }
                    }
                    if let roundTrip = window.roundTrip { lastDelay = roundTrip / 2 }
                    if lossApplies, let loss = window.loss { lastLoss = loss }
                    return Played(rate: lastRate.map(rateText), delay: milliseconds(lastDelay), loss: percent(lastZero ? 1 : lastLoss))
                }
            }
            // A round trip's losses are played on the uplink (a loss either way loses it).
            let up = states(\.up, lossApplies: true), down = states(\.down, lossApplies: false)
            func conditions(_ played: Played) -> String {
                (played.rate.map { "rate: \($0), " } ?? "") + "delay: \(played.delay), loss: \(played.loss)"
            }
            lines.append("  - {name: \(interface.link), between: [phone, server], type: \(interface.type), up: {\(conditions(up[0]))}, down: {\(conditions(down[0]))}}")
            for (direction, played) in [("up", up), ("down", down)] {
                for index in played.indices.dropFirst() where played[index] != played[index - 1] {
                    let before = played[index - 1], now = played[index]
                    var set: [String] = []
                    if now.rate != before.rate, let rate = now.rate { set.append("rate: \(rate)") }
                    if now.delay != before.delay { set.append("delay: \(now.delay)") }
                    if now.loss != before.loss { set.append("loss: \(now.loss)") }
                    let at = start + width * index
                    events.append((at, order * 2 + (direction == "up" ? 0 : 1),
                                   "  - {at: \(milliseconds(at)), link: \(interface.link), direction: \(direction), set: {\(set.joined(separator: ", "))}}"))
                }
            }
        }
        events.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        if !events.isEmpty { lines += ["timeline:"] + events.map(\.text) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A rate as a scenario writes it: whole kbit/s (whole bit/s below one kbit/s).
    static func rateText(_ rate: Rate) -> String {
        let bits = max(rate.bitsPerSecond, ScenarioLimits.minimumRate.bitsPerSecond).rounded()
        return bits >= 1000 ? "\(Int64((bits / 1000).rounded()))kbit" : "\(Int64(bits))bit"
    }

    static func milliseconds(_ value: Duration) -> String {
        let tenths = Int64((value.seconds * 10_000).rounded())
        return tenths % 10 == 0 ? "\(tenths / 10)ms" : "\(tenths / 10).\(tenths % 10)ms"
    }

    static func percent(_ share: Double) -> String {
        let tenths = Int((min(max(share, 0), 1) * 1000).rounded())
        return tenths % 10 == 0 ? "\(tenths / 10)%" : "\(tenths / 10).\(tenths % 10)%"
    }

    /// `text` as one comment line: no line breaks or control characters, at most 200 characters.
    static func sanitizedComment(_ text: String) -> String {
        IRTTImport.sanitizedComment(text)
    }

    /// A short figure of rates for a comment: mean, least and most of those above zero, and the
    /// seconds at zero.
    static func summary(_ rates: [Rate]) -> String {
        guard !rates.isEmpty else { return "none recorded" }
        let positive = rates.filter { $0.bitsPerSecond > 0 }
        let zeros = rates.count - positive.count
        guard !positive.isEmpty else { return "\(rates.count) samples, all zero" }
        let mean = positive.map(\.bitsPerSecond).reduce(0, +) / Double(positive.count)
        func mbit(_ bits: Double) -> String {
            let hundredths = Int64((bits / 1e4).rounded())
            return "\(hundredths / 100).\(String(repeating: "0", count: hundredths % 100 < 10 ? 1 : 0))\(hundredths % 100)"
        }
        let least = positive.map(\.bitsPerSecond).min() ?? 0, most = positive.map(\.bitsPerSecond).max() ?? 0
        return "mean \(mbit(mean)) Mbit/s (\(mbit(least)) to \(mbit(most))), \(zeros) at zero, of \(rates.count) samples"
    }
}
