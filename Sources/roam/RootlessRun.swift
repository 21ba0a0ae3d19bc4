import CRoamLinux
import Glibc
import RoamSystem
import Simulator
import SystemPackage

/// A rootless run seen from another process of the same user: its namespaces are reached through
/// its process, noted in ``Rootless/registryDirectory``.
enum RootlessRun {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The runs in progress that this user can see: root's and its own rootless ones.
    static func inProgress() -> [String] {
        let registry = Rootless.registryDirectory
        let own = RunRegistry.runs(in: registry).filter { run in
            RunRegistry.owner(of: run, in: registry).map { kill($0, 0) == 0 || errno == EPERM } ?? false
        }
        return Array(Set(RunRegistry.runs() + own)).sorted()
    }

    /// Enters the user and mount namespaces of rootless run `runID`, so that its nodes' named
    /// namespaces (`/run/netns/roam-RUNID-NODE`) are there to open. Keeps the working directory.
    /// Must be called while the process has one thread (a user namespace admits no other).
    static func enter(_ runID: String) throws(Failure) {
        let registry = Rootless.registryDirectory
        guard let pid = RunRegistry.owner(of: runID, in: registry), kill(pid, 0) == 0 || errno == EPERM else {
            let runs = inProgress()
            throw Failure(description: "no run \(runID) in progress" + (runs.isEmpty ? " (none is)" : "; runs in progress: \(runs.joined(separator: ", "))"))
        }
        let user = open("/proc/\(pid)/ns/user", O_RDONLY | O_CLOEXEC)
        let mounts = open("/proc/\(pid)/ns/mnt", O_RDONLY | O_CLOEXEC)
        let directory = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { for descriptor in [user, mounts, directory] where descriptor >= 0 { close(descriptor) } }
        guard user >= 0, mounts >= 0 else { throw Failure(description: "cannot open the namespaces of run \(runID) (process \(pid)): \(Errno.current)") }
        guard setns(user, CLONE_NEWUSER) == 0 else {
            throw Failure(description: "cannot enter the user namespace of run \(runID): \(Errno.current); only the user who started a rootless run can enter it")
        }
        guard setns(mounts, CLONE_NEWNS) == 0 else { throw Failure(description: "cannot enter the mount namespace of run \(runID): \(Errno.current)") }
        if directory >= 0 { _ = fchdir(directory) }
    }

    /// The run id of a node's namespace name, `roam-RUNID-NODE`, when the name is one.
    static func runID(ofNamespace name: String) -> String? {
        let parts = name.split(separator: "-", maxSplits: 2)
        guard parts.count == 3, parts[0] == "roam", parts[1].count == 6, parts[1].allSatisfy(\.isHexDigit) else { return nil }
        return String(parts[1])
    }
}
