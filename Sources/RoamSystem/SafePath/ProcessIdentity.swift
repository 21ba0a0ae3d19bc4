import CRoamLinux
import Glibc
import SystemPackage

/// A process named so that its id cannot be mistaken for a later process's: its pid and the
/// time it started (clock ticks after boot, field 22 of `/proc/PID/stat`). A pid alone, read from
/// a file, may by now be anyone's process.
package struct ProcessIdentity: Sendable, Hashable, CustomStringConvertible {
    public var pid: pid_t
    public var startTime: UInt64

    public init(pid: pid_t, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    /// The largest pid Linux hands out (`PID_MAX_LIMIT`).
    public static let maximumPID: pid_t = 4_194_304

    /// This process.
    public static var current: ProcessIdentity {
        of(getpid()) ?? ProcessIdentity(pid: getpid(), startTime: 0)
    }

    /// The process `pid` is now, or nil when there is none.
    public static func of(_ pid: pid_t) -> ProcessIdentity? {
        guard pid > 0, pid <= maximumPID else { return nil }
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        // `PID (COMM) STATE ...`: COMM may hold spaces and parentheses, so fields are counted
        // from the last ')'. The start time is field 22, the 20th after COMM.
        guard let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count >= 20, let start = UInt64(String(decoding: fields[fields.startIndex + 19], as: UTF8.self)) else { return nil }
        return ProcessIdentity(pid: pid, startTime: start)
    }

    /// The note's text: `PID STARTTIME` and a line feed.
    public var note: String { "\(pid) \(startTime)\n" }

    /// Reads a note strictly: two decimal numbers, a pid from 1 to ``maximumPID``, nothing else
    /// (so that `0`, `-1` or a pid alone never name a process group or every process).
    public init?(note text: some StringProtocol) {
        let line = text.hasSuffix("\n") ? Substring(text.dropLast()) : Substring(text)
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.count <= 20 && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
              let pid = pid_t(parts[0]), pid >= 1, pid <= Self.maximumPID, let start = UInt64(parts[1]) else { return nil }
        self.init(pid: pid, startTime: start)
    }

    public var description: String { "process \(pid)" }
}

/// A process held by a pidfd: while this lives, its pid names no other process to
/// ``isAlive``, ``signal(_:)`` or ``openNamespace(_:)``, even if it ends and the pid is reused.
package final class PinnedProcess: Sendable {
    public let identity: ProcessIdentity
    private let pidfd: Int32
    /// Its real uid, as this process's user namespace sees it (the `Uid:` line of
    /// `/proc/PID/status`; the owner of `/proc/PID` is root for a process that is not dumpable,
    /// as one that entered a user namespace of its own).
    public let owner: uid_t

    private init(identity: ProcessIdentity, pidfd: Int32, owner: uid_t) {
        self.identity = identity
        self.pidfd = pidfd
        self.owner = owner
    }

    deinit { close(pidfd) }

    /// The process `identity` names, if it still runs: same pid, same start time.
    public static func pin(_ identity: ProcessIdentity) -> PinnedProcess? {
        guard identity.pid > 0, identity.pid <= ProcessIdentity.maximumPID else { return nil }
        let fd = roam_pidfd_open(identity.pid)
        guard fd >= 0 else { return nil }
        // Read after the pidfd is held, and checked alive after: what was read is the pinned
        // process's, not a successor's.
        guard let now = ProcessIdentity.of(identity.pid), now == identity, let owner = realUID(of: identity.pid), isAlive(fd) else {
            close(fd)
            return nil
        }
        return PinnedProcess(identity: identity, pidfd: fd, owner: owner)
    }

    /// The real uid on the `Uid:` line of `/proc/PID/status`.
    private static func realUID(of pid: pid_t) -> uid_t? {
        let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        for line in buffer[..<count].split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("Uid:".utf8)) {
            let fields = line.dropFirst(4).split { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") }
            return fields.first.flatMap { uid_t(String(decoding: $0, as: UTF8.self)) }
        }
        return nil
    }

    private static func isAlive(_ pidfd: Int32) -> Bool {
        roam_pidfd_send_signal(pidfd, 0) == 0 || errno == EPERM
    }

    /// Whether it still runs.
    public var isAlive: Bool { Self.isAlive(pidfd) }

    /// Sends `signal` to it (never to a successor with its pid).
    @discardableResult
    public func signal(_ signal: Int32) -> Bool { roam_pidfd_send_signal(pidfd, signal) == 0 }

    /// Opens its namespace `kind` (`user`, `mnt`, `net`): the one it is in, checked alive after
    /// the open so that the namespace is not a successor's.
    public func openNamespace(_ kind: String) throws(Errno) -> FileDescriptor {
        let fd = try systemCall { open("/proc/\(identity.pid)/ns/\(kind)", O_RDONLY | O_CLOEXEC) }
        guard isAlive else {
            close(fd)
            throw Errno.noSuchProcess
        }
        return FileDescriptor(rawValue: fd)
    }
}
