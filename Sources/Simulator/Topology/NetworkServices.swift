import CRoamLinux
import Glibc
import RoamCore
import Netlink
import PathMonitor
import RoamReport
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

    /// How long a program has to answer before the run gives up on it, while it runs (one that
    /// exits is reported at once). Generous: unbound's first start in a VM without KVM, reading
    /// its libraries cold, has taken over 10 s.
    static let readinessTimeout = Duration.seconds(60)

    /// The workloads whose traffic a captive portal counts: the index (its counter's name and,
    /// from it, its server's port) and the node its client runs in.
    private let countedWorkloads: [(index: Int, client: String, port: UInt16)]

    package init(plan: TopologyPlan, topology: Topology, report: SecureDirectory, watchdog: ProcessGroupWatchdog,
                 countedWorkloads: [(index: Int, client: String, port: UInt16)] = []) {
        self.plan = plan
        self.topology = topology
        self.report = report
        self.watchdog = watchdog
        self.countedWorkloads = countedWorkloads
        // Each phone's addresses on its networks, for the portals to know who asks.
        for network in plan.networks {
            for member in network.spec.members {
                let link = NetworkSpec.accessLinkName(network: network.spec.name, node: member)
                guard let interface = plan.node(member)?.interfaces.first(where: { $0.link == link }) else { continue }
                for address in interface.addresses where !address.address.isLinkLocal { members[address.address] = link }
            }
        }
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
        if network.spec.portal != nil {
            // The portal's page and API, at the gateway.
            text += [network.gatewayIPv4.map { "\(CaptivePortal.host). 60 IN A \($0)" }, network.gatewayIPv6.map { "\(CaptivePortal.host). 60 IN AAAA \($0)" }]
                .compactMap { $0 }.map { "  local-data: \"\($0)\"\n" }.joined()
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

    /// A captive portal's nftables table in its gateway: the set of logged-in phones (by the
    /// gateway's interface to each: a portal knows a phone by its MAC address, which stays when
    /// it is renumbered); for the others, HTTP to anywhere but the gateway goes to the portal's
    /// server (DNAT to port 80 of the gateway), DNS to the hijacking relay when the portal
    /// hijacks it, and whatever else the gateway would forward is dropped or refused. `counters`
    /// name, for each counted workload, the access interface of its client and its server's port:
    /// what the phone sends toward that port on connections it opened (or tried to) while held is
    /// counted, before any DNAT.
    package static func portalRuleset(_ network: TopologyPlan.NetworkPlan, accessInterfaces: [String],
                                      counters: [(name: String, interface: String, port: UInt16)] = []) -> String? {
        guard let portal = network.spec.portal, !accessInterfaces.isEmpty else { return nil }
        let phones = "{ " + accessInterfaces.map { "\"\($0)\"" }.joined(separator: ", ") + " }"
        var nat = "    iifname @allowed return\n"
        if let v4 = network.gatewayIPv4 {
            nat += "    iifname \(phones) ip daddr != \(v4) tcp dport 80 dnat ip to \(v4):80\n"
        }
        if let v6 = network.gatewayIPv6 {
            nat += "    iifname \(phones) ip6 daddr != \(v6) tcp dport 80 dnat ip6 to [\(v6)]:80\n"
        }
        if portal.dns == .hijack {
            if let v4 = network.gatewayIPv4 {
                nat += "    iifname \(phones) meta nfproto ipv4 udp dport 53 dnat ip to \(v4):\(DNSFaultRelay.hijackPort)\n"
            }
            if let v6 = network.gatewayIPv6 {
                nat += "    iifname \(phones) meta nfproto ipv6 udp dport 53 dnat ip6 to [\(v6)]:\(DNSFaultRelay.hijackPort)\n"
            }
        }
        let block = portal.others == .drop ? "drop" : "meta l4proto tcp reject with tcp reset\n    iifname \(phones) reject with icmpx admin-prohibited"
        // A connection opened (or tried: each SYN the portal drops is a new one) while the portal
        // holds the phone is marked; its packets are counted, what the phone sent on connections
        // it had before is not.
        var counting = counters.isEmpty ? "" : "    ct state new iifname \(phones) iifname != @allowed ct mark set \(portalMark)\n"
        for counter in counters {
            counting += "    ct mark \(portalMark) iifname \"\(counter.interface)\" tcp dport \(counter.port) counter name \"\(counter.name)\"\n"
        }
        return """
            table inet roam-portal {
              set allowed {
                type ifname
              }
            \(counters.map { "  counter \($0.name) {\n  }\n" }.joined())  chain count {
                type filter hook prerouting priority mangle; policy accept;
            \(counting)  }
              chain prerouting {
                type nat hook prerouting priority dstnat - 10; policy accept;
            \(nat)  }
              chain forward {
                type filter hook forward priority filter; policy accept;
                iifname @allowed accept
                iifname \(phones) \(block)
              }
            }

            """
    }

    /// The conntrack mark of a connection a phone opened while a portal held it ("RP").
    static let portalMark = "0x5250"

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
        for network in plan.networks where network.spec.portal != nil {
            try startPortal(network)
        }
        var servers: [(address: IPAddress, node: String, pid: pid_t)] = []
        if let authoritative = Self.authoritativeConfiguration(plan), let internet {
            let pid = try run(["unbound", "-d", "-c", "/dev/fd/3"], configuration: authoritative, in: internet.name, what: "unbound")
            servers.append((internet.serviceIPv4, internet.name, pid))
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
                let pid = try run(["unbound", "-d", "-c", "/dev/fd/3"], configuration: configuration, in: gateway, what: "unbound")
                if let resolver = network.resolver { servers.append((resolver, gateway, pid)) }
            }
        }
        for (address, node, pid) in servers { try waitForDNS(at: address, from: node, served: pid) }
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
            let addresses = try topology.renumber(link: name)
            lock.withLock { _ in
                members = members.filter { $0.value != name }
                for address in addresses where !address.address.isLinkLocal { members[address.address] = name }
            }
        case .portal(let login):
            guard let portal = lock.withLock({ _ in portals[link.second] }) else {
                throw SimulatorError(.invalidScenario, "network of '\(name)' has no captive portal")
            }
            portal.set(login, link: name)
            if let failure = lock.withLock({ _ in portalFailures.removeValue(forKey: name) }) { throw failure }
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
            // The relay first: its last answers (what a delay held) go back through the entries.
            lock.withLock { _ in relays.removeValue(forKey: gateway) }?.stop()
            try forgetQueries(in: gateway)
        default:
            break
        }
    }

    // MARK: - Captive portals

    /// Each portal network's server, by gateway; the hijacking DNS relays; each phone's address
    /// on its networks (its access link); under `lock`.
    private var portals: [String: CaptivePortalServer] = [:]
    private var hijackers: [DNSFaultRelay] = []
    private var members: [IPAddress: String] = [:]
    /// A change of a session that could not be carried out, for the timeline event that made it.
    private var portalFailures: [String: SimulatorError] = [:]
    /// Where portal changes not made by the timeline are recorded, once the run's log exists.
    private var portalLog: RunLog?
    /// Told of each login: the run has the phone's monitor check the network again, as a
    /// phone's captive-portal sheet does once the user is through.
    private var loginObserver: (@Sendable (_ node: String, _ network: String) -> Void)?

    /// Records the portals' changes in `log` from now on, and that each member starts held.
    package func attach(_ log: RunLog) {
        lock.withLock { _ in portalLog = log }
        for network in plan.networks where network.spec.portal != nil {
            for member in network.spec.members {
                log.record(.link(RunEvent.LinkChange(link: NetworkSpec.accessLinkName(network: network.spec.name, node: member), action: "portal",
                                                     kind: .network("held by the captive portal of \(network.spec.name)"))), at: .zero)
            }
        }
    }

    /// Calls `observer` with each login from now on.
    package func observeLogins(_ observer: @escaping @Sendable (_ node: String, _ network: String) -> Void) {
        lock.withLock { _ in loginObserver = observer }
    }

    /// The access interfaces of `network`'s phones in its gateway.
    private func accessInterfaces(of network: TopologyPlan.NetworkPlan) -> [(link: String, interface: String, member: String)] {
        network.spec.members.compactMap { member in
            let name = NetworkSpec.accessLinkName(network: network.spec.name, node: member)
            return plan.link(name).map { (name, $0.secondInterface, member) }
        }
    }

    /// The counters of `network`'s portal: one per counted workload whose client is its member.
    private func portalCounters(of network: TopologyPlan.NetworkPlan) -> [(name: String, interface: String, port: UInt16)] {
        let interfaces = Dictionary(accessInterfaces(of: network).map { ($0.member, $0.interface) }, uniquingKeysWith: { first, _ in first })
        return countedWorkloads.compactMap { workload in
            interfaces[workload.client].map { ("w\(workload.index)", $0, workload.port) }
        }
    }

    private func startPortal(_ network: TopologyPlan.NetworkPlan) throws(SimulatorError) {
        guard let portal = network.spec.portal, let namespace = topology.namespace(of: network.spec.gateway) else { return }
        let gateway = network.spec.gateway
        let access = accessInterfaces(of: network)
        guard let rules = Self.portalRuleset(network, accessInterfaces: access.map(\.interface), counters: portalCounters(of: network)) else { return }
        try runToCompletion(["nft", "-f", "/dev/fd/3"], configuration: rules, in: gateway, what: "nft-portal")
        let addresses = [network.gatewayIPv4, network.gatewayIPv6].compactMap { $0 }
        if portal.dns == .hijack {
            let relay = try DNSFaultRelay(mode: .hijack(ipv4: network.gatewayIPv4, ipv6: network.gatewayIPv6), resolvers: addresses, in: namespace,
                                          port: DNSFaultRelay.hijackPort)
            lock.withLock { _ in hijackers.append(relay) }
        }
        let interfaceOf = Dictionary(access.map { ($0.link, $0.interface) }, uniquingKeysWith: { first, _ in first })
        let nodeOf = Dictionary(access.map { ($0.link, $0.member) }, uniquingKeysWith: { first, _ in first })
        let server = try CaptivePortalServer(
            portal: portal, network: network.spec.name, addresses: addresses, in: namespace,
            member: { [weak self] address in
                guard let self else { return nil }
                return self.lock.withLock { _ in self.members[address] }
            },
            apply: { [weak self] change in
                guard let self, let interface = interfaceOf[change.link] else { return }
                let element = "add element inet roam-portal allowed { \"\(interface)\" }\n"
                do throws(SimulatorError) {
                    try self.runToCompletion(["nft", "-f", "/dev/fd/3"], configuration: change.loggedIn ? element : "delete" + element.dropFirst(3),
                                             in: gateway, what: "nft-portal-session")
                    // The hijack's DNAT acts on a flow's first packet only: a stub that keeps
                    // its port would go on to the hijacker after the login (or past it after the
                    // logout) until its entry expired. Forgotten, its next query is NATed anew.
                    if portal.dns == .hijack { try self.forgetQueries(in: gateway) }
                } catch {
                    self.lock.withLock { _ in self.portalFailures[change.link] = error }
                }
                let (log, observer) = self.lock.withLock { _ in (self.portalLog, self.loginObserver) }
                if change.cause != .timeline {
                    log?.record(.link(RunEvent.LinkChange(link: change.link, action: "portal",
                                                          kind: .network("\(change.loggedIn ? "login" : "logout") \(change.cause)"))))
                }
                if change.loggedIn, change.cause != .expiry, let node = nodeOf[change.link] { observer?(node, network.spec.name) }
            })
        lock.withLock { _ in portals[gateway] = server }
    }

    /// What each network's portal counted of each counted workload while it held the workload's
    /// client: by workload index, then network. Read from the gateways' nftables counters.
    package func portalCounts() -> [Int: [String: (bytes: Int64, packets: Int64)]] {
        var counts: [Int: [String: (bytes: Int64, packets: Int64)]] = [:]
        for network in plan.networks where network.spec.portal != nil && !portalCounters(of: network).isEmpty {
            let gateway = network.spec.gateway
            guard (try? runToCompletion(["nft", "-j", "list", "counters", "table", "inet", "roam-portal"], configuration: "", in: gateway,
                                        what: "nft-portal-counters")) != nil,
                  let output = try? report.readFile(named: "network-\(gateway)-nft-portal-counters.log", maximumBytes: 1 << 20),
                  let json = try? JSONValue.parse(String(decoding: output, as: UTF8.self)),
                  case .array(let items)? = json["nftables"] else { continue }
            for item in items {
                guard let counter = item["counter"], let name = counter["name"]?.stringValue, name.hasPrefix("w"),
                      let index = Int(name.dropFirst()), case .int(let bytes)? = counter["bytes"], case .int(let packets)? = counter["packets"] else { continue }
                counts[index, default: [:]][network.spec.name] = (bytes, packets)
            }
        }
        return counts
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
        try forgetQueries(in: gateway)
    }

    /// Deletes the gateway's conntrack entries of UDP queries to port 53, once the relay's DNAT
    /// rule goes in or out: NAT rules apply to a flow's first packet only, so a query from a
    /// source port that asked in the last 30 s (a stub resolver that keeps its socket, as
    /// systemd-resolved and dnsmasq do, or a random port that happened to repeat) would go on to
    /// where its entry points: past the fault, or to a relay that is gone. (`conntrack -D` exits
    /// 1 when there was none.)
    private func forgetQueries(in gateway: String) throws(SimulatorError) {
        try runToCompletion(["conntrack", "-D", "-p", "udp", "--orig-port-dst", "53"], configuration: "", in: gateway, what: "conntrack-dns",
                            succeeding: [0, 1])
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
            // What the network's DHCP or RA would announce (RFC 8910).
            if network.spec.portal?.announcesAPI == true { validation.interfacePortalAPIs[network.spec.name] = CaptivePortalHTTP.apiURL }
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
        for relay in lock.withLock({ _ in Array(relays.values) + hijackers }) { relay.stop() }
        for portal in lock.withLock({ _ in portals.values }) { portal.stop() }
        lock.withLock { _ in
            relays = [:]
            hijackers = []
            portals = [:]
        }
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
    package static var searchPath: [String] {
        if let path = getenv("ROAM_NETWORK_PATH").map({ String(cString: $0) }) { return path.split(separator: ":").map(String.init) }
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        return path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    }

    /// The program `name` as a path, from `directories` (``searchPath``). As the host's root
    /// (`asHostRoot`), only a program that no one but root can replace is taken: the file and
    /// every directory up to it, as named and as resolved, root's and written by no one else
    /// (a `ROAM_NETWORK_PATH` or `PATH` entry another user can write would otherwise run that
    /// user's `nft` as root); the resolved path is returned, so that no link is looked up again.
    package static func locate(_ name: String, in directories: [String] = searchPath, asHostRoot: Bool = Rootless.isHostRoot) -> String? {
        for directory in directories where directory.hasPrefix("/") {
            let candidate = directory + "/" + name
            guard access(candidate, X_OK) == 0 else { continue }
            guard asHostRoot else { return candidate }
            if let trusted = rootOwned(candidate) { return trusted }
        }
        return nil
    }

    /// `path` resolved, when it and every directory up to it (as named and as resolved) are
    /// root's and written by no one else, and it is a regular file; nil otherwise.
    static func rootOwned(_ path: String) -> String? {
        guard let resolvedPointer = realpath(path, nil) else { return nil }
        let resolved = String(cString: resolvedPointer)
        free(resolvedPointer)
        func chainIsRoots(_ path: String) -> Bool {
            var prefix = ""
            for component in [""] + path.split(separator: "/").map(String.init) {
                prefix = component.isEmpty ? "/" : (prefix == "/" ? "/" : prefix + "/") + component
                var status = stat()
                guard lstat(prefix, &status) == 0, status.st_uid == 0 else { return false }
                // A link's own mode means nothing; a directory's or a file's must not let others
                // write, but for a sticky directory (/tmp), where no one but its owner, root
                // (checked next), can rename or remove the entry that follows.
                let type = status.st_mode & S_IFMT
                if type != S_IFLNK, status.st_mode & 0o022 != 0, !(type == S_IFDIR && status.st_mode & S_ISVTX != 0) { return false }
            }
            return true
        }
        var status = stat()
        guard chainIsRoots(path), chainIsRoots(resolved), lstat(resolved, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
        return resolved
    }

    private func spawn(_ arguments: [String], configuration: String, in node: String, what: String) throws(SimulatorError) -> pid_t {
        guard let namespace = topology.namespace(of: node) else { throw SimulatorError(.invalidScenario, "node '\(node)' was not built") }
        guard let program = Self.locate(arguments[0]) else {
            throw SimulatorError(.environment, "cannot run \(arguments[0]) in node '\(node)' for its network: not installed (scripts/setup.sh "
                + "installs it: nftables, unbound, tayga, conntrack; looked in \(Self.searchPath.joined(separator: ":"))"
                + (Rootless.isHostRoot ? "; as root, only a program that root owns in directories only root can write" : "") + ")")
        }
        let arguments = [program] + arguments.dropFirst()
        let output: FileDescriptor
        do throws(SafePathError) {
            output = try report.createFile(named: "network-\(node)-\(what).log", mode: RunReportFiles.mode)
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

    @discardableResult
    private func run(_ arguments: [String], configuration: String, in node: String, what: String) throws(SimulatorError) -> pid_t {
        let pid = try spawn(arguments, configuration: configuration, in: node, what: what)
        lock.withLock { _ in processes.append((pid, "\(arguments[0]) in \(node)")) }
        return pid
    }

    private func runToCompletion(_ arguments: [String], configuration: String, in node: String, what: String,
                                 succeeding: Set<Int32> = [0]) throws(SimulatorError) {
        let pid = try spawn(arguments, configuration: configuration, in: node, what: what)
        let status = try? waitForExit(pid)
        watchdog.forget(pid)
        guard let code = status?.code, succeeding.contains(code) else {
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

    /// Waits until the name server at `address` answers a query from `node`, while `pid` (its
    /// unbound) runs: one that exits is reported at once, with its log.
    private func waitForDNS(at address: IPAddress, from node: String, served pid: pid_t) throws(SimulatorError) {
        guard let namespace = topology.namespace(of: node) else { return }
        let deadline = MonotonicInstant.now + Self.readinessTimeout
        enum Outcome { case answered, exited, timedOut }
        let outcome = (try? namespace.perform { () -> Outcome in
            while MonotonicInstant.now < deadline {
                if DNSProbe.answers(address, name: "ipv4only.arpa", timeout: .milliseconds(200)) { return .answered }
                if hasExited(pid) { return .exited }
                usleep(5_000)
            }
            return .timedOut
        }) ?? .timedOut
        switch outcome {
        case .answered:
            return
        case .exited:
            let log = (try? report.readFile(named: "network-\(node)-unbound.log", maximumBytes: 2048)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            throw SimulatorError(.environment, "the name server for \(address) in node '\(node)' (unbound) exited before it answered"
                + (log.isEmpty ? "" : ": \(escapedForMessage(log.trimmingCharacters(in: .whitespacesAndNewlines), maximumLength: 400))")
                + "; see network-\(node)-unbound.log in the report")
        case .timedOut:
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
