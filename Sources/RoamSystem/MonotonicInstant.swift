import CRoamLinux
import Glibc

/// Time on the kernel's monotonic clock (`CLOCK_MONOTONIC`), the clock a run's timeline is
/// planned on: it never jumps when the wall clock is set.
public struct MonotonicInstant: Sendable, Hashable, Comparable {
    /// Nanoseconds since an arbitrary point (the machine's boot).
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static var now: MonotonicInstant {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return MonotonicInstant(nanoseconds: Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec))
    }

    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public static func + (lhs: MonotonicInstant, rhs: Duration) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: lhs.nanoseconds + rhs.nanoseconds)
    }

    public static func - (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Duration {
        .nanoseconds(lhs.nanoseconds - rhs.nanoseconds)
    }

    /// The time from now until this instant (zero once it has passed), as a wait's timeout.
    var timeoutFromNow: timespec {
        let remaining = max(0, nanoseconds - MonotonicInstant.now.nanoseconds)
        return timespec(tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
    }
}
