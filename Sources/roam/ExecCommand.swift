import ArgumentParser
import CRoamLinux
import Glibc
import Netlink
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator
import SystemPackage

/// `roam exec RUN NODE -- COMMAND`: run a command inside a node of a run in progress, rootless
/// or not.
struct ExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a command inside a node of a run in progress.",
        discussion: """
            RUN is the run's id (six hex digits, shown when the run starts and in its report directory's name), NODE a node \
            of its scenario. For a run started as root, this is `ip netns exec roam-RUN-NODE COMMAND` and needs root. For a \
            rootless run, the same user enters the run's user and mount namespaces through its process (noted in \
            $XDG_RUNTIME_DIR/roam/runs, else /tmp/roam-UID/runs, else ~/.local/state/roam/runs), then the node's network namespace: no privilege is needed. \
            The command runs as root of the run's user namespace, in the node's network namespace, in the current directory. \
            For example, `roam exec 1a2b3c phone -- roam monitor` watches the phone's path.
            """
    )

    @Argument(help: ArgumentHelp("The run's id.", valueName: "run"))
    var runID: String

    @Argument(help: ArgumentHelp("The node to enter.", valueName: "node"))
    var node: String

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after `--`.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard RunRegistry.isRunID(runID) else {
            throw ValidationError("'\(escapedForMessage(runID))' is not a run id: six lowercase hex digits (0-9, a-f), as in roam-reports/NAME-RUNID")
        }
        guard ScenarioNode.isValidName(node) else {
            throw ValidationError("'\(escapedForMessage(node, maximumLength: 64))' is not a node name (a letter, then letters, digits, '-' and '_', at most \(Scenario.maximumNodeNameLength))")
        }
        guard !command.isEmpty else { throw ValidationError("name a command after `--`, e.g. roam exec \(runID) \(node) -- ip addr") }
    }

    func run() throws {
        let namespacePath = "\(NetworkNamespace.runDirectory)/roam-\(runID)-\(node)"
        if !RootlessRun.isRootRun(runID) {
            do {
                try RootlessRun.enter(runID)
            } catch {
                fail(error.description)
            }
        }
        let namespace = open(namespacePath, O_RDONLY | O_CLOEXEC)
        if namespace < 0, errno == EACCES || errno == EPERM {
            fail("cannot enter node '\(node)' of run \(runID): it was started as root, and only root enters it")
        }
        guard namespace >= 0 else {
            let nodes = NetworkNamespace.list().filter { $0.hasPrefix("roam-\(runID)-") }.map { String($0.dropFirst("roam-\(runID)-".count)) }
            fail("run \(runID) has no node '\(node)'" + (nodes.isEmpty ? "" : "; its nodes: \(nodes.joined(separator: ", "))"))
        }
        guard setns(namespace, CLONE_NEWNET) == 0 else {
            let error = Errno.current
            if error == .notPermitted { fail("cannot enter node '\(node)' of run \(runID): it was started as root, and only root enters it") }
            fail("cannot enter node '\(node)' of run \(runID): \(error)")
        }
        close(namespace)
        var arguments = command.map { strdup($0) }
        arguments.append(nil)
        execvp(command[0], &arguments)
        let error = Errno.current
        fail("cannot run \(escapedForMessage(command[0])): \(error)")
    }

    private func fail(_ message: String) -> Never {
        printError("roam exec: \(message)")
        Glibc.exit(ExitCode.badInput.rawValue)
    }
}
