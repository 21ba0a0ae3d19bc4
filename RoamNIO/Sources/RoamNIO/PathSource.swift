import Dispatch
import Multipath
import NIOCore
import Netlink
import PathMonitor
import Synchronization

/// What a bootstrap's races and its channels share: the monitor of the namespace, and the
/// interfaces held down after a channel stalled on them (left out of the next races, as
/// ``HandoverConnection`` does).
final class PathSource: Sendable {
    let monitor: NetworkPathMonitor
    /// Runs the channels' probes.
    let probes: ProbeWaiter
    private let ownsMonitor: Bool
    private let stalled = Mutex(StalledPaths())

    init(monitor: NetworkPathMonitor, owned: Bool) {
        self.monitor = monitor
        ownsMonitor = owned
        probes = ProbeWaiter(namespace: monitor.namespace)
    }

    deinit {
        probes.stop()
        if ownsMonitor { monitor.cancel() }
    }

    var namespace: NetworkNamespace { monitor.namespace }

    /// The clock the advisors and hold-downs run on (`CLOCK_MONOTONIC`, as NIO's deadlines).
    static func now() -> Duration { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }

    /// A time of that clock as NIO's deadline.
    static func deadline(at time: Duration) -> NIODeadline { .uptimeNanoseconds(UInt64(max(0, TimeAmount(time).nanoseconds))) }

    /// A channel stalled on `interface`: hold it down for the next races, one second first and
    /// doubling with each stall (whichever channel saw it), as ``StalledPaths`` does.
    func markStalled(_ interface: String, at now: Duration) {
        stalled.withLock { _ = $0.markStalled(interface, at: now) }
    }

    /// The interfaces held down at `now`, and until when: what every channel's advice must know,
    /// so that none points to an interface the next race would leave out.
    func holdDowns(of interfaces: [String], at now: Duration) -> [(interface: String, until: Duration)] {
        stalled.withLock { stalled in
            interfaces.compactMap { name in
                guard stalled.isHeldDown(name, at: now), let end = stalled.holdDownEnd(name) else { return nil }
                return (name, end)
            }
        }
    }

    /// The path to race over now (the monitor's, without interfaces held down, unless that
    /// leaves none), and the monitor's own.
    func racePath() -> (race: NetworkPath, published: NetworkPath)? {
        guard let path = monitor.currentPath else { return nil }
        let now = Self.now()
        return (stalled.withLock { $0.racePath(path, at: now) }, path)
    }

    /// Blocks until the monitor publishes a path other than `path`, or `deadline` passes;
    /// whether it did. For the racing thread, never an event loop.
    func waitForChange(from path: NetworkPath?, until deadline: NIODeadline) -> Bool {
        let changed = DispatchSemaphore(value: 0)
        let subscription = monitor.onUpdate { update in
            if update != path { changed.signal() }
        }
        defer { subscription.cancel() }
        let remaining = deadline - NIODeadline.now()
        guard remaining > .zero else { return false }
        return changed.wait(timeout: .now() + .nanoseconds(Int(remaining.nanoseconds))) == .success
    }
}
