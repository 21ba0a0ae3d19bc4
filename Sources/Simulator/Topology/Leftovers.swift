import Glibc
import Netlink
import RoamSystem

/// Finds and removes what runs, demos, benchmarks and tests left behind when they were killed:
/// namespaces whose owner is gone, and the processes still inside them.
package enum Leftovers {
    package struct Report: Sendable, Hashable {
        package var namespaces: [String] = []
        package var processes: [pid_t] = []
        package var failures: [String] = []
        /// Notes of ended runs removed from root's registry.
        package var notes: [String] = []
        /// The networks' directories of ended runs (`/run/roam/net-RUNID`) removed.
        package var networkDirectories: [String] = []
    }

    /// Whether the owner of a Roam namespace still runs, from its name: a run noted in root's
    /// registry (checked as `RunRegistry` checks notes), or the process id embedded in the
    /// names of demo, benchmark and test namespaces. Nil for a name that is not Roam's.
    static func ownerIsAlive(ofNamespace name: String, registry: RunRegistry?) -> Bool? {
        let parts = name.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "roam" else { return nil }
        switch parts[1] {
        case "test", "bench", "demo":
            guard let pid = pid_t(parts[2]), pid > 0 else { return false }
            return pid == getpid() || kill(pid, 0) == 0 || errno == EPERM
        default:
            guard RunRegistry.isRunID(parts[1]) else { return nil }
            return registry?.note(of: parts[1]).process != nil
        }
    }

    /// The Roam namespaces whose owner is no longer running.
    package static func find() -> [String] {
        let registry = try? RunRegistry.root(creating: false)
        return NetworkNamespace.list().filter { ownerIsAlive(ofNamespace: $0, registry: registry) == false }
    }

    /// Removes leftovers: kills processes inside leftover namespaces, deletes the namespaces,
    /// and drops the notes of runs that are gone.
    package static func remove() -> Report {
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
        let registry = try? RunRegistry.root(creating: false)
        report.networkDirectories = removeNetworkDirectories(registry: registry, failures: &report.failures)
        if let registry {
            report.notes = registry.removeEnded()
        }
        return report
    }

    /// Removes `/run/roam/net-RUNID` (a run's phones' resolv.conf and its resolvers' control
    /// sockets) of every run that is not running, through descriptors, following no link.
    static func removeNetworkDirectories(registry: RunRegistry?, failures: inout [String]) -> [String] {
        guard let parent = try? SecureDirectory.open(NetworkServices.stateDirectory, requirement: .ownedByCaller),
              let names = try? parent.entries() else { return [] }
        var removed: [String] = []
        for name in names where name.hasPrefix("net-") && RunRegistry.isRunID(name.dropFirst(4)) {
            guard registry?.note(of: String(name.dropFirst(4))).process == nil else { continue }
            do throws(SafePathError) {
                let directory = try parent.directory(named: name, requirement: .privateToCaller)
                for entry in try directory.entries() where entry.hasSuffix("-resolv.conf") || entry.hasSuffix("-unbound.ctl") {
                    try directory.removeFile(named: entry)
                }
                try parent.removeDirectory(named: name)
                removed.append(parent.child(name))
            } catch {
                failures.append("\(parent.child(name)): \(error.message)")
            }
        }
        return removed
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
