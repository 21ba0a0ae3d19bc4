// Multipath benchmark: each acceptance case of the multipath module, with the connection under
// test made by Multipath's public API in a scenario's phone node, beside a plain TCP client
// (the kernel's routes, reconnecting after 5 s without data, as an app without Roam would), in
// one run. The scenario only hosts the nodes and links (RoamTesting, on the backend `auto`
// picks: netem where the kernel has it, the userspace emulator otherwise); the server is this
// program's own, in the server node.
//
// - `HandoverConnection`: application-level handover over TCP (a resumable byte offset);
// - `HandoverConnection, MPTCP`: the same over an MPTCP socket, the kernel's path manager kept in
//   step with the phone's path by `MPTCPPathManager` (backup subflows), stalls demoted through it;
// - `HandoverConnection, MPTCP userspace`: the kernel's userspace path manager, the connection's
//   subflows opened and switched by `MPTCPSubflowController` (`controlsSubflows`);
// - aggregate and interactive: `ConnectionRacer` with MPTCP sockets and `MPTCPPathManager`.
//
// Wi-Fi: 5 ms each way, 50 Mbit/s; cellular (expensive): 30 ms each way, 20 Mbit/s. Aggregate:
// two 10 Mbit/s links.
//
//   swift build -c release --product MultipathBenchmark && .build/release/MultipathBenchmark
//   options: --quick (the first case only, to check that it runs)
//
// Needs root.
import Foundation
import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamTesting
import ScenarioModel
import Synchronization
import TestSupport

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("MultipathBenchmark: \(message)\n".utf8))
    exit(2)
}
guard geteuid() == 0 else { fail("needs root (it creates network namespaces)") }
let quick = CommandLine.arguments.contains("--quick")

let links = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 5ms, rate: 50mbit }
      - { name: cell, between: [phone, server], type: cellular, expensive: true, delay: 30ms, rate: 20mbit }

    """
let twoLinks = """
    nodes: { phone: {}, server: {} }
    links:
      - { name: wifi, between: [phone, server], type: wifi, delay: 10ms, rate: 10mbit }
      - { name: cell, between: [phone, server], type: cellular, delay: 20ms, rate: 10mbit }

    """

@Sendable func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }

func ms(_ duration: Duration?) -> String {
    guard let duration else { return "-" }
    return String(format: "%.0f ms", seconds(duration) * 1000)
}

/// Who makes the connection under test.
enum Client: Sendable, Hashable {
    /// A plain TCP socket over the kernel's routes; after 5 s without data (or a failed
    /// connect) it connects again.
    case plain
    /// `HandoverConnection` over TCP.
    case application
    /// `HandoverConnection` over MPTCP, with `MPTCPPathManager` (the kernel's path manager).
    case mptcp
    /// `HandoverConnection` over MPTCP with the userspace path manager (`controlsSubflows`).
    case mptcpUserspace
    /// `ConnectionRacer` with MPTCP sockets and `MPTCPPathManager` of this service type.
    case multipath(MultipathServiceType)

    var label: String {
        switch self {
        case .plain: "plain TCP"
        case .application: "HandoverConnection"
        case .mptcp: "HandoverConnection, MPTCP"
        case .mptcpUserspace: "HandoverConnection, MPTCP userspace"
        case .multipath(let type): "ConnectionRacer, MPTCP \(type.rawValue)"
        }
    }

    var usesMPTCP: Bool { if case .plain = self { false } else { self != .application } }
}

/// What the client saw, in scenario time.
struct Outcome: Sendable {
    /// The longest time without data after the first byte, and when it began.
    var longestGap: (start: Duration, length: Duration)?
    var firstByte: Duration?
    var bytes: Int64 = 0
    /// Each connection's interface and when it was made.
    var connections: [(interface: String, at: Duration)] = []
    /// MPTCP userspace: each switch of the data to another interface's subflow.
    var switches: [(interface: String, at: Duration)] = []
    /// The interface the data went over (`HandoverConnection.currentInterface`), at each change.
    var carriers: [(interface: String, at: Duration)] = []
    var events: [String] = []
    var transport = "tcp"
    var subflows = 0
    /// Why the client stopped early, if it did.
    var error: String?
}

/// The server: `live`, a 4 Mbit/s source with 2 s behind it from the offset each connection
/// asks for (8 bytes, big-endian), as fast as the link takes it so that a client that
/// reconnects catches up; or a bulk source, as fast as the link takes it, from the accept.
final class Source: Sendable {
    let listener: Int32
    let live: Bool
    let start = ContinuousClock.now
    static let bytesPerSecond = 500_000.0

    init(listener: Int32, live: Bool) {
        self.listener = listener
        self.live = live
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
        var position: Int64 = 0
        if live {
            var raw: UInt64 = 0
            guard recv(connection, &raw, 8, Int32(MSG_WAITALL)) == 8 else { return }
            position = Int64(UInt64(bigEndian: raw))
        }
        let chunk = [UInt8](repeating: 0x5a, count: 64 * 1024)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let available = live ? Int64((2 + seconds(ContinuousClock.now - start)) * Self.bytesPerSecond) : .max
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

/// A plain TCP connection to `address`, over whatever the kernel's routes pick, within `timeout`.
@Sendable func plainConnect(_ address: IPAddress, port: UInt16, timeout: Duration) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    let started = address.withSocketAddress(port: port) { connect(fd, $0, $1) }
    if started != 0 && errno != EINPROGRESS {
        close(fd)
        return nil
    }
    var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    var error: Int32 = 0
    var length = socklen_t(4)
    guard poll(&entry, 1, Int32(seconds(timeout) * 1000)) == 1, getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 else {
        ConnectionRacer.abandon(fd)
        return nil
    }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
    return fd
}

/// Where the runs' reports go: a directory of this process's own (`mkdtemp`), never a name
/// another user could make first; removed at exit.
let reportsDirectory: String = {
    do { return try TestEnvironment.processScratchDirectory("roam-multipath-bench") } catch { fatalError("cannot make a directory under /tmp: \(error)") }
}()

/// Plays `body` (the timeline) on `topology` with `client` reading from the server in the
/// phone node from `start` until `end` (scenario time); `live` chooses the server.
func play(_ name: String, _ client: Client, _ body: String, topology: String = links, live: Bool = true,
          start: Duration = .zero, end: Duration) async -> Outcome {
    do {
        let scenario = try Scenario.parse(yaml: "name: \(name)\nseed: 1\nduration: \(Int(seconds(end)) + 1)s\n" + topology + body, name: "\(name).yaml")
        var options = TestRunOptions(backend: .auto)
        options.reportsDirectory = reportsDirectory
        let run = try await scenario.run(options) { network in
            let server = try network.node("server")
            let phone = try network.node("phone")
            guard let monitor = phone.monitor else { throw RoamTestingError("the phone has no monitor") }
            let port: UInt16 = 9100
            let address = IPAddress(server.address)!
            let usesMPTCP = client.usesMPTCP
            if usesMPTCP {
                try MPTCPPathManager.acceptSubflows(in: server.namespace)
                try MPTCPPathManager.acceptSubflows(in: phone.namespace)
            }
            let listener = try await server.run { () -> Int32 in
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), usesMPTCP ? Int32(IPPROTO_MPTCP) : 0)
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
                guard fd >= 0, address.withSocketAddress(port: port, { bind(fd, $0, $1) }) == 0, listen(fd, 8) == 0 else {
                    throw RoamTestingError("the server cannot listen: errno \(errno)")
                }
                return fd
            }
            let source = Source(listener: listener, live: live)
            defer { source.stop() }
            var manager: MPTCPPathManager?
            var following: PathUpdateSubscription?
            switch client {
            case .mptcp:
                manager = try MPTCPPathManager(namespace: phone.namespace, serviceType: .handover)
            case .multipath(let type):
                manager = try MPTCPPathManager(namespace: phone.namespace, serviceType: type)
            case .mptcpUserspace:
                try phone.namespace.setSysctls(["net.mptcp.pm_type": "1"])
            case .plain, .application:
                break
            }
            if let manager { following = manager.follow(monitor) }
            defer { following?.cancel() }
            try await network.wait(until: start)
            let pathManager = manager
            return try await phone.run { () -> Outcome in
                let outcome = Mutex(Outcome())
                let began = network.elapsed
                func received(_ count: Int, last: inout Duration?) {
                    let now = network.elapsed
                    outcome.withLock { outcome in
                        if outcome.firstByte == nil { outcome.firstByte = now - began }
                        outcome.bytes += Int64(count)
                        if let last, now - last > (outcome.longestGap?.length ?? .zero) { outcome.longestGap = (last, now - last) }
                    }
                    last = now
                }
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                var last: Duration?
                switch client {
                case .plain:
                    while network.elapsed < end {
                        guard let fd = plainConnect(address, port: port, timeout: .seconds(5)) else { continue }
                        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
                        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                        var offset = UInt64(outcome.withLock { $0.bytes }).bigEndian
                        if live { _ = write(fd, &offset, 8) }
                        outcome.withLock { $0.connections.append(("routes", network.elapsed)) }
                        var quiet = network.elapsed
                        while network.elapsed < end {
                            let count = recv(fd, &buffer, buffer.count, 0)
                            if count > 0 {
                                received(count, last: &last)
                                quiet = network.elapsed
                            } else if count == 0 || (errno != EAGAIN && errno != EINTR) || network.elapsed - quiet > .seconds(5) {
                                break
                            }
                        }
                        ConnectionRacer.abandon(fd)
                    }
                case .multipath:
                    let racer = ConnectionRacer(namespace: phone.namespace, transport: .mptcp)
                    guard let path = monitor.currentPath else { throw RoamTestingError("the phone has no path") }
                    let connection = try racer.connect(to: [address], port: port, over: path)
                    defer { close(connection.descriptor) }
                    var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
                    setsockopt(connection.descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                    while network.elapsed < end {
                        let count = recv(connection.descriptor, &buffer, buffer.count, 0)
                        if count > 0 { received(count, last: &last) } else if count == 0 || (errno != EAGAIN && errno != EINTR) { break }
                    }
                    let subflows = MPTCP.subflows(of: connection.descriptor).count
                    let mode = MPTCP.mode(of: connection.descriptor)
                    outcome.withLock {
                        $0.transport = mode.rawValue
                        $0.subflows = subflows
                    }
                case .application, .mptcp, .mptcpUserspace:
                    var configuration = HandoverConnection.Configuration()
                    configuration.pathManager = pathManager
                    configuration.controlsSubflows = client == .mptcpUserspace
                    let racer = ConnectionRacer(namespace: phone.namespace, transport: client == .application ? .tcp : .mptcp)
                    let connection = try HandoverConnection(racer: racer, to: [address], port: port, monitor: monitor,
                                                            configuration: configuration, onEvent: { event in
                        let now = network.elapsed
                        outcome.withLock { outcome in
                            switch event {
                            case .connected(let metrics, _):
                                outcome.connections.append((metrics.winner?.candidate.route.interface ?? "?", now))
                                outcome.transport = metrics.mode.rawValue
                            case .left(let interface, let reason):
                                outcome.events.append(String(format: "%.2f s", seconds(now)) + " left \(interface): \(reason)")
                            case .heldDown(let interface, let hold):
                                outcome.events.append(String(format: "%.2f s", seconds(now)) + " held \(interface) down for \(hold)")
                            case .switchedSubflows(let interface, _):
                                outcome.switches.append((interface, now))
                            case .probe:
                                break
                            }
                        }
                    }) { descriptor, _ in
                        var offset = UInt64(outcome.withLock { $0.bytes }).bigEndian
                        guard write(descriptor.rawValue, &offset, 8) == 8 else { throw RoamTestingError("could not send the offset") }
                    }
                    // The app stops reading at the end of the case: interrupt() is the one method
                    // that is safe from another thread.
                    nonisolated(unsafe) let interruptible = connection
                    let stopper = Thread {
                        while network.elapsed < end { usleep(20_000) }
                        interruptible.interrupt()
                    }
                    stopper.start()
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
                        received(count, last: &last)
                        // Where the data goes now (over MPTCP, the subflow the path manager or
                        // the session prefers): each change, when the reader saw it.
                        if let interface = connection.currentInterface {
                            let now = network.elapsed
                            outcome.withLock { outcome in
                                if outcome.carriers.last?.interface != interface { outcome.carriers.append((interface, now)) }
                            }
                        }
                    }
                    connection.close()
                }
                return outcome.withLock { $0 }
            }
        }
        return run.value
    } catch {
        fail("\(name) (\(client.label)): \(error)")
    }
}

var rows: [[String]] = []
let mptcp = MPTCP.availability() == .available
/// The clients that hand over on this kernel, beside plain TCP.
let handovers: [Client] = [.application] + (mptcp ? [.mptcp, .mptcpUserspace] : [])

func detail(_ outcome: Outcome) -> String {
    var parts = ["connections: " + (outcome.connections.isEmpty ? "none" : outcome.connections.map(\.interface).joined(separator: ", "))]
    if outcome.carriers.count > 1 { parts.append("data over " + outcome.carriers.map(\.interface).joined(separator: ", ")) }
    if !outcome.switches.isEmpty { parts.append("subflow switches: " + outcome.switches.map(\.interface).joined(separator: ", ")) }
    if outcome.transport != "tcp" { parts.append(outcome.transport) }
    if let error = outcome.error { parts.append("stopped at \(error)") }
    return parts.joined(separator: "; ")
}

// 1. Wi-Fi carrier lost mid-stream (at 4 s).
for client in [.plain] + (quick ? [.application] : handovers) {
    let outcome = await play("carrier-lost", client, "timeline:\n  - { at: 4s, link: wifi, down: true }\n", end: .seconds(10))
    rows.append(["Wi-Fi carrier lost mid-stream", client.label, "longest gap in data \(ms(outcome.longestGap?.length))", detail(outcome),
                 client == .plain ? "" : "≤ 100 ms + cellular RTT (60 ms) = 160 ms"])
}

// 2. Wi-Fi blackholed mid-stream (up, passing nothing) from 4 s to 9 s.
for client in [.plain] + handovers where !quick {
    let outcome = await play("blackholed", client, "timeline:\n  - { at: 4s, link: wifi, blackhole: true }\n  - { at: 9s, link: wifi, blackhole: false }\n",
                             end: .seconds(12))
    rows.append(["Wi-Fi blackholed mid-stream (5 s)", client.label, "longest gap in data \(ms(outcome.longestGap?.length))", detail(outcome),
                 client == .plain ? "" : "≤ 1.5 s"])
}

// 3. Connecting while Wi-Fi is blackholed: the first byte of a new connection made at 1 s.
for client in [Client.plain, .application] where !quick {
    let outcome = await play("connect-blackholed", client, "timeline:\n  - { at: 0s, link: wifi, blackhole: true }\n", start: .seconds(1), end: .seconds(8))
    rows.append(["Connecting while Wi-Fi is blackholed", client.label,
                 outcome.firstByte.map { "first byte after \(ms($0))" } ?? "no data in 7 s", detail(outcome),
                 client == .plain ? "" : "≤ 250 ms + cellular connect (60 ms) + the answer (60 ms)"])
}

// 4. Wi-Fi back after an outage (down 3 s to 6 s): when the data goes over Wi-Fi again.
for client in [.plain] + handovers where !quick {
    let outcome = await play("wifi-back", client, "timeline:\n  - { at: 3s, link: wifi, down: true }\n  - { at: 6s, link: wifi, up: true }\n",
                             end: .seconds(12))
    let back = outcome.carriers.first { $0.interface == "wifi" && $0.at > .seconds(6) }?.at
    let measured = client == .plain ? "the flow died with Wi-Fi: longest gap in data \(ms(outcome.longestGap?.length))"
        : back.map { String(format: "back on Wi-Fi %.2f s after it returned", seconds($0) - 6) } ?? "stayed on cellular"
    rows.append(["Wi-Fi back after an outage (3 s)", client.label, measured, "longest gap \(ms(outcome.longestGap?.length)); " + detail(outcome),
                 client == .plain ? "" : "within a few seconds, no stall"])
}

// 5. One bulk transfer for 10 s over two 10 Mbit/s links, against one link's worth.
var single: Double?
for client in [Client.plain] + (mptcp ? [.multipath(.aggregate), .multipath(.interactive)] : []) where !quick {
    let outcome = await play("aggregate", client, "", topology: twoLinks, live: false, end: .seconds(10))
    let bits = Double(outcome.bytes) * 8 / 10
    if client == .plain { single = bits }
    let ratio = single.map { String(format: "%.2f× one link", bits / $0) } ?? "-"
    rows.append(["Bulk over two 10 Mbit/s links (10 s)", client.label, String(format: "%.1f Mbit/s, %@", bits / 1e6, ratio),
                 "\(outcome.transport), \(outcome.subflows) subflow(s)" + (outcome.error.map { "; stopped at \($0)" } ?? ""),
                 client == .multipath(.aggregate) ? "≥ 1.6× one link" : ""])
}

print("Multipath acceptance, MPTCP \(mptcp ? "available" : "unavailable"): "
      + "each case with a plain TCP client and the library's, in one run")
print("")
print("| case | client | measured | also | target |")
print("|---|---|---|---|---|")
for row in rows { print("| " + row.joined(separator: " | ") + " |") }
if !mptcp { print("\nMPTCP rows: not measured, this kernel has no MPTCP") }
