// Userspace link emulator benchmark: forwarding capacity (TCP with 1500-byte packets, UDP with
// 64-byte packets) and added latency, each side by side in the same run with a plain veth pair
// between the same two namespaces; delay accuracy under load; CPU and memory.
//
//   swift build -c release --product EmulatorBenchmark && .build/release/EmulatorBenchmark
//   options: --quick (short phases, to check that it runs); --end-to-end (only the end-to-end
//   section, beside netem: scripts/vm.sh -- .build/release/EmulatorBenchmark --end-to-end);
//   --ordinary (the emulator's threads in the ordinary class, not real-time, except where a phase
//   compares the two); --small-packets SECONDS (only 64-byte UDP and the round trip, to profile)
//
// Needs root. Its namespaces are named roam-RUNID-a and -b, removed at the end (and by
// `roam cleanup` if it is killed).
import RoamSystem
import Foundation
import Glibc
import LinkEmulation
import Netlink
import ScenarioModel
import Simulator
import Synchronization

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("EmulatorBenchmark: \(message)\n".utf8))
    exit(2)
}

let quick = CommandLine.arguments.contains("--quick")
let phase: Double = quick ? 1 : 5
let scheduling: LinkEmulator.Scheduling = CommandLine.arguments.contains("--ordinary") ? .normal : .realtime
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }
guard UserspaceBackend.probe() == nil else { fail("needs /dev/net/tun") }

@Sendable func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// One link through the emulator with the kernel's TUN offloads, one through it without them,
/// and one plain veth pair, between the same two namespaces.
final class MixedBackend: LinkBackend {
    let kind = BackendKind.userspace
    let emulated: UserspaceBackend
    let unoffloaded: UserspaceBackend
    let plain: NetemBackend
    init(plan: TopologyPlan, measuresLateness: Bool, threads: Int?, scheduling: LinkEmulator.Scheduling) {
        emulated = UserspaceBackend(plan: plan, seed: 1)
        emulated.measuresLateness = measuresLateness
        emulated.threads = threads
        emulated.scheduling = scheduling
        unoffloaded = UserspaceBackend(plan: plan, seed: 1)
        unoffloaded.offloads = false
        unoffloaded.scheduling = scheduling
        plain = NetemBackend(plan: plan, seed: 1)
    }
    func createInterfaces(for link: TopologyPlan.Link, in topology: Topology) throws(SimulatorError) {
        switch link.name {
        case "emu", "emu2": try emulated.createInterfaces(for: link, in: topology)
        case "raw": try unoffloaded.createInterfaces(for: link, in: topology)
        default: try plain.createInterfaces(for: link, in: topology)
        }
    }
    func start(_ topology: Topology) throws(SimulatorError) {
        try emulated.start(topology)
        try unoffloaded.start(topology)
        try plain.start(topology)
    }
    func apply(_ conditions: LinkConditions, link: String, direction: TrafficDirection) throws(SimulatorError) {
        switch link {
        case "raw": try unoffloaded.apply(conditions, link: link, direction: direction)
        case "plain": try plain.apply(conditions, link: link, direction: direction)
        default: try emulated.apply(conditions, link: link, direction: direction)
        }
    }
    func setCarrier(_ up: Bool, link: String) throws(SimulatorError) {}
    func stop() {
        emulated.stop()
        unoffloaded.stop()
    }
}

/// The address of b on each link, by the link's name.
nonisolated(unsafe) var addresses: [String: String] = [:]

func makeTopology(measuresLateness: Bool, threads: Int? = nil, scheduling: LinkEmulator.Scheduling = scheduling) -> (Topology, MixedBackend) {
    let outcome = ScenarioReader.parse("""
        name: bench
        duration: 10s
        nodes: { a: {}, b: {} }
        links:
          - { name: emu, between: [a, b] }
          - { name: emu2, between: [a, b] }
          - { name: raw, between: [a, b] }
          - { name: plain, between: [a, b] }
        """, file: "bench.yaml")
    guard let scenario = outcome.scenario else { fail("\(outcome.diagnostics)") }
    do {
        let plan = try TopologyPlan(scenario: scenario, runID: RunRegistry.newRunID())
        for interface in plan.node("a")?.interfaces ?? [] { addresses[interface.link] = interface.peerIPv4.description }
        let backend = MixedBackend(plan: plan, measuresLateness: measuresLateness, threads: threads, scheduling: scheduling)
        let topology = try Topology.build(plan, backend: backend)
        try backend.start(topology)
        return (topology, backend)
    } catch { fail("\(error)") }
}

@Sendable func socketIn(_ namespace: NetworkNamespace, _ type: Int32) -> Int32 {
    guard let fd = try? namespace.perform({ socket(AF_INET, type, 0) }), fd >= 0 else { fail("socket") }
    return fd
}

@Sendable func address(_ text: String, port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, text, &address.sin_addr)
    return address
}

@Sendable func withSockaddr<T>(_ value: sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var copy = value
    return withUnsafePointer(to: &copy) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
}

@Sendable func thread(_ body: @escaping @Sendable () -> Void) -> Thread {
    let thread = Thread(block: body)
    thread.start()
    return thread
}

/// The CPU time (seconds) of this process's threads named `name`.
func cpuSeconds(ofThreadsNamed name: String) -> Double {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    var ticks = 0.0
    for task in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
              comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
              let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        ticks += (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)   // utime, stime
    }
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func residentMegabytes() -> Double {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
}

/// TCP from a to b's address for `seconds`: goodput in bit/s.
@Sendable func tcpThroughput(_ topology: Topology, to destination: String, port: UInt16, seconds: Double) -> Double {
    let listener = socketIn(topology.namespace(of: "b")!, Int32(SOCK_STREAM.rawValue))
    var one: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(4))
    guard withSockaddr(address(destination, port: port), { bind(listener, $0, $1) }) == 0, listen(listener, 1) == 0 else { fail("listen") }
    final class Box: @unchecked Sendable { var bytes = 0; var start = 0.0; var end = 0.0 }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    _ = thread {
        let connection = accept(listener, nil, nil)
        var buffer = [UInt8](repeating: 0, count: 1 << 18)
        box.start = now()
        while true {
            let count = read(connection, &buffer, buffer.count)
            if count <= 0 { break }
            box.bytes += count
        }
        box.end = now()
        close(connection)
        done.signal()
    }
    let sender = socketIn(topology.namespace(of: "a")!, Int32(SOCK_STREAM.rawValue))
    guard withSockaddr(address(destination, port: port), { connect(sender, $0, $1) }) == 0 else { fail("connect to \(destination)") }
    let buffer = [UInt8](repeating: 1, count: 1 << 18)
    let end = now() + seconds
    while now() < end { _ = buffer.withUnsafeBytes { write(sender, $0.baseAddress, $0.count) } }
    close(sender)
    done.wait()
    close(listener)
    return Double(box.bytes) * 8 / (box.end - box.start)
}

/// UDP datagrams of `size` IP bytes from a to b, as fast as the sender can, for `seconds`:
/// packets per second received.
/// The machine's CPU time so far, busy and in all (`/proc/stat`'s first line, in ticks).
func machineTicks() -> (busy: Double, total: Double) {
    let stat = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
    let fields = stat.split(separator: "\n").first?.split(separator: " ").dropFirst().compactMap { Double($0) } ?? []
    guard fields.count >= 5 else { return (0, 0) }
    let total = fields.prefix(8).reduce(0, +)
    return (total - fields[3] - fields[4], total)   // less idle and iowait
}

/// What one UDP measurement found: packets received per second, how many of the machine's
/// cores were busy while the sender sent, and the CPU time the emulator's threads used then.
struct UDPMeasurement {
    var rate: Double
    var busyCores: Double
    var emulatorSeconds: Double
    var seconds: Double
}

func udpRate(_ topology: Topology, to destination: String, port: UInt16, size: Int, seconds: Double) -> Double {
    udpMeasurement(topology, to: destination, port: port, size: size, seconds: seconds).rate
}

func udpMeasurement(_ topology: Topology, to destination: String, port: UInt16, size: Int, seconds: Double) -> UDPMeasurement {
    let receiver = socketIn(topology.namespace(of: "b")!, Int32(SOCK_DGRAM.rawValue))
    var big: Int32 = 8 << 20
    setsockopt(receiver, SOL_SOCKET, SO_RCVBUFFORCE, &big, socklen_t(4))
    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard withSockaddr(address(destination, port: port), { bind(receiver, $0, $1) }) == 0 else { fail("bind udp") }
    final class Box: @unchecked Sendable { var count = 0; var stop = false }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    _ = thread {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while !box.stop {
            if recv(receiver, &buffer, buffer.count, 0) > 0 { box.count += 1 }
        }
        done.signal()
    }
    let sender = socketIn(topology.namespace(of: "a")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(destination, port: port), { connect(sender, $0, $1) }) == 0 else { fail("connect udp") }
    let payload = [UInt8](repeating: 2, count: size - 28)
    let ticksBefore = machineTicks(), emulatorBefore = cpuSeconds(ofThreadsNamed: "roam-emulator")
    let start = now()
    let end = start + seconds
    while now() < end {
        for _ in 0..<64 { _ = payload.withUnsafeBytes { send(sender, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) } }
    }
    let ticksAfter = machineTicks(), emulatorAfter = cpuSeconds(ofThreadsNamed: "roam-emulator")
    usleep(300_000)
    box.stop = true
    done.wait()
    close(sender)
    close(receiver)
    let cores = Double(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    let busy = ticksAfter.total > ticksBefore.total ? (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total) * cores : 0
    return UDPMeasurement(rate: Double(box.count) / seconds, busyCores: busy, emulatorSeconds: emulatorAfter - emulatorBefore, seconds: seconds)
}

/// UDP rates to each of `destinations` in `rounds` rounds taking turns (each round gives every
/// path `seconds / rounds`), so that what the machine does meanwhile falls on all of them alike:
/// packets per second over all rounds per path, and the per-round ratio of each path to the last
/// one (the reference) as min, median and max.
func interleavedUDPRates(_ topology: Topology, to destinations: [(address: String, port: UInt16)], size: Int, seconds: Double,
                         rounds: Int) -> (rates: [Double], ratios: [(min: Double, median: Double, max: Double)], busyCores: [Double],
                                          emulatorMicrosecondsPerPacket: [Double]) {
    var perRound = destinations.map { _ in [Double]() }
    var busy = destinations.map { _ in 0.0 }, emulator = destinations.map { _ in 0.0 }, received = destinations.map { _ in 0.0 }
    for _ in 0..<rounds {
        for (index, destination) in destinations.enumerated() {
            let measured = udpMeasurement(topology, to: destination.address, port: destination.port, size: size, seconds: seconds / Double(rounds))
            perRound[index].append(measured.rate)
            busy[index] += measured.busyCores / Double(rounds)
            emulator[index] += measured.emulatorSeconds
            received[index] += measured.rate * measured.seconds
        }
    }
    let reference = perRound[perRound.count - 1]
    let ratios = perRound.map { rates -> (min: Double, median: Double, max: Double) in
        let sorted = zip(rates, reference).map { $0 / $1 }.sorted()
        return (sorted[0], sorted[sorted.count / 2], sorted[sorted.count - 1])
    }
    return (perRound.map { $0.reduce(0, +) / Double($0.count) }, ratios, busy, zip(emulator, received).map { $0 / max(1, $1) * 1e6 })
}

/// An echo of UDP datagrams in b on `destination`:`port`, and a client socket in a connected to it.
func echoPair(_ topology: Topology, to destination: String, port: UInt16) -> Int32 {
    let echo = socketIn(topology.namespace(of: "b")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(destination, port: port), { bind(echo, $0, $1) }) == 0 else { fail("bind echo") }
    _ = thread {
        var buffer = [UInt8](repeating: 0, count: 2048)
        var peer = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let received = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(echo, &buffer, buffer.count, 0, $0, &length) } }
            if received <= 0 || buffer[0] == 0xff { break }
            _ = withUnsafePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(echo, buffer, received, 0, $0, length) } }
        }
        close(echo)
    }
    let client = socketIn(topology.namespace(of: "a")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(destination, port: port), { connect(client, $0, $1) }) == 0 else { fail("connect echo") }
    return client
}

/// Whether the threads that keep the cores busy go on.
final class Spinning: Sendable { let on = Atomic<Bool>(true) }

/// Round trips of 64-byte UDP datagrams through each client in turn, `block` at a time:
/// sorted, in microseconds, per client. With a block of 1 the paths take turns packet by
/// packet, so that both see the same machine at every moment, but veth's round trips then run
/// while the emulator's thread still polls after its last packet (beside it, or holding a core
/// its threads would have used), which moves part of the emulator's cost into the reference.
/// With larger blocks a path's round trips start after the other's threads went to sleep.
func udpRoundTrips(_ clients: [Int32], count: Int, block: Int = 1) -> [[Double]] {
    var samples = clients.map { _ in [Double]() }
    let payload = [UInt8](repeating: 3, count: 36)
    var reply = [UInt8](repeating: 0, count: 2048)
    var done = 0
    while done < count {
        let size = min(block, count - done)
        for (index, client) in clients.enumerated() {
            for _ in 0..<size {
                let start = now()
                _ = send(client, payload, payload.count, 0)
                _ = recv(client, &reply, reply.count, 0)
                samples[index].append((now() - start) * 1e6)
            }
            // The emulator's thread polls for 100 µs after a packet: let it stop first.
            if block > 1 { usleep(300) }
        }
        done += size
    }
    return samples.map { $0.sorted() }
}

/// Ends the echoes of `clients` and closes them.
func endEchoes(_ clients: [Int32]) {
    var payload = [UInt8](repeating: 3, count: 36)
    payload[0] = 0xff
    for client in clients {
        _ = send(client, payload, payload.count, 0)
        close(client)
    }
}

/// The round trip through the emulator (sorted, µs) while two threads of the ordinary class keep
/// both cores busy, as a CI machine's builds do: the emulator's thread against the sender and
/// the echo, each waiting for a core.
func busyRoundTrips(_ topology: Topology, emulated: String, count: Int) -> [Double] {
    let spinning = Spinning()
    for _ in 0..<2 { Thread { while spinning.on.load(ordering: .relaxed) {} }.start() }
    defer { spinning.on.store(false, ordering: .relaxed) }
    let echo = echoPair(topology, to: emulated, port: 5013)
    defer { endEchoes([echo]) }
    return udpRoundTrips([echo], count: count)[0]
}

/// The round trip through the emulator and veth, taking turns packet by packet and in blocks
/// of 250: for each, (emulator, veth) sorted in microseconds.
func roundTripsBothWays(_ topology: Topology, emulated: String, plain: String, count: Int) -> (perPacket: [[Double]], blocks: [[Double]]) {
    let clients = [echoPair(topology, to: emulated, port: 5007), echoPair(topology, to: plain, port: 5008)]
    defer { endEchoes(clients) }
    return (udpRoundTrips(clients, count: count), udpRoundTrips(clients, count: count, block: 250))
}

func percentile(_ sorted: [Double], _ fraction: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }

// MARK: - Capacity, latency, CPU, memory

// `--small-packets SECONDS`: only 64-byte UDP (the emulator, the emulator without offloads and veth
// taking turns) and the round trip (the emulator and veth taking turns)
// (to profile the per-packet path: perf record -g --call-graph dwarf -t <roam-emulator's thread>).
if let index = CommandLine.arguments.firstIndex(of: "--small-packets") {
    guard index + 1 < CommandLine.arguments.count, let seconds = Double(CommandLine.arguments[index + 1]), seconds > 0, seconds <= 600 else {
        fail("--small-packets SECONDS (0 < SECONDS <= 600)")
    }
    let (topology, backend) = makeTopology(measuresLateness: false, scheduling: scheduling)
    guard let emu = addresses["emu"], let raw = addresses["raw"], let plain = addresses["plain"] else { fail("no addresses for the links") }
    let udp = interleavedUDPRates(topology, to: [(emu, 5005), (raw, 5015), (plain, 5006)], size: 64, seconds: seconds, rounds: 5)
    print(String(format: "UDP, 64-byte packets, five rounds taking turns: emulator %.0f kpps, without offloads %.0f kpps, veth %.0f kpps; "
                 + "emulator / veth %.2f (%.2f–%.2f), without offloads / veth %.2f (%.2f–%.2f)",
                 udp.rates[0] / 1e3, udp.rates[1] / 1e3, udp.rates[2] / 1e3, udp.ratios[0].median, udp.ratios[0].min, udp.ratios[0].max,
                 udp.ratios[1].median, udp.ratios[1].min, udp.ratios[1].max))
    print(String(format: "Cores busy while sending (of %d): emulator %.2f, without offloads %.2f, veth %.2f; "
                 + "the emulator's threads per packet received: %.2f µs, without offloads %.2f µs",
                 sysconf(Int32(_SC_NPROCESSORS_ONLN)), udp.busyCores[0], udp.busyCores[1], udp.busyCores[2],
                 udp.emulatorMicrosecondsPerPacket[0], udp.emulatorMicrosecondsPerPacket[1]))
    let both = roundTripsBothWays(topology, emulated: emu, plain: plain, count: Int(seconds * 2000))
    let busy = busyRoundTrips(topology, emulated: emu, count: Int(seconds * 1000))
    print(String(format: "Round trip (µs) through the emulator with both cores kept busy: p50 %.0f p90 %.0f p99 %.0f max %.0f",
                 percentile(busy, 0.5), percentile(busy, 0.9), percentile(busy, 0.99), busy.last ?? 0))
    for (name, trips) in [("taking turns each packet", both.perPacket), ("in blocks of 250", both.blocks)] {
        print(String(format: "Round trip (µs), %@: emulator p50 %.0f p99 %.0f, veth p50 %.0f p99 %.0f, added p50 %.0f p99 %.0f", name,
                     percentile(trips[0], 0.5), percentile(trips[0], 0.99), percentile(trips[1], 0.5), percentile(trips[1], 0.99),
                     percentile(trips[0], 0.5) - percentile(trips[1], 0.5), percentile(trips[0], 0.99) - percentile(trips[1], 0.99)))
    }
    backend.stop()
    topology.teardown()
    exit(0)
}

// `--end-to-end`: only the last section (for the VM, where everything runs several times slower).
let endToEndOnly = CommandLine.arguments.contains("--end-to-end")
if !endToEndOnly {
let rssBefore = residentMegabytes()
let (topology, backend) = makeTopology(measuresLateness: false, scheduling: scheduling)
guard let emu = addresses["emu"], let raw = addresses["raw"], let plain = addresses["plain"] else { fail("no addresses for the links") }
print("Userspace link emulator, with the kernel's TUN offloads and without, against a plain veth pair between the same")
print("two namespaces (no impairment)")
print("")
print("| traffic | emulator | emulator, no offloads | veth | emulator / veth | no offloads / veth |")
print("|---|---|---|---|---|---|")
var cpuBefore = cpuSeconds(ofThreadsNamed: "roam-emulator")
let tcpEmu = tcpThroughput(topology, to: emu, port: 5001, seconds: phase)
let cpuTCP = cpuSeconds(ofThreadsNamed: "roam-emulator") - cpuBefore
cpuBefore = cpuSeconds(ofThreadsNamed: "roam-emulator")
let tcpRaw = tcpThroughput(topology, to: raw, port: 5013, seconds: phase)
let cpuTCPRaw = cpuSeconds(ofThreadsNamed: "roam-emulator") - cpuBefore
let tcpPlain = tcpThroughput(topology, to: plain, port: 5002, seconds: phase)
print(String(format: "| TCP | %.2f Gbit/s | %.2f Gbit/s | %.2f Gbit/s | %.2f | %.2f |", tcpEmu / 1e9, tcpRaw / 1e9, tcpPlain / 1e9, tcpEmu / tcpPlain, tcpRaw / tcpPlain))
// Five rounds taking turns (emulator, emulator without offloads, veth), so that the ratios are
// of rates measured at the same time; the ratio columns are the median round's (min–max).
let udpRounds = quick ? 1 : 5
func range(_ ratio: (min: Double, median: Double, max: Double)) -> String {
    udpRounds > 1 ? String(format: "%.2f (%.2f–%.2f)", ratio.median, ratio.min, ratio.max) : String(format: "%.2f", ratio.median)
}
let udp1500 = interleavedUDPRates(topology, to: [(emu, 5003), (raw, 5014), (plain, 5004)], size: 1500, seconds: phase, rounds: udpRounds)
print(String(format: "| UDP, 1500-byte packets | %.0f kpps (%.2f Gbit/s) | %.0f kpps | %.0f kpps | ", udp1500.rates[0] / 1e3, udp1500.rates[0] * 1500 * 8 / 1e9,
             udp1500.rates[1] / 1e3, udp1500.rates[2] / 1e3) + range(udp1500.ratios[0]) + " | " + range(udp1500.ratios[1]) + " |")
let udp64 = interleavedUDPRates(topology, to: [(emu, 5005), (raw, 5015), (plain, 5006)], size: 64, seconds: phase, rounds: udpRounds)
print(String(format: "| UDP, 64-byte packets | %.0f kpps | %.0f kpps | %.0f kpps | ", udp64.rates[0] / 1e3, udp64.rates[1] / 1e3, udp64.rates[2] / 1e3)
      + range(udp64.ratios[0]) + " | " + range(udp64.ratios[1]) + " |")
let udpCPU = String(format: "64-byte UDP: cores busy while sending (of %d), emulator %.2f, without offloads %.2f, veth %.2f; the emulator's "
                    + "threads per packet received %.2f µs, without offloads %.2f µs.", sysconf(Int32(_SC_NPROCESSORS_ONLN)),
                    udp64.busyCores[0], udp64.busyCores[1], udp64.busyCores[2], udp64.emulatorMicrosecondsPerPacket[0], udp64.emulatorMicrosecondsPerPacket[1])
let samples = quick ? 500 : 5000
let roundTrips = roundTripsBothWays(topology, emulated: emu, plain: plain, count: samples)
print("")
print("Round trip of 64-byte UDP, \(samples) samples each, the two paths taking turns packet by packet, then in blocks of 250 (µs;")
print("packet by packet, veth's round trips run while the emulator's thread still polls after its last packet)")
print("")
print("| path | p50, each packet | p99, each packet | p50, blocks | p99, blocks |")
print("|---|---|---|---|---|")
for (name, index) in [("emulator", 0), ("veth", 1)] {
    print(String(format: "| %@ | %.0f | %.0f | %.0f | %.0f |", name, percentile(roundTrips.perPacket[index], 0.5), percentile(roundTrips.perPacket[index], 0.99),
                 percentile(roundTrips.blocks[index], 0.5), percentile(roundTrips.blocks[index], 0.99)))
}
func added(_ trips: [[Double]], _ fraction: Double) -> Double { percentile(trips[0], fraction) - percentile(trips[1], fraction) }
print(String(format: "| added by the emulator | %.0f | %.0f | %.0f | %.0f |", added(roundTrips.perPacket, 0.5), added(roundTrips.perPacket, 0.99),
             added(roundTrips.blocks, 0.5), added(roundTrips.blocks, 0.99)))
let busyTrips = busyRoundTrips(topology, emulated: emu, count: quick ? 500 : 2000)
print(String(format: "Through the emulator with both cores kept busy by two ordinary threads: p50 %.0f, p90 %.0f, p99 %.0f, max %.0f µs.",
             percentile(busyTrips, 0.5), percentile(busyTrips, 0.9), percentile(busyTrips, 0.99), busyTrips.last ?? 0))
let rssDuring = residentMegabytes()
backend.stop()
topology.teardown()
print("")
print(String(format: "CPU per Gbit of TCP (the emulator's thread): %.3f CPU-seconds with offloads (%.2f s for %.2f Gbit), %.3f without (%.2f s for %.2f Gbit).",
             cpuTCP / (tcpEmu * phase / 1e9), cpuTCP, tcpEmu * phase / 1e9, cpuTCPRaw / (tcpRaw * phase / 1e9), cpuTCPRaw, tcpRaw * phase / 1e9))
print(udpCPU)
print(String(format: "Memory: resident %.1f MB with the emulators running (%.1f MB before the topology).", rssDuring, rssBefore))

// MARK: - TCP through random loss: segments cut and decided on one by one

do {
    let (topology, backend) = makeTopology(measuresLateness: false)
    let lossy = LinkConditions(impairment: Impairment(loss: .random(rate: 0.01, correlation: 0)))
    for link in ["emu", "raw"] {
        for direction in TrafficDirection.allCases { try backend.apply(lossy, link: link, direction: direction) }
    }
    let withOffloads = tcpThroughput(topology, to: emu, port: 5021, seconds: phase)
    let without = tcpThroughput(topology, to: raw, port: 5022, seconds: phase)
    backend.stop()
    topology.teardown()
    func loss(_ emulator: UserspaceBackend) -> (rate: Double, low: Double, high: Double, packets: Int) {
        let up = emulator.linkStatistics.first { $0.direction == .up }?.counters
        let arrived = Double(up?.arrived ?? 0)
        let rate = Double(up?.lost ?? 0) / max(1, arrived)
        let half = 2.576 * (0.01 * 0.99 / max(1, arrived)).squareRoot()
        return (rate, 0.01 - half, 0.01 + half, Int(arrived))
    }
    let on = loss(backend.emulated), off = loss(backend.unoffloaded)
    print("")
    print("TCP through 1% random loss, \(Int(phase)) s each")
    print("")
    print("| emulator | throughput | wire packets decided | lost | 99% interval for 1% |")
    print("|---|---|---|---|---|")
    print(String(format: "| with offloads | %.2f Gbit/s | %d | %.3f%% | %.3f–%.3f%% |", withOffloads / 1e9, on.packets, on.rate * 100, on.low * 100, on.high * 100))
    print(String(format: "| without | %.2f Gbit/s | %d | %.3f%% | %.3f–%.3f%% |", without / 1e9, off.packets, off.rate * 100, off.low * 100, off.high * 100))
    print(String(format: "With offloads / without: %.2f; %d packets read stood for more than one wire packet.", withOffloads / without, backend.emulated.superPackets))
} catch {
    fail("\(error)")
}

// MARK: - Two busy links: one thread against one per link

do {
    print("")
    print("Two links at once, each a TCP transfer through 100 µs of delay (every wire packet through the pipeline), \(Int(phase)) s")
    print("")
    print("| emulator threads | link 1 | link 2 | together | CPU-seconds of the emulator | the machine's cores busy, of \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) |")
    print("|---|---|---|---|---|---|")
    var totals: [Double] = []
    for threads in [1, 2] {
        let (topology, backend) = makeTopology(measuresLateness: false, threads: threads)
        let delayed = LinkConditions(impairment: Impairment(delay: .microseconds(100)))
        for link in ["emu", "emu2"] {
            for direction in TrafficDirection.allCases { try backend.apply(delayed, link: link, direction: direction) }
        }
        guard let second = addresses["emu2"] else { fail("no address for emu2") }
        final class Box: @unchecked Sendable { var rate = 0.0; let topology: Topology; init(_ topology: Topology) { self.topology = topology } }
        let box = Box(topology)
        let done = DispatchSemaphore(value: 0)
        let cpuBefore = cpuSeconds(ofThreadsNamed: "roam-emulator"), ticksBefore = machineTicks()
        _ = thread {
            box.rate = tcpThroughput(box.topology, to: second, port: UInt16(5030 + threads), seconds: phase)
            done.signal()
        }
        let first = tcpThroughput(topology, to: emu, port: UInt16(5040 + threads), seconds: phase)
        done.wait()
        let cpu = cpuSeconds(ofThreadsNamed: "roam-emulator") - cpuBefore, ticksAfter = machineTicks()
        // The senders, receivers and their kernel TCP share the cores with the emulator: where
        // the machine is busy all through with one thread, a second has no core to run on.
        let busy = ticksAfter.total > ticksBefore.total
            ? (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total) * Double(sysconf(Int32(_SC_NPROCESSORS_ONLN))) : 0
        backend.stop()
        topology.teardown()
        totals.append(first + box.rate)
        print(String(format: "| %d | %.2f Gbit/s | %.2f Gbit/s | %.2f Gbit/s | %.2f | %.2f |", threads, first / 1e9, box.rate / 1e9, (first + box.rate) / 1e9, cpu, busy))
    }
    print(String(format: "Two threads / one: %.2f.", totals[1] / totals[0]))
} catch {
    fail("\(error)")
}

// MARK: - Accuracy against what the scenario says (figures the test suite no longer asserts)

do {
    let (topology, backend) = makeTopology(measuresLateness: false)
    // 20 ms each way: the round trip against 40 ms.
    let delayed = LinkConditions(impairment: Impairment(delay: .milliseconds(20)))
    for direction in TrafficDirection.allCases { try backend.apply(delayed, link: "emu", direction: direction) }
    let echo = echoPair(topology, to: emu, port: 5011)
    let rtt = udpRoundTrips([echo], count: quick ? 50 : 200)[0]
    endEchoes([echo])
    // 10 Mbit/s: TCP's goodput against the rate (headers take about 3.5% of 1500-byte packets).
    let limited = LinkConditions(impairment: Impairment(delay: .milliseconds(20), rate: .mbit(10)))
    for direction in TrafficDirection.allCases { try backend.apply(limited, link: "emu", direction: direction) }
    let goodput = tcpThroughput(topology, to: emu, port: 5012, seconds: quick ? 2 : 10)
    backend.stop()
    topology.teardown()
    print("")
    print("Accuracy of the emulator against the scenario's figures")
    print("")
    print("| figure | configured | measured | measured / configured |")
    print("|---|---|---|---|")
    print(String(format: "| round trip, 20 ms each way, p50 (%d UDP echoes) | 40.0 ms | %.2f ms | %.3f |", rtt.count, percentile(rtt, 0.5) / 1e3, percentile(rtt, 0.5) / 40e3))
    print(String(format: "| round trip, 20 ms each way, min / p99 | 40.0 ms | %.2f / %.2f ms | |", rtt[0] / 1e3, percentile(rtt, 0.99) / 1e3))
    print(String(format: "| TCP goodput through 10 Mbit/s, %.0f s | 10.00 Mbit/s | %.2f Mbit/s | %.3f |", quick ? 2.0 : 10.0, goodput / 1e6, goodput / 10e6))
} catch {
    fail("\(error)")
}

// MARK: - Delay accuracy under load

/// Each packet's delivery against its scheduled time (µs, sorted) on a 10 Mbit/s link with
/// 50 ms of delay at 80% load, with the emulator's threads scheduled as `scheduling`, while
/// `busy` threads of the ordinary class keep the cores busy (as a CI machine's builds and tests
/// do); and how many of the emulator's threads were real-time.
func deliveryLateness(_ scheduling: LinkEmulator.Scheduling, busy: Int) throws -> (lateness: [Double], realtime: Int) {
    let (topology, backend) = makeTopology(measuresLateness: true, scheduling: scheduling)
    let conditions = LinkConditions(impairment: Impairment(delay: .milliseconds(50), rate: .mbit(10)))
    for direction in TrafficDirection.allCases { try backend.apply(conditions, link: "emu", direction: direction) }
    // 1000-byte datagrams at 1000 a second: 8 Mbit/s, 80% of the link.
    let receiver = socketIn(topology.namespace(of: "b")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(emu, port: 5009), { bind(receiver, $0, $1) }) == 0 else { fail("bind") }
    let sender = socketIn(topology.namespace(of: "a")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(emu, port: 5009), { connect(sender, $0, $1) }) == 0 else { fail("connect") }
    let spinning = Spinning()
    for _ in 0..<busy { Thread { while spinning.on.load(ordering: .relaxed) {} }.start() }
    defer { spinning.on.store(false, ordering: .relaxed) }
    let payload = [UInt8](repeating: 4, count: 972)
    let count = Int(phase * 1000)
    let start = now()
    for index in 0..<count {
        let due = start + Double(index) / 1000
        while now() < due { usleep(UInt32(max(0, (due - now()) * 1e6 * 0.9))) }
        _ = send(sender, payload, payload.count, 0)
    }
    usleep(300_000)
    spinning.on.store(false, ordering: .relaxed)
    backend.stop()
    let lateness = backend.emulated.deliveryLateness.map { Double($0.components.attoseconds) / 1e12 + Double($0.components.seconds) * 1e6 }.sorted()
    topology.teardown()
    close(sender)
    close(receiver)
    return (lateness, backend.emulated.realtimeThreads)
}

do {
    let cores = ProcessInfo.processInfo.activeProcessorCount
    print("")
    print("Delay accuracy: 10 Mbit/s link, 50 ms delay, 80% load (\(Int(phase * 1000)) datagrams of 1000 bytes); each packet's delivery")
    print("against its scheduled time (µs), with the emulator's threads real-time (SCHED_FIFO, the default where allowed) and")
    print("ordinary, on idle cores and with every core kept busy by an ordinary thread")
    print("")
    print("| emulator's threads | cores | packets | p50 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for (scheduling, name) in [(LinkEmulator.Scheduling.realtime, "real-time"), (.normal, "ordinary")] {
        for busy in [0, cores] {
            let (lateness, realtime) = try deliveryLateness(scheduling, busy: busy)
            let label = scheduling == .realtime && realtime == 0 ? "real-time refused: ordinary" : name
            print(String(format: "| %@ | %@ | %d | %.0f | %.0f | %.0f |", label, busy == 0 ? "idle" : "\(busy) busy", lateness.count,
                         percentile(lateness, 0.5), percentile(lateness, 0.99), lateness.last ?? 0))
        }
    }
} catch {
    fail("\(error)")
}

}

// MARK: - End to end, beside the kernel's netem where it has it

/// 1000-byte datagrams at 1000 a second (80% of 10 Mbit/s) from a to b, each stamped with the
/// time it was sent: how much later than 50 ms of delay and its 0.8 ms of serialization each
/// arrived (µs, sorted). Measured the same way through either backend.
func oneWayExcess(_ topology: Topology, to destination: String, port: UInt16, count: Int) -> [Double] {
    let receiver = socketIn(topology.namespace(of: "b")!, Int32(SOCK_DGRAM.rawValue))
    var timeout = timeval(tv_sec: 1, tv_usec: 0)
    setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard withSockaddr(address(destination, port: port), { bind(receiver, $0, $1) }) == 0 else { fail("bind") }
    final class Box: @unchecked Sendable { var excess: [Double] = [] }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    _ = thread {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while recv(receiver, &buffer, buffer.count, 0) > 0 {
            let arrived = now()
            let sent = buffer.withUnsafeBytes { $0.loadUnaligned(as: Double.self) }
            box.excess.append((arrived - sent - 0.050 - 0.0008) * 1e6)
        }
        done.signal()
    }
    let sender = socketIn(topology.namespace(of: "a")!, Int32(SOCK_DGRAM.rawValue))
    guard withSockaddr(address(destination, port: port), { connect(sender, $0, $1) }) == 0 else { fail("connect") }
    var payload = [UInt8](repeating: 4, count: 972)
    let start = now()
    for index in 0..<count {
        let due = start + Double(index) / 1000
        while now() < due { usleep(UInt32(max(0, (due - now()) * 1e6 * 0.9))) }
        var stamp = now()
        withUnsafeBytes(of: &stamp) { stamp in payload.withUnsafeMutableBytes { $0.copyMemory(from: stamp) } }
        _ = send(sender, payload, payload.count, 0)
    }
    done.wait()
    close(sender)
    close(receiver)
    return box.excess.sorted()
}

do {
    let netem = NetemBackend.probe() == .available
    let (topology, backend) = makeTopology(measuresLateness: false)
    let conditions = LinkConditions(impairment: Impairment(delay: .milliseconds(50), rate: .mbit(10)))
    for direction in TrafficDirection.allCases {
        try backend.apply(conditions, link: "emu", direction: direction)
        if netem { try backend.apply(conditions, link: "plain", direction: direction) }
    }
    let count = Int(phase * 1000)
    guard let emu = addresses["emu"], let plain = addresses["plain"] else { fail("no addresses for the links") }
    let emulated = oneWayExcess(topology, to: emu, port: 5051, count: count)
    let kernel = netem ? oneWayExcess(topology, to: plain, port: 5052, count: count) : []
    backend.stop()
    topology.teardown()
    print("")
    print("End to end, the same 10 Mbit/s link with 50 ms delay at 80% load (\(count) datagrams of 1000 bytes): each datagram's")
    print("one-way time beyond 50 ms and its 0.8 ms of serialization, stack included (µs)")
    print("")
    print("| backend | received | p50 | p99 | max |")
    print("|---|---|---|---|---|")
    for (name, excess) in [("userspace emulator", emulated)] + (netem ? [("netem (kernel)", kernel)] : []) where !excess.isEmpty {
        print("| \(name) | " + String(format: "%d | %.0f | %.0f | %.0f |", excess.count, percentile(excess, 0.5), percentile(excess, 0.99), excess.last ?? 0))
    }
    if !netem { print("(netem: not in this kernel; run the benchmark in the VM, scripts/vm.sh -- .build/release/EmulatorBenchmark, for it beside the emulator)") }
} catch {
    fail("\(error)")
}
