// Multipath benchmark: each acceptance case of the multipath module played with `mode: none`
// (plain single-path TCP, the kernel's routes) and with `mode: handover` (application-level,
// what `--multipath auto` uses where the kernel's userspace MPTCP path manager cannot hand over;
// over MPTCP with the kernel's path manager; over MPTCP through the userspace path manager,
// what `auto` uses where it can), side by side in one
// run, on the backend `auto` picks (netem where the kernel has it, the userspace emulator
// otherwise). Wi-Fi: 5 ms each way, 50 Mbit/s; cellular (expensive): 30 ms each way, 20 Mbit/s.
// Then `mode: aggregate` (MPTCP) against `none` over two 10 Mbit/s links.
//
// Every multipath figure comes from public API: the simulator's workloads drive Multipath's
// HandoverStateMachine, and the `HandoverConnection` rows are an app's own client written
// against the library (a resumable stream from a server in the scenario's server node, played
// with RoamTesting), as a user of the library would write it.
//
//   swift build -c release --product MultipathBenchmark && .build/release/MultipathBenchmark
//   options: --quick (the first case only, to check that it runs), --library (the
//   HandoverConnection rows only)
//
// Needs root.
import Foundation
import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamTesting
import ScenarioModel
import Simulator
import Synchronization

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("MultipathBenchmark: \(message)\n".utf8))
    exit(2)
}
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }
let quick = CommandLine.arguments.contains("--quick")
let libraryOnly = CommandLine.arguments.contains("--library")

let links = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 5ms, rate: 50mbit }
      - { name: cell, between: [phone, server], type: cellular, expensive: true, delay: 30ms, rate: 20mbit }

    """

struct Outcome {
    var report: RunReport
    var events: [RecordedEvent]
    var workload: WorkloadResult { report.workloads[0] }

    /// When the first planned change of `link` that `matches` was applied, in seconds.
    func linkChange(_ link: String, _ matches: (RunEvent.LinkChange.Kind) -> Bool) -> Double? {
        events.compactMap { record -> Double? in
            guard case .link(let change) = record.event, change.link == link, change.planned != nil, matches(change.kind) else { return nil }
            return change.actual?.seconds
        }.first
    }
}

/// A mode as the table shows it: `handover` is application-level, `handover (MPTCP)` the
/// kernel's backup subflows.
func play(_ name: String, mode label: String, _ body: String, links: String = links) -> Outcome {
    let mode = String(label.prefix { $0 != " " })
    let yaml = "name: \(name)\nseed: 1\n" + links + body.replacingOccurrences(of: "MODE", with: mode)
    let parsed = ScenarioReader.parse(yaml, file: "\(name).yaml")
    guard let scenario = parsed.scenario else { fail(parsed.diagnostics.map(\.description).joined(separator: "\n")) }
    var options = RunOptions()
    options.multipath = label.contains("MPTCP userspace") ? .mptcpUserspace : label.contains("MPTCP") ? .mptcp : mode == "handover" ? .application : .auto
    options.reportDirectory = "/tmp/roam-multipath-bench-\(getpid())/\(name)-\(label.replacingOccurrences(of: " ", with: "-"))"
    do {
        let report = try ScenarioRunner(scenario: scenario, options: options).run()
        return Outcome(report: report, events: try RecordedRun.load(directory: report.reportDirectory).events)
    } catch {
        fail("\(name) (\(label)): \(error)")
    }
}

func ms(_ duration: Duration?) -> String {
    guard let duration else { return "-" }
    let value = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    return String(format: "%.0f ms", value)
}

var rows: [[String]] = []
var backend = ""
let mptcp = MPTCP.availability() == .available
/// The handover variants this kernel can run.
let handovers = mptcp ? ["handover", "handover (MPTCP)", "handover (MPTCP userspace)"] : ["handover"]

// 1. Wi-Fi carrier lost mid-stream.
let stream = """
    workloads:
      - { name: video, kind: stream, from: server, to: phone, bitrate: 4mbit, mode: MODE }

    """
for mode in ["none"] + (quick ? ["handover"] : handovers) where !libraryOnly {
    let outcome = play("carrier-lost", mode: mode, "duration: 10s\ntimeline:\n  - { at: 4s, link: wifi, down: true }\n" + stream)
    backend = outcome.report.backend.kind.rawValue
    let gap = outcome.workload.longestGap
    rows.append(["Wi-Fi carrier lost mid-stream", mode, "longest gap in data \(ms(gap?.length))",
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0), longest \(ms(outcome.workload.stream?.longestStall))",
                 mode.hasPrefix("handover") ? "≤ 100 ms + cellular RTT (60 ms) = 160 ms" : ""])
}

// 2. Wi-Fi blackholed mid-stream (up, passing nothing) from 4 s to 9 s.
for mode in ["none"] + handovers where !quick && !libraryOnly {
    let outcome = play("blackholed", mode: mode,
                       "duration: 12s\ntimeline:\n  - { at: 4s, link: wifi, blackhole: true }\n  - { at: 9s, link: wifi, blackhole: false }\n" + stream)
    rows.append(["Wi-Fi blackholed mid-stream (5 s)", mode, "longest gap in data \(ms(outcome.workload.longestGap?.length))",
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0), longest \(ms(outcome.workload.stream?.longestStall))",
                 mode.hasPrefix("handover") ? "≤ 1.5 s" : ""])
}

// 3. Connecting while Wi-Fi is blackholed.
for mode in ["none", "handover"] where !quick && !libraryOnly {
    let outcome = play("connect-blackholed", mode: mode, """
        duration: 8s
        timeline:
          - { at: 0s, link: wifi, blackhole: true }
        workloads:
          - { name: api, kind: requests, from: server, to: phone, size: 10kb, interval: 3s, count: 2, start: 1s, mode: MODE }

        """)
    let requests = outcome.workload.requests
    let first = outcome.events.compactMap { record -> RunEvent.Request? in
        if case .request(let request) = record.event { request } else { nil }
    }.first
    let measured: String
    switch first?.outcome {
    case .completed(let ttfb, _)?: measured = String(format: "first request: first byte after %.0f ms", ttfb.seconds * 1000)
    case .failed(let reason)?: measured = "first request failed: \(reason)"
    case nil: measured = "no request was made"
    }
    rows.append(["Connecting while Wi-Fi is blackholed", mode, measured,
                 "\(requests?.succeeded ?? 0) of \(requests?.sent ?? 0) answered",
                 mode == "handover" ? "≤ 250 ms + cellular connect (60 ms) + the answer (60 ms)" : ""])
}

// 4. Wi-Fi back after an outage (down 3 s to 6 s).
for mode in ["none"] + handovers where !quick && !libraryOnly {
    let outcome = play("wifi-back", mode: mode, "duration: 12s\ntimeline:\n  - { at: 3s, link: wifi, down: true }\n  - { at: 6s, link: wifi, up: true }\n" + stream)
    let up = outcome.linkChange("wifi") { if case .carrier(up: true) = $0 { true } else { false } } ?? 6
    // Back on Wi-Fi: a new connection over it, (MPTCP) a new subflow over it, or (userspace
    // path manager, where a standby subflow opens at once) the data switched to it.
    let back = outcome.events.first { record in
        guard record.time.seconds > up else { return false }
        switch record.event {
        case .subflowSwitch(_, let to, _): return mode.contains("userspace") && to == "wifi"
        case .connect(let connect): return !mode.contains("userspace") && connect.interface == "wifi"
        case .subflow(let subflow): return !mode.contains("userspace") && subflow.interface == "wifi"
        default: return false
        }
    }?.time.seconds
    let cellular = outcome.workload.bytesByInterface["cell"].map { String(format: "%.1f MB over cellular", Double($0) / 1e6) }
        ?? (mode == "none" ? "local addresses \(outcome.workload.localAddresses.joined(separator: ", "))" : "-")
    let measured = mode == "none" ? "the flow died with Wi-Fi: longest gap in data \(ms(outcome.workload.longestGap?.length))"
        : back.map { String(format: "back on Wi-Fi %.2f s after it returned", $0 - up) } ?? "stayed on cellular"
    rows.append(["Wi-Fi back after an outage (3 s)", mode, measured,
                 "playout stalls \(outcome.workload.stream?.stalls.count ?? 0); \(cellular)", mode.hasPrefix("handover") ? "within a few seconds, no stall" : ""])
}

@Sendable func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }

/// `interrupt()` is the one method of a HandoverConnection safe from another thread.
struct Interrupter: @unchecked Sendable {
    let connection: HandoverConnection
    func interrupt() { connection.interrupt() }
}

/// What an app's own client saw: `HandoverConnection` receiving a 4 Mbit/s live stream (a
/// resumable byte offset) in the phone node while the scenario plays.
struct LibraryOutcome {
    /// The longest time without data after the first byte, and when it began (run time).
    var longestGap: (start: Duration, length: Duration)?
    var bytes: Int64 = 0
    var handovers = 0
    /// Each connection's interface and when it was made (run time).
    var connections: [(interface: String, at: Duration)] = []
    var events: [String] = []
    /// Why the client stopped early, if it did.
    var error: String?
}

/// The server: a live source 4 Mbit/s with 2 s behind it, from the offset each connection asks
/// for, as fast as the link takes it (so a client that reconnects catches up).
final class LiveSource: @unchecked Sendable {
    let listener: Int32
    let start = ContinuousClock.now
    static let bytesPerSecond = 500_000.0

    init(listener: Int32) {
        self.listener = listener
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread { [self] in serve(connection) }
            }
        }
    }

    func serve(_ connection: Int32) {
        defer { close(connection) }
        var raw: UInt64 = 0
        guard recv(connection, &raw, 8, Int32(MSG_WAITALL)) == 8 else { return }
        var position = Int64(UInt64(bigEndian: raw))
        let chunk = [UInt8](repeating: 0x5a, count: 64 * 1024)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let elapsed = ContinuousClock.now - start
            let available = Int64((2 + Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * Self.bytesPerSecond)
            while position < available {
                let sent = send(connection, chunk, Int(min(Int64(chunk.count), available - position)), Int32(MSG_NOSIGNAL))
                guard sent > 0 else { return }
                position += Int64(sent)
            }
            usleep(10_000)
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

func playLibrary(_ name: String, _ body: String, until end: Duration) async -> LibraryOutcome {
    do {
        let scenario = try Scenario.parse(yaml: "name: \(name)\nseed: 1\n" + links + body, name: "\(name).yaml")
        var options = TestRunOptions(backend: .auto)
        options.reportsDirectory = "/tmp/roam-multipath-bench-\(getpid())"
        let run = try await scenario.run(options) { network in
            let server = try network.node("server")
            let phone = try network.node("phone")
            guard let monitor = phone.monitor else { throw RoamTestingError("the phone has no monitor") }
            let port: UInt16 = 9100
            let address = IPAddress(server.address)!
            let listener = try await server.run { () -> Int32 in
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
                guard address.withSocketAddress(port: port, { bind(fd, $0, $1) }) == 0, listen(fd, 8) == 0 else {
                    throw RoamTestingError("the server cannot listen: errno \(errno)")
                }
                return fd
            }
            let source = LiveSource(listener: listener)
            defer { source.stop() }
            return try await phone.run { () -> LibraryOutcome in
                let outcome = Mutex(LibraryOutcome())
                let received = Mutex<Int64>(0)
                let connection = try HandoverConnection(racer: ConnectionRacer(), to: [address], port: port, monitor: monitor, onEvent: { event in
                    let now = network.elapsed
                    outcome.withLock { outcome in
                        switch event {
                        case .connected(let metrics, _):
                            outcome.connections.append((metrics.winner?.candidate.route.interface ?? "?", now))
                        case .left(let interface, let reason):
                            outcome.events.append(String(format: "%.2f s", seconds(now)) + " left \(interface): \(reason)")
                        case .heldDown(let interface, let hold):
                            outcome.events.append(String(format: "%.2f s", seconds(now)) + " held \(interface) down for \(hold)")
                        case .probe, .switchedSubflows: break
                        }
                    }
                }) { descriptor, _ in
                    var offset = UInt64(received.withLock { $0 }).bigEndian
                    guard write(descriptor, &offset, 8) == 8 else { throw RoamTestingError("could not send the offset") }
                }
                // The app stops reading at the end of the case.
                let interrupter = Interrupter(connection: connection)
                let stopper = Thread {
                    while network.elapsed < end { usleep(20_000) }
                    interrupter.interrupt()
                }
                stopper.start()
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                var last: Duration?
                while network.elapsed < end {
                    let count: Int
                    do {
                        count = try buffer.withUnsafeMutableBytes { try connection.receive(into: $0) }
                    } catch let error as MultipathError where error.code == .interrupted {
                        break
                    } catch {
                        let now = network.elapsed
                        outcome.withLock { $0.error = String(format: "%.2f s: ", seconds(now)) + "\(error)" }
                        break
                    }
                    guard count > 0 else { break }
                    let now = network.elapsed
                    received.withLock { $0 += Int64(count) }
                    outcome.withLock { outcome in
                        if let last, now - last > (outcome.longestGap?.length ?? .zero) { outcome.longestGap = (last, now - last) }
                    }
                    last = now
                }
                connection.close()
                return outcome.withLock { outcome in
                    var result = outcome
                    result.bytes = received.withLock { $0 }
                    result.handovers = connection.handovers
                    return result
                }
            }
        }
        return run.value
    } catch {
        fail("\(name) (HandoverConnection): \(error)")
    }
}

if !quick {
    // Each scenario lasts a second longer than the client reads, so that the network is still
    // there while the client stops.
    let lost = await playLibrary("carrier-lost-library", "duration: 11s\ntimeline:\n  - { at: 4s, link: wifi, down: true }\n", until: .seconds(10))
    rows.append(["Wi-Fi carrier lost mid-stream", "HandoverConnection", "longest gap in data \(ms(lost.longestGap?.length))",
                 "\(lost.handovers) handover(s): \(lost.events.joined(separator: "; "))" + (lost.error.map { "; stopped at \($0)" } ?? ""),
                 "≤ 100 ms + cellular RTT (60 ms) = 160 ms"])
    let blackholed = await playLibrary("blackholed-library",
                                       "duration: 13s\ntimeline:\n  - { at: 4s, link: wifi, blackhole: true }\n  - { at: 9s, link: wifi, blackhole: false }\n",
                                       until: .seconds(12))
    rows.append(["Wi-Fi blackholed mid-stream (5 s)", "HandoverConnection", "longest gap in data \(ms(blackholed.longestGap?.length))",
                 "\(blackholed.handovers) handover(s): \(blackholed.events.joined(separator: "; "))" + (blackholed.error.map { "; stopped at \($0)" } ?? ""),
                 "≤ 1.5 s"])
    let back = await playLibrary("wifi-back-library", "duration: 13s\ntimeline:\n  - { at: 3s, link: wifi, down: true }\n  - { at: 6s, link: wifi, up: true }\n",
                                 until: .seconds(12))
    let returned = back.connections.dropFirst().first { $0.interface == "wifi" && $0.at > .seconds(6) }
    rows.append(["Wi-Fi back after an outage (3 s)", "HandoverConnection",
                 returned.map { String(format: "back on Wi-Fi %.2f s after it returned", seconds($0.at) - 6) } ?? "stayed on cellular",
                 "longest gap in data \(ms(back.longestGap?.length)); connections " + back.connections.map(\.interface).joined(separator: ", ")
                    + (back.error.map { "; stopped at \($0)" } ?? ""),
                 "within a few seconds, no stall"])
}

// 5. Aggregate: one bulk transfer over two 10 Mbit/s links, against one link's worth.
let twoLinks = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 10mbit }
      - { name: cell, between: [phone, server], type: cellular, delay: 20ms, rate: 10mbit }

    """
var single: Double?
for mode in ["none"] + (mptcp ? ["aggregate", "interactive"] : []) where !quick && !libraryOnly {
    let outcome = play("aggregate", mode: mode, "duration: 10s\nworkloads:\n  - { name: download, kind: bulk, from: server, to: phone, mode: MODE }\n", links: twoLinks)
    let bits = outcome.workload.throughput?.bitsPerSecond ?? 0
    if mode == "none" { single = bits }
    let ratio = single.map { String(format: "%.2f× one link", bits / $0) } ?? "-"
    let split = outcome.workload.bytesByInterface.sorted { $0.key > $1.key }.map { String(format: "%@ %.1f MB", $0.key, Double($0.value) / 1e6) }
    rows.append(["Bulk over two 10 Mbit/s links (10 s)", mode, String(format: "%.1f Mbit/s, %@", bits / 1e6, ratio),
                 "\(outcome.workload.transport); " + (split.isEmpty ? "one path" : split.joined(separator: ", ")),
                 mode == "aggregate" ? "≥ 1.6× one link" : ""])
}

print("Multipath acceptance, backend \(backend), MPTCP \(mptcp ? "available" : "unavailable"): each case with mode none and the multipath modes in one run")
print("")
print("| case | mode | measured | also | target |")
print("|---|---|---|---|---|")
for row in rows { print("| " + row.joined(separator: " | ") + " |") }
if !mptcp { print("\naggregate over two links: not measured, this kernel has no MPTCP") }
