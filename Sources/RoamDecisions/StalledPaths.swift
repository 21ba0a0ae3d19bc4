import RoamCore

/// Interfaces whose connections stalled, each held down for a while: raced last so that the
/// next connection takes another path, and given back only once the hold-down has passed
/// (and, for moving a flow back, once probes say so). The hold-down starts at one second and
/// doubles with each stall, up to thirty, so a Wi-Fi that keeps failing is tried less and less.
/// Times are the caller's clock.
public struct StalledPaths: Sendable, Hashable {
    public var initialHold: Duration
    public var maximumHold: Duration
    private var entries: [String: Entry] = [:]

    struct Entry: Sendable, Hashable {
        var since: Duration
        var hold: Duration
        var stalls: Int
    }

    /// No interface held down yet.
    ///
    /// - Parameters:
    ///   - initialHold: An interface's hold-down after its first stall.
    ///   - maximumHold: The most a hold-down grows to, doubling with each stall.
    public init(initialHold: Duration = .seconds(1), maximumHold: Duration = .seconds(30)) {
        self.initialHold = initialHold
        self.maximumHold = maximumHold
    }

    /// Records a stall of `interface`.
    ///
    /// - Parameters:
    ///   - interface: The interface whose connection stalled.
    ///   - now: When, on the caller's clock.
    /// - Returns: Its hold-down from `now`: ``initialHold`` the first time, then twice the last,
    ///   up to ``maximumHold``.
    @discardableResult
    public mutating func markStalled(_ interface: String, at now: Duration) -> Duration {
        let hold = entries[interface].map { min(maximumHold, $0.hold * 2) } ?? initialHold
        entries[interface] = Entry(since: now, hold: hold, stalls: (entries[interface]?.stalls ?? 0) + 1)
        return hold
    }

    /// Whether `interface` is still held down at `now`.
    ///
    /// - Parameters:
    ///   - interface: An interface's name.
    ///   - now: The time asked about, on the caller's clock.
    /// - Returns: True until its last stall's hold-down has passed; false for one that never
    ///   stalled.
    public func isHeldDown(_ interface: String, at now: Duration) -> Bool {
        entries[interface].map { now - $0.since < $0.hold } ?? false
    }

    /// How many times `interface` stalled.
    ///
    /// - Parameter interface: An interface's name.
    /// - Returns: The stalls recorded for it (0 for one that never stalled).
    public func stalls(of interface: String) -> Int {
        entries[interface]?.stalls ?? 0
    }

    /// When `interface`'s hold-down ends.
    ///
    /// - Parameter interface: An interface's name.
    /// - Returns: The end of its last hold-down on the caller's clock, or nil if it never
    ///   stalled.
    public func holdDownEnd(_ interface: String) -> Duration? {
        entries[interface].map { $0.since + $0.hold }
    }

    /// `path` with the interfaces held down at `now` moved after all the others (each group in
    /// the path's order), and its primary the first of the others: the path to race over. A
    /// race tries a held-down interface only once every other candidate has had its attempt
    /// delay (RFC 8305's staggering), so it is the last resort, never no resort: the interface
    /// a flow just left may be the only one that still works (the new path of a handover
    /// judged stalled while data sent over the old one holds it up), and a race over the rest
    /// alone would wait out its whole timeout on a path that is gone.
    ///
    /// - Parameters:
    ///   - path: The path as the monitor gives it.
    ///   - now: The time, on the caller's clock.
    /// - Returns: `path` reordered, or `path` itself when nothing is held down or nothing else
    ///   is left.
    public func racePath(_ path: NetworkPath, at now: Duration) -> NetworkPath {
        racePath(path, at: now, alsoLast: [])
    }

    /// ``racePath(_:at:)``, with the interfaces in `alsoLast` (ones a path manager demoted,
    /// which have not yet proved themselves) moved last as the held-down ones are.
    ///
    /// - Parameters:
    ///   - path: The path as the monitor gives it.
    ///   - now: The time, on the caller's clock.
    ///   - alsoLast: Interfaces to move last although they are not held down.
    /// - Returns: `path` reordered, or `path` itself when nothing is moved or nothing else is
    ///   left.
    public func racePath(_ path: NetworkPath, at now: Duration, alsoLast: Set<String>) -> NetworkPath {
        func isLast(_ name: String) -> Bool { alsoLast.contains(name) || isHeldDown(name, at: now) }
        let healthy = path.availableInterfaces.filter { !isLast($0.name) }
        guard healthy.contains(where: { $0.type != .loopback }), healthy.count != path.availableInterfaces.count else { return path }
        var ordered = path
        ordered.availableInterfaces = healthy + path.availableInterfaces.filter { isLast($0.name) }
        ordered.primaryInterface = healthy.first { $0.type != .loopback }
        return ordered
    }

    /// How long without progress, while data is expected, before a connection counts as
    /// stalled: four smoothed round trips plus 200 ms (a few retransmission timeouts' worth),
    /// within `minimum` and `maximum`; 100 ms is assumed for an RTT not known yet.
    ///
    /// - Parameters:
    ///   - smoothedRTT: The connection's smoothed round-trip time (`TCP_INFO`), or nil.
    ///   - minimum: The shortest threshold.
    ///   - maximum: The longest threshold.
    /// - Returns: The threshold.
    public static func stallThreshold(smoothedRTT: Duration?, minimum: Duration = .milliseconds(300), maximum: Duration) -> Duration {
        let rtt = smoothedRTT ?? .milliseconds(100)
        return min(maximum, max(minimum, rtt * 4 + .milliseconds(200)))
    }
}
