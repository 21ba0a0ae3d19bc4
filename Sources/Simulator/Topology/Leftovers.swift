import Glibc
import Netlink

/// Finds and removes what runs, demos, benchmarks and tests left behind when they were killed:
/// namespaces whose owner is gone, and the processes still inside them.
public enum Leftovers {
    public struct Report: Sendable, Hashable {
        public var namespaces: [String] = []
        public var processes: [pid_t] = []
        public var failures: [String] = []
    }

    /// The owner of a Roam namespace, from its name: a registered run, or the process id
    /// embedded in the names of demo, benchmark and test namespaces.
    static func owner(ofNamespace name: String) -> (known: Bool, pid: pid_t?) {
        let parts = name.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "roam" else { return (false, nil) }
        switch parts[1] {
        case "test", "bench", "demo":
            return (true, pid_t(parts[2]))
        default:
            guard parts[1].count == 6, parts[1].allSatisfy(\.isHexDigit) else { return (false, nil) }
            return (true, RunRegistry.owner(of: parts[1]))
        }
    }

    /// The Roam namespaces whose owner is no longer running.
    public static func find() -> [String] {
        NetworkNamespace.list().filter { name in
            let owner = owner(ofNamespace: name)
            guard owner.known else { return false }
            guard let pid = owner.pid else { return true }
            return pid != getpid() && !RunRegistry.isAlive(pid)
        }
    }

    /// Removes leftovers: kills processes inside leftover namespaces, deletes the namespaces,
    /// and drops registrations of runs that are gone.
    public static func remove() -> Report {
        var report = Report()
        for name in find() {
            guard let namespace = try? NetworkNamespace.named(name), let path = namespace.path else { continue }
            var target = stat()
            guard stat(path, &target) == 0 else { continue }
            report.processes += killProcesses(inNamespaceWith: target)
            do throws(NetlinkError) {
                try namespace.delete()
                report.namespaces.append(name)
            } catch {
                report.failures.append("\(name): \(error)")
            }
        }
        if let directory = opendir(RunRegistry.directory) {
            defer { closedir(directory) }
            var stale: [String] = []
            while let entry = readdir(directory) {
                let id = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                guard id.count == 6, let pid = RunRegistry.owner(of: id), !RunRegistry.isAlive(pid) else { continue }
                stale.append(id)
            }
            for id in stale { RunRegistry.unregister(id) }
        }
        return report
    }

    private static func killProcesses(inNamespaceWith target: stat) -> [pid_t] {
        guard let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        var killed: [pid_t] = []
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard let pid = pid_t(name), pid != getpid() else { continue }
            var info = stat()
            guard stat("/proc/\(pid)/ns/net", &info) == 0, info.st_ino == target.st_ino, info.st_dev == target.st_dev else { continue }
            if kill(pid, SIGKILL) == 0 { killed.append(pid) }
        }
        return killed
    }
}
