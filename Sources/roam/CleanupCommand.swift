import ArgumentParser
import Glibc
import RoamControl
import RoamSystem
import Simulator

/// `roam cleanup`: remove what killed runs left behind.
struct CleanupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cleanup",
        abstract: "Remove network namespaces and processes left by runs that were killed or crashed.",
        discussion: """
            Only leftovers whose owning process is gone are removed: a run in progress is never touched. \
            Without root, only the notes of this user's rootless runs that ended are removed, from this user's own \
            registry ($XDG_RUNTIME_DIR/roam/runs, else /tmp/roam-UID/runs, else ~/.local/state/roam/runs when another user \
            made /tmp/roam-UID first; each must be this user's and private): a \
            rootless run's namespaces end with its process, so it leaves nothing else behind.
            """
    )

    func run() throws {
        var failed = false
        var removedAny = false
        if Rootless.canRunAsRoot {
            let report = Leftovers.remove()
            for name in report.namespaces { writeLine("removed namespace \(name)") }
            for pid in report.processes { writeLine("killed process \(pid)") }
            for run in report.notes { writeLine("removed the note of ended run \(run)") }
            for directory in report.networkDirectories { writeLine("removed \(directory), the networks' files of an ended run") }
            for failure in report.failures { printError("roam cleanup: \(failure)") }
            removedAny = !(report.namespaces.isEmpty && report.processes.isEmpty && report.notes.isEmpty && report.networkDirectories.isEmpty)
            failed = !report.failures.isEmpty
            // The control sockets and tokens of root runs that died.
            if let directory = try? ControlListeners.directory(rootless: false, creating: false) {
                let registry = try? RunRegistry.root(creating: false)
                for name in ControlListeners.removeStale(in: directory, isLive: { registry?.note(of: $0).process != nil }) {
                    writeLine("removed \(directory.child(name)), the control API's of an ended run")
                    removedAny = true
                }
            }
        }
        // This user's rootless runs (root's too: `roam run --rootless`).
        do throws(SafePathError) {
            let registry = try RunRegistry.rootless(creating: false)
            for run in registry.removeEnded() {
                writeLine("removed the note of ended rootless run \(run)")
                removedAny = true
            }
            for name in ControlListeners.removeStale(in: registry.directory, isLive: { registry.note(of: $0).process != nil }) {
                writeLine("removed \(registry.directory.child(name)), the control API's of an ended rootless run")
                removedAny = true
            }
        } catch {
            if !(error.code == .system && error.errno == .noSuchFileOrDirectory) {
                printError("roam cleanup: left this user's registry of rootless runs alone: \(error.message)"
                    + (error.code == .foreignOwner ? "; set XDG_RUNTIME_DIR to a directory of yours with mode 0700 to keep runs elsewhere" : ""))
                failed = true
            }
        }
        if !removedAny && !failed {
            writeLine(Rootless.canRunAsRoot ? "nothing to clean up"
                : "nothing to clean up (rootless runs leave nothing behind; as root, roam cleanup removes what root runs left)")
        }
        if failed { throw ExitCode.badInput }
    }
}
