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
public struct EventPoll: ~Copyable {
    private let descriptor: Int32
    private var events: [epoll_event]

    public init() throws(Errno) {
        descriptor = try systemCall { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        events = []
    }

    deinit { close(descriptor) }

    /// Adds `fd`, reported as `tag` when it is readable. The descriptor stays the caller's: it
    /// must stay open while it is in the set (closing it removes it).
    public mutating func add(_ fd: Int32, tag: Int) throws(Errno) {
        var event = epoll_event()
        event.events = UInt32(EPOLLIN.rawValue)
        event.data.u64 = UInt64(tag)
        _ = try systemCall { epoll_ctl(descriptor, EPOLL_CTL_ADD, fd, &event) }
        events.append(epoll_event())
    }

    /// Waits until one of the descriptors is readable (or has an error or hang-up) or until
    /// `deadline` (`nil`: without end; one in the past: not at all), and calls `ready` with the
    /// tag of each one that is. Returns how many were; interrupted waits are resumed. With no
    /// descriptor added there is nothing to wait for: it returns 0 at once.
    @discardableResult
    public mutating func wait(until deadline: MonotonicInstant?, _ ready: (Int) -> Void) throws(Errno) -> Int {
        guard !events.isEmpty else { return 0 }
        let capacity = Int32(events.count)
        while true {
            let result: Int32 = events.withUnsafeMutableBufferPointer { buffer in
                if let deadline {
                    var timeout = deadline.timeoutFromNow
                    return epoll_pwait2(descriptor, buffer.baseAddress, capacity, &timeout, nil)
                }
                return epoll_pwait2(descriptor, buffer.baseAddress, capacity, nil, nil)
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
