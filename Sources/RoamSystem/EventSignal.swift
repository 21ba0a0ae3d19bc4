import CRoamLinux
import Glibc
import SystemPackage

/// A signal that wakes threads waiting on it: an `eventfd`, so that it can be waited on in
/// `poll` beside sockets, and so that a signal sent before the waiter looks is not lost.
///
/// Roam uses one for each of its wake-ups: a run's stop (signalled once, never reset), a path
/// monitor's update to a flow's loop, answers from lookup threads to a connection race, a
/// packet for the emulator's thread. ``signal()`` is safe from any thread, and a signal stays
/// until ``reset()``.
public final class EventSignal: Sendable {
    /// The eventfd, readable while signalled. Owned by this object: closed when it goes.
    public let descriptor: FileDescriptor

    public init() throws(Errno) {
        descriptor = FileDescriptor(rawValue: try systemCall { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) })
    }

    deinit { try? descriptor.close() }

    /// Signals: wakes every waiter now and later, until ``reset()``.
    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor.rawValue, &one, 8)
    }

    /// Clears the signal; true if it was signalled.
    @discardableResult
    public func reset() -> Bool {
        var value: UInt64 = 0
        return Glibc.read(descriptor.rawValue, &value, 8) == 8
    }

    public var isSignalled: Bool {
        var entry = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&entry, 1, 0) > 0
    }

    /// A `poll` entry that becomes readable when signalled.
    public var pollEntry: pollfd { pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0) }

    /// Blocks until `deadline` (true) or until signalled (false), whichever comes first.
    /// Precise to the scheduler's wake-up latency: the wait takes a nanosecond timeout.
    @discardableResult
    public func wait(until deadline: MonotonicInstant) -> Bool {
        wait(until: deadline, wakingOn: [])
    }

    /// Blocks until `deadline` or until one of `extra` is ready (true), or until signalled
    /// (false).
    public func wait(until deadline: MonotonicInstant, wakingOn extra: [pollfd]) -> Bool {
        var entries = [pollEntry] + extra
        do {
            _ = try waitForEvents(&entries, until: deadline)
        } catch {
            return false
        }
        return entries[0].revents == 0
    }

    /// Blocks for `duration` unless signalled first; true when the time passed.
    @discardableResult
    public func wait(for duration: Duration) -> Bool {
        wait(until: .now + duration)
    }
}
