import RoamCore

/// Whether a run played what its scenario asked, measured by the run itself (Mininet-HiFi's
/// lesson: an emulator on a busy machine produces wrong figures silently unless it checks
/// itself). `summary.json`'s `fidelity` section; `report.html` shows a banner and `roam run
/// --strict-fidelity` exits 3 when the run was not faithful.
///
/// What is judged:
/// - the timeline's scheduling: how late the player began each change beyond its planned time
///   and the time the change before it took to apply (its thread's wake-up: what a starved
///   machine stretches; the time a change takes to apply, a carrier's routes put back, say, is
///   the kernel's and in ``RunSummary/Timeline``), on both backends;
/// - on the userspace backend, delivery lateness: how long after its due time each packet left
///   the emulator (its rate is held exactly but for this: each departure is scheduled at the
///   configured rate from the one before while the queue is non-empty), and packets a TUN
///   interface refused because the emulator fell behind (lost without the scenario asking).
///
/// What is reported beside, not judged: each direction's loss drawn against the loss configured
/// (``RunSummary/LinkCounters/expectedLost``); on netem, the qdiscs' own counters at the run's
/// end (``qdiscs``).
public struct Fidelity: Sendable, Hashable {
    /// The bounds a faithful run stays within.
    public struct Bounds: Sendable, Hashable {
        /// The 99th percentile of delivery lateness, over every packet of every link.
        public var deliveryP99: Duration
        /// The 99th percentile of the timeline's scheduling lateness.
        public var timelineP99: Duration

        public init(deliveryP99: Duration = .milliseconds(1), timelineP99: Duration = .milliseconds(2)) {
            self.deliveryP99 = deliveryP99
            self.timelineP99 = timelineP99
        }
    }

    public var bounds: Bounds
    /// Delivery lateness over every packet of every link (userspace backend); nil on netem.
    public var deliveryP50: Duration?
    public var deliveryP99: Duration?
    public var deliveryMax: Duration?
    /// Packets whose lateness was measured.
    public var packets: Int64 = 0
    /// Packets a TUN interface refused (the emulator fell behind): lost, not by the scenario.
    public var refused: Int64 = 0
    /// The 99th percentile of the timeline's scheduling lateness.
    public var timelineP99: Duration?
    /// Each bound exceeded, said in words; empty for a faithful run.
    public var problems: [String] = []
    /// On the netem backend: each link direction's qdiscs and what they counted, read from the
    /// kernel at the run's end (`tc -s qdisc show`).
    public var qdiscs: [QdiscCounters] = []

    /// One qdisc of one link direction, as the kernel counted.
    public struct QdiscCounters: Sendable, Hashable {
        public var link: String
        public var direction: String
        /// `netem`, `tbf`, `codel`, `fq_codel`.
        public var kind: String
        public var packets: Int64
        public var drops: Int64
        public var overlimits: Int64
        public var requeues: Int64

        public init(link: String, direction: String, kind: String, packets: Int64, drops: Int64, overlimits: Int64, requeues: Int64) {
            self.link = link
            self.direction = direction
            self.kind = kind
            self.packets = packets
            self.drops = drops
            self.overlimits = overlimits
            self.requeues = requeues
        }
    }

    /// Whether the run stayed within every bound.
    public var faithful: Bool { problems.isEmpty }

    public init(bounds: Bounds = Bounds()) {
        self.bounds = bounds
    }

    /// Judges a run: fills ``problems`` from the figures against ``bounds``.
    public mutating func judge() {
        problems = []
        if let p99 = deliveryP99, p99 > bounds.deliveryP99 {
            problems.append("packets left the userspace emulator late: p99 \(Self.words(p99)) after their due time (bound \(Self.words(bounds.deliveryP99)), "
                + "max \(Self.words(deliveryMax ?? p99)); the emulator's threads did not get the CPU in time")
        }
        if refused > 0 {
            problems.append("\(refused) packets were lost because the emulator fell behind (a TUN interface's queue was full), not by the links' conditions")
        }
        if let p99 = timelineP99, p99 > bounds.timelineP99 {
            problems.append("the timeline's player began its changes late: p99 \(Self.words(p99)) after their planned time (bound \(Self.words(bounds.timelineP99))); "
                + "its thread did not get the CPU in time")
        }
    }

    /// A duration in words for a message: `850 µs`, `12.5 ms`, `1.2 s`.
    static func words(_ duration: Duration) -> String {
        let nanoseconds = Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
        if nanoseconds < 1e6 { return "\(Int((nanoseconds / 1e3).rounded())) µs" }
        if nanoseconds < 1e9 { return format3(nanoseconds / 1e6) + " ms" }
        return format3(nanoseconds / 1e9) + " s"
    }
}

extension Fidelity {
    /// The section as `summary.json` holds it.
    public var json: JSONValue {
        .object([
            ("faithful", .bool(faithful)),
            ("bounds", .object([("deliveryP99Ms", .milliseconds(bounds.deliveryP99)), ("timelineP99Ms", .milliseconds(bounds.timelineP99))])),
            ("deliveryLatenessMs", .object([("p50", .milliseconds(deliveryP50)), ("p99", .milliseconds(deliveryP99)), ("max", .milliseconds(deliveryMax))])),
            ("packets", .int(packets)),
            ("refused", .int(refused)),
            ("timelineP99Ms", .milliseconds(timelineP99)),
            ("problems", .array(problems.map { .string($0) })),
            ("qdiscs", .array(qdiscs.map { counters in
                .object([("link", .string(counters.link)), ("direction", .string(counters.direction)), ("kind", .string(counters.kind)),
                         ("packets", .int(counters.packets)), ("drops", .int(counters.drops)), ("overlimits", .int(counters.overlimits)),
                         ("requeues", .int(counters.requeues))])
            })),
        ])
    }

    /// Reads the section back; the error names the field.
    init(json value: JSONValue) throws(ReportError) {
        let fields = JSONFields(value, place: "summary.json 'fidelity'")
        var bounds = Bounds()
        if let value = fields.value("bounds") {
            let read = JSONFields(value, place: "summary.json 'fidelity.bounds'")
            if let p99 = try read.optionalMilliseconds("deliveryP99Ms") { bounds.deliveryP99 = p99 }
            if let p99 = try read.optionalMilliseconds("timelineP99Ms") { bounds.timelineP99 = p99 }
        }
        self.init(bounds: bounds)
        if let value = fields.value("deliveryLatenessMs") {
            let read = JSONFields(value, place: "summary.json 'fidelity.deliveryLatenessMs'")
            deliveryP50 = try read.optionalMilliseconds("p50")
            deliveryP99 = try read.optionalMilliseconds("p99")
            deliveryMax = try read.optionalMilliseconds("max")
        }
        packets = try fields.optionalInt("packets") ?? 0
        refused = try fields.optionalInt("refused") ?? 0
        timelineP99 = try fields.optionalMilliseconds("timelineP99Ms")
        problems = Array((try fields.optionalStrings("problems") ?? []).prefix(RunSummary.maximumItems))
        qdiscs = try fields.list("qdiscs", limit: RunSummary.maximumItems) { item throws(ReportError) in
            let counters = JSONFields(item, place: "summary.json 'fidelity.qdiscs'")
            return QdiscCounters(link: try counters.string("link"), direction: try counters.string("direction"), kind: try counters.string("kind"),
                                 packets: try counters.optionalInt("packets") ?? 0, drops: try counters.optionalInt("drops") ?? 0,
                                 overlimits: try counters.optionalInt("overlimits") ?? 0, requeues: try counters.optionalInt("requeues") ?? 0)
        }
    }
}
