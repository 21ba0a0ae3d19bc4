import Glibc
import Netlink

/// Where runs note who owns them, so that `roam cleanup` can tell a crashed run's leftovers
/// from a live run's network: `/run/roam/runs/RUN` holds the owning process id.
public enum RunRegistry {
    public static let directory = "/run/roam/runs"

    /// A new run id: six hex digits not used by any namespace or registered run.
    public static func newRunID() -> String {
        let taken = Set(NetworkNamespace.list())
        while true {
            let id = String(UInt32.random(in: 0..<0x100_0000), radix: 16)
            let padded = String(repeating: "0", count: 6 - id.count) + id
            if !taken.contains(where: { $0.hasPrefix("roam-\(padded)-") }) && access("\(directory)/\(padded)", F_OK) != 0 {
                return padded
            }
        }
    }

    /// Records that this process owns `runID`.
    public static func register(_ runID: String) throws(SimulatorError) {
        for path in ["/run/roam", directory] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            throw SimulatorError("create \(path)", NetlinkError.posix("mkdir \(path)"))
        }
        let path = "\(directory)/\(runID)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SimulatorError("register run \(runID)", NetlinkError.posix("create \(path)")) }
        defer { close(fd) }
        let text = Array("\(getpid())\n".utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    public static func unregister(_ runID: String) {
        _ = unlink("\(directory)/\(runID)")
    }

    /// The process that owns `runID`, if it is registered.
    public static func owner(of runID: String) -> pid_t? {
        let fd = open("\(directory)/\(runID)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return pid_t(String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").first ?? "")
    }

    static func isAlive(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }
}
