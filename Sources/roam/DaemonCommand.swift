import ArgumentParser
import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamControl
import RoamCore
import RoamSystem
import Synchronization

/// `roam daemon`: the path of this host (or of a namespace), served on a Unix socket for every
/// program on it, in any language (docs/daemon.md).
struct DaemonCommand: ParsableCommand, SignalHandlingCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Serve the network path, and every change, on a Unix socket for every program on this host.",
        discussion: """
            GET /v1/path answers the path now (the object roam monitor --json prints); GET /v1/path/events \
            streams it and every change as Server-Sent Events; POST /v1/revalidate[?interface=NAME] checks \
            connectivity at once (with --validate; the daemon's user and root only). Reading is open to \
            every local user unless --private. Under systemd (Type=notify) it says when it is ready; it \
            stops on SIGTERM or SIGINT and removes its socket. roam monitor --daemon reads it. With --dbus, the \
            same path is org.roam.PathMonitor1 on D-Bus (properties, PropertiesChanged, PathChanged, Revalidate).
            """
    )

    @OptionGroup var source: PathSourceOptions

    @Option(name: .long, help: ArgumentHelp("The socket to serve on (default: /run/roam/path.sock as root, $XDG_RUNTIME_DIR/roam/path.sock otherwise).", valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Only the daemon's user (and root) may connect; by default every local user may read the path.")
    var `private` = false

    @Option(name: .long, help: ArgumentHelp("Keep the kernel's MPTCP endpoints in step with the path, for every MPTCP program (mptcpize run …): handover (the preferred interface carries, the others are backups), interactive or aggregate (all carry). An interface the connectivity rule leaves out (a portal's while another is validated) or that stands by gets none. Needs CAP_NET_ADMIN.", valueName: "type"))
    var mptcp: String?

    @Flag(name: .customLong("no-stall-demotion"), help: "With --mptcp: leave an interface whose subflows stall as it is (by default it becomes a backup for a hold-down of 1 s, doubling with each stall up to 30 s).")
    var noStallDemotion = false

    @Option(name: .long, help: ArgumentHelp("Serve the path on D-Bus too, as org.roam.PathMonitor1 on the system bus (needs the D-Bus policy make install puts in place) or the user's session bus.", valueName: "system|session"))
    var dbus: String?

    @Flag(name: .long, help: "Follow NetworkManager's Metered flag of each device over the system bus: metered interfaces are expensive (the interfaces file still wins).")
    var networkManager = false

    @Option(name: .customLong("state-directory"), help: ArgumentHelp("Keep the path's sequence here across restarts (the unit's /var/lib/roam), so that a client resuming with Last-Event-ID after a restart gets the next path, not a sequence from 0. The directory must be the daemon's user's, writable by no one else.", valueName: "directory"))
    var stateDirectory: String?

    @Option(name: .customLong("cgroup-policy"), help: ArgumentHelp("Per-program policy: lines of 'CGROUP prohibit=expensive,constrained' or 'CGROUP require=validated' (the group below the cgroup2 root, as systemctl show -p ControlGroup UNIT says); its programs' traffic uses only the interfaces the policy permits, and none when no interface does. Needs CAP_NET_ADMIN.", valueName: "file"))
    var cgroupPolicy: String?

    func validate() throws {
        if let dbus, BusConnection.Bus(rawValue: dbus) == nil {
            throw ValidationError("--dbus '\(escapedForMessage(dbus, maximumLength: 40))' is not a bus: system or session")
        }
        if dbus != nil, self.private {
            throw ValidationError("--private cannot go with --dbus: the bus sends the path's signals to every local user it lets listen; serve the socket alone with --private")
        }
        if noStallDemotion, mptcp == nil {
            throw ValidationError("--no-stall-demotion goes with --mptcp: without it the daemon keeps no endpoints to demote")
        }
        if let mptcp, MultipathServiceType(rawValue: mptcp).map({ $0 == .none }) ?? true {
            throw ValidationError("--mptcp '\(escapedForMessage(mptcp, maximumLength: 40))' is not a multipath service type: handover, interactive or aggregate")
        }
    }

    func run() throws {
        let (namespace, configuration) = try source.monitorConfiguration(policy: PathPolicy(validation: .ignore), command: "daemon")
        let listening: DaemonSocket
        do {
            listening = try DaemonSocket(path: socket ?? DaemonSocket.defaultPath(), shared: !self.private)
        } catch {
            printError("roam daemon: \(error)")
            throw ExitCode.badInput
        }
        let stopped: EventSignal
        do {
            stopped = try EventSignal()
        } catch {
            listening.remove()
            printError("roam daemon: \(error)")
            throw ExitCode.badInput
        }
        CommandSignals.watch("daemon", nil) { stopped.signal() }

        let monitor = NetworkPathMonitor(namespace: namespace, configuration: configuration)
        var revalidate: (@Sendable (String?) -> Void)?
        if configuration.validation != nil { revalidate = { @Sendable interface in monitor.revalidate(interface: interface) } }

        // What runs beside the monitor, each made below when asked for; `stop()` ends whatever
        // was made, in every way out.
        var subscription: PathUpdateSubscription?
        var bus: PathBus?
        var networkManager: NetworkManagerMetered?
        var cgroupPolicies: CgroupPolicyManager?
        var policyFollowing: PathUpdateSubscription?
        var policyWorker: LatestPathWorker?
        var endpoints: (manager: MPTCPPathManager, following: PathUpdateSubscription)?
        var stalls: MPTCPStallDemotion?
        var server: ControlServer?
        var service: PathService?
        // Why a part that runs on its own ended the daemon (the bus went away): exit 2, so that
        // the service manager restarts it.
        let ended = Mutex<String?>(nil)
        func stop() {
            ServiceNotification.send("STOPPING=1")
            service?.end()
            subscription?.cancel()
            // The endpoints it made are removed, the limits it raised restored; the policy's
            // rules, routes and nftables table removed.
            stalls?.stop()
            endpoints?.following.cancel()
            endpoints?.manager.stop()
            policyFollowing?.cancel()
            policyWorker?.stop()
            cgroupPolicies?.stop()
            monitor.cancel()
            networkManager?.stop()
            bus?.stop()
            server?.shutdown()
            listening.remove()
        }
        func fail(_ message: String) -> ExitCode {
            stop()
            printError("roam daemon: \(message)")
            return ExitCode.badInput
        }

        // The sequence where the last daemon stopped.
        var state: SecureDirectory?
        var firstSequence = 0
        if let stateDirectory {
            do throws(SafePathError) {
                let directory = try SecureDirectory.open(stateDirectory, creating: 0o700, requirement: .ownedByCaller)
                state = directory
                if directory.contains("sequence") {
                    let text = String(decoding: try directory.readFile(named: "sequence", maximumBytes: 64), as: UTF8.self)
                    if let saved = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), (0...ControlAPI.maximumSequenceNumber).contains(saved) {
                        firstSequence = saved
                    } else {
                        printError("roam daemon: \(directory.child("sequence")) holds no sequence ('\(escapedForMessage(text, maximumLength: 40))'): starting from 0")
                    }
                }
            } catch {
                throw fail("--state-directory: \(error.message)")
            }
        }
        let paths = PathService(owner: geteuid(), revalidate: revalidate, firstSequence: firstSequence)
        service = paths
        // D-Bus: the same path, the same sequence, published after the socket's.
        if let dbus, let which = BusConnection.Bus(rawValue: dbus) {
            // Connected and the name asked for on a thread of its own: a bus that takes the
            // connection and then never answers holds that thread (up to sd-bus's timeouts),
            // not the daemon, which still stops on the first SIGTERM or Ctrl-C.
            let connecting = Mutex<Result<PathBus, BusError>?>(nil)
            let connected: EventSignal
            do {
                connected = try EventSignal()
                let thread = try PinnedThread(name: "roam-dbus-connect") { [revalidate] in
                    let result = Result { () throws(BusError) in
                        try PathBus(bus: which, owner: geteuid(), revalidate: revalidate) { error in
                            ended.withLock { $0 = "\(error)" }
                            stopped.signal()
                        }
                    }
                    connecting.withLock { $0 = result }
                    connected.signal()
                }
                thread.detach()
            } catch {
                throw fail("--dbus \(dbus): \(error)")
            }
            var entries = [stopped.pollEntry, connected.pollEntry]
            while !connected.isSignalled && !stopped.isSignalled { _ = poll(&entries, 2, -1) }
            guard let result = connecting.withLock({ $0 }) else {
                // Stopped before the bus answered: the connection left to the process's end.
                printError("roam daemon: stopped while the \(which.rawValue) bus had not answered")
                stop()
                return
            }
            do {
                bus = try result.get()
            } catch {
                throw fail("--dbus \(dbus): \(error)")
            }
        }
        subscription = monitor.onUpdate { [bus, state] path in
            let (sequence, json) = paths.publish(path, time: RFC3339.now())
            bus?.publish(path, sequence: sequence, json: json)
            // The next daemon's first sequence: after this one.
            do throws(SafePathError) {
                try state?.replaceFile(named: "sequence", contents: Array("\(sequence + 1)\n".utf8), mode: 0o600)
            } catch {
                printError("roam daemon: cannot keep the sequence: \(error.message)")
            }
        }
        // NetworkManager's metered flags, before the interfaces file's rules.
        if self.networkManager {
            let fileRules = configuration.interfaceRules.rules
            do {
                networkManager = try NetworkManagerMetered(changed: { flags in
                    printError("roam daemon: NetworkManager: metered \(flags.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value ? "yes" : "no")" }.joined(separator: " "))")
                    monitor.updateInterfaceRules(InterfaceRules(NetworkManagerMetered.rules(flags) + fileRules))
                }, ended: { error in
                    ended.withLock { $0 = "NetworkManager: \(error)" }
                    stopped.signal()
                }, report: { printError("roam daemon: \($0)") })
            } catch {
                throw fail("--network-manager: \(error)")
            }
        }
        // Per-program policy: each group's traffic routed by its own table, at each path and when
        // a group comes, goes or is made again (its unit restarted).
        if let cgroupPolicy {
            do {
                cgroupPolicies = try CgroupPolicyManager(namespace: namespace, policies: try CgroupPolicies(contentsOfFile: cgroupPolicy))
            } catch {
                throw fail("--cgroup-policy: \(error)")
            }
        }
        // The first application's failure ends the daemon (exit 2: the policy was never in
        // force, nft or the kernel's nf_tables missing); a later one is said and the next path
        // tries again.
        let firstPolicyFailure = Mutex<String??>(.none)
        @Sendable func applyPolicies(_ manager: CgroupPolicyManager, _ path: NetworkPath) {
            var failure: String?
            do {
                let changes = try manager.apply(path)
                if !changes.isEmpty { printError("roam daemon: cgroup policy: \(changes.joined(separator: "; "))") }
            } catch {
                failure = "\(error)"
            }
            let first = firstPolicyFailure.withLock { first in
                defer { if first == nil { first = .some(failure) } }
                return first == nil
            }
            if let failure, !first { printError("roam daemon: cgroup policy: \(failure)") }
        }
        // On a thread of its own, the latest path first: nft can take seconds (a module the kernel
        // loads on its first use, slowly on a loaded machine), and the paths the socket, the bus
        // and the MPTCP endpoints follow must not wait for it.
        if let manager = cgroupPolicies {
            do {
                let worker = try LatestPathWorker(name: "roam-cgroup-pol") { applyPolicies(manager, $0) }
                policyWorker = worker
                policyFollowing = monitor.onUpdate { worker.submit($0) }
            } catch {
                throw fail("--cgroup-policy: \(error)")
            }
        }
        // MPTCP endpoints for unmodified programs, as the simulator's path manager keeps them.
        if let mptcp, let serviceType = MultipathServiceType(rawValue: mptcp) {
            do {
                let manager = try MPTCPPathManager(namespace: namespace, serviceType: serviceType)
                let following = manager.follow(monitor) { outcome, _ in
                    switch outcome {
                    case .success(let changes): printError("roam daemon: mptcp: \(changes.map(\.description).joined(separator: "; "))")
                    case .failure(let error): printError("roam daemon: mptcp: \(error)")
                    }
                }
                endpoints = (manager, following)
                // Subflows that stall: their interface demoted for a hold-down.
                if !noStallDemotion {
                    stalls = try MPTCPStallDemotion(manager: manager) { event in printError("roam daemon: mptcp: \(event)") }
                }
            } catch {
                throw fail("--mptcp \(mptcp): \(error)")
            }
        }
        let control = ControlServer(api: paths)
        server = control
        do {
            try control.serveUnix(descriptor: listening.descriptor, onlyUser: self.private ? geteuid() : nil)
            try monitor.start()
        } catch {
            throw fail("\(error)")
        }
        // Ready once the per-program policy is in force for the first path: a unit ordered after
        // the daemon (systemd's Type=notify) must not start while its group's traffic is still
        // unmarked and free to take any link (the first nft can take seconds while the kernel
        // loads its modules). The first SIGTERM or Ctrl-C still ends the wait.
        if let policyWorker {
            var entries = [stopped.pollEntry, policyWorker.handledFirst.pollEntry]
            while !policyWorker.handledFirst.isSignalled && !stopped.isSignalled { _ = poll(&entries, 2, -1) }
            if stopped.isSignalled {
                if let reason = ended.withLock({ $0 }) { throw fail(reason) }
                stop()
                return
            }
            if case .some(.some(let failure)) = firstPolicyFailure.withLock({ $0 }) { throw fail("--cgroup-policy: \(failure)") }
        }
        let status = "serving the path of the \(namespace) on \(listening.path)" + (bus.map { " and as \(PathBus.name) on the \($0.bus.rawValue) bus" } ?? "")
        ServiceNotification.send("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())")
        printError("roam daemon: \(status)")
        // Until a signal; a monitor that stopped by itself (netlink failed), or a bus that went
        // away, ends the daemon with exit 2, so that its service manager restarts it.
        while stopped.wait(for: .seconds(1)) {
            if let cgroupPolicies, cgroupPolicies.groupsChanged, let path = monitor.currentPath { policyWorker?.submit(path) }
            if let failure = monitor.failure { throw fail("\(failure)") }
        }
        if let reason = ended.withLock({ $0 }) { throw fail(reason) }
        stop()
    }
}

/// Runs `body` on a thread of its own for the latest path submitted: a path submitted while the
/// one before is being handled replaces any still waiting, so a slow `body` never holds up the
/// monitor that submits, and always ends on the newest path.
final class LatestPathWorker: Sendable {
    private final class Shared: Sendable {
        let pending = Mutex<NetworkPath?>(nil)
        let stopping = Atomic<Bool>(false)
    }

    private let shared = Shared()
    private let wake: EventSignal
    private let thread: Mutex<PinnedThread?>
    /// Signalled once `body` has returned for a first path (and never reset): what the daemon
    /// waits on before it says it is ready.
    let handledFirst: EventSignal

    init(name: String, _ body: @escaping @Sendable (NetworkPath) -> Void) throws {
        let wake = try EventSignal()
        let handledFirst = try EventSignal()
        self.wake = wake
        self.handledFirst = handledFirst
        let shared = self.shared
        thread = Mutex(try PinnedThread(name: name) {
            while !shared.stopping.load(ordering: .acquiring) {
                wake.wait(for: .seconds(1))
                wake.reset()
                if shared.stopping.load(ordering: .acquiring) { return }
                if let path = shared.pending.withLock({ path in defer { path = nil }; return path }) {
                    body(path)
                    handledFirst.signal()
                }
            }
        })
    }

    /// Hands `path` to the thread, in place of one still waiting.
    func submit(_ path: NetworkPath) {
        shared.pending.withLock { $0 = path }
        wake.signal()
    }

    /// Ends the thread after the path it is handling, if any.
    func stop() {
        shared.stopping.store(true, ordering: .releasing)
        wake.signal()
        thread.withLock { thread in
            thread?.join()
            thread = nil
        }
    }
}
