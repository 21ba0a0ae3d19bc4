import ArgumentParser
import Glibc
import Netlink
import RoamControl
import RoamCore
import RoamReport
import RoamSystem
import ScenarioModel
import Simulator
import Synchronization
import SystemPackage

extension BackendChoice: ExpressibleByArgument {}
extension EmulatorPriority: ExpressibleByArgument {}
extension MultipathTransport: ExpressibleByArgument {}

/// `roam run FILE`: play a scenario and check its expectations.
struct RunCommand: ParsableCommand, SignalHandlingCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a mobility scenario: build its topology, play its timeline and workloads, check its expectations.",
        discussion: """
            As root, each node is a network namespace named roam-RUNID-NODE (enter one with `roam exec RUNID NODE -- COMMAND` \
            or `ip netns exec`). Without root (or with --rootless), the run builds its network in a user namespace of its own: \
            the userspace backend needs no privilege, nothing on the host changes, and everything ends with the run \
            (enter a node with `roam exec RUNID NODE -- COMMAND`). \
            Writes summary.json and timeline.jsonl to the report directory. Ctrl-C or SIGTERM stops the run, \
            writes the report and removes everything. Exit 0 when every expectation holds, 1 when one fails, \
            2 on bad input or an environment that cannot run the scenario, 130/143 when interrupted.
            """
    )

    @Argument(help: ArgumentHelp("The scenario file.", valueName: "file"))
    var file: String

    @Option(help: "Seed for every random decision (overrides the scenario's seed).")
    var seed: UInt64?

    @Option(help: ArgumentHelp("Report directory (default: roam-reports/NAME-RUNID).", valueName: "dir"))
    var report: String?

    @Option(help: "Link backend: auto (netem where the kernel has it), netem, or userspace.")
    var backend: BackendChoice = .auto

    @Option(help: "How workloads in multipath modes keep their flows: auto (MPTCP where the kernel has it; handover through the userspace path manager where the kernel's can, at the application level otherwise), mptcp (handover with the in-kernel path manager's backup subflows), mptcp-userspace (handover through the userspace path manager, per-connection subflows switched by Roam, or an error), or application.")
    var multipath: MultipathTransport = .auto

    @Flag(help: "No progress line; only the final table (for CI logs).")
    var quiet = false

    @Flag(help: "Write each link direction's decision log to the report (userspace backend): decisions-LINK-DIRECTION.log.")
    var decisionLog = false

    @Option(parsing: .unconditional, help: ArgumentHelp("How many threads the userspace emulator moves packets on, each link on one of them (default: one per core, at most one per link).", valueName: "count"))
    var emulatorThreads: Int?

    @Option(help: ArgumentHelp("The userspace emulator's threads' scheduling class: realtime (the kernel's real-time class where this process may use it: packets leave on time however busy the cores are, and a busy emulator can hold up to 95% of a core ahead of the machine's other programs) or ordinary (shares the cores; on a shared machine, other users first).", valueName: "class"))
    var emulatorPriority: EmulatorPriority = .realtime

    @Option(parsing: .unconditional, help: ArgumentHelp("Scale the scenario's time by this factor, in (0, 1]: 0.5 plays it in half its duration, twice as fast (for quick checks).", valueName: "factor"))
    var timeScale: Double = 1

    @Flag(help: "Build the scenario in a user namespace of the run's own even as root (the default without root, and inside any user namespace).")
    var rootless = false

    @Option(name: .customLong("max-file-size"), help: ArgumentHelp("The most one file of the run's own may hold: a command's output, a decision log, a capture (default 64MiB; the rest is left out and noted in the report).", valueName: "size"))
    var maximumFileSize: String?

    @Option(name: .customLong("max-output-size"), help: ArgumentHelp("The most those files may hold together (default 1GiB).", valueName: "size"))
    var maximumOutputSize: String?

    @Flag(help: "Serve the run's control API (HTTP/JSON, /v1/...) on a Unix socket only this user can reach; the first line on standard output then says where (see docs/control-api.md, and roam ctl).")
    var control = false

    @Option(help: ArgumentHelp("Also serve the control API on 127.0.0.1:PORT (0: a free port), for a bearer token printed once and written beside the socket (implies --control).", valueName: "port"))
    var controlPort: Int?

    @Option(help: ArgumentHelp("Also serve toxiproxy's HTTP API on 127.0.0.1:PORT (0: a free port; toxiproxy's own is 8474), over the run's proxies, for toxiproxy's clients; only this user and root may connect (implies --control; see docs/from-toxiproxy.md).", valueName: "port"))
    var toxiproxyPort: Int?

    @Flag(help: "Keep the network up after the scenario's timeline and workloads end, until the run is stopped (roam ctl RUN stop, or Ctrl-C, which cancels it).")
    var hold = false

    @Flag(help: "Exit 3 when the run was not faithful: packets or timeline changes later than the fidelity bounds, or packets the emulator lost by falling behind (summary.json's fidelity section says which).")
    var strictFidelity = false

    @Option(help: ArgumentHelp("The bound on the 99th percentile of packets' delivery lateness in the userspace emulator (default 1ms).", valueName: "duration"))
    var fidelityDelivery: String?

    @Option(help: ArgumentHelp("The bound on the 99th percentile of the timeline's lateness (default 2ms).", valueName: "duration"))
    var fidelityTimeline: String?

    /// Whether this run builds its network in a user namespace of its own: asked for, or where
    /// the process cannot build named namespaces as root (an ordinary user, `unshare -Ur`).
    var isRootless: Bool { rootless || !Rootless.canRunAsRoot }

    func validate() throws {
        guard timeScale > 0, timeScale <= 1 else {
            throw ValidationError("--time-scale \(timeScale) is not in (0, 1]: it scales the scenario's time, 0.5 plays it in half its duration")
        }
        _ = try outputLimits()
        _ = try fidelityBounds()
        if let emulatorThreads, !(1...RunOptions.maximumEmulatorThreads).contains(emulatorThreads) {
            throw ValidationError("--emulator-threads \(emulatorThreads) is not in 1...\(RunOptions.maximumEmulatorThreads)")
        }
        if let controlPort, !(0...65_535).contains(controlPort) {
            throw ValidationError("--control-port \(controlPort) is not a port: 0 to 65535 (0 picks a free one)")
        }
        if let toxiproxyPort, !(0...65_535).contains(toxiproxyPort) {
            throw ValidationError("--toxiproxy-port \(toxiproxyPort) is not a port: 0 to 65535 (0 picks a free one; toxiproxy's own is 8474)")
        }
    }

    var servesControl: Bool { control || controlPort != nil || toxiproxyPort != nil }

    /// The fidelity bounds the flags ask for.
    func fidelityBounds() throws -> Fidelity.Bounds {
        var bounds = Fidelity.Bounds()
        for (flag, text, keyPath) in [("--fidelity-delivery", fidelityDelivery, \Fidelity.Bounds.deliveryP99),
                                      ("--fidelity-timeline", fidelityTimeline, \Fidelity.Bounds.timelineP99)] {
            guard let text else { continue }
            switch Units.duration(text) {
            case .success(let duration) where duration > .zero && duration <= .seconds(3600): bounds[keyPath: keyPath] = duration
            case .success: throw ValidationError("\(flag) \(escapedForMessage(text)): a bound is more than zero and at most 1h")
            case .failure(let error): throw ValidationError("\(flag): \(error.message)")
            }
        }
        return bounds
    }

    /// The output limits the flags ask for.
    func outputLimits() throws -> OutputLimits {
        var limits = OutputLimits()
        for (flag, text, keyPath) in [("--max-file-size", maximumFileSize, \OutputLimits.perFile), ("--max-output-size", maximumOutputSize, \OutputLimits.total)] {
            guard let text else { continue }
            switch Units.size(text) {
            case .success(let bytes) where bytes >= 0: limits[keyPath: keyPath] = bytes
            case .success: throw ValidationError("\(flag) \(escapedForMessage(text)): a size cannot be negative")
            case .failure(let error): throw ValidationError("\(flag): \(error.message)")
            }
        }
        return limits
    }

    func run() throws {
        let scenario = try ScenarioCommand.read(file)

        var options = RunOptions()
        options.backend = backend
        options.seed = seed
        options.reportDirectory = report
        options.timeScale = timeScale
        options.decisionLogs = decisionLog
        options.emulatorThreads = emulatorThreads
        options.emulatorPriority = emulatorPriority
        options.multipath = multipath
        options.outputLimits = try outputLimits()
        options.fidelityBounds = try fidelityBounds()
        options.hold = hold
        options.holdsEvents = servesControl
        var listeners: ControlListeners?
        if isRootless {
            try prepareRootless(&options, scenario: scenario) { runID in
                // Bound on the host, before the run enters its user namespace: the host reaches them.
                if servesControl { listeners = try bindControl(runID: runID, rootless: true) }
            }
        } else if servesControl {
            let runID = RunRegistry.newRunID()
            options.runID = runID
            listeners = try bindControl(runID: runID, rootless: false)
        }
        defer { listeners?.removeFiles() }
        let runner = ScenarioRunner(scenario: scenario, options: options)
        let api = ControlAPI(finish: { runner.finish() })
        var server: ControlServer?
        if let listeners {
            let started = ControlServer(api: api)
            do {
                try started.start(listeners)
            } catch {
                started.shutdown()
                printError("roam run: error: cannot serve the control API: \(error)")
                throw ExitCode.badInput
            }
            server = started
        }

        CommandSignals.watch("run", "stopping and cleaning up") { runner.cancel() }

        let console = ProgressConsole(enabled: !quiet, rootless: Rootless.hasEntered)
        let result: RunReport
        let announcement = listeners.map { ControlAnnouncement(listeners: $0) }
        do {
            result = try runner.run(progress: { progress in console.show(progress) }, started: { network in
                api.started(network)
                if let announcement { announcement.announce(reportDirectory: network.reportDirectory) }
            })
        } catch {
            api.ended(.object([("error", .string(error.message))]))
            server?.shutdown()
            console.clear()
            throw ScenarioCommand.failure(error, command: "run", file: file)
        }
        api.ended(.object([("reportDirectory", .string(result.reportDirectory)), ("summary", .string(result.reportDirectory + "/summary.json")),
                           ("passed", .bool(result.passed)), ("cancelled", .bool(result.cancelled))]))
        server?.shutdown()
        console.clear()
        try ScenarioCommand.finish(result, strictFidelity: strictFidelity)
    }
}

extension RunCommand {
    /// What a rootless run does on the host before it enters a user namespace of its own (while
    /// the process still has one thread): notes itself in this user's registry, so that
    /// `roam exec` finds it (a registry another user made first is refused, and the run goes on
    /// without it), chooses its run id, and opens its report directory, so that the report lands
    /// where the host sees the path (the run's private `/run` would hide it). Then it enters.
    /// The control API's listeners for run `runID`, or exit 2 with why not.
    func bindControl(runID: String, rootless: Bool) throws -> ControlListeners {
        do {
            let directory = try ControlListeners.directory(rootless: rootless, creating: true)
            return try ControlListeners(directory: directory, runID: runID, port: controlPort, toxiproxyPort: toxiproxyPort)
        } catch let error as SafePathError {
            printError("roam run: error: cannot place the control socket: \(error.message)")
        } catch {
            printError("roam run: error: \(error)")
        }
        throw ExitCode.badInput
    }

    func prepareRootless(_ options: inout RunOptions, scenario: Scenario, beforeEntering: (String) throws -> Void = { _ in }) throws {
        do {
            try Rootless.preflight()
        } catch {
            printError("roam run: cannot run without root here: \(error)")
            throw ExitCode.badInput
        }
        do throws(SafePathError) {
            options.hostRegistry = try RunRegistry.rootless(creating: true)
        } catch {
            printError("roam run: warning: roam exec will not find this run: \(error.message)"
                + (error.code == .foreignOwner || error.code == .writableByOthers
                    ? "; set XDG_RUNTIME_DIR to a directory of yours with mode 0700 to keep the registry there" : ""))
        }
        let runID = RunRegistry.newRunID(avoiding: options.hostRegistry)
        options.runID = runID
        do throws(SimulatorError) {
            options.openedReportDirectory = try ScenarioRunner.openReportDirectory(report, scenario: scenario.name, runID: runID)
        } catch {
            printError("roam run: error: \(error.message)")
            throw ExitCode.badInput
        }
        try beforeEntering(runID)
        do {
            try Rootless.enter()
        } catch {
            printError("roam run: cannot run without root here: \(error)")
            throw ExitCode.badInput
        }
    }
}

/// The live progress line on standard error: rewritten in place on a terminal, one line every
/// five seconds otherwise.
final class ProgressConsole: Sendable {
    private let enabled: Bool
    private let isTerminal: Bool
    private let lastLine = Mutex<(shown: Bool, at: Duration)>((false, .seconds(-10)))

    private let rootless: Bool
    private let announced = Atomic<Bool>(false)

    init(enabled: Bool, rootless: Bool) {
        self.enabled = enabled
        self.rootless = rootless
        isTerminal = isatty(STDERR_FILENO) == 1
    }

    func show(_ progress: RunProgress) {
        guard enabled else { return }
        if !announced.exchange(true, ordering: .relaxed) {
            clear()
            printError("roam run: run \(progress.runID)\(rootless ? ", rootless (in a user namespace of its own)" : ""); "
                + "enter a node with `roam exec \(progress.runID) NODE -- COMMAND`")
        }
        var parts = ["[\(Self.seconds(progress.elapsed))/\(Self.seconds(progress.duration))]"]
        parts.append(progress.links.map { "\($0.name): \($0.state)" }.joined(separator: "  "))
        for workload in progress.workloads {
            var text = workload.name
            if let throughput = workload.throughput { text += " \(throughput.roundedDescription)/s" }
            if let detail = workload.detail { text += " \(detail)" }
            parts.append(text)
        }
        let line = parts.joined(separator: " | ")
        if isTerminal {
            var columns = winsize()
            let width = ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &columns) == 0 && columns.ws_col > 0 ? Int(columns.ws_col) : 120
            let clipped = line.count > width - 1 ? String(line.prefix(width - 2)) + "…" : line
            writeRaw("\r\u{1B}[2K" + clipped, to: STDERR_FILENO)
            lastLine.withLock { $0.shown = true }
        } else {
            let due = lastLine.withLock { state -> Bool in
                guard progress.elapsed - state.at >= .seconds(5) || progress.elapsed >= progress.duration else { return false }
                state.at = progress.elapsed
                return true
            }
            if due { printError(line) }
        }
    }

    func clear() {
        guard isTerminal, lastLine.withLock({ $0.shown }) else { return }
        writeRaw("\r\u{1B}[2K", to: STDERR_FILENO)
    }

    static func seconds(_ duration: Duration) -> String {
        let tenths = Int((Double(duration.components.seconds) * 10 + Double(duration.components.attoseconds) / 1e17).rounded())
        return "\(tenths / 10).\(tenths % 10)s"
    }

    private func writeRaw(_ text: String, to descriptor: Int32) {
        try? writeAll(text.utf8, to: FileDescriptor(rawValue: descriptor))
    }
}

/// The final table of `roam run`.
enum RunTable {
    static func render(_ report: RunReport) -> String {
        var lines: [String] = []
        let failed = report.expectations.filter { !$0.passed }.count
        let verdict: String
        if report.cancelled {
            verdict = "CANCELLED"
        } else if !report.failedChanges.isEmpty {
            verdict = "ERROR (\(report.failedChanges.count) link changes could not be applied)"
        } else if report.expectations.isEmpty {
            verdict = "DONE (no expectations)"
        } else {
            let count = report.expectations.count
            verdict = failed == 0 ? (count == 1 ? "PASS (its expectation held)" : "PASS (\(count) expectations held)")
                : "FAIL (\(failed) of \(count) expectation\(count == 1 ? "" : "s") failed)"
        }
        lines.append("\(report.scenario.name): \(verdict)")
        lines.append("  backend \(report.backend.kind.rawValue), seed \(report.seed), run \(report.runID), \(report.scenario.duration.roamDescription)")
        if !report.workloads.isEmpty {
            var rows = [["workload", "kind", "mode", "throughput", "result"]]
            for workload in report.workloads {
                rows.append([workload.name, workload.kind, workload.mode.rawValue + (workload.note == nil ? "" : "*"),
                             workload.command == nil ? workload.throughput?.roundedDescription ?? "-" : "-", describe(workload)])
            }
            lines.append(contentsOf: table(rows))
        }
        if !report.expectations.isEmpty {
            var rows = [["expectation", "measured", "result"]]
            for result in report.expectations {
                rows.append(["\(result.expectation.subject): \(result.requirement)", result.measured, result.passed ? "pass" : "FAIL"])
            }
            lines.append(contentsOf: table(rows))
            for result in report.expectations where !result.passed {
                if let detail = result.detail { lines.append("  line \(result.expectation.line): \(detail)") }
            }
        }
        for change in report.failedChanges {
            lines.append("  \(change.change.link) \(change.change.action) at \(change.change.at.roamDescription): \(change.failure ?? "")")
        }
        for note in Set(report.workloads.compactMap(\.note)).sorted() { lines.append("  * \(note)") }
        for note in report.notes { lines.append("  note: \(note)") }
        let fidelity = report.fidelity
        for problem in fidelity.problems { lines.append("  NOT FAITHFUL: \(problem)") }
        lines.append("  report: \(report.reportDirectory)" + (report.wroteHTML ? " (open report.html)" : ""))
        return lines.joined(separator: "\n")
    }

    static func describe(_ workload: WorkloadResult) -> String {
        guard let lookups = workload.lookups else { return describeTraffic(workload) }
        let slowest = lookups.duration.maximum.map { ", slowest \($0.roamDescription)" } ?? ""
        let failed = lookups.failed == 0 ? "" : ", \(lookups.failed) failed" + (lookups.lastFailure.map { " (last: \($0))" } ?? "")
        return describeTraffic(workload) + "; \(lookups.duration.count) lookups of \(lookups.name)\(slowest)\(failed)"
    }

    static func describeTraffic(_ workload: WorkloadResult) -> String {
        if let stream = workload.stream {
            let startup = stream.startupDelay.map { "started after \($0.roamDescription)" } ?? "never started"
            return "\(startup), \(stream.stalls.count) stalls, longest \(stream.longestStall.roamDescription)"
        }
        if let requests = workload.requests {
            let worst = requests.timeToFirstByte.maximum.map { ", slowest first byte \($0.roamDescription)" } ?? ""
            return "\(requests.succeeded)/\(requests.sent) answered, \(requests.failed) failed\(worst)"
        }
        if let command = workload.command {
            if let code = command.exitCode { return "exit \(code)\(command.terminatedByRoam ? " (stopped by roam)" : "")" }
            if let signal = command.signal { return "signal \(signal)\(command.terminatedByRoam ? " (stopped by roam)" : "")" }
            return workload.incompleteReason ?? "did not run"
        }
        var text = "\(workload.bytesReceived) bytes, \(workload.connections) connections"
        if let completion = workload.completionTime { text += ", done in \(completion.roamDescription)" }
        return text
    }

    static func table(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            "  " + row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index] + 2)
            }.joined()
        }
    }
}

extension String {
    func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}

/// Where a run's control API is, said once the run is at time zero: one JSON line on standard
/// output (for programs that start runs, such as the Python client), and on standard error
/// for people, with the token of the loopback port (shown only here).
final class ControlAnnouncement: Sendable {
    let listeners: ControlListeners

    init(listeners: ControlListeners) {
        self.listeners = listeners
    }

    func announce(reportDirectory: String) {
        var members: [(String, JSONValue)] = [("runId", .string(listeners.runID)), ("socket", .string(listeners.socketPath))]
        if let tcp = listeners.tcp {
            members.append(("url", .string("http://127.0.0.1:\(tcp.port)")))
            if let tokenPath = listeners.tokenPath { members.append(("tokenFile", .string(tokenPath))) }
        }
        if let toxiproxy = listeners.toxiproxy { members.append(("toxiproxy", .string("127.0.0.1:\(toxiproxy.port)"))) }
        members.append(("reportDirectory", .string(reportDirectory)))
        writeLine(JSONValue.object([("control", .object(members))]).serialized)
        var text = "roam run: control API on \(listeners.socketPath) (roam ctl \(listeners.runID) ...)"
        if let tcp = listeners.tcp { text += " and http://127.0.0.1:\(tcp.port) with Authorization: Bearer \(tcp.token)" }
        if let toxiproxy = listeners.toxiproxy { text += "; toxiproxy's API on 127.0.0.1:\(toxiproxy.port)" }
        printError(text)
    }
}
