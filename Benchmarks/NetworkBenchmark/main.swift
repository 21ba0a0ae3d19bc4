// Network benchmark: what networks (gateways, NAT, NAT64, resolvers) cost, side by side with a
// reference in the same run.
//
// 1. Setup + teardown of a 2-network scenario: Roam's topology against the same built by a
//    shell script of `ip` commands; then with the networks' programs (nftables, tayga, three
//    unbound), Roam's against the script's (the same programs, readiness polled over /dev/udp).
// 2. What each gateway adds: ping round trips and a TCP transfer from the phone to the server,
//    through NAT44 and through NAT64, against the same gateway routing IPv6 untranslated.
// 3. From a leave, a renumber and a carrier loss of the same interface to the phone's path
//    monitor publishing it.
// 4. From the same events to a stream's first byte after them: plain TCP, application-level
//    handover and MPTCP, each a whole scenario played by ScenarioRunner.
// 5. Captive portals: what a connectivity probe costs, per hour beside NetworkManager's and
//    Android's schedules; from a portal network's join, a login and a session's end to the phone's
//    monitor publishing each; and bundled hotel-wifi's failed requests, handover against curl.
//
//   swift build -c release --product NetworkBenchmark && .build/release/NetworkBenchmark
//   options: --quick (fewer rounds, to check that it runs)
//
// Needs root, nft, unbound and tayga (scripts/setup.sh). Everything it makes is in namespaces
// named roam-RUNID-* and in /run/roam/net-RUNID, removed at the end.
import Foundation
import Glibc
import Netlink
import PathMonitor
import RoamSystem
import ScenarioModel
import Simulator
import SystemPackage

/// What a failure undoes before the benchmark exits (the running network, the scratch directory).
nonisolated(unsafe) var cleanups: [() -> Void] = []

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("NetworkBenchmark: \(message)\n".utf8))
    for cleanup in cleanups.reversed() { cleanup() }
    exit(2)
}

/// A line of the report, written at once (a table row is not left in a buffer when a later step fails).
func say(_ line: String = "") { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let quick = CommandLine.arguments.contains("--quick")
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }

let yaml = """
    name: two-networks
    duration: 60s
    nodes:
      phone: {}
      api: { internet: { names: [api.example.test] } }
    networks:
      - { name: cafe, type: wifi, ipv4: nat44, members: [phone] }
      - { name: lte, type: cellular, ipv4: none, nat64: true, members: [phone] }
    """
let outcome = ScenarioReader.parse(yaml, file: "benchmark.yaml")
guard let twoNetworks = outcome.scenario else { fail(outcome.diagnostics.map(\.description).joined(separator: "\n")) }

func plan() -> TopologyPlan {
    do { return try TopologyPlan(scenario: twoNetworks, runID: RunRegistry.newRunID()) } catch { fail("\(error)") }
}

let scratch: String = {
    var template = Array("/tmp/roam-network-bench-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { fail("cannot make a scratch directory") }
    return String(cString: made)
}()
cleanups.append { _ = system("rm -rf '\(scratch)'") }
defer { _ = system("rm -rf '\(scratch)'") }
let report: SecureDirectory = {
    do throws(SafePathError) { return try SecureDirectory.open(scratch) } catch { fail(error.message) }
}()
let watchdog = ProcessGroupWatchdog()

func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func format(_ duration: Duration) -> String {
    let ms = milliseconds(duration)
    return ms >= 1000 ? String(format: "%.2f s", ms / 1000) : String(format: "%.1f ms", ms)
}

func ratio(_ reference: Duration, _ roam: Duration) -> String { String(format: "%.1f×", milliseconds(reference) / milliseconds(roam)) }

// MARK: - 1. Setup and teardown

/// The plan as a script of `ip` commands (and, with `services`, the same programs Roam starts).
func script(for plan: TopologyPlan, services: Bool) -> String {
    var lines = ["set -e"]
    let sysctls = Topology.nodeSysctls.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    for node in plan.nodes {
        let ns = node.namespaceName
        lines += ["ip netns add \(ns)", "ip -n \(ns) link set lo up", "ip -n \(ns) addr add \(node.serviceIPv4)/32 dev lo",
                  "ip -n \(ns) addr add \(node.serviceIPv6)/128 dev lo nodad", "ip netns exec \(ns) sysctl -q -w \(sysctls)"]
    }
    for link in plan.links {
        lines.append("ip -n \(plan.node(link.first)!.namespaceName) link add \(link.firstInterface) type veth peer name \(link.secondInterface) netns \(plan.node(link.second)!.namespaceName)")
    }
    for node in plan.nodes {
        for interface in node.interfaces { lines.append("ip -n \(node.namespaceName) link set \(interface.name) up alias '\(interface.alias)'") }
    }
    for node in plan.nodes {
        for interface in node.interfaces {
            for prefix in interface.addresses { lines.append("ip -n \(node.namespaceName) addr add \(prefix) dev \(interface.name)\(prefix.address.family == .inet6 ? " nodad" : "")") }
        }
    }
    for node in plan.nodes {
        let ns = node.namespaceName
        for interface in node.interfaces {
            for (address, peer) in [(interface.ipv4, interface.peerIPv4), (interface.ipv6, interface.peerIPv6)]
            where interface.families.contains(address.address.family == .inet ? .ipv4 : .ipv6) {
                let family = address.address.family == .inet ? "-4" : "-6"
                let subnet = IPPrefix(address.address.masked(to: address.length), length: address.length)
                switch interface.routing {
                case .direct, .phone:
                    lines += ["ip \(family) -n \(ns) route add default via \(peer) dev \(interface.name) metric \(interface.metric)",
                              "ip \(family) -n \(ns) route replace \(subnet) dev \(interface.name) table \(interface.table.rawValue)",
                              "ip \(family) -n \(ns) route add default via \(peer) dev \(interface.name) table \(interface.table.rawValue)",
                              "ip \(family) -n \(ns) route add unreachable default metric \(UInt32.max) table \(interface.table.rawValue)",
                              "ip \(family) -n \(ns) rule add from \(address.address) table \(interface.table.rawValue) priority \(interface.rulePriority)"]
                case .gatewayAccess:
                    lines.append("ip \(family) -n \(ns) route replace \(peer) dev \(interface.name)")
                case .upstream:
                    lines.append("ip \(family) -n \(ns) route add default via \(peer) dev \(interface.name) metric \(interface.metric)")
                case .transit(let behind):
                    for prefix in behind where (prefix.address.family == .inet) == (family == "-4") {
                        lines.append("ip \(family) -n \(ns) route add \(prefix) via \(peer) dev \(interface.name) metric \(interface.metric)")
                    }
                }
            }
        }
    }
    guard services else { return lines.joined(separator: "\n") + "\n" }
    // The same programs, configurations and readiness as Roam's.
    func file(_ name: String, _ text: String) -> String {
        let path = "\(scratch)/\(name)"
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }
    let internet = plan.nodes.first { $0.role == .internet }!
    let query = DNSProbe.query("ipv4only.arpa").map { String(format: "\\x%02x", $0) }.joined()
    func wait(_ ns: String, _ address: IPAddress) -> String {
        // A query over bash's /dev/udp until an answer comes (20 ms apart, as Roam polls).
        """
        for i in $(seq 1 500); do ip netns exec \(ns) bash -c 'exec 3<>/dev/udp/\(address)/53; printf "\(query)" >&3; timeout 0.2 head -c 12 <&3 >/dev/null' && break; sleep 0.02; done
        """
    }
    lines.append("ip netns exec \(internet.namespaceName) unbound -d -c \(file("auth.conf", NetworkServices.authoritativeConfiguration(plan)!)) >/dev/null 2>&1 &")
    lines.append(wait(internet.namespaceName, internet.serviceIPv4))
    for network in plan.networks {
        let ns = plan.node(network.spec.gateway)!.namespaceName
        if let rules = NetworkServices.natRuleset(network) { lines.append("ip netns exec \(ns) nft -f \(file("\(network.spec.name).nft", rules))") }
        if network.spec.nat64 {
            let tayga = file("\(network.spec.name).tayga", NetworkServices.taygaConfiguration())
            lines += ["ip netns exec \(ns) tayga --mktun -c \(tayga) >/dev/null", "ip -n \(ns) link set nat64 up",
                      "ip -n \(ns) route add \(TopologyPlan.nat64Prefix) dev nat64", "ip -n \(ns) route add \(TopologyPlan.nat64Pool) dev nat64",
                      "ip netns exec \(ns) tayga --nodetach -c \(tayga) >/dev/null 2>&1 &"]
        }
        let resolver = file("\(network.spec.name).unbound", NetworkServices.resolverConfiguration(network, nameServer: internet.serviceIPv4))
        lines += ["ip netns exec \(ns) unbound -d -c \(resolver) >/dev/null 2>&1 &", wait(ns, network.resolver!)]
    }
    return lines.joined(separator: "\n") + "\n"
}

func teardownScript(for plan: TopologyPlan) -> String {
    // The programs first (by the namespaces they run in), then the namespaces.
    var lines: [String] = []
    for node in plan.nodes {
        lines.append("for pid in $(ip netns pids \(node.namespaceName) 2>/dev/null); do kill $pid; done")
    }
    for node in plan.nodes { lines.append("ip netns del \(node.namespaceName)") }
    return lines.joined(separator: "\n") + "\n"
}

/// Runs `arguments`; its output (and errors, when `errors`) when `capture`, else nothing of it.
/// Roam's own spawner: Foundation's Process waits on forever when a script leaves daemons behind.
func run(_ arguments: [String], capture: Bool) -> (status: TerminationStatus, output: String) {
    let null = FileDescriptor(rawValue: open("/dev/null", O_WRONLY | O_CLOEXEC))
    defer { try? null.close() }
    var pipe: (readEnd: FileDescriptor, writeEnd: FileDescriptor)?
    if capture { pipe = try? makePipe() }
    let pid: pid_t
    do {
        pid = try spawnProcess(arguments, environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], standardOutput: pipe?.writeEnd ?? null,
                               standardError: null, newProcessGroup: false)
    } catch { fail("cannot run \(arguments[0]): \(error)") }
    try? pipe?.writeEnd.close()
    var output: [UInt8] = []
    if let readEnd = pipe?.readEnd {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(readEnd.rawValue, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            output += buffer[..<count]
        }
        try? readEnd.close()
    }
    guard let status = try? waitForExit(pid) else { fail("cannot wait for \(arguments[0])") }
    return (status, String(decoding: output, as: UTF8.self))
}

func runScript(_ text: String) -> Duration {
    let path = "\(scratch)/script-\(getpid()).sh"
    guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else { fail("cannot write \(path)") }
    let clock = ContinuousClock()
    let start = clock.now
    let result = run(["/bin/bash", path], capture: false)
    guard result.status.code == 0 else { fail("the script failed (\(result.status)): \(path)") }
    return clock.now - start
}

say("Setup + teardown of two networks (a NAT44 Wi-Fi with IPv6, an IPv6-only LTE with NAT64) and a server:")
say("median of rounds; the same plan built by Roam and by a shell script, in one run")
say("")
say("| what | rounds | Roam | shell script | script / Roam |")
say("|---|---|---|---|---|")
let rounds = quick ? 1 : 10
for services in [false, true] {
    var roam: [Duration] = [], shell: [Duration] = []
    for _ in 0..<rounds {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let topology = try Topology.build(plan())
            if services {
                let running = NetworkServices(plan: topology.plan, topology: topology, report: report, watchdog: watchdog)
                try running.start()
                running.stop()
            }
            topology.teardown()
        } catch { fail("Roam's build failed: \(error)") }
        roam.append(clock.now - start)
        let reference = plan()
        shell.append(runScript(script(for: reference, services: services)) + runScript(teardownScript(for: reference)))
    }
    let label = services ? "namespaces, links, addresses, routes + nft, tayga, 3 × unbound (until each answers)" : "namespaces, links, addresses, routes"
    say("| \(label) | \(rounds) | \(format(median(roam))) | \(format(median(shell))) | \(ratio(median(shell), median(roam))) |")
}

// MARK: - A running network for 2 and 3

let running: (topology: Topology, services: NetworkServices) = {
    do {
        let topology = try Topology.build(plan())
        let services = NetworkServices(plan: topology.plan, topology: topology, report: report, watchdog: watchdog)
        try services.start()
        return (topology, services)
    } catch { fail("\(error)") }
}()
cleanups.append {
    running.services.stop()
    running.topology.teardown()
}
defer {
    running.services.stop()
    running.topology.teardown()
}
let network = running.topology.plan
let phone = network.node("phone")!, api = network.node("api")!
let phoneNamespace = phone.namespaceName, apiNamespace = api.namespaceName
var synthesized = TopologyPlan.nat64Prefix.address.bytes
synthesized.replaceSubrange(12..<16, with: api.serviceIPv4.bytes)
let nat64Address = IPAddress(bytes: synthesized)!

// MARK: - 2. What each gateway adds

func capture(_ arguments: [String]) -> String { run(["/usr/sbin/ip"] + arguments, capture: true).output }

/// The median round trip of `count` pings from the phone over `interface` to `address`.
func pingMedian(_ address: IPAddress, interface: String, count: Int) -> Double {
    let output = capture(["netns", "exec", phoneNamespace, "ping", "-n", "-c", "\(count)", "-i", "0.005", "-I", interface, "\(address)"])
    let times = output.split(separator: "\n").compactMap { line -> Double? in
        guard let range = line.range(of: "time=") else { return nil }
        return Double(line[range.upperBound...].prefix { $0 == "." || $0.isNumber })
    }.sorted()
    guard times.count >= count * 9 / 10 else { fail("ping \(address) over \(interface): \(times.count) of \(count) answered") }
    return times[times.count / 2]
}

/// Megabits a second of one TCP transfer of `megabytes` from the phone to the server.
func transfer(_ address: IPAddress, megabytes: Int) -> Double {
    let family = address.family == .inet ? "AF_INET" : "AF_INET6"
    let ready: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
    do { ready = try makePipe() } catch { fail("cannot make a pipe: \(error)") }
    let receiver: pid_t
    do {
        receiver = try spawnProcess(["/usr/sbin/ip", "netns", "exec", apiNamespace, "python3", "-c", """
            import socket
            s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("::", 5201)); s.listen(1); print("ready", flush=True)
            c, _ = s.accept()
            while c.recv(1 << 20): pass
            """], environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], standardOutput: ready.writeEnd, standardError: ready.writeEnd, newProcessGroup: false)
    } catch { fail("cannot start the receiver: \(error)") }
    try? ready.writeEnd.close()
    var byte: UInt8 = 0
    _ = Glibc.read(ready.readEnd.rawValue, &byte, 1)
    try? ready.readEnd.close()
    let output = capture(["netns", "exec", phoneNamespace, "python3", "-c", """
        import socket, time
        c = socket.socket(socket.\(family)); c.connect(("\(address)", 5201))
        block = b"x" * (1 << 20); start = time.monotonic()
        for _ in range(\(megabytes)): c.sendall(block)
        c.shutdown(socket.SHUT_WR); c.recv(1); print(time.monotonic() - start)
        """])
    _ = try? waitForExit(receiver)
    guard let seconds = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)), seconds > 0 else { fail("transfer to \(address): \(output)") }
    return Double(megabytes) * 8 * 1.048576 / seconds
}

let pings = quick ? 20 : 500
let megabytes = quick ? 5 : 200
say("")
say("What each gateway adds, from the phone to the server over veth pairs (no impairment): median ping")
say("round trip of \(pings), one TCP transfer of \(megabytes) MB; the reference is the same gateway routing IPv6")
say("")
say("| path | ping RTT | TCP | against routed IPv6 |")
say("|---|---|---|---|")
let routedCafe = (pingMedian(api.serviceIPv6, interface: "cafe", count: pings), transfer(api.serviceIPv6, megabytes: megabytes))
let nat44 = (pingMedian(api.serviceIPv4, interface: "cafe", count: pings), transfer(api.serviceIPv4, megabytes: megabytes))
say(String(format: "| cafe gateway, IPv6 routed | %.3f ms | %.0f Mbit/s | reference |", routedCafe.0, routedCafe.1))
say(String(format: "| cafe gateway, IPv4 through NAT44 | %.3f ms | %.0f Mbit/s | %+.3f ms, %.2f× the throughput |", nat44.0, nat44.1,
             nat44.0 - routedCafe.0, nat44.1 / routedCafe.1))
// The LTE network: taken by binding to its interface (the phone's main table prefers the cafe).
let routedLTE = pingMedian(api.serviceIPv6, interface: "lte", count: pings)
let nat64 = pingMedian(nat64Address, interface: "lte", count: pings)
say(String(format: "| lte gateway, IPv6 routed | %.3f ms | | reference |", routedLTE))
say(String(format: "| lte gateway, IPv4 through NAT64 (tayga) | %.3f ms | | %+.3f ms |", nat64, nat64 - routedLTE))
do {
    // The TCP transfer through NAT64 with the cafe gone (so that the LTE carries it).
    try running.services.setMembership(false, link: "cafe.phone")
    let routed = transfer(api.serviceIPv6, megabytes: megabytes), translated = transfer(nat64Address, megabytes: megabytes)
    say(String(format: "| lte gateway, TCP: routed IPv6 / through NAT64 | | %.0f / %.0f Mbit/s | %.2f× the throughput |", routed, translated, translated / routed))
    try running.services.setMembership(true, link: "cafe.phone")
} catch { fail("\(error)") }

// MARK: - 5a. What a connectivity probe costs (before 3's carrier losses take the gateway's routes)

/// The phone's monitor, validating its networks as in a run, to weigh one probe.
@MainActor func validatingMonitor(portalAPI: String?) -> NetworkPathMonitor {
    guard let namespace = running.topology.namespace(of: "phone"), var validation = running.services.validation(of: "phone") else { fail("no phone") }
    validation.interval = .seconds(3600)
    if let portalAPI { validation.interfacePortalAPIs["cafe"] = portalAPI }
    var configuration = NetworkPathMonitor.Configuration(resolverConfigurationPath: running.services.resolvConfPath(of: "phone"))
    configuration.validation = validation
    let monitor = NetworkPathMonitor(namespace: namespace, configuration: configuration)
    do { try monitor.start() } catch { fail("\(error)") }
    return monitor
}

/// Bytes in and out of the phone's cafe interface so far.
@MainActor func cafeBytes() -> Int64 {
    let output = capture(["-n", phoneNamespace, "-s", "-j", "link", "show", "cafe"])
    guard let json = try? JSONValue.parse(output), case .array(let links)? = Optional(json), let stats = links.first?["stats64"],
          case .int(let received)? = stats["rx"]?["bytes"], case .int(let sent)? = stats["tx"]?["bytes"] else { fail("cannot read the cafe's counters: \(output)") }
    return received + sent
}

/// Bytes one probe from the cafe interface costs (median of `rounds`): each asked for with
/// `revalidate`, counted on the interface until it has been quiet for 300 ms.
@MainActor func bytesPerProbe(portalAPI: String?, rounds: Int) -> Int64 {
    let monitor = validatingMonitor(portalAPI: portalAPI)
    defer { monitor.cancel() }
    let deadline = ContinuousClock.now + .seconds(10)
    while monitor.currentPath?.availableInterfaces.first(where: { $0.name == "cafe" })?.connectivity.state != .validated {
        guard ContinuousClock.now < deadline else {
            fail("the cafe did not validate: \(String(describing: monitor.currentPath?.availableInterfaces.map { "\($0.name) \($0.connectivity.state) \($0.connectivity.reason ?? "")" }))")
        }
        usleep(10_000)
    }
    var sizes: [Int64] = []
    for _ in 0..<rounds {
        usleep(300_000)
        let before = cafeBytes(), probes = monitor.statistics.connectivityProbes
        monitor.revalidate(interface: "cafe")
        while monitor.statistics.connectivityProbes == probes { usleep(1_000) }
        var last = cafeBytes(), quietSince = ContinuousClock.now
        while ContinuousClock.now - quietSince < .milliseconds(300) {
            usleep(20_000)
            let now = cafeBytes()
            if now != last { last = now; quietSince = ContinuousClock.now }
        }
        sizes.append(last - before)
    }
    return sizes.sorted()[sizes.count / 2]
}

let probeRounds = quick ? 1 : 15
let probeBytes = bytesPerProbe(portalAPI: nil, rounds: probeRounds)
let probeAndAPIBytes = bytesPerProbe(portalAPI: "http://connectivity.roam.test/api", rounds: probeRounds)
func perHour(_ probes: Double, _ bytes: Int64) -> String {
    probes == 0 ? "0" : String(format: "%.0f probes, %.1f KB", probes, probes * Double(bytes) / 1000)
}
say("")
say("One connectivity probe from the cafe interface, as a phone's monitor makes it in a run (A and AAAA lookup")
say("through the network's resolver, TCP, GET, the 204, close), counted on the interface: median of \(probeRounds):")
say("\(probeBytes) bytes; with a portal API asked first (one more GET): \(probeAndAPIBytes) bytes.")
say("Per interface and hour (Roam's figures: these bytes; NetworkManager's and Android's: their schedules from their")
say("sources, with Roam's probe size, one address family):")
say("")
say("| who | while validated | while held by a portal (after its back-off) |")
say("|---|---|---|")
say("| Roam, PathMonitor's defaults (300 s; back-off 1 s doubling to 60 s) | \(perHour(12, probeBytes)) | \(perHour(60, probeBytes)) |")
say("| Roam, in a scenario (30 s; with the portal's API) | \(perHour(120, probeAndAPIBytes)) | \(perHour(60, probeAndAPIBytes)) |")
say("| NetworkManager (interval 300 s; 1 s doubling to 300 s without full connectivity) | \(perHour(12, probeBytes)) | \(perHour(12, probeBytes)) |")
say("| Android NetworkMonitor (validated: none until a data stall or an app's report; portal: every 10 min) | 0 | \(perHour(6, probeBytes)) |")

// MARK: - 3. From the event to the phone's path monitor

final class Latest: @unchecked Sendable {
    let lock = NSLock()
    var path: NetworkPath?
    let signal = DispatchSemaphore(value: 0)
    func set(_ path: NetworkPath) { lock.lock(); self.path = path; lock.unlock(); signal.signal() }
    func get() -> NetworkPath? { lock.lock(); defer { lock.unlock() }; return path }
}

let latest = Latest()
let monitor: NetworkPathMonitor = {
    guard let namespace = running.topology.namespace(of: "phone") else { fail("no phone") }
    return NetworkPathMonitor(namespace: namespace, configuration: .init(resolverConfigurationPath: running.services.resolvConfPath(of: "phone")))
}()
let subscription = monitor.onUpdate { latest.set($0) }
do { try monitor.start() } catch { fail("\(error)") }
defer { subscription.cancel(); monitor.cancel() }

/// How long from `action` until the monitor publishes a path for which `holds` is true.
func time(_ what: String, _ action: () throws -> Void, until holds: @escaping (NetworkPath) -> Bool) -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    do { try action() } catch { fail("\(error)") }
    let deadline = start + .seconds(5)
    while clock.now < deadline {
        if let path = latest.get(), holds(path) { return clock.now - start }
        _ = latest.signal.wait(timeout: .now() + .milliseconds(5))
    }
    fail("the monitor did not publish \(what) within 5 s; its path: \(latest.get().map { "\($0)" } ?? "none")")
}

func cafe(_ path: NetworkPath) -> NetworkInterface? { path.availableInterfaces.first { $0.name == "cafe" } }

let changes = quick ? 1 : 20
var leave: [Duration] = [], renumber: [Duration] = [], carrier: [Duration] = []
let gatewaySocket = running.topology.socket(of: "cafe-gw")!
let p0 = (try? gatewaySocket.link(named: "p0"))??.index ?? 0
// The network's addresses (the kernel's link-local one stays): an IPv4 and an IPv6 one.
func global(_ interface: NetworkInterface?) -> Set<IPPrefix> { Set((interface?.addresses ?? []).filter { !$0.address.isLinkLocal }) }
for _ in 0..<changes {
    _ = time("the cafe", {}, until: { global(cafe($0)).count == 2 })
    leave.append(time("the leave", { try running.services.setMembership(false, link: "cafe.phone") }, until: { cafe($0) == nil }))
    _ = time("the join", { try running.services.setMembership(true, link: "cafe.phone") }, until: { global(cafe($0)).count == 2 })
    let before = global(cafe(latest.get()!))
    renumber.append(time("the renumbering", { try running.services.apply(.renumber, link: "cafe.phone") },
                         until: { path in let now = global(cafe(path)); return now.count == before.count && now.isDisjoint(with: before) }))
    // Carrier loss of the same interface: its gateway's end goes down.
    carrier.append(time("the carrier loss", { try gatewaySocket.setLink(index: p0, up: false) }, until: { cafe($0) == nil }))
    _ = time("the carrier's return", { try gatewaySocket.setLink(index: p0, up: true) }, until: { global(cafe($0)).count == 2 })
}
say("")
say("From the event to the phone's path monitor publishing it: median of \(changes). A carrier loss waits for the")
say("kernel's linkwatch (up to a second, machine-wide); a leave and a renumber are address and link changes at once")
say("")
say("| event | to the monitor's update | carrier loss / event |")
say("|---|---|---|")
say("| carrier loss of the cafe interface (its gateway's end down) | \(format(median(carrier))) | reference |")
say("| leave the cafe network (interface down, addresses gone) | \(format(median(leave))) | \(ratio(median(carrier), median(leave))) |")
say("| renumber on the cafe network (new addresses published) | \(format(median(renumber))) | \(ratio(median(carrier), median(renumber))) |")

// MARK: - 4. From the event to the workload's first byte after it

subscription.cancel()
monitor.cancel()

/// A 6 s scenario on the two networks' phone (home Wi-Fi first, LTE second) with an 8 Mbit/s
/// stream by name from the server, and `event` on home at 3 s.
func resumeScenario(event: String, mode: String) -> Scenario {
    let text = """
        name: resume
        duration: 6s
        nodes:
          phone: {}
          media: { internet: { names: [media.example.test] } }
        networks:
          - { name: home, type: wifi, profile: home-wifi, members: [phone] }
          - { name: lte, type: cellular, profile: lte, members: [phone] }
        timeline:
          - { at: 3s, network: home, \(event) }
        workloads:
          - { name: video, kind: stream, from: media, to: phone, mode: \(mode), bitrate: 8mbit, buffer: 1s, timeout: 1s }
        """
    let outcome = ScenarioReader.parse(text, file: "resume.yaml")
    guard let scenario = outcome.scenario else { fail(outcome.diagnostics.map(\.description).joined(separator: "\n")) }
    return scenario
}

/// From the event taking effect to the first byte after the gap in data it made (nil: no gap
/// of 20 ms or more spanned it; fails when no byte came after it).
func resume(event: String, mode: String, multipath: MultipathTransport, round: Int) -> Duration? {
    var options = RunOptions()
    options.multipath = multipath
    options.reportDirectory = scratch + "/resume-\(round)-\(mode)-\(multipath.rawValue)-\(event.prefix(5))"
    let report: RunReport
    do { report = try ScenarioRunner(scenario: resumeScenario(event: event, mode: mode), options: options).run() } catch { fail("\(error)") }
    guard let change = report.changes.first(where: { $0.change.link == "home.phone" }), change.failure == nil else {
        fail("the event on home did not apply: \(report.changes)")
    }
    guard let video = report.workloads.first else { fail("no workload result") }
    let at = change.actual
    // The gap the event opened: it began at most 20 ms after the event (the last byte before
    // it) and ended after it.
    guard let gap = video.gaps.first(where: { $0.start <= at + .milliseconds(20) && $0.start + $0.length > at }) else { return nil }
    guard gap.start + gap.length < report.endedAt - .milliseconds(50) else {
        fail("the stream (\(mode), \(multipath.rawValue)) never resumed after '\(event)' (a gap from \(format(gap.start)) to the end)")
    }
    return gap.start + gap.length - at
}

let resumeRounds = quick ? 1 : 3
let events = [("carrier loss (`down`, reference)", "down: true"), ("leave", "leave: phone"), ("renumber", "renumber: phone")]
let clients: [(String, String, MultipathTransport)] = [
    ("plain TCP (reconnects after its 1 s timeout)", "none", .auto), ("handover, application level", "handover", .application),
    ("handover, MPTCP (backup subflow)", "handover", .mptcp),
]
say("")
say("From an event on the home Wi-Fi (home-wifi profile) to the stream's first byte after it (8 Mbit/s, by name,")
say("the lte profile the other network): median of \(resumeRounds), through ScenarioRunner as `roam run` plays it;")
say("\"< 20 ms\": no gap of 20 ms")
say("")
say("| client | " + events.map(\.0).joined(separator: " | ") + " |")
say("|---|" + String(repeating: "---|", count: events.count))
for (label, mode, multipath) in clients {
    var cells: [String] = []
    for (_, event) in events {
        let measured = (0..<resumeRounds).map { resume(event: event, mode: mode, multipath: multipath, round: $0) }
        let found = measured.compactMap { $0 }
        cells.append(found.count * 2 <= measured.count ? "< 20 ms" : format(median(found)))
    }
    say("| \(label) | " + cells.joined(separator: " | ") + " |")
}

// MARK: - 5. Captive portals

/// A phone on LTE joins a hotel's Wi-Fi with a portal at 1 s, logs in at 3 s, and its session
/// ends 3 s later; `api`: whether the network announces its portal API. Each round has a seed of
/// its own: the radio's 0.1% loss, drawn from the seed, would otherwise drop the same packet every
/// round (one seed loses the first AAAA answer, and the probe asks again 667 ms later).
func portalScenario(api: Bool, seed: Int) -> Scenario {
    let text = """
        name: portal
        seed: \(seed)
        duration: 8s
        nodes:
          phone: {}
          api: { internet: { names: [api.example.test] } }
        networks:
          - { name: hotel, type: wifi, profile: home-wifi, members: [phone], portal: { expires: 3s, api: \(api) } }
          - { name: lte, type: cellular, profile: lte, members: [phone] }
        timeline:
          - { at: 1s, network: hotel, join: phone }
          - { at: 3s, network: hotel, node: phone, portal: login }
        """
    let outcome = ScenarioReader.parse(text, file: "portal.yaml")
    guard let scenario = outcome.scenario else { fail(outcome.diagnostics.map(\.description).joined(separator: "\n")) }
    return scenario
}

/// From the join to the hotel's `portal`, from the login to `validated`, and from the session's
/// end to `portal` again (nil: not within the run).
func portalTimes(api: Bool, round: Int) -> (join: Duration, login: Duration, expiry: Duration?) {
    var options = RunOptions()
    options.reportDirectory = scratch + "/portal-\(api)-\(round)"
    let report: RunReport
    do { report = try ScenarioRunner(scenario: portalScenario(api: api, seed: round + 1), options: options).run() } catch { fail("\(error)") }
    func state(_ record: PathRecord) -> InterfaceConnectivity.State? {
        guard record.node == "phone" else { return nil }
        return record.path.availableInterfaces.first { $0.name == "hotel" }?.connectivity.state
    }
    func first(_ wanted: InterfaceConnectivity.State, after time: Duration) -> Duration? {
        report.paths.first { $0.at > time && state($0) == wanted }.map { $0.at - time }
    }
    guard let join = report.changes.first(where: { $0.change.action == "join" })?.actual,
          let login = report.changes.first(where: { $0.change.action == "login" })?.actual else { fail("the portal's events did not apply") }
    guard let joined = first(.portal, after: join), let validated = first(.validated, after: login) else {
        fail("the monitor did not follow the portal (api \(api)): \(report.paths.compactMap { state($0).map { "\($0)" } })")
    }
    // The session's end, as the portal recorded it.
    let timeline = (try? String(contentsOfFile: options.reportDirectory! + "/timeline.jsonl", encoding: .utf8)) ?? ""
    let expired = timeline.split(separator: "\n").compactMap { line -> Duration? in
        guard line.contains("logout expired"), let event = try? JSONValue.parse(String(line)), let t = event["t"]?.doubleValue else { return nil }
        return .milliseconds(Int64((t * 1000).rounded()))
    }.first
    return (joined, validated, expired.flatMap { first(.portal, after: $0) })
}

let portalRounds = quick ? 1 : 5
say("")
say("A phone on LTE joins a hotel's Wi-Fi whose portal holds it, logs in (a timeline event: the run has its monitor")
say("check at once, as a phone's captive-portal sheet does), and its 3 s session ends: from each to the phone's")
say("monitor publishing it, median of \(portalRounds) scenarios played by ScenarioRunner:")
say("")
say("| network | join → portal | login → validated | session's end → portal |")
say("|---|---|---|---|")
for api in quick ? [true] : [true, false] {
    let times = (0..<portalRounds).map { portalTimes(api: api, round: $0) }
    let expiries = times.compactMap(\.expiry)
    let expiry = expiries.count * 2 > times.count ? format(median(expiries))
        : "at the next periodic check (30 s in a scenario, 300 s by default)"
    say("| \(api ? "announces its portal API (RFC 8908)" : "no portal API: the probe's redirect only") | \(format(median(times.map(\.join)))) "
        + "| \(format(median(times.map(\.login)))) | \(expiry) |")
}
say("")
say("References: NetworkManager probes at once on a new connection, then after a login only at its next back-off")
say("step (1 s doubling to 300 s: up to 5 min); Android re-evaluates when its captive-portal app reports the login,")
say("else every 10 min (AOSP NetworkMonitor's CAPTIVE_PORTAL_REEVALUATE_DELAY_MS).")

if !quick {
    let path = FileManager.default.currentDirectoryPath + "/scenarios/hotel-wifi.yaml"
    let outcome = ScenarioReader.read(contentsOf: path)
    guard let hotel = outcome.scenario else { fail("cannot read \(path): \(outcome.diagnostics.map(\.description))") }
    var options = RunOptions()
    options.reportDirectory = scratch + "/hotel-wifi"
    let report: RunReport
    do { report = try ScenarioRunner(scenario: hotel, options: options).run() } catch { fail("\(error)") }
    let app = report.workloads.first { $0.name == "app" }?.requests
    let curl = (try? String(contentsOfFile: scratch + "/hotel-wifi/unaware.stdout", encoding: .utf8))?.split(separator: "\n").last.map(String.init) ?? "?"
    say("")
    say("scenarios/hotel-wifi.yaml, one run (60 s: portal from 5 s, login at 20 s, session's end at 50 s):")
    say("")
    say("| client | requests | failed |")
    say("|---|---|---|")
    say("| app, handover (follows the validated path) | \(app?.sent ?? 0) | \(app?.failed ?? -1) |")
    say("| curl, unaware (the routes' choice) | a request a second | \(curl) |")
}
