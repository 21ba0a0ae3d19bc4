import ArgumentParser
import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamControl
import RoamCore
import RoamSystem

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
                listening.remove()
                printError("roam daemon: --state-directory: \(error.message)")
                throw ExitCode.badInput
            }
        }
        let service = PathService(owner: geteuid(), revalidate: revalidate, firstSequence: firstSequence)
        // D-Bus: the same path, the same sequence, published after the socket's.
        var bus: PathBus?
        if let dbus, let which = BusConnection.Bus(rawValue: dbus) {
            do {
                bus = try PathBus(bus: which, owner: geteuid(), revalidate: revalidate) { error in
                    printError("roam daemon: \(error)")
                    stopped.signal()
                }
            } catch {
                listening.remove()
                printError("roam daemon: --dbus \(dbus): \(error)")
                throw ExitCode.badInput
            }
        }
        let subscription = monitor.onUpdate { [bus, state] path in
            let (sequence, json) = service.publish(path, time: RFC3339.now())
            bus?.publish(path, sequence: sequence, json: json)
            // The next daemon's first sequence: after this one.
            do throws(SafePathError) {
                try state?.replaceFile(named: "sequence", contents: Array("\(sequence + 1)\n".utf8), mode: 0o600)
            } catch {
                printError("roam daemon: cannot keep the sequence: \(error.message)")
            }
        }
        // NetworkManager's metered flags, before the interfaces file's rules.
        var networkManager: NetworkManagerMetered?
        if self.networkManager {
            let fileRules = configuration.interfaceRules.rules
            do {
                networkManager = try NetworkManagerMetered(changed: { flags in
                    printError("roam daemon: NetworkManager: metered \(flags.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value ? "yes" : "no")" }.joined(separator: " "))")
                    monitor.updateInterfaceRules(InterfaceRules(NetworkManagerMetered.rules(flags) + fileRules))
                }, ended: { error in
                    printError("roam daemon: NetworkManager: \(error)")
                    stopped.signal()
                }, report: { printError("roam daemon: \($0)") })
            } catch {
                subscription.cancel()
                bus?.stop()
                listening.remove()
                printError("roam daemon: --network-manager: \(error)")
                throw ExitCode.badInput
            }
        }
        // Per-program policy: each group's traffic routed by its own table.
        var cgroupPolicies: CgroupPolicyManager?
        if let cgroupPolicy {
            do {
                let policies = try CgroupPolicies(contentsOfFile: cgroupPolicy)
                cgroupPolicies = try CgroupPolicyManager(namespace: namespace, policies: policies)
            } catch {
                subscription.cancel()
                networkManager?.stop()
                bus?.stop()
                listening.remove()
                printError("roam daemon: --cgroup-policy: \(error)")
                throw ExitCode.badInput
            }
        }
        let following = cgroupPolicies.map { manager in
            monitor.onUpdate { path in
                do {
                    let changes = try manager.apply(path)
                    if !changes.isEmpty { printError("roam daemon: cgroup policy: \(changes.joined(separator: "; "))") }
                } catch {
                    printError("roam daemon: cgroup policy: \(error)")
                }
            }
        }
        // MPTCP endpoints for unmodified programs, as the simulator's path manager keeps them.
        var endpoints: (manager: MPTCPPathManager, following: PathUpdateSubscription)?
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
            } catch {
                subscription.cancel()
                following?.cancel()
                cgroupPolicies?.stop()
                networkManager?.stop()
                bus?.stop()
                listening.remove()
                printError("roam daemon: --mptcp \(mptcp): \(error)")
                throw ExitCode.badInput
            }
        }
        let server = ControlServer(api: service)
        func stop() {
            ServiceNotification.send("STOPPING=1")
            service.end()
            subscription.cancel()
            // The endpoints it made are removed, the limits it raised restored.
            endpoints?.following.cancel()
            endpoints?.manager.stop()
            following?.cancel()
            cgroupPolicies?.stop()
            monitor.cancel()
            networkManager?.stop()
            bus?.stop()
            server.shutdown()
            listening.remove()
        }
        do {
            try server.serveUnix(descriptor: listening.descriptor, onlyUser: self.private ? geteuid() : nil)
            try monitor.start()
        } catch {
            stop()
            printError("roam daemon: \(error)")
            throw ExitCode.badInput
        }
        let status = "serving the path of the \(namespace) on \(listening.path)" + (bus.map { " and as \(PathBus.name) on the \($0.bus.rawValue) bus" } ?? "")
        ServiceNotification.send("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())")
        printError("roam daemon: \(status)")
        // Until a signal; a monitor that stopped by itself (netlink failed) ends the daemon, so
        // that its service manager restarts it.
        while stopped.wait(for: .seconds(1)) {
            // A policy's group that came, went or was made again (its unit restarted) is matched anew.
            if let cgroupPolicies, cgroupPolicies.groupsChanged, let path = monitor.currentPath {
                do {
                    let changes = try cgroupPolicies.apply(path)
                    if !changes.isEmpty { printError("roam daemon: cgroup policy: \(changes.joined(separator: "; "))") }
                } catch {
                    printError("roam daemon: cgroup policy: \(error)")
                }
            }
            if let failure = monitor.failure {
                stop()
                printError("roam daemon: \(failure)")
                throw ExitCode.badInput
            }
        }
        stop()
    }
}
