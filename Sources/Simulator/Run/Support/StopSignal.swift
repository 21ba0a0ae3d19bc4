import CNetlink
import Glibc

/// A flag that stops waits at once: an `eventfd` that threads blocked in ``wait(until:)`` or in
/// `poll` on ``descriptor`` wake up on. Once signalled it stays signalled.
public final class StopSignal: @unchecked Sendable {
    /// The eventfd; readable once signalled.
    public let descriptor: Int32

    public init() throws(SimulatorError) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw SimulatorError(.environment, "eventfd: \(String(cString: strerror(errno)))") }
        descriptor = fd
    }

    deinit { close(descriptor) }

    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor, &one, 8)
    }

    public var isSignalled: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// Blocks until `deadline` (true) or until signalled (false), whichever comes first.
    /// Precise to the scheduler's wake-up latency: `ppoll` takes a nanosecond timeout.
    @discardableResult
    public func wait(until deadline: MonotonicInstant) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = deadline.nanoseconds - MonotonicInstant.now.nanoseconds
            if remaining <= 0 { return !isSignalled }
            var timeout = timespec(tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
            let result = ppoll(&entry, 1, &timeout, nil)
            if result > 0 { return false }
            if result < 0 && errno != EINTR { return false }
        }
    }

    /// Blocks until `deadline` or until one of `extra` is ready (true), or until signalled
    /// (false).
    public func wait(until deadline: MonotonicInstant, wakingOn extra: [pollfd]) -> Bool {
        guard !extra.isEmpty else { return wait(until: deadline) }
        var entries = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)] + extra
        while true {
            let remaining = deadline.nanoseconds - MonotonicInstant.now.nanoseconds
            if remaining <= 0 { return !isSignalled }
            var timeout = timespec(tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
            let result = ppoll(&entries, nfds_t(entries.count), &timeout, nil)
            if result < 0 && errno != EINTR { return false }
            if result > 0 { return entries[0].revents == 0 }
        }
    }

    /// Blocks for `duration` unless signalled first; true when the time passed.
    @discardableResult
    public func wait(for duration: Duration) -> Bool {
        wait(until: .now + duration)
    }
}
