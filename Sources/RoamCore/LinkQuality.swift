/// How good an interface's link is, in the four grades of Network.framework's
/// `NWPath.LinkQuality` (iOS and macOS 26).
///
/// As Apple advises: use it to pick initial values of algorithms (a first video bitrate, how
/// much to prefetch), never to decide whether to try a connection.
///
/// Sources, first found wins: the interfaces file, then an alias tag (`roam:quality=minimal`;
/// in a scenario, the simulator tags each link from its current conditions), then what the
/// kernel's Wi-Fi stack says of an associated Wi-Fi interface (`LinkQuality.init(grading:)` in PathMonitor); otherwise
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
