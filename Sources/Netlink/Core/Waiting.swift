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

/// Watches directories for files in them being written, created, replaced or removed (inotify).
public final class DirectoryWatcher {
    /// The descriptor to wait on.
    public let fileDescriptor: FileDescriptor
    /// The directories watched.
    public let directories: [String]

    public init(directories: [String]) throws(NetlinkError) {
        let fd = try systemCall("inotify_init1") { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) }
        fileDescriptor = FileDescriptor(owning: fd)
        self.directories = directories
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
        for directory in directories {
            try systemCall("inotify_add_watch(\(directory))") { inotify_add_watch(fd, directory, mask) }
        }
    }

    /// The names of the files that changed since the last call; empty when nothing did, nil
    /// when the kernel's event queue overflowed and any file may have changed.
    public func changedNames() -> Set<String>? {
        var names: Set<String> = []
        var overflowed = false
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = read(fileDescriptor.rawValue, &buffer, buffer.count)
            if count <= 0 { return overflowed ? nil : names }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                let length = buffer.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)) }
                let nameBytes = buffer[(offset + headerSize)..<min(count, offset + headerSize + length)]
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                if !name.isEmpty { names.insert(name) }
                offset += headerSize + length
            }
        }
    }
}

/// Waits until one of `descriptors` is readable or the timeout passes (-1: no timeout), and
/// returns which are readable. Retries `EINTR`.
public func waitReadable(_ descriptors: [Int32], timeoutMilliseconds: Int32) throws(NetlinkError) -> [Bool] {
    var fds = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    try systemCall("poll") { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
    return fds.map { $0.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 }
}
