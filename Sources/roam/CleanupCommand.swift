import ArgumentParser
import Simulator

/// `roam cleanup`: remove what killed runs left behind.
struct CleanupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cleanup",
        abstract: "Remove network namespaces and processes left by runs that were killed or crashed.",
        discussion: "Only leftovers whose owning process is gone are removed: a run in progress is never touched."
    )

    func run() throws {
        let report = Leftovers.remove()
        for name in report.namespaces { writeLine("removed namespace \(name)") }
        for pid in report.processes { writeLine("killed process \(pid)") }
        for failure in report.failures { printError("roam cleanup: \(failure)") }
        if report.namespaces.isEmpty && report.processes.isEmpty && report.failures.isEmpty { writeLine("nothing to clean up") }
        if !report.failures.isEmpty { throw ExitCode.badInput }
    }
}
