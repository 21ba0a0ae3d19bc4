import Glibc
import RoamCore
import Netlink
import PathMonitor
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

/// The programs that make a scenario's networks real, started in their nodes once the topology
/// is built and stopped before it goes:
///
/// - in each gateway, NAT44 (or carrier-grade NAT) to the uplink by nftables (`nft`), NAT64 by
///   `tayga` on a TUN interface `nat64` where the network has it, and the network's resolver,
///   `unbound`, forwarding to the internet's name server (with DNS64 on a NAT64 network);
/// - in the internet, `unbound` answering for the servers' names (and `ipv4only.arpa`, RFC 7050)
///   and nothing else.
///
/// unbound was chosen over dnsmasq because it does DNS64 (dnsmasq has none). Configuration goes
/// to each program in memory (`/dev/fd/3`); nothing is written outside the report directory,
/// where each program's output goes (`network-NODE-PROGRAM.log`).
///
/// Each phone of a network gets a `resolv.conf` naming the resolver of its primary network (the
/// joined one it routes through first), rewritten in place as it joins and leaves; commands
/// started in the node see it at `/etc/resolv.conf` (bound in a mount namespace of their own).
/// These files are the only ones Roam writes outside the report for networks: in
/// `/run/roam/net-RUNID/` (root's, or the rootless run's private `/run`), removed with the run.
package final class NetworkServices: NetworkEventHandler, @unchecked Sendable {
    private let plan: TopologyPlan
    private let topology: Topology
    private let report: SecureDirectory
    private let watchdog: ProcessGroupWatchdog
    private let lock = Mutex(())
    private var processes: [(pid: pid_t, what: String)] = []
    /// Each phone's resolv.conf, and the networks it has joined.
    private var resolvers: [String: String] = [:]
    private var joined: [String: Set<String>] = [:]
    /// The access links whose carrier is down.
    private var carrierDown: Set<String> = []
    /// `/run/roam` and the run's directory in it, once made.
    private var runDirectory: (parent: SecureDirectory, directory: SecureDirectory, name: String)?

    /// Where runs keep their phones' resolv.conf files.
    static let stateDirectory = "/run/roam"

    /// How long a program has to answer before the run gives up on it.
    static let readinessTimeout = Duration.seconds(10)

    package init(plan: TopologyPlan, topology: Topology, report: SecureDirectory, watchdog: ProcessGroupWatchdog) {
        self.plan = plan
        self.topology = topology
        self.report = report
        self.watchdog = watchdog
    }

    // MARK: - Configuration (pure)

    /// The internet's name server: the servers' names and nothing else.
    package static func authoritativeConfiguration(_ plan: TopologyPlan) -> String? {
        guard let internet = plan.nodes.first(where: { $0.role == .internet }) else { return nil }
        var records: [String] = []
        for node in plan.nodes {
            guard case let .server(names, families) = node.role else { continue }
            for name in names {
                if families.contains(.ipv4) { records.append("\(name). 60 IN A \(node.serviceIPv4)") }
                if families.contains(.ipv6) { records.append("\(name). 60 IN AAAA \(node.serviceIPv6)") }
            }
        }
        // The phones' connectivity check, answered by the internet (``ConnectivityResponder``).
        records.append("\(ConnectivityResponder.name). 60 IN A \(internet.serviceIPv4)")
        records.append("\(ConnectivityResponder.name). 60 IN AAAA \(internet.serviceIPv6)")
        // RFC 7050: an IPv6-only host learns its network's NAT64 prefix from the AAAA records
        // DNS64 synthesizes for this name.
        records += ["ipv4only.arpa. 60 IN A 192.0.0.170", "ipv4only.arpa. 60 IN A 192.0.0.171"]
        return unboundServer(listening: [internet.serviceIPv4]) + """
              module-config: "iterator"
              local-zone: "." static

            """ + records.map { "  local-data: \"\($0)\"\n" }.joined() + unboundFooter
    }

    /// A network's resolver, at its gateway's addresses, forwarding to the internet's name server;
    /// `control` is the Unix socket unbound-control reaches it at (for the timeline's faults).
    package static func resolverConfiguration(_ network: TopologyPlan.NetworkPlan, nameServer: IPAddress, control: String? = nil) -> String {
        var text = unboundServer(listening: [network.gatewayIPv4, network.gatewayIPv6].compactMap { $0 })
        if network.spec.nat64 {
            text += """
                  module-config: "dns64 iterator"
                  dns64-prefix: \(TopologyPlan.nat64Prefix)

                """
        } else {
            text += "  module-config: \"iterator\"\n"
        }
        // The special-use names unbound answers itself by default; the scenario's zone may use them.
        text += """
              local-zone: "test." nodefault
              local-zone: "arpa." nodefault
              do-not-query-localhost: no
              qname-minimisation: no
            forward-zone:
              name: "."
              forward-addr: \(nameServer)

            """
        guard let control else { return text + unboundFooter }
        return text + """
            remote-control:
              control-enable: yes
              control-interface: \(control)
              control-use-cert: no

            """
    }

    /// What turns a resolver's fault on in its gateway: an nftables table that drops queries
    /// (`timeout`), or a local zone over every name (`nxdomain`, `refused`).
    package static let dnsTimeoutRuleset = """
        table inet roam-dns {
          chain input {
            type filter hook input priority filter; policy accept;
            udp dport 53 drop
            tcp dport 53 drop
          }
        }

        """

    private static func unboundServer(listening addresses: [IPAddress]) -> String {
        """
        server:
          username: ""
          chroot: ""
          directory: "/"
          pidfile: ""
          use-syslog: no
          logfile: ""
          do-daemonize: no
          verbosity: 0
          num-threads: 1
          so-reuseport: no
          port: 53
        \(addresses.map { "  interface: \($0)\n" }.joined())  access-control: 0.0.0.0/0 allow
          access-control: ::/0 allow

        """
    }

    private static let unboundFooter = """
        remote-control:
          control-enable: no

        """

    /// NAT44 (and the NAT64 pool's) to the uplink, each new mapping on a random port (as carrier
    /// NATs and many home routers pick them), so that a rebind is seen by the server.
    package static func natRuleset(_ network: TopologyPlan.NetworkPlan) -> String? {
        guard network.spec.ipv4 != .none || network.spec.nat64 else { return nil }
        return """
            table ip roam {
              chain postrouting {
                type nat hook postrouting priority srcnat; policy accept;
                oifname "uplink" masquerade random
              }
            }

            """
    }

    /// tayga's configuration: the network-specific prefix, the pool phones are mapped into.
    package static func taygaConfiguration() -> String {
        var first = TopologyPlan.nat64Pool.address.bytes
        first[3] = 1
        return """
            tun-device nat64
            ipv4-addr \(IPAddress(bytes: first)!)
            prefix \(TopologyPlan.nat64Prefix)
            dynamic-pool \(TopologyPlan.nat64Pool)

            """
    }

    /// A phone's resolv.conf while it has joined `networks`: its primary network's resolver.
    package static func resolvConf(of node: TopologyPlan.Node, joined networks: Set<String>, plan: TopologyPlan) -> String {
        let primary = node.interfaces.filter { $0.routing == .phone }.sorted { $0.metric < $1.metric }.compactMap { interface -> TopologyPlan.NetworkPlan? in
            guard let link = plan.link(interface.link), let network = plan.networks.first(where: { NetworkSpec.accessLinkName(network: $0.spec.name, node: node.name) == link.name }),
                  networks.contains(network.spec.name) else { return nil }
            return network
        }.first
        guard let primary, let resolver = primary.resolver else {
            return "# Roam: node '\(node.name)' has joined no network; no resolver\n"
        }
        return "# Roam: the resolver of network '\(primary.spec.name)', node '\(node.name)''s primary network\nnameserver \(resolver)\n"
    }

    // MARK: - Running

    /// Starts every program, and waits until each answers: the translators and NAT first (each
    /// done when its command returns), then every name server at once, then each is asked a
    /// question until it answers.
    package func start() throws(SimulatorError) {
        let directory = try makeRunDirectory()
        let internet = plan.nodes.first { $0.role == .internet }
        for network in plan.networks {
            let gateway = network.spec.gateway
            if let rules = Self.natRuleset(network) {
                try runToCompletion(["nft", "-f", "/dev/fd/3"], configuration: rules, in: gateway, what: "nft")
            }
            if network.spec.nat64 {
                try runToCompletion(["tayga", "--mktun", "-c", "/dev/fd/3"], configuration: Self.taygaConfiguration(), in: gateway, what: "tayga-mktun")
                try configureTranslator(in: gateway)
                try run(["tayga", "--nodetach", "-c", "/dev/fd/3"], configuration: Self.taygaConfiguration(), in: gateway, what: "tayga")
            }
        }
        var servers: [(address: IPAddress, node: String)] = []
        if let authoritative = Self.authoritativeConfiguration(plan), let internet {
            try run(["unbound", "-d", "-c", "/dev/fd/3"], configuration: authoritative, in: internet.name, what: "unbound")
            servers.append((internet.serviceIPv4, internet.name))
            if let namespace = topology.namespace(of: internet.name) {
                let responder = try ConnectivityResponder(addresses: [internet.serviceIPv4, internet.serviceIPv6], in: namespace)
                lock.withLock { _ in self.responder = responder }
            }
        }
        if let nameServer = internet?.serviceIPv4 {
            for network in plan.networks {
                let gateway = network.spec.gateway
                let configuration = Self.resolverConfiguration(network, nameServer: nameServer, control: directory.child("\(gateway)-unbound.ctl"))
                lock.withLock { _ in resolverConfigurations[gateway] = configuration }
                try run(["unbound", "-d", "-c", "/dev/fd/3"], configuration: configuration, in: gateway, what: "unbound")
                if let resolver = network.resolver { servers.append((resolver, gateway)) }
            }
        }
        for (address, node) in servers { try waitForDNS(at: address, from: node) }
        let phones = plan.nodes.filter { $0.interfaces.contains(where: { $0.routing == .phone }) }
        for node in phones {
            let networks = Set(plan.networks.filter { $0.spec.joinedAtStart.contains(node.name) }.map(\.spec.name))
            joined[node.name] = networks
            do throws(SafePathError) {
                let file = try directory.createFile(named: "\(node.name)-resolv.conf", mode: 0o644, replacing: false)
                try? file.close()
                lock.withLock { _ in resolvers[node.name] = directory.child("\(node.name)-resolv.conf") }
                try directory.rewriteFile(named: "\(node.name)-resolv.conf", contents: Array(Self.resolvConf(of: node, joined: networks, plan: plan).utf8))
            } catch {
                throw SimulatorError(.environment, "cannot write the resolv.conf of node '\(node.name)': \(error.message)")
            }
        }
    }

    /// `/run/roam/net-RUNID`, the run's own: its phones' resolv.conf and its resolvers' control sockets.
    private func makeRunDirectory() throws(SimulatorError) -> SecureDirectory {
        do throws(SafePathError) {
            let parent = try SecureDirectory.open(Self.stateDirectory, creating: 0o755, requirement: .ownedByCaller)
            let name = "net-\(plan.runID)"
            let directory = try parent.directory(named: name, creating: 0o700, requirement: .privateToCaller)
            lock.withLock { _ in runDirectory = (parent, directory, name) }
            return directory
        } catch {
            throw SimulatorError(.environment, "cannot make the run's directory for its networks: \(error.message)")
        }
    }

    /// Each gateway's resolver configuration (unbound-control reads it to find the socket); under `lock`.
    private var resolverConfigurations: [String: String] = [:]
    /// The fault on each gateway's resolver, and the relays that make some; under `lock`.
    private var dnsFaults: [String: TimelineEvent.Action] = [:]
    private var relays: [String: DNSFaultRelay] = [:]
    /// The internet's connectivity check.
    private var responder: ConnectivityResponder?

    package func apply(_ action: TimelineEvent.Action, link name: String) throws(SimulatorError) {
        guard let link = plan.link(name) else { throw SimulatorError(.invalidScenario, "no link '\(name)' in this run") }
        switch action {
        case .renumber:
            try topology.renumber(link: name)
        case .rebind:
            // The gateway's NAT forgets every mapping; the next packet of each flow gets a new one.
            try runToCompletion(["conntrack", "-F"], configuration: "", in: link.first, what: "conntrack")
        case .dns, .dnsDelay:
            // The fault on goes first: a new one takes its place.
            let gateway = link.first
            let current = lock.withLock { _ in dnsFaults.removeValue(forKey: gateway) }
            if let current { try clear(current, gateway: gateway) }
            switch action {
            case .dns(.timeout?):
                try runToCompletion(["nft", "-f", "/dev/fd/3"], configuration: Self.dnsTimeoutRuleset, in: gateway, what: "nft-dns")
            case .dns(let fault?) where fault == .nxdomain || fault == .refused:
                try control(gateway, ["local_zone", ".", fault == .nxdomain ? "always_nxdomain" : "always_refuse"])
            case .dns(.servfail?):
                try startRelay(.servfail, gateway: gateway)
            case .dnsDelay(let delay):
                try startRelay(.delay(delay), gateway: gateway)
            default:
                return
            }
            lock.withLock { _ in dnsFaults[gateway] = action }
        default:
            throw SimulatorError(.invalidScenario, "'\(name)': not a network event")
        }
    }

    /// Ends the resolver's fault `action` in `gateway`.
    private func clear(_ action: TimelineEvent.Action, gateway: String) throws(SimulatorError) {
        switch action {
        case .dns(.timeout?):
            try runToCompletion(["nft", "delete", "table", "inet", "roam-dns"], configuration: "", in: gateway, what: "nft-dns")
        case .dns(.nxdomain?), .dns(.refused?):
            try control(gateway, ["local_zone_remove", "."])
        case .dns(.servfail?), .dnsDelay:
            try runToCompletion(["nft", "delete", "table", "inet", "roam-dns-relay"], configuration: "", in: gateway, what: "nft-dns")
            lock.withLock { _ in relays.removeValue(forKey: gateway) }?.stop()
        default:
            break
        }
    }

    /// Puts a ``DNSFaultRelay`` between the phones of `gateway`'s network and its resolver.
    private func startRelay(_ mode: DNSFaultRelay.Mode, gateway: String) throws(SimulatorError) {
        guard let network = plan.networks.first(where: { $0.spec.gateway == gateway }), let namespace = topology.namespace(of: gateway) else {
            throw SimulatorError(.invalidScenario, "node '\(gateway)' is no network's gateway")
        }
        let resolvers = [network.gatewayIPv4, network.gatewayIPv6].compactMap { $0 }
        let relay = try DNSFaultRelay(mode: mode, resolvers: resolvers, in: namespace)
        lock.withLock { _ in relays[gateway] = relay }
        try runToCompletion(["nft", "-f", "/dev/fd/3"], configuration: DNSFaultRelay.ruleset(resolvers: resolvers), in: gateway, what: "nft-dns")
    }

    /// Runs unbound-control against the resolver of `gateway`.
    private func control(_ gateway: String, _ command: [String]) throws(SimulatorError) {
        guard let configuration = lock.withLock({ _ in resolverConfigurations[gateway] }) else {
            throw SimulatorError(.invalidScenario, "node '\(gateway)' runs no resolver")
        }
        try runToCompletion(["unbound-control", "-c", "/dev/fd/3"] + command, configuration: configuration, in: gateway, what: "unbound-control")
    }

    /// The resolv.conf of `node`, if it is a phone of a network: commands in the node see it at
    /// /etc/resolv.conf, and its path monitor reads it.
    package func resolvConfPath(of node: String) -> String? { lock.withLock { _ in resolvers[node] } }

    /// How a phone's monitor validates its networks: the internet's connectivity check, each
    /// network's interface asking that network's resolver (nil: `node` is no phone of a network).
    package func validation(of node: String) -> ConnectivityValidation? {
        guard plan.node(node) != nil, resolvConfPath(of: node) != nil else { return nil }
        var validation = ConnectivityValidation(url: "http://\(ConnectivityResponder.name)\(ConnectivityResponder.path)",
                                                timeout: .seconds(2), interval: Self.validationInterval)
        for network in plan.networks where network.spec.members.contains(node) {
            if let resolver = network.resolver { validation.interfaceResolvers[network.spec.name] = [resolver] }
        }
        return validation
    }

    /// How often a phone checks a validated network again in a run: scenarios are short.
    static let validationInterval = Duration.seconds(30)

    /// The name servers of `node` now: those its resolv.conf names (its primary network's).
    package func nameServers(of node: String) -> [IPAddress] {
        guard let planned = plan.node(node) else { return [] }
        let text = lock.withLock { _ in Self.resolvConf(of: planned, joined: reachableNetworks(of: node), plan: plan) }
        return ResolverConfiguration(parsing: text).nameservers.map(\.address)
    }

    /// A phone joins or leaves a network. Its resolver moves before the network goes (and after
    /// it comes): a lookup started as the path monitor publishes the change never asks a
    /// resolver the phone can no longer reach.
    package func setMembership(_ joined: Bool, link: String) throws(SimulatorError) {
        guard let (node, network) = accessOf(link) else {
            try topology.setMembership(joined, link: link)
            return
        }
        if joined { try topology.setMembership(true, link: link) }
        lock.withLock { _ in
            if joined { self.joined[node.name, default: []].insert(network.spec.name) } else { self.joined[node.name, default: []].remove(network.spec.name) }
        }
        try rewriteResolvConf(of: node)
        if !joined { try topology.setMembership(false, link: link) }
    }

    /// A phone's network whose radio lost its carrier is not one it can ask: its resolver moves to
    /// the next network it has joined, as NetworkManager takes a device's DNS away with its link.
    package func carrierChanged(_ up: Bool, link: String) throws(SimulatorError) {
        guard let (node, _) = accessOf(link) else { return }
        lock.withLock { _ in
            if up { carrierDown.remove(link) } else { carrierDown.insert(link) }
        }
        try rewriteResolvConf(of: node)
    }

    /// The phone and the network of an access link.
    private func accessOf(_ link: String) -> (TopologyPlan.Node, TopologyPlan.NetworkPlan)? {
        guard let planned = plan.link(link), let node = plan.node(planned.first),
              let network = plan.networks.first(where: { NetworkSpec.accessLinkName(network: $0.spec.name, node: node.name) == link }) else { return nil }
        return (node, network)
    }

    /// The networks `node` has joined whose radio has its carrier; under `lock`.
    private func reachableNetworks(of node: String) -> Set<String> {
        (joined[node] ?? []).filter { !carrierDown.contains(NetworkSpec.accessLinkName(network: $0, node: node)) }
    }

    /// Writes `node`'s resolv.conf as its networks are now.
    private func rewriteResolvConf(of node: TopologyPlan.Node) throws(SimulatorError) {
        let contents = lock.withLock { _ in Self.resolvConf(of: node, joined: reachableNetworks(of: node.name), plan: plan) }
        if let directory = lock.withLock({ _ in runDirectory?.directory }), resolvConfPath(of: node.name) != nil {
            do throws(SafePathError) {
                try directory.rewriteFile(named: "\(node.name)-resolv.conf", contents: Array(contents.utf8))
            } catch {
                throw SimulatorError(.environment, "cannot rewrite the resolv.conf of node '\(node.name)': \(error.message)")
            }
        }
    }

    /// Stops every program (SIGTERM, SIGKILL after a second) and closes the resolv.conf files.
    package func stop() {
        let running = lock.withLock { _ -> [(pid: pid_t, what: String)] in
            defer { processes = [] }
            return processes
        }
        for relay in lock.withLock({ _ in relays.values }) { relay.stop() }
        lock.withLock { _ in relays = [:] }
        lock.withLock { _ in
            defer { responder = nil }
            return responder
        }?.stop()
        for process in running { kill(-process.pid, SIGTERM) }
        let deadline = MonotonicInstant.now + .seconds(1)
        for process in running {
            var status: Int32 = 0
            while waitpid(process.pid, &status, WNOHANG) == 0 {
                if MonotonicInstant.now >= deadline {
                    kill(-process.pid, SIGKILL)
                    _ = waitpid(process.pid, &status, 0)
                    break
                }
                usleep(10_000)
            }
            watchdog.forget(process.pid)
        }
        lock.withLock { _ in
            if let (parent, directory, name) = runDirectory {
                for node in resolvers.keys { try? directory.removeFile(named: "\(node)-resolv.conf") }
                for gateway in resolverConfigurations.keys { try? directory.removeFile(named: "\(gateway)-unbound.ctl") }
                try? parent.removeDirectory(named: name)
            }
            resolvers = [:]
            runDirectory = nil
        }
    }

    deinit { stop() }

    /// The directories the programs are looked for in: `ROAM_NETWORK_PATH` when set, else `PATH`
    /// and then the system's sbin directories (which an ordinary user's `PATH` often lacks).
    static var searchPath: [String] {
        if let path = getenv("ROAM_NETWORK_PATH").map({ String(cString: $0) }) { return path.split(separator: ":").map(String.init) }
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        return path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    }

    /// The program `name` as a path, from ``searchPath``.
    static func locate(_ name: String) -> String? {
        for directory in searchPath where directory.hasPrefix("/") {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private func spawn(_ arguments: [String], configuration: String, in node: String, what: String) throws(SimulatorError) -> pid_t {
        guard let namespace = topology.namespace(of: node) else { throw SimulatorError(.invalidScenario, "node '\(node)' was not built") }
        guard let program = Self.locate(arguments[0]) else {
            throw SimulatorError(.environment, "cannot run \(arguments[0]) in node '\(node)' for its network: not installed (scripts/setup.sh "
                + "installs it: nftables, unbound, tayga, conntrack; looked in \(Self.searchPath.joined(separator: ":")))")
        }
        let arguments = [program] + arguments.dropFirst()
        let output: FileDescriptor
        do throws(SafePathError) {
            output = try report.createFile(named: "network-\(node)-\(what).log")
        } catch {
            throw SimulatorError(.environment, "cannot write the output of \(arguments[0]) in node '\(node)': \(error.message)")
        }
        defer { try? output.close() }
        let config: FileDescriptor
        do throws(Errno) {
            config = try makeMemoryFile(named: "roam-\(what).conf", contents: configuration)
        } catch {
            throw SimulatorError(.environment, "cannot hold the configuration of \(arguments[0]): \(error)")
        }
        defer { try? config.close() }
        let result: Result<pid_t, Errno>
        do {
            result = try namespace.perform {
                Result { () throws(Errno) in
                    try spawnProcess(arguments, environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], standardOutput: output, standardError: output,
                                     newProcessGroup: true, inheriting: [(config, 3)])
                }
            }
        } catch {
            throw SimulatorError(.environment, "cannot enter node '\(node)' to run \(arguments[0]): \(error)")
        }
        switch result {
        case .success(let pid):
            watchdog.watch(pid)
            return pid
        case .failure(let error):
            throw SimulatorError(.environment, "cannot run \(arguments[0]) in node '\(node)' for its network: \(error)")
        }
    }

    private func run(_ arguments: [String], configuration: String, in node: String, what: String) throws(SimulatorError) {
        let pid = try spawn(arguments, configuration: configuration, in: node, what: what)
        lock.withLock { _ in processes.append((pid, "\(arguments[0]) in \(node)")) }
    }

    private func runToCompletion(_ arguments: [String], configuration: String, in node: String, what: String) throws(SimulatorError) {
        let pid = try spawn(arguments, configuration: configuration, in: node, what: what)
        let status = try? waitForExit(pid)
        watchdog.forget(pid)
        guard status?.code == 0 else {
            let log = (try? report.readFile(named: "network-\(node)-\(what).log", maximumBytes: 2048)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            throw SimulatorError(.environment, "\(arguments.joined(separator: " ")) failed in node '\(node)'"
                + (log.isEmpty ? "" : ": \(escapedForMessage(log.trimmingCharacters(in: .whitespacesAndNewlines), maximumLength: 400))"))
        }
    }

    /// The gateway's routes into tayga: the NAT64 prefix and the pool.
    private func configureTranslator(in gateway: String) throws(SimulatorError) {
        guard let socket = topology.routeSocket(of: gateway) else { return }
        do throws(NetlinkError) {
            guard let tun = try socket.link(named: "nat64") else { throw NetlinkError(.errno(ENODEV), operation: "find nat64") }
            try socket.setLink(index: tun.index, up: true, alias: nil, mtu: nil, name: nil)
            try socket.addRoute(.direct(to: TopologyPlan.nat64Prefix, interfaceIndex: tun.index), replace: true)
            try socket.addRoute(.direct(to: TopologyPlan.nat64Pool, interfaceIndex: tun.index), replace: true)
        } catch {
            throw SimulatorError("route into NAT64 in node '\(gateway)'", error)
        }
    }

    /// Waits until the name server at `address` answers a query from `node`.
    private func waitForDNS(at address: IPAddress, from node: String) throws(SimulatorError) {
        guard let namespace = topology.namespace(of: node) else { return }
        let deadline = MonotonicInstant.now + Self.readinessTimeout
        let answered = (try? namespace.perform { () -> Bool in
            while MonotonicInstant.now < deadline {
                if DNSProbe.answers(address, name: "ipv4only.arpa", timeout: .milliseconds(200)) { return true }
                usleep(5_000)
            }
            return false
        }) ?? false
        guard answered else {
            throw SimulatorError(.environment, "the name server at \(address) in node '\(node)' did not answer within "
                + "\(Self.readinessTimeout.roamDescription); see network-\(node)-unbound.log in the report")
        }
    }
}

/// A DNS query over UDP, for readiness checks and tests.
package enum DNSProbe {
    /// The query for `name` (type A, recursion desired) with id `id`.
    package static func query(_ name: String, id: UInt16 = 0x526f, type: UInt16 = 1) -> [UInt8] {
        DNSMessage.query(name, id: id, type: type)
    }

    /// Whether a name server at `address` answers a query for `name` (any response code) within
    /// `timeout`. The socket is connected, so that a port nobody listens on yet (ICMP port
    /// unreachable) ends the wait at once instead of at the timeout.
    package static func answers(_ address: IPAddress, name: String, timeout: Duration) -> Bool {
        let family = address.family == .inet ? AF_INET : AF_INET6
        let descriptor = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let connected = address.withSocketAddress(port: 53) { pointer, length in connect(descriptor, pointer, length) }
        guard connected == 0 else { return false }
        let query = query(name)
        let sent = query.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        guard sent == query.count else { return false }
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&poller, 1, milliseconds) == 1, poller.revents & Int16(POLLIN) != 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        return count >= 12 && buffer[0] == query[0] && buffer[1] == query[1] && buffer[2] & 0x80 != 0
    }
}
