import ArgumentParser
import Glibc
import RoamSystem
import Simulator

/// `roam cleanup`: remove what killed runs left behind.
struct CleanupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cleanup",
        abstract: "Remove network namespaces and processes left by runs that were killed or crashed.",
        discussion: """
            Only leftovers whose owning process is gone are removed: a run in progress is never touched. \
            Without root, only the notes of this user's rootless runs that ended are removed: a rootless run's \
            namespaces end with its process, so it leaves nothing else behind.
            """
    )

    func run() throws {
        if geteuid() != 0 {
            let registry = Rootless.registryDirectory
            var removed = 0
            for run in RunRegistry.runs(in: registry) {
                if let pid = RunRegistry.owner(of: run, in: registry), kill(pid, 0) == 0 || errno == EPERM { continue }
                RunRegistry.unregister(run, in: registry)
                removed += 1
                writeLine("removed the note of ended rootless run \(run)")
            }
            if removed == 0 { writeLine("nothing to clean up (rootless runs leave nothing behind; as root, roam cleanup removes what root runs left)") }
            return
        }
        let report = Leftovers.remove()
        for name in report.namespaces { writeLine("removed namespace \(name)") }
        for pid in report.processes { writeLine("killed process \(pid)") }
        for failure in report.failures { printError("roam cleanup: \(failure)") }
        if report.namespaces.isEmpty && report.processes.isEmpty && report.failures.isEmpty { writeLine("nothing to clean up") }
        if !report.failures.isEmpty { throw ExitCode.badInput }
    }
}
