import Glibc
import Netlink
import PathMonitor
import Synchronization

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
        let base = context.reportDirectory + "/" + context.workload.name
        outcome = Mutex(CommandStatistics(arguments: arguments, stdoutPath: base + ".stdout", stderrPath: base + ".stderr"))
    }

    func prepare() throws(SimulatorError) {}

    /// The environment the command gets: Roam's own, then the scenario's `env`.
    var environment: [String] {
        var values = processEnvironment()
        for (key, value) in context.environment { values[key] = value }
        for (key, value) in extraEnvironment { values[key] = value }
        return values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    private func spawn() -> pid_t? {
        let output = open(outcome.withLock { $0.stdoutPath }, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let errors = open(outcome.withLock { $0.stderrPath }, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer {
            if output >= 0 { close(output) }
            if errors >= 0 { close(errors) }
        }
        guard output >= 0, errors >= 0 else {
            spawnError.withLock { $0 = "cannot write the command's output to \(context.reportDirectory): \(String(cString: strerror(errno)))" }
            return nil
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, errors, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group (so that its children are signalled with it), every signal
        // unblocked (roam blocks SIGINT and SIGTERM for its signal thread) and at its default.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result: Int32
        do {
            result = try context.serverNamespace.perform {
                posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
            }
        } catch {
            spawnError.withLock { $0 = "cannot enter node '\(context.workload.from)': \(error)" }
            return nil
        }
        guard result == 0 else {
            let reason = result == ENOENT ? "no such program (looked in PATH)" : String(cString: strerror(result))
            spawnError.withLock { $0 = "cannot run \(arguments[0]): \(reason)" }
            return nil
        }
        return pid
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
            context.log.record("subflow", [("workload", .string(context.workload.name)), ("error", .string("cannot follow MPTCP events: \(error)"))])
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
            var fields: [(String, JSONValue)] = [("workload", .string(context.workload.name)), ("event", .string(kind)),
                                                 ("interface", .string(interface(of: event.local))), ("subflow", .string(key)),
                                                 ("token", .int(Int64(event.token)))]
            if let backup = event.isBackup { fields.append(("backup", .bool(backup))) }
            context.log.record("subflow", fields)
        }
    }

    func run() {
        let name = JSONValue.string(context.workload.name)
        let started = MonotonicInstant.now
        let countersBefore = nodeCounters()
        let events = mptcpEvents()
        guard let pid = spawn() else {
            context.log.record("command", [("workload", name), ("event", "failed"), ("error", .string(spawnError.withLock { $0 ?? "" }))])
            return
        }
        context.log.record("command", [("workload", name), ("event", "started"), ("pid", .int(Int64(pid))),
                                       ("node", .string(context.workload.from))])
        let exited: StopSignal
        do {
            exited = try StopSignal()
        } catch {
            kill(-pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            return
        }
        let status = Mutex<Int32>(0)
        let waiter = try? PinnedThread(name: "roam-waitpid") {
            var value: Int32 = 0
            while waitpid(pid, &value, 0) < 0 && errno == EINTR {}
            status.withLock { $0 = value }
            exited.signal()
        }
        var terminated = false
        if waiter != nil {
            var entries = [pollfd(fd: exited.descriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: context.stop.descriptor, events: Int16(POLLIN), revents: 0)]
            if let events { entries.append(pollfd(fd: events.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
            while true {
                let ready = poll(&entries, nfds_t(entries.count), -1)
                if ready < 0 && errno == EINTR { continue }
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
            var value: Int32 = 0
            waitpid(pid, &value, 0)
            status.withLock { $0 = value }
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
        let raw = status.withLock { $0 }
        let runTime = MonotonicInstant.now - started
        outcome.withLock { outcome in
            outcome.runTime = runTime
            outcome.terminatedByRoam = terminated
            if raw & 0x7f == 0 {
                outcome.exitCode = Int((raw >> 8) & 0xff)
            } else {
                outcome.signal = raw & 0x7f
            }
        }
        let final = outcome.withLock { $0 }
        context.log.record("command", [("workload", name), ("event", "exited"),
                                       ("exitCode", final.exitCode.map { .int(Int64($0)) } ?? .null),
                                       ("signal", final.signal.map { .int(Int64($0)) } ?? .null),
                                       ("terminatedByRoam", .bool(terminated))])
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
public func processEnvironment() -> [String: String] {
    var values: [String: String] = [:]
    var index = 0
    while let entry = environ[index] {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") { values[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
        index += 1
    }
    return values
}
