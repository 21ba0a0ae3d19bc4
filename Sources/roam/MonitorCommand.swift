import ArgumentParser
import Glibc
import Netlink
import PathMonitor
import RoamControl
import RoamCore
import RoamSystem
import Synchronization

/// `roam monitor`: print a namespace's network path, then every change.
struct MonitorCommand: ParsableCommand, SignalHandlingCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Print the network path now and on every change, until interrupted.",
        discussion: """
            Interface types: wifi, cellular, wiredEthernet (or wired), loopback, other. The kernel's \
            classification can be overridden per interface by an alias tag (ip link set DEV alias \
            'roam:type=cellular,expensive') or by an --interfaces file of 'PATTERN ATTRIBUTES' lines.
            """
    )

    @OptionGroup var source: PathSourceOptions

    @Flag(name: .long, help: "Print one JSON object per line.")
    var json = false

    @Flag(name: .long, help: "Read the path from roam daemon instead of watching here: its socket (--socket), this user's daemon's, or the system's (/run/roam/path.sock).")
    var daemon = false

    @Option(name: .long, help: ArgumentHelp("With --daemon: the daemon's socket.", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("Use only interfaces of this type.", valueName: "type"))
    var require: String?

    @Option(name: .long, help: ArgumentHelp("Never use interfaces of this type (repeatable).", valueName: "type"))
    var prohibit: [String] = []

    @Flag(name: .long, help: "Never use expensive interfaces (cellular, hotspots).")
    var prohibitExpensive = false

    @Flag(name: .long, help: "Never use constrained interfaces (Low Data Mode).")
    var prohibitConstrained = false

    @Flag(name: .long, help: "Never use ultra-constrained interfaces (a carrier's satellite network).")
    var prohibitUltraConstrained = false

    @Flag(name: .long, help: "With --validate: use only validated interfaces (a path behind a captive portal is unsatisfied), as Android's default network.")
    var requireValidated = false

    @Flag(name: .long, help: "With --validate: leave out an interface behind a captive portal or without internet while another is validated, and list one not checked yet after the validated (the path a connection would use, as Android's default network and iOS's primary).")
    var preferValidated = false

    func validate() throws {
        if socket != nil, !daemon { throw ValidationError("--socket names the socket of roam daemon: give it with --daemon") }
        if daemon {
            let local = [(source.netns != nil, "--netns"), (source.interfaces != nil, "--interfaces"), (source.validationURL != nil, "--validate"),
                         (require != nil, "--require"), (!prohibit.isEmpty, "--prohibit"), (prohibitExpensive, "--prohibit-expensive"),
                         (prohibitConstrained, "--prohibit-constrained"), (prohibitUltraConstrained, "--prohibit-ultra-constrained"),
                         (requireValidated, "--require-validated"), (preferValidated, "--prefer-validated")].filter(\.0).map(\.1)
            if let first = local.first {
                throw ValidationError("\(first) applies to a monitor of this process; with --daemon the path is the daemon's, as it publishes it (start the daemon with its options)")
            }
        }
        if let require, InterfaceType(name: require) == nil {
            throw ValidationError("unknown interface type '\(escapedForMessage(require))' for --require; use wifi, cellular, wiredEthernet, loopback or other")
        }
        for type in prohibit where InterfaceType(name: type) == nil {
            throw ValidationError("unknown interface type '\(escapedForMessage(type))' for --prohibit; use wifi, cellular, wiredEthernet, loopback or other")
        }
        if source.validationURL == nil, source.validateInterval != nil || requireValidated || preferValidated {
            throw ValidationError("--validate-interval, --require-validated and --prefer-validated need --validate URL: nothing is validated without a probe")
        }
        if requireValidated, preferValidated {
            throw ValidationError("--require-validated and --prefer-validated are two rules for the same thing: give one")
        }
        if let require, let required = InterfaceType(name: require), prohibit.contains(where: { InterfaceType(name: $0) == required }) {
            throw ValidationError("--require \(required.rawValue) and --prohibit \(required.rawValue) contradict: no path could satisfy both; drop one")
        }
    }

    func run() throws {
        if daemon { return try readDaemon() }
        let policy = PathPolicy(
            allowsExpensive: !prohibitExpensive,
            allowsConstrained: !prohibitConstrained,
            allowsUltraConstrained: !prohibitUltraConstrained,
            requiredInterfaceType: require.flatMap { InterfaceType(name: $0) },
            prohibitedInterfaceTypes: Set(prohibit.compactMap { InterfaceType(name: $0) }),
            validation: requireValidated ? .require : preferValidated ? .prefer : .ignore)
        let (namespace, configuration) = try source.monitorConfiguration(policy: policy, command: "monitor")

        // SIGINT, SIGTERM, SIGHUP and a closed standard output end the monitor cleanly.
        let stopped: EventSignal
        do {
            stopped = try EventSignal()
        } catch {
            printError("roam monitor: \(error)")
            throw ExitCode.badInput
        }
        CommandSignals.watch("monitor", nil) { stopped.signal() }

        let monitor = NetworkPathMonitor(namespace: namespace, configuration: configuration)
        let json = self.json
        let subscription = monitor.onUpdate { path in
            let line = json ? path.json(time: RFC3339.now()).serialized : "\(RFC3339.now()) \(path.summary)"
            writeLine(line)
        }
        do {
            try monitor.start()
        } catch {
            printError("roam monitor: \(error)")
            throw ExitCode.badInput
        }
        // Wait for a signal; look once a second whether the monitor stopped by itself.
        while stopped.wait(for: .seconds(1)) {
            if let failure = monitor.failure {
                subscription.cancel()
                printError("roam monitor: \(failure)")
                throw ExitCode.badInput
            }
        }
        subscription.cancel()
        monitor.cancel()
        // A signal is how a monitor is meant to end (exit 0); a closed output is not (141).
        if CommandSignals.received.load(ordering: .relaxed) == SIGPIPE { throw ExitCode(128 + SIGPIPE) }
    }

    /// Prints the path `roam daemon` serves, and every change, until a signal or the daemon
    /// stops (exit 2: the path is no longer known).
    private func readDaemon() throws {
        let path = socket ?? DaemonSocket.readerDefaultPath()
        let json = self.json
        // A reader has nothing to clean up: a signal ends it at once (0, as it ends `roam
        // monitor`), a closed output at the next line it prints (141, as a SIGPIPE would).
        CommandSignals.watch("monitor", nil) { Glibc._exit(CommandSignals.received.load(ordering: .relaxed) == SIGPIPE ? 128 + SIGPIPE : 0) }
        let reader = ServerSentEvents()
        let failure = Mutex<String?>(nil)
        let status: Int
        do {
            status = try ControlClient.stream(.unix(path), path: "/v1/path/events") { bytes in
                for event in reader.feed(bytes) {
                    if event.type == "gap" {
                        printError("roam monitor: the daemon no longer held some changes (\(escapedForMessage(event.data, maximumLength: 100))); going on from the next")
                    } else if event.type != "path" {
                        continue
                    } else if json {
                        writeLine(event.data)
                    } else if let value = try? JSONValue.parse(event.data), let path = NetworkPath(json: value) {
                        writeLine("\(value["time"]?.stringValue ?? "-") \(path.summary)")
                    } else {
                        failure.withLock { $0 = "the daemon sent a path this roam cannot read: \(escapedForMessage(event.data, maximumLength: 200))" }
                        return false
                    }
                }
                if reader.dropped > 0 {
                    failure.withLock { $0 = "the daemon sent a line over \(ServerSentEvents.maximumLine) bytes" }
                    return false
                }
                return true
            }
        } catch {
            printError("roam monitor: cannot read roam daemon's path at \(escapedForMessage(path, maximumLength: 256)): \(error) (is roam daemon running? --socket names another)")
            throw ExitCode.badInput
        }
        if let failure = failure.withLock({ $0 }) {
            printError("roam monitor: \(failure)")
            throw ExitCode.badInput
        }
        guard status == 200 else {
            printError("roam monitor: roam daemon at \(escapedForMessage(path, maximumLength: 256)) answered \(status)")
            throw ExitCode.badInput
        }
        printError("roam monitor: roam daemon at \(escapedForMessage(path, maximumLength: 256)) stopped")
        throw ExitCode.badInput
    }
}
