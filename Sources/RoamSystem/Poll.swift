import CRoamLinux
import Glibc
import SystemPackage

/// Waits until one of `entries` has an event or `deadline` passes (`nil`: no deadline), and
/// returns how many have events (0 when the deadline passed). The one deadline wait of Roam:
/// it takes nanoseconds (`ppoll`), and after `EINTR` it waits again for what remains rather
/// than for the whole timeout.
@discardableResult
public func waitForEvents(_ entries: inout [pollfd], until deadline: MonotonicInstant?) throws(Errno) -> Int {
    while true {
        var result: Int32
        if let deadline {
            var timeout = deadline.timeoutFromNow
            result = ppoll(&entries, nfds_t(entries.count), &timeout, nil)
        } else {
            result = ppoll(&entries, nfds_t(entries.count), nil, nil)
        }
        if result >= 0 { return Int(result) }
        let code = errno
        if code != EINTR { throw Errno(rawValue: code) }
        if let deadline, deadline <= .now { return 0 }
    }
}

/// Waits up to `timeout` (`nil`: without end) for `entries`; see ``waitForEvents(_:until:)``.
@discardableResult
public func waitForEvents(_ entries: inout [pollfd], timeout: Duration?) throws(Errno) -> Int {
    try waitForEvents(&entries, until: timeout.map { .now + max($0, .zero) })
}
