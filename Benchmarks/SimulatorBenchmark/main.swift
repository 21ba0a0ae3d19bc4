// Simulator benchmark: topology setup + teardown side by side with the same topology built by a
// shell script of `ip` commands in the same run, and the precision of the timeline (planned vs
// applied time of link changes, each a real netlink request).
//
//   swift build -c release --product SimulatorBenchmark && .build/release/SimulatorBenchmark
//   options: --quick (fewer rounds and events, to check that it runs), --mobility (only the
//   derivation of mobility:)
//
// Needs root. Everything it creates is in namespaces named roam-RUNID-*, removed at the end
// (and by `roam cleanup` if it is killed).
import Foundation
import Glibc
import Netlink
import PathMonitor
import RoamSystem
import ScenarioModel
import Simulator
import Yams

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SimulatorBenchmark: \(message)\n".utf8))
    exit(2)
}

let quick = CommandLine.arguments.contains("--quick")
// --mobility: only the derivation of movement (no root needed).
if CommandLine.arguments.contains("--mobility") {
    mobilityDerivation()
    exit(0)
}
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }

func scenario(_ yaml: String) -> Scenario {
    let outcome = ScenarioReader.parse(yaml, file: "benchmark.yaml")
    guard let scenario = outcome.scenario else { fail(outcome.diagnostics.map(\.description).joined(separator: "\n")) }
    return scenario
}

/// `nodes` nodes, each linked to the next `perNode` nodes around a ring: nodes × perNode links.
func ring(nodes: Int, perNode: Int) -> Scenario {
    var yaml = "name: bench\nduration: 10s\nnodes:\n"
    for node in 0..<nodes { yaml += "  n\(node): {}\n" }
    yaml += "links:\n"
    var index = 0
    for node in 0..<nodes {
        for step in 1...perNode {
            yaml += "  - { name: l\(index), between: [n\(node), n\((node + step) % nodes)], type: \(index % 2 == 0 ? "wifi" : "cellular") }\n"
            index += 1
        }
    }
    return scenario(yaml)
}

// MARK: - The reference: the same topology as a script of ip commands

func script(for plan: TopologyPlan, teardown: Bool) -> String {
    var lines = ["set -e"]
    if teardown {
        for node in plan.nodes { lines.append("ip netns del \(node.namespaceName)") }
        return lines.joined(separator: "\n") + "\n"
    }
    let sysctls = Topology.nodeSysctls.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    for node in plan.nodes {
        let ns = node.namespaceName
        lines += ["ip netns add \(ns)", "ip -n \(ns) link set lo up",
                  "ip -n \(ns) addr add \(node.serviceIPv4)/32 dev lo", "ip -n \(ns) addr add \(node.serviceIPv6)/128 dev lo",
                  "ip netns exec \(ns) sysctl -q -w \(sysctls)"]
    }
    for link in plan.links {
        let first = plan.node(link.first)!.namespaceName, second = plan.node(link.second)!.namespaceName
        lines.append("ip -n \(first) link add \(link.name) type veth peer name \(link.name) netns \(second)")
    }
    for node in plan.nodes {
        for interface in node.interfaces {
            lines.append("ip -n \(node.namespaceName) link set \(interface.name) up alias '\(interface.alias)'")
        }
    }
    for node in plan.nodes {
        let ns = node.namespaceName
        for interface in node.interfaces {
            lines += ["ip -n \(ns) addr add \(interface.ipv4) dev \(interface.name)",
                      "ip -n \(ns) addr add \(interface.ipv6) dev \(interface.name) nodad"]
        }
    }
    for node in plan.nodes {
        let ns = node.namespaceName
        for interface in node.interfaces {
            let peerNode = plan.node(interface.peer)!
            for (address, peer, service, any) in [(interface.ipv4, interface.peerIPv4, "\(peerNode.serviceIPv4)/32", "default"),
                                                  (interface.ipv6, interface.peerIPv6, "\(peerNode.serviceIPv6)/128", "default")] {
                let family = peer.family == .inet ? "-4" : "-6"
                let subnet = IPPrefix(address.address.masked(to: address.length), length: address.length)
                lines += [
                    "ip \(family) -n \(ns) route add default via \(peer) dev \(interface.name) metric \(interface.metric)",
                    "ip \(family) -n \(ns) route add unreachable \(subnet) metric \(UInt32.max)",
                    "ip \(family) -n \(ns) route replace \(subnet) dev \(interface.name) table \(interface.table.rawValue)",
                    "ip \(family) -n \(ns) route add default via \(peer) dev \(interface.name) table \(interface.table.rawValue)",
                    "ip \(family) -n \(ns) route add unreachable \(any) metric \(UInt32.max) table \(interface.table.rawValue)",
                    "ip \(family) -n \(ns) route add \(service) via \(peer) dev \(interface.name) metric \(interface.metric)",
                    "ip \(family) -n \(ns) rule add from \(address.address) table \(interface.table.rawValue) priority \(interface.rulePriority)",
                ]
            }
        }
    }
    return lines.joined(separator: "\n") + "\n"
}

func runScript(_ text: String) -> Duration {
    // The script goes to bash on its standard input: no file under /tmp another user could
    // replace between writing and running it.
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-s"]
    let input = Pipe()
    process.standardInput = input
    let clock = ContinuousClock()
    let start = clock.now
    do { try process.run() } catch { fail("cannot run bash: \(error)") }
    input.fileHandleForWriting.write(Data(text.utf8))
    try? input.fileHandleForWriting.close()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { fail("the ip script failed (status \(process.terminationStatus))") }
    return clock.now - start
}

func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }

func format(_ duration: Duration) -> String {
    let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    return ms >= 1000 ? String(format: "%.2f s", ms / 1000) : String(format: "%.1f ms", ms)
}

print("Topology setup + teardown (median of rounds; the same plan built by Roam through netlink and by a script of ip commands)")
print("")
print("| topology | rounds | Roam | ip script | script / Roam |")
print("|---|---|---|---|---|")
for (label, scenario, rounds) in [("2 nodes / 2 links", ring(nodes: 2, perNode: 1), quick ? 3 : 20),
                                  ("50 nodes / 100 links", ring(nodes: 50, perNode: 2), quick ? 1 : 3)] {
    var roam: [Duration] = [], shell: [Duration] = []
    for _ in 0..<rounds {
        let plan: TopologyPlan
        do { plan = try TopologyPlan(scenario: scenario, runID: RunRegistry.newRunID()) } catch { fail("\(error)") }
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let topology = try Topology.build(plan)
            topology.teardown()
        } catch { fail("Roam's build failed: \(error)") }
        roam.append(clock.now - start)

        let reference: TopologyPlan
        do { reference = try TopologyPlan(scenario: scenario, runID: RunRegistry.newRunID()) } catch { fail("\(error)") }
        shell.append(runScript(script(for: reference, teardown: false)) + runScript(script(for: reference, teardown: true)))
    }
    let ratio = Double(median(shell).components.attoseconds / 1_000_000 + median(shell).components.seconds * 1_000_000_000_000)
        / Double(median(roam).components.attoseconds / 1_000_000 + median(roam).components.seconds * 1_000_000_000_000)
    print("| \(label) | \(rounds) | \(format(median(roam))) | \(format(median(shell))) | \(String(format: "%.1f×", ratio)) |")
}

// MARK: - Timeline precision

/// Applies each change as a real kernel request: the rate of a tbf qdisc on one end of a veth
/// pair (this kernel may lack netem; tbf is everywhere), the carrier by the peer's admin state.
final class TokenBucketBackend: LinkBackend {
    let kind = BackendKind.netem
    let socket: NetlinkSocket
    let peerSocket: NetlinkSocket
    let index: Int32
    let peerIndex: Int32

    init(topology: Topology, link: String) throws {
        let plan = topology.plan.links[0]
        socket = topology.socket(of: plan.first)!
        peerSocket = topology.socket(of: plan.second)!
        index = try socket.link(named: link)!.index
        peerIndex = try peerSocket.link(named: link)!.index
    }

    func createInterfaces(for link: TopologyPlan.Link, in topology: Topology) throws(SimulatorError) {}
    func start(_ topology: Topology) throws(SimulatorError) {}
    func apply(_ conditions: LinkConditions, link: String, direction: TrafficDirection) throws(SimulatorError) {
        let rate = UInt64((conditions.impairment.rate?.bitsPerSecond ?? 1e9) / 8)
        do throws(NetlinkError) {
            try socket.replaceTokenBucket(TokenBucketConfiguration(rate: rate, bucket: 10_000, limit: 100_000), interfaceIndex: index,
                                          handle: QdiscHandle(major: 2, minor: 0), parent: .root)
        } catch { throw SimulatorError("tbf", error) }
    }
    func setCarrier(_ up: Bool, link: String) throws(SimulatorError) {
        do throws(NetlinkError) { try peerSocket.setLink(index: peerIndex, up: up) } catch { throw SimulatorError("carrier", error) }
    }
    func stop() {}
}

let events = quick ? 100 : 1000
let spacing = 10
var yaml = "name: precision\nduration: \(events * spacing + 500)ms\nnodes: { a: {}, b: {} }\nlinks:\n  - { name: link, between: [a, b], rate: 100mbit }\ntimeline:\n"
for event in 0..<events {
    if event % 50 == 49 {
        yaml += "  - { at: \(100 + event * spacing)ms, link: link, \(event % 100 == 49 ? "down" : "up"): true }\n"
    } else {
        yaml += "  - { at: \(100 + event * spacing)ms, link: link, direction: up, set: { rate: \(event % 2 == 0 ? 10 : 20)mbit } }\n"
    }
}
let precision = scenario(yaml)
do {
    let plan = try TopologyPlan(scenario: precision, runID: RunRegistry.newRunID())
    let topology = try Topology.build(plan)
    defer { topology.teardown() }
    let backend = try TokenBucketBackend(topology: topology, link: "link")
    let schedule = TimelineSchedule(scenario: precision)
    let stop = try EventSignal()
    let log = try RunLog(start: .now + .milliseconds(50), directory: nil)
    let player = TimelinePlayer(schedule: schedule, backend: backend, log: log, stop: stop)
    try player.start()
    player.join()
    let applied = log.appliedChanges
    guard applied.count == schedule.changes.count, applied.allSatisfy({ $0.failure == nil }) else {
        fail("not every change applied: \(applied.compactMap(\.failure).first ?? "missing")")
    }
    let lateness = applied.map { $0.actual - $0.change.at }.sorted()
    func at(_ fraction: Double) -> Duration { lateness[min(lateness.count - 1, Int(Double(lateness.count) * fraction))] }
    print("")
    print("Timeline precision: \(applied.count) changes \(spacing) ms apart (tbf rate changes and carrier flips through netlink);")
    print("lateness = time the kernel request returned - planned time")
    print("")
    print("| p50 | p90 | p99 | max |")
    print("|---|---|---|---|")
    print("| \(format(at(0.5))) | \(format(at(0.9))) | \(format(at(0.99))) | \(format(lateness.last!)) |")
} catch {
    fail("\(error)")
}

// MARK: - Validation at scale

/// Validation must stay linear in the size of a scenario: `roam validate` of N links, events or
/// expectations against the floor of reading the same text with Yams alone, at growing N.
func validationScale() {
    /// A chain of `count` links; `refused`: every link names nodes that do not exist (each an
    /// error, none with a suggestion searched among thousands of names).
    func links(_ count: Int, refused: Bool) -> String {
        var yaml = "name: big\nduration: 60s\nnodes:\n"
        for node in 0...count { yaml += "  n\(node): {}\n" }
        yaml += "links:\n"
        for link in 0..<count {
            yaml += refused ? "  - {name: l\(link), between: [x\(link), y\(link)]}\n" : "  - {name: l\(link), between: [n\(link), n\(link + 1)], delay: 5ms}\n"
        }
        return yaml
    }
    func events(_ count: Int) -> String {
        var yaml = "name: big\nduration: 24h\nnodes: {a: {}, b: {}}\nlinks:\n  - {name: w, between: [a, b]}\ntimeline:\n"
        for event in 0..<count { yaml += "  - {at: \(event * 5)ms, link: w, set: {delay: \(event % 50)ms}}\n" }
        return yaml
    }
    func expectations(_ count: Int) -> String {
        var yaml = "name: big\nduration: 60s\nnodes: {a: {}, b: {}}\nlinks:\n  - {name: w, between: [a, b]}\n"
        yaml += "timeline:\n  - {at: 1s, link: w, down: true}\nworkloads:\n"
        for workload in 0..<1000 { yaml += "  - {name: w\(workload), kind: bulk, from: a, to: b}\n" }
        yaml += "expect:\n"
        for expectation in 0..<count {
            yaml += expectation % 2 == 0 ? "  - {node: a, path: unsatisfied, within: 1s, after: {link: w, event: down}}\n"
                                         : "  - {workload: w\(expectation % 1000), completes: true}\n"
        }
        return yaml
    }
    /// Every link naming nodes that do not exist: each an error, none with a suggestion
    /// searched among thousands of names.
    func brokenLinks(_ count: Int) -> String {
        var yaml = "name: big\nduration: 60s\nnodes:\n"
        for node in 0...count { yaml += "  n\(node): {}\n" }
        yaml += "links:\n"
        for link in 0..<count { yaml += "  - {name: l\(link), between: [x\(link), y\(link)]}\n" }
        return yaml
    }
    let clock = ContinuousClock()
    print("")
    print("Validation at scale (ScenarioReader, as roam validate; the floor is Yams reading the same text with no checks)")
    print("")
    print("| scenario | N | validate | Yams alone | validate / Yams | per item |")
    print("|---|---|---|---|---|---|")
    for (label, make) in [("links", { links($0, refused: false) }), ("events", events), ("expectations", expectations),
                          ("links, all refused", { links($0, refused: true) })]
        as [(String, (Int) -> String)] {
        for count in quick ? [1000, 10_000] : [1000, 10_000, 100_000] {
            let text = make(count)
            let started = clock.now
            let outcome = ScenarioReader.parse(text, file: "big.yaml")
            let validate = clock.now - started
            let refused = label.hasSuffix("refused")
            // A refused file has two errors per link; the first 100 are shown and the rest counted
            // in a last note, which must hold the exact remainder.
            let shown = outcome.errors.dropLast().count
            guard (outcome.scenario != nil) != refused,
                  !refused || outcome.errors.last?.message.hasPrefix("\(2 * count - shown) more problems not shown") == true else {
                fail("unexpected validation outcome: " + outcome.errors.prefix(3).map(\.description).joined(separator: "\n"))
            }
            let floorStart = clock.now
            _ = try? Yams.compose(yaml: text, .basic)
            let floor = clock.now - floorStart
            let ratio = validate / max(floor, .nanoseconds(1))
            let perItem = (validate / count) / .microseconds(1)
            print("| \(label) | \(count) | \(format(validate)) | \(format(floor)) | \(String(format: "%.2f×", ratio)) | \(String(format: "%.1f µs", perItem)) |")
        }
    }
}
validationScale()

// MARK: - Mobility derivation

/// `mobility:` is expanded before a run: 100 phones walking at random (random waypoint) for an
/// hour among three access points and two cell sites, sampled every 500 ms, as `roam validate`
/// and `roam run` derive it (events only) and as the report would (every sample kept), with the
/// resident memory the result holds (the process's, with the result against without).
func mobilityDerivation() {
    let phones = quick ? 10 : 100
    let names = (0..<phones).map { "p\($0)" }
    let mobility = Mobility(
        accessPoints: (0..<3).map { AccessPoint(name: "ap\($0)", network: "office", position: Position(Double($0) * 40, 10)) },
        cellSites: [CellSite(name: "west", network: "lte", position: Position(-300, 0)), CellSite(name: "east", network: "lte", position: Position(400, 0))],
        phones: names.map { PhoneMovement(node: $0, model: .randomWaypoint(area: .init(from: Position(-20, 0), to: Position(100, 20)),
                                                                           speed: 0.5...1.5, pause: .zero ... .seconds(10))) })
    let derivation = MobilityDerivation(mobility: mobility, duration: .seconds(3600), seed: 1, networks: [
        .init(name: "office", isCellular: false, members: names), .init(name: "lte", isCellular: true, members: names),
    ])
    let clock = ContinuousClock()
    print("")
    print("Mobility derivation: \(phones) phones × 1 h at 500 ms (random waypoint; 3 access points, 2 cell sites): \(derivation.sampleCount) samples")
    print("")
    print("| derived | time | events | roams and handovers | memory it holds |")
    print("|---|---|---|---|---|")
    for keepsSamples in [false, true] {
        let before = residentMegabytesNow()
        let started = clock.now
        let result = derivation.derive(samples: keepsSamples)
        let elapsed = clock.now - started
        let held = residentMegabytesNow() - before
        print("| \(keepsSamples ? "events and samples (the report)" : "events (validate, run)") | \(format(elapsed)) | \(result.events.count) "
            + "| \(result.moves) | \(String(format: "%.1f MB", max(0, held))) |")
        guard result.events == derivation.derive(samples: false).events else { fail("the derivation is not deterministic") }
    }
}

/// The process's resident memory now (VmRSS), MB.
func residentMegabytesNow() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return kilobytes / 1024
}
mobilityDerivation()
