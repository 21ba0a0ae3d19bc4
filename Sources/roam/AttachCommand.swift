import ArgumentParser
import Glibc
import Netlink
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator
import Synchronization

/// `roam attach FILE --netns NODE=PATH ...`: play a scenario's links on interfaces that exist.
struct AttachCommand: ParsableCommand, SignalHandlingCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Play a scenario's links (conditions and timeline) on existing interfaces of existing network namespaces.",
        discussion: """
            Nothing is built: each scenario node you name is a network namespace that already exists (a container's, a pod's, \
            one from `ip netns add`), given by its file (--netns NODE=PATH; a bare NAME is /run/netns/NAME), by a process in it \
            (--pid NODE=PID), or as this process's own (--node NODE, for a sidecar in a pod). Each link's end in an attached node \
            is the interface named after the link (--device LINK=IFACE or NODE/LINK=IFACE to name another), and gets exactly the \
            qdiscs roam run's netem backend gives it (netem at the root, tbf under it for a rate, CoDel or FQ-CoDel under that), \
            with the same seeds, changed on the same timeline. A node shapes what it sends: attach both ends of a link for both \
            directions. Carrier loss sets the second node's end down (its peer, a veth, loses its carrier) and brings it back \
            with its addresses and routes; with only the first end attached it is 100% loss there. \
            At the end (or Ctrl-C, SIGTERM) the root qdiscs it set are removed and every interface is as it was. Needs root and \
            the kernel's sch_netem; scenarios with networks (gateways, NAT, DNS) are roam run's. \
            Writes summary.json, timeline.jsonl and report.html to the report directory. \
            Exit 0 when every change was applied, 2 on bad input, an environment that cannot play it, or a change that failed, \
            130/143 when interrupted.
            """
    )

    @Argument(help: ArgumentHelp("The scenario file.", valueName: "file"))
    var file: String

    @Option(name: .customLong("netns"), parsing: .unconditionalSingleValue, help: ArgumentHelp("A node's network namespace file: NODE=PATH, or NODE=NAME for /run/netns/NAME (repeat for each node).", valueName: "node=path"))
    var namespaceFiles: [String] = []

    @Option(name: .customLong("pid"), parsing: .unconditionalSingleValue, help: ArgumentHelp("A node's network namespace as a process in it: NODE=PID (repeat for each node).", valueName: "node=pid"))
    var processes: [String] = []

    @Option(name: .customLong("node"), parsing: .unconditional, help: ArgumentHelp("The node this process's own network namespace plays (a sidecar's).", valueName: "node"))
    var currentNode: String?

    @Option(name: .customLong("device"), parsing: .unconditionalSingleValue, help: ArgumentHelp("A link's interface, in every attached node (LINK=IFACE) or in one (NODE/LINK=IFACE).", valueName: "link=iface"))
    var devices: [String] = []

    @Option(help: "Seed for every random decision (overrides the scenario's seed).")
    var seed: UInt64?

    @Option(help: ArgumentHelp("Report directory (default: roam-reports/NAME-RUNID).", valueName: "dir"))
    var report: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Scale the scenario's time by this factor, in (0, 1].", valueName: "factor"))
    var timeScale: Double = 1

    @Option(name: .customLong("start-at"), parsing: .unconditional, help: ArgumentHelp("Time zero on the wall clock, in seconds since the epoch (`date +%s`), at most a day ahead: attaches in several namespaces then play one timeline.", valueName: "seconds"))
    var startAt: Double?

    @Flag(help: "Keep the links' last conditions after the timeline, until roam attach is stopped (Ctrl-C or SIGTERM); then remove them as always.")
    var hold = false

    @Flag(help: "No progress line; only the final table.")
    var quiet = false

    func validate() throws {
        guard timeScale > 0, timeScale <= 1 else {
            throw ValidationError("--time-scale \(timeScale) is not in (0, 1]: it scales the scenario's time, 0.5 plays it in half its duration")
        }
        if let startAt, !startAt.isFinite || startAt < 0 {
            throw ValidationError("--start-at \(startAt) is not a time: seconds since the epoch, as `date +%s` prints")
        }
        guard !namespaceFiles.isEmpty || !processes.isEmpty || currentNode != nil else {
            throw ValidationError("name at least one node's namespace: --netns NODE=PATH, --pid NODE=PID or --node NODE")
        }
        _ = try attachments()
        _ = try deviceNames()
    }

    enum Attachment {
        case file(String), process(Int32), current
    }

    /// Each node and where its namespace is; a node named twice is refused.
    func attachments() throws -> [(node: String, where: Attachment)] {
        var result: [(node: String, where: Attachment)] = []
        func pair(_ text: String, _ flag: String) throws -> (String, String) {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex, text.index(after: equals) != text.endIndex else {
                throw ValidationError("\(flag) \(escapedForMessage(text)): expected NODE=\(flag == "--pid" ? "PID" : "PATH")")
            }
            return (String(text[..<equals]), String(text[text.index(after: equals)...]))
        }
        for text in namespaceFiles {
            let (node, path) = try pair(text, "--netns")
            result.append((node, .file(path)))
        }
        for text in processes {
            let (node, number) = try pair(text, "--pid")
            guard let pid = Int32(number), pid > 0 else {
                throw ValidationError("--pid \(escapedForMessage(text)): \(escapedForMessage(number)) is not a process id")
            }
            result.append((node, .process(pid)))
        }
        if let currentNode { result.append((currentNode, .current)) }
        var seen = Set<String>()
        for (node, _) in result where !seen.insert(node).inserted {
            throw ValidationError("node '\(escapedForMessage(node))' is attached twice; give each node one namespace")
        }
        return result
    }

    /// `--device` as `LINK` or `NODE/LINK` to an interface name.
    func deviceNames() throws -> [String: String] {
        var names: [String: String] = [:]
        for text in devices {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                throw ValidationError("--device \(escapedForMessage(text)): expected LINK=IFACE or NODE/LINK=IFACE")
            }
            let key = String(text[..<equals]), interface = String(text[text.index(after: equals)...])
            // The kernel's rule for an interface name (dev_valid_name).
            guard !interface.isEmpty, interface.utf8.count < 16, interface != ".", interface != "..",
                  !interface.contains(where: { $0 == "/" || $0 == ":" || $0.isWhitespace }) else {
                throw ValidationError("--device \(escapedForMessage(text)): '\(escapedForMessage(interface))' is not an interface name (1 to 15 bytes, no '/', ':' or spaces)")
            }
            guard names.updateValue(interface, forKey: key) == nil else {
                throw ValidationError("--device \(escapedForMessage(key)) is given twice")
            }
        }
        return names
    }

    func run() throws {
        let scenario = try ScenarioCommand.read(file)

        var options = AttachOptions()
        options.seed = seed
        options.reportDirectory = report
        options.timeScale = timeScale
        options.startAt = startAt
        options.hold = hold
        options.devices = try deviceNames()


        let attacher: ScenarioAttacher
        do {
            var namespaces: [AttachedNamespace] = []
            for (node, place) in try attachments() {
                switch place {
                case .file(let path): namespaces.append(try AttachedNamespace.open(node: node, path: path))
                case .process(let pid): namespaces.append(try AttachedNamespace.open(node: node, pid: pid))
                case .current: namespaces.append(try AttachedNamespace.current(node: node))
                }
            }
            attacher = try ScenarioAttacher(scenario: scenario, namespaces: namespaces, options: options)
        } catch let error as SimulatorError {
            printError("roam attach: error: \(error.message)")
            throw ExitCode.badInput
        }
        CommandSignals.watch("attach", "restoring the interfaces") { attacher.cancel() }

        let console = ProgressConsole(enabled: !quiet, rootless: false)
        let result: RunReport
        do {
            result = try attacher.run(progress: { console.show($0) })
        } catch {
            console.clear()
            throw ScenarioCommand.failure(error, command: "attach", file: file)
        }
        console.clear()
        try ScenarioCommand.finish(result)
    }
}

