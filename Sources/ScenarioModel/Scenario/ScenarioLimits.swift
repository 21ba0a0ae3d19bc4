/// The bounds of every quantity a scenario may hold, enforced by ``ScenarioReader`` and by
/// ``Scenario/problems``, so that no value read from a file can overflow a conversion later or
/// make a run, a validation or an export do unbounded work. `docs/scenario-format.md` lists them.
public enum ScenarioLimits {
    /// The largest scenario file read.
    public static let maximumFileSize = 32 << 20
    /// The largest trace file read.
    public static let maximumTraceFileSize = 64 << 20
    /// The longest scenario; every time in a scenario (events, starts, stops, timeouts) lies within it.
    public static let maximumDuration = Duration.seconds(24 * 3600)
    /// The longest one-way delay or jitter.
    public static let maximumDelay = Duration.seconds(60)
    /// The slowest and fastest rate (`rate`, `bitrate`, `minThroughput`).
    public static let minimumRate = Rate(bitsPerSecond: 8)
    public static let maximumRate = Rate(bitsPerSecond: 100e9)
    /// The largest transfer (`size` of bulk and requests workloads).
    public static let maximumSize: Int64 = 1 << 40
    /// A queue limit in bytes (`limit: 256kb`): 1 KiB to 1 GiB.
    public static let queueBytes: ClosedRange<Int64> = 1024...(1 << 30)
    /// A request carries a 16-byte header; the largest request is held in memory whole.
    public static let minimumRequestSize: Int64 = 16
    public static let maximumRequestSize: Int64 = 64 << 20
    /// The shortest time between requests.
    public static let minimumInterval = Duration.milliseconds(1)
    /// The shortest flap period: a carrier change every half millisecond, as fast as a timeline
    /// plays (the kernel reports a carrier change at most once a second per device anyway).
    public static let minimumFlapPeriod = Duration.milliseconds(1)
    /// The most link changes the timeline may expand to (a ramp makes one per 100 ms step, a
    /// flap two per period, other events one), so that a run, `roam export` and the report stay
    /// bounded.
    public static let maximumChanges = 100_000
    /// The longest stream playout buffer.
    public static let maximumBuffer = Duration.seconds(600)
    /// The longest a network's resolver may be told to hold its answers (`dns: {delay: ...}`).
    public static let maximumDNSDelay = Duration.seconds(60)
    /// The longest period of a delivery trace (its last millisecond).
    public static let maximumTracePeriod = Duration.seconds(24 * 3600)
    /// The most arguments and environment variables a command workload may have, and the
    /// longest of each.
    public static let maximumCommandLength = 1 << 20
    /// The most flows with conditions of their own (`match:`) on one link, each direction
    /// counted alone, whether set by the link, its network or the timeline: the netem backend
    /// gives each a band of a `prio` qdisc (which has at most 16).
    public static let maximumFlows = 8
    /// The most items in one list of a `match:` (protocols, ports, servers, prefixes).
    public static let maximumMatchItems = 16
}
