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
        try register(runID, in: directory)
    }

    /// Records that this process owns `runID` in `registry` (made, with its parents, if missing).
    public static func register(_ runID: String, in registry: String) throws(SimulatorError) {
        var parent = ""
        for component in registry.split(separator: "/") {
            parent += "/\(component)"
            guard mkdir(parent, 0o755) != 0, errno != EEXIST else { continue }
            throw SimulatorError("create \(parent)", NetlinkError.posix("mkdir \(parent)"))
        }
        // Another user's directory (or a link to one) in a shared /tmp must not receive it.
        var status = stat()
        guard lstat(registry, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid(),
              status.st_mode & 0o022 == 0 else {
            throw SimulatorError(.environment, "\(registry) is not a directory of this user's that only it can write; remove it and run again")
        }
        let path = "\(registry)/\(runID)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SimulatorError("register run \(runID)", NetlinkError.posix("create \(path)")) }
        defer { close(fd) }
        let text = Array("\(getpid())\n".utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    public static func unregister(_ runID: String, in registry: String = directory) {
        _ = unlink("\(registry)/\(runID)")
    }

    /// The runs registered in `registry`.
    public static func runs(in registry: String = directory) -> [String] {
        guard let entries = opendir(registry) else { return [] }
        defer { closedir(entries) }
        var names: [String] = []
        while let entry = readdir(entries) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// The process that owns `runID`, if it is registered.
    public static func owner(of runID: String, in registry: String = directory) -> pid_t? {
        let fd = open("\(registry)/\(runID)", O_RDONLY | O_CLOEXEC)
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
