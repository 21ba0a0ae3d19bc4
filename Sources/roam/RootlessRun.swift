import CRoamLinux
import Glibc
import RoamSystem
import Simulator
import SystemPackage

/// A rootless run seen from another process of the same user: its namespaces are reached through
/// its process, noted in the user's registry (`RunRegistry/rootless(creating:)`) and checked
/// there before it is trusted.
enum RootlessRun {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The runs in progress that this user can see: root's and its own rootless ones.
    static func inProgress() -> [String] {
        let root = (try? RunRegistry.root(creating: false))?.liveRuns() ?? []
        let own = (try? RunRegistry.rootless(creating: false))?.liveRuns() ?? []
        return Array(Set(root + own)).sorted()
    }

    /// The process of this user's rootless run `runID`, if one is in progress.
    static func process(of runID: String) throws(Failure) -> PinnedProcess? {
        let registry: RunRegistry
        do {
            registry = try RunRegistry.rootless(creating: false)
        } catch {
            if error.code == .system, error.errno == .noSuchFileOrDirectory { return nil }
            throw Failure(description: "cannot use this user's registry of rootless runs: \(error.message)")
        }
        switch registry.note(of: runID) {
        case .live(let process): return process
        case .missing, .ended: return nil
        case .invalid(let reason): throw Failure(description: "the note of run \(runID) is not one Roam trusts (\(reason)); `roam cleanup` removes it")
        }
    }

    /// Enters the user and mount namespaces of rootless run `runID`, so that its nodes' named
    /// namespaces (`/run/netns/roam-RUNID-NODE`) are there to open; only after checking that the
    /// note names a live process of this user and that the namespaces are this user's
    /// (`Rootless/enterNamespaces(of:)`). Keeps the working directory. Must be called while
    /// the process has one thread (a user namespace admits no other).
    static func enter(_ runID: String) throws(Failure) {
        guard let process = try process(of: runID) else {
            let runs = inProgress()
            throw Failure(description: "no run \(runID) in progress" + (runs.isEmpty ? " (none is)" : "; runs in progress: \(runs.joined(separator: ", "))"))
        }
        let directory = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if directory >= 0 { close(directory) } }
        do {
            try Rootless.enterNamespaces(of: process)
        } catch {
            throw Failure(description: "cannot enter run \(runID): \(error.description)")
        }
        if directory >= 0 { _ = fchdir(directory) }
    }

    /// Whether `runID` is a run root started in the host's namespaces, in progress.
    static func isRootRun(_ runID: String) -> Bool {
        (try? RunRegistry.root(creating: false))?.note(of: runID).process != nil
    }

    /// The run id of a node's namespace name, `roam-RUNID-NODE`, when the name is one.
    static func runID(ofNamespace name: String) -> String? {
        let parts = name.split(separator: "-", maxSplits: 2)
        guard parts.count == 3, parts[0] == "roam", RunRegistry.isRunID(parts[1]) else { return nil }
        return String(parts[1])
    }
}
