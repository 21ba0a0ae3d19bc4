import Glibc
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import Synchronization
import SystemPackage

/// A user's program run inside a node: spawned in the node's namespace (as `ip netns exec`
/// would), in a process group of its own, with the topology in environment variables and its
/// output in the report directory. When its time is up (its `stop`, or the end of the run) it
/// gets SIGTERM, and SIGKILL two seconds later if it is still there.
final class CommandWorkload: WorkloadDriver {
    let context: WorkloadContext
    private let arguments: [String]
    private let extraEnvironment: [String: String]
    private let outcome: Mutex<CommandStatistics>
    private let spawnError = Mutex<String?>(nil)
    /// Bytes each of the node's interfaces carried (both directions) while the command ran.
    private let interfaceBytes = Mutex<[String: Int64]>([:])
    /// MPTCP subflows the node's connections opened while the command ran (multipath modes).
    private let subflowsOpened = Mutex(0)
    /// How long a command has between SIGTERM and SIGKILL.
    static let terminationGrace = Duration.seconds(2)

    init(context: WorkloadContext, arguments: [String], environment: [String: String]) {
        self.context = context
        // mptcpize preloads a library that turns the program's TCP sockets into MPTCP.
        self.arguments = context.workload.mptcpize ? ["mptcpize", "run"] + arguments : arguments
        extraEnvironment = environment
        let base = context.report.child(context.workload.name)
        outcome = Mutex(CommandStatistics(arguments: arguments, stdoutPath: base + ".stdout", stderrPath: base + ".stderr"))
    }

    func prepare() throws(SimulatorError) {}

    /// The environment the command gets: Roam's own, then the scenario's `env`.
    var environment: [String] {
        var values = processEnvironment()
        for (key, value) in context.environment { values[key] = value }
        // The run's time zero on CLOCK_MONOTONIC (Python's time.monotonic()), so that a program
        // can place what it sees on the scenario's timeline.
        let t0 = context.log.start.nanoseconds, fraction = String(t0 % 1_000_000_000)
        values["ROAM_T0"] = "\(t0 / 1_000_000_000)." + String(repeating: "0", count: 9 - fraction.count) + fraction
        for (key, value) in extraEnvironment { values[key] = value }
        return values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    /// Starts the command with its output going, through pipes, into `NAME.stdout` and
    /// `NAME.stderr` in the report (a new file each, under the run's output budget), and its
    /// process group watched by the run's watchdog.
    private func spawn() -> (pid: pid_t, output: CommandOutput)? {
        let name = context.workload.name
        var streams: [CommandOutput.Stream] = []
        var writeEnds: [FileDescriptor] = []
        func closeAll() {
            for stream in streams {
                try? stream.pipe.close()
                try? stream.file.close()
            }
            for end in writeEnds { try? end.close() }
        }
        for suffix in ["stdout", "stderr"] {
            do throws(SafePathError) {
                let file = try context.report.createFile(named: "\(name).\(suffix)", mode: RunReportFiles.mode)
                do {
                    let pipe = try makePipe()
                    streams.append(CommandOutput.Stream(pipe: pipe.readEnd, file: file, name: "\(name).\(suffix)"))
                    writeEnds.append(pipe.writeEnd)
                } catch {
                    try? file.close()
                    closeAll()
                    spawnError.withLock { $0 = "cannot make a pipe for the command's output: \(error)" }
                    return nil
                }
            } catch {
                closeAll()
                spawnError.withLock { $0 = "cannot write the command's output: \(error.message)" }
                return nil
            }
        }
        let result: Result<pid_t, Errno>
        do {
            // Its own process group, so that its children are signalled with it.
            let resolvConf = context.resolvConf
            result = try context.serverNamespace.perform {
                Result { () throws(Errno) in
                    // The node's resolver, as `ip netns exec` gives a namespace's own resolv.conf.
                    if let resolvConf { try bindInThread(resolvConf, over: "/etc/resolv.conf") }
                    return try spawnProcess(arguments, environment: environment, standardOutput: writeEnds[0], standardError: writeEnds[1], newProcessGroup: true,
                                            contained: true)
                }
            }
        } catch {
            closeAll()
            spawnError.withLock { $0 = "cannot enter node '\(context.workload.from)': \(error)" }
            return nil
        }
        for end in writeEnds { try? end.close() }
        writeEnds = []
        switch result {
        case .success(let pid):
            context.watchdog.watch(pid)
            do {
                let output = try CommandOutput(streams, budget: context.outputBudget)
                return (pid, output)
            } catch {
                kill(-pid, SIGKILL)
                _ = try? waitForExit(pid)
                context.watchdog.forget(pid)
                spawnError.withLock { $0 = error.message }
                return nil
            }
        case .failure(let error):
            closeAll()
            var reason = error == .noSuchFileOrDirectory ? "no such program (looked in PATH)" : error.description
            if let identity = Rootless.containedIdentity, error == .permissionDenied {
                reason += "; root's --rootless run runs commands as uid \(identity.uid) of the host (\(Rootless.containedID) in the run), "
                    + "which may not read or run it: make it and its directories readable by others, or run without --rootless"
            }
            spawnError.withLock { $0 = "cannot run \(arguments[0]): \(reason)" }
            return nil
        }
    }

    /// In a multipath mode with MPTCP, a socket that hears the node's MPTCP events: the
    /// subflows of the program's connections, whatever it does itself.
    private func mptcpEvents() -> NetlinkSocket? {
        guard context.mptcp != nil else { return nil }
        do throws(NetlinkError) {
            let socket = try NetlinkSocket(.generic, in: context.serverNamespace)
            try socket.subscribeToMPTCPEvents()
            try socket.setNonBlocking()
            return socket
        } catch {
            context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, error: "cannot follow MPTCP events: \(error)")))
            return nil
        }
    }

    /// Logs the subflows in `events` (each with the interface of its local address) and counts them.
    private func record(_ events: [MPTCPEvent]) {
        guard !events.isEmpty else { return }
        let addresses = (try? NetlinkSocket(.route, in: context.serverNamespace).addresses()) ?? []
        let links = (try? NetlinkSocket(.route, in: context.serverNamespace).links()) ?? []
        func interface(of address: IPAddress?) -> String {
            guard let address, let owner = addresses.first(where: { $0.prefix.address == address }) else { return address?.description ?? "?" }
            return links.first { $0.index == owner.interfaceIndex }?.name ?? address.description
        }
        for event in events {
            let kind: String
            switch event.kind {
            case .established, .subflowEstablished: kind = "added"
            case .subflowClosed: kind = "closed"
            default: continue
            }
            if kind == "added" { subflowsOpened.withLock { $0 += 1 } }
            let key = "\(event.local?.description ?? "?"):\(event.localPort ?? 0) -> \(event.remote?.description ?? "?"):\(event.remotePort ?? 0)"
            context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, event: kind, interface: interface(of: event.local),
                                                         subflow: key, token: Int64(event.token), backup: event.isBackup)))
        }
    }

    func run() {
        let name = context.workload.name
        let started = MonotonicInstant.now
        let countersBefore = nodeCounters()
        let events = mptcpEvents()
        guard let (pid, output) = spawn() else {
            context.log.record(.command(RunEvent.Command(workload: name, phase: .failed(error: spawnError.withLock { $0 ?? "" }))))
            return
        }
        defer {
            output.finish()
            context.watchdog.forget(pid)
        }
        context.log.record(.command(RunEvent.Command(workload: name, phase: .started(pid: pid, node: context.workload.from))))
        let exited: EventSignal
        do {
            exited = try EventSignal()
        } catch {
            kill(-pid, SIGKILL)
            _ = try? waitForExit(pid)
            return
        }
        let status = Mutex<TerminationStatus?>(nil)
        let waiter = try? PinnedThread(name: "roam-waitpid") {
            let ended = try? waitForExit(pid)
            status.withLock { $0 = ended }
            exited.signal()
        }
        var terminated = false
        if waiter != nil {
            var entries = [exited.pollEntry, context.stop.pollEntry]
            if let events { entries.append(pollfd(fd: events.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
            while true {
                guard (try? waitForEvents(&entries, until: nil)) != nil else { break }
                if let events, entries.count > 2, entries[2].revents != 0 {
                    var heard: [MPTCPEvent] = []
                    _ = try? events.receiveMPTCPEvents { heard.append($0) }
                    record(heard)
                    if entries[0].revents == 0 && entries[1].revents == 0 { continue }
                }
                break
            }
            if entries[0].revents == 0 {
                terminated = true
                kill(-pid, SIGTERM)
                if exited.wait(for: Self.terminationGrace) {
                    kill(-pid, SIGKILL)
                }
            }
            waiter?.join()
        } else {
            kill(-pid, SIGKILL)
            let ended = try? waitForExit(pid)
            status.withLock { $0 = ended }
        }
        // Whatever the command left running in its group goes with it.
        kill(-pid, SIGKILL)
        if let events {
            var heard: [MPTCPEvent] = []
            _ = try? events.receiveMPTCPEvents { heard.append($0) }
            record(heard)
        }
        if let before = countersBefore, let after = nodeCounters() {
            var carried: [String: Int64] = [:]
            for (interface, now) in after where interface != "lo" {
                let then = before[interface] ?? InterfaceCounters()
                let bytes = now.receivedBytes &- then.receivedBytes &+ now.sentBytes &- then.sentBytes
                if bytes > 0, bytes < UInt64(Int64.max) { carried[interface] = Int64(bytes) }
            }
            interfaceBytes.withLock { $0 = carried }
        }
        let ended = status.withLock { $0 }
        let runTime = MonotonicInstant.now - started
        outcome.withLock { outcome in
            outcome.runTime = runTime
            outcome.terminatedByRoam = terminated
            outcome.exitCode = ended?.code.map(Int.init)
            outcome.signal = ended?.signal
        }
        let final = outcome.withLock { $0 }
        context.log.record(.command(RunEvent.Command(workload: name, phase: .exited(code: final.exitCode.map { Int32(clamping: $0) },
                                                                                    signal: final.signal, terminatedByRoam: terminated))))
    }

    func sample() -> WorkloadSample { WorkloadSample(bytesReceived: 0) }

    /// The counters of the node's interfaces now; nil if netlink would not say.
    private func nodeCounters() -> [String: InterfaceCounters]? {
        try? NetlinkSocket(.route, in: context.serverNamespace).interfaceCounters()
    }

    func result(end: Duration) -> WorkloadResult {
        var result = WorkloadResult(context.workload)
        result.note = nil
        let statistics = outcome.withLock { $0 }
        result.command = statistics
        result.activeTime = statistics.runTime
        result.bytesByInterface = interfaceBytes.withLock { $0 }
        result.subflowsOpened = subflowsOpened.withLock { $0 }
        if context.mptcp != nil {
            result.note = "MPTCP path manager on node '\(context.workload.from)' in mode \(context.workload.mode.rawValue): "
                + "connections the program opens with IPPROTO_MPTCP get subflows over its paths"
        }
        if let error = spawnError.withLock({ $0 }) {
            result.incompleteReason = error
        } else if statistics.terminatedByRoam {
            result.incompleteReason = "still running when its time was up"
        } else if let signal = statistics.signal {
            result.incompleteReason = "killed by signal \(signal)"
        } else {
            result.completed = true
        }
        return result
    }

    func finish() {}
}

/// This process's environment variables.
package func processEnvironment() -> [String: String] {
    var values: [String: String] = [:]
    var index = 0
    while let entry = environ[index] {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") { values[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
        index += 1
    }
    return values
}
