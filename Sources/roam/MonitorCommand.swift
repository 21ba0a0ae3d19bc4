import ArgumentParser
import Glibc
import Netlink
import PathMonitor
import RoamCore
import RoamSystem

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

    @Option(name: .long, help: ArgumentHelp("Watch the named network namespace (as listed by `ip netns`) instead of the current one; for a node of your rootless run, roam-RUNID-NODE.", valueName: "name"))
    var netns: String?

    @Flag(name: .long, help: "Print one JSON object per line.")
    var json = false

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

    @Option(name: .long, help: ArgumentHelp("Interfaces file: lines of 'PATTERN ATTRIBUTES', e.g. 'wwan* type=cellular expensive'.", valueName: "file"))
    var interfaces: String?

    @Option(name: .customLong("validate"), help: ArgumentHelp("Check each interface's connectivity: an HTTP GET of this URL from the interface, expecting 204 (a redirect or another page: a captive portal; nothing: limited).", valueName: "url"))
    var validationURL: String?

    @Option(name: .long, help: ArgumentHelp("With --validate: seconds between checks of a validated interface (default 300, NetworkManager's).", valueName: "seconds"))
    var validateInterval: Int?

    @Flag(name: .long, help: "With --validate: use only validated interfaces (a path behind a captive portal is unsatisfied), as Android's default network.")
    var requireValidated = false

    @Flag(name: .long, help: "With --validate: leave out an interface behind a captive portal or without internet while another is validated, and list one not checked yet after the validated (the path a connection would use, as Android's default network and iOS's primary).")
    var preferValidated = false

    func validate() throws {
        // A name under /run/netns, as `ip netns` makes them: no path, no control characters.
        if let netns, netns.isEmpty || netns == "." || netns == ".." || netns.utf8.count > 255
            || netns.unicodeScalars.contains(where: { $0 == "/" || $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) }) {
            throw ValidationError("--netns '\(escapedForMessage(netns))' is not a network namespace name (a file name under /run/netns, as `ip netns list` shows)")
        }
        if let require, InterfaceType(name: require) == nil {
            throw ValidationError("unknown interface type '\(escapedForMessage(require))' for --require; use wifi, cellular, wiredEthernet, loopback or other")
        }
        for type in prohibit where InterfaceType(name: type) == nil {
            throw ValidationError("unknown interface type '\(escapedForMessage(type))' for --prohibit; use wifi, cellular, wiredEthernet, loopback or other")
        }
        if let validationURL, case .failure(let error) = ConnectivityValidation(url: validationURL).target() {
            throw ValidationError("--validate: \(error.message)")
        }
        if let validateInterval, !(1...86_400).contains(validateInterval) {
            throw ValidationError("--validate-interval must be 1 to 86400 seconds, not \(validateInterval)")
        }
        if validationURL == nil, validateInterval != nil || requireValidated || preferValidated {
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
        // A node of a rootless run: reached through the run's user and mount namespaces, first
        // thing (while the process has one thread).
        if let netns, !Rootless.canRunAsRoot, access("\(NetworkNamespace.runDirectory)/\(netns)", F_OK) != 0,
           let run = RootlessRun.runID(ofNamespace: netns), (try? RootlessRun.process(of: run)) ?? nil != nil {
            do {
                try RootlessRun.enter(run)
            } catch {
                printError("roam monitor: \(error)")
                throw ExitCode.badInput
            }
        }
        let namespace: NetworkNamespace
        do {
            namespace = try netns.map { try NetworkNamespace.named($0) } ?? .current
        } catch {
            throw ValidationError("\(error)")
        }
        var configuration = NetworkPathMonitor.Configuration(policy: PathPolicy(
            allowsExpensive: !prohibitExpensive,
            allowsConstrained: !prohibitConstrained,
            allowsUltraConstrained: !prohibitUltraConstrained,
            requiredInterfaceType: require.flatMap { InterfaceType(name: $0) },
            prohibitedInterfaceTypes: Set(prohibit.compactMap { InterfaceType(name: $0) }),
            validation: requireValidated ? .require : preferValidated ? .prefer : .ignore))
        if let validationURL {
            var validation = ConnectivityValidation(url: validationURL)
            if let validateInterval { validation.interval = .seconds(validateInterval) }
            configuration.validation = validation
        }
        if let interfaces {
            do {
                configuration.interfaceRules = try InterfaceRules(contentsOfFile: interfaces)
            } catch {
                printError("roam monitor: \(error)")
                throw ExitCode.badInput
            }
        }

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
}
