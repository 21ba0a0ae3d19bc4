import CRoamLinux
import Glibc
import SystemPackage

/// Descriptors waited on together through one `epoll` instance: a wait is one system call that
/// reports only the ready descriptors, where `ppoll` (``waitForEvents(_:until:)``) asks every
/// descriptor's driver each time. For a loop that waits very often on many descriptors, such
/// as the link emulator's thread, which polls between packets.
///
/// Level-triggered: a descriptor left with data to read is reported again by the next wait.
/// The timeout is in nanoseconds (`epoll_pwait2`), as precise as `ppoll`'s.
package struct EventPoll: ~Copyable {
    private let descriptor: Int32
    /// Room for one event per descriptor added, which a wait fills: its own memory, so that a
    /// wait does not modify the value (and a `let` holding it is not checked for exclusive
    /// access on each wait).
    private var events: UnsafeMutableBufferPointer<epoll_event>
    private var count = 0

    public init() throws(Errno) {
        descriptor = try systemCall { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        events = UnsafeMutableBufferPointer(start: nil, count: 0)
    }

    deinit {
        events.deallocate()
        close(descriptor)
    }

    /// Adds `fd`, reported as `tag` when it is readable. The descriptor stays the caller's: it
    /// must stay open while it is in the set (closing it removes it).
    public mutating func add(_ fd: Int32, tag: Int) throws(Errno) {
        var event = epoll_event()
        event.events = UInt32(EPOLLIN.rawValue)
        event.data.u64 = UInt64(tag)
        _ = try systemCall { epoll_ctl(descriptor, EPOLL_CTL_ADD, fd, &event) }
        if count == events.count {
            let larger = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: max(4, 2 * events.count))
            larger.initialize(repeating: epoll_event())
            if count > 0 { _ = larger.update(fromContentsOf: events) }
            events.deallocate()
            events = larger
        }
        count += 1
    }

    /// Waits until one of the descriptors is readable (or has an error or hang-up) or until
    /// `deadline` (`nil`: without end; one in the past: not at all), and calls `ready` with the
    /// tag of each one that is. Returns how many were; interrupted waits are resumed. With no
    /// descriptor added there is nothing to wait for: it returns 0 at once.
    @discardableResult
    public func wait(until deadline: MonotonicInstant?, _ ready: (Int) -> Void) throws(Errno) -> Int {
        guard count > 0 else { return 0 }
        let capacity = Int32(count)
        while true {
            let result: Int32
            if let deadline {
                var timeout = deadline.timeoutFromNow
                result = epoll_pwait2(descriptor, events.baseAddress, capacity, &timeout, nil)
            } else {
                result = epoll_pwait2(descriptor, events.baseAddress, capacity, nil, nil)
            }
            if result >= 0 {
                for index in 0..<Int(result) { ready(Int(events[index].data.u64)) }
                return Int(result)
            }
            let code = errno
            if code != EINTR { throw Errno(rawValue: code) }
            if let deadline, deadline <= .now { return 0 }
        }
    }
}
