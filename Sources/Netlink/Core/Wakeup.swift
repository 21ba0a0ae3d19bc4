import CNetlink
import Glibc

/// A wake-up signal one thread sends another that waits in ``waitReadable(_:timeoutMilliseconds:)``
/// (an `eventfd`). Signals sent before the waiter looks are not lost.
public final class Wakeup: Sendable {
    /// The descriptor to wait on.
    public let fileDescriptor: FileDescriptor

    public init() throws(NetlinkError) {
        let fd = try systemCall("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
        fileDescriptor = FileDescriptor(owning: fd)
    }

    /// Wakes the waiter. Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = write(fileDescriptor.rawValue, &one, 8)
    }

    /// Clears pending signals.
    public func reset() {
        var value: UInt64 = 0
        _ = read(fileDescriptor.rawValue, &value, 8)
    }
}

/// Waits until one of `descriptors` is readable or the timeout passes (-1: no timeout), and
/// returns which are readable. Retries `EINTR`.
public func waitReadable(_ descriptors: [Int32], timeoutMilliseconds: Int32) throws(NetlinkError) -> [Bool] {
    var fds = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    try systemCall("poll") { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
    return fds.map { $0.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 }
}
