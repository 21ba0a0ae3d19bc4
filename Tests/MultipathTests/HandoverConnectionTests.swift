import Foundation
import Glibc
import Synchronization
import Netlink
import PathMonitor
import Simulator
import Testing
import TestSupport
@testable import Multipath

/// Holds, states and parts of the stall threshold (pure).
@Suite struct StalledPathsTests {
    @Test func holdDownsDoubleUpToTheMaximum() {
        var paths = StalledPaths(initialHold: .seconds(1), maximumHold: .seconds(3))
        #expect(paths.markStalled("wifi", at: .seconds(10)) == .seconds(1))
        #expect(paths.isHeldDown("wifi", at: .milliseconds(10_999)))
        #expect(!paths.isHeldDown("wifi", at: .seconds(11)))
        #expect(paths.markStalled("wifi", at: .seconds(20)) == .seconds(2))
        #expect(paths.markStalled("wifi", at: .seconds(30)) == .seconds(3))
        #expect(!paths.isHeldDown("cell", at: .seconds(30)))
    }

    @Test func theRacePathPutsHeldDownInterfacesLast() {
        let interfaces = [NetworkInterface(name: "wifi", index: 2, type: .wifi, addresses: [IPPrefix("198.18.0.1/24")!]),
                          NetworkInterface(name: "cell", index: 3, type: .cellular, isExpensive: true, addresses: [IPPrefix("198.18.1.1/24")!]),
                          NetworkInterface(name: "lo", index: 1, type: .loopback, addresses: [IPPrefix("127.0.0.1/8")!])]
        let path = NetworkPath(status: .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces, primaryInterface: interfaces[0],
                               isExpensive: false, isConstrained: false, supportsIPv4: true, supportsIPv6: false, supportsDNS: false, gateways: [])
        var paths = StalledPaths()
        paths.markStalled("wifi", at: .zero)
        // Raced last, not left out: the path just left may be the only one that still works.
        #expect(paths.racePath(path, at: .milliseconds(500)).availableInterfaces.map(\.name) == ["cell", "lo", "wifi"])
        #expect(paths.racePath(path, at: .milliseconds(500)).primaryInterface?.name == "cell")
        #expect(paths.racePath(path, at: .seconds(2)).availableInterfaces.map(\.name) == ["wifi", "cell", "lo"])
        paths.markStalled("cell", at: .zero)
        // Every interface that reaches a peer held down: loopback alone is no path to race over.
        #expect(paths.racePath(path, at: .milliseconds(500)).availableInterfaces.map(\.name) == ["wifi", "cell", "lo"], "never a path of loopback only")
        #expect(paths.racePath(path, at: .milliseconds(500)).primaryInterface?.name == "wifi")
    }

    @Test func theStallThresholdFollowsTheRoundTrip() {
        #expect(StalledPaths.stallThreshold(smoothedRTT: .milliseconds(20), maximum: .seconds(5)) == .milliseconds(300))
        #expect(StalledPaths.stallThreshold(smoothedRTT: .milliseconds(100), maximum: .seconds(5)) == .milliseconds(600))
        #expect(StalledPaths.stallThreshold(smoothedRTT: nil, maximum: .seconds(5)) == .milliseconds(600))
        #expect(StalledPaths.stallThreshold(smoothedRTT: .seconds(3), maximum: .seconds(5)) == .seconds(5))
    }
}

/// `HandoverConnection` with an app's own resumable protocol (an offset, then a counting pattern
/// from there) between two namespaces over Wi-Fi and cellular links played by the userspace
/// emulator. Root only.
@Suite(.enabled(if: TestEnvironment.isRoot && UserspaceBackend.probe() == nil, "needs root and /dev/net/tun"), .serialized)
final class HandoverConnectionTests {
    let net: PhoneAndServer
    let listener: Int32
    let acceptor: Thread
    let port: UInt16 = 7601
    var backend: UserspaceBackend { net.backend }
    var monitor: NetworkPathMonitor { net.monitor }
    var server: TopologyPlan.Node { net.server }

    init() throws {
        net = try PhoneAndServer(wifi: "delay: 5ms, rate: 40mbit", cell: "delay: 20ms, rate: 20mbit")
        let address = net.server.serviceIPv4
        let port = self.port
        let fd = try net.serverNamespace.perform { () -> Int32 in
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        _ = address.withSocketAddress(port: port) { bind(fd, $0, $1) }
        Glibc.listen(fd, 8)
        listener = fd
        // The server: reads the offset to resume from, then sends the pattern from there
        // (byte i is i mod 251) until the client goes.
        acceptor = Thread {
            while true {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread {
                    var raw: UInt64 = 0
                    guard read(connection, &raw, 8) == 8 else { close(connection); return }
                    var position = UInt64(bigEndian: raw)
                    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                    while true {
                        for index in buffer.indices { buffer[index] = UInt8((position + UInt64(index)) % 251) }
                        let sent = send(connection, buffer, buffer.count, Int32(MSG_NOSIGNAL))
                        if sent <= 0 { break }
                        position += UInt64(sent)
                    }
                    close(connection)
                }
            }
        }
        acceptor.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    struct ClientError: Error { var message: String }

    /// A client that resumes from the bytes it holds and checks every byte against the pattern.
    final class Client {
        var received: UInt64 = 0
        var intact = true
        var resumedAt: [UInt64] = []
        var events: [String] = []
        var connection: HandoverConnection!

        /// A client that follows `monitor` (woken by its updates), or with `polling`, one given
        /// only a closure for the path (which it looks at every 20 ms).
        init(racer: ConnectionRacer, server: IPAddress, port: UInt16, monitor: NetworkPathMonitor, polling: Bool = false) throws {
            let onEvent: (HandoverConnection.Event) -> Void = { [unowned self] event in
                switch event {
                case .connected(let metrics, _): events.append("connected \(metrics.winner?.candidate.route.interface ?? "?")")
                case .left(let interface, let reason): events.append("left \(interface): \(reason)")
                case .heldDown(let interface, _): events.append("held down \(interface)")
                case .probe(let interface, let connected?): events.append("probe \(interface): \(connected ? "connected" : "failed")")
                case .probe: break
                case .switchedSubflows(let interface, _): events.append("switched to \(interface)")
                }
            }
            let resume: HandoverConnection.ResumeHook = { [unowned self] descriptor, _ in
                resumedAt.append(received)
                var offset = received.bigEndian
                guard write(descriptor.rawValue, &offset, 8) == 8 else { throw ClientError(message: "could not send the offset") }
            }
            if polling {
                connection = HandoverConnection(racer: racer, to: [server], port: port, path: { monitor.currentPath }, onEvent: onEvent, resume: resume)
            } else {
                connection = try HandoverConnection(racer: racer, to: [server], port: port, monitor: monitor, onEvent: onEvent, resume: resume)
            }
        }

        /// Receives until `total` bytes have come, or (with `done`) until it says so.
        func receive(until total: UInt64, or done: () -> Bool = { false }) throws {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while received < total && !done() {
                let count = try buffer.withUnsafeMutableBytes { try connection.receive(into: $0) }
                guard count > 0 else { throw ClientError(message: "the server closed the connection") }
                for byte in buffer[..<count] {
                    if byte != UInt8(received % 251) { intact = false }
                    received += 1
                }
            }
        }
    }

    @Test(arguments: [false, true]) func carrierLossMovesTheConnectionAndItResumesWhereItWas(polling: Bool) throws {
        let client = try Client(racer: ConnectionRacer(namespace: net.phone), server: server.serviceIPv4, port: port, monitor: monitor, polling: polling)
        try client.receive(until: 1_000_000)
        try backend.setCarrier(false, link: "wifi")
        // The kernel batches carrier changes (linkwatch, up to a second): wait until the path
        // says Wi-Fi is gone, so that the move is for that and not for the stall it causes.
        net.waitForPath(containing: "wifi", false)
        try client.receive(until: 3_000_000)
        #expect(client.intact, "every byte in order across the move")
        #expect(client.connection.connections.map { $0.winner?.candidate.route.interface } == ["wifi", "cell"], "\(client.events)")
        #expect(client.connection.handovers == 1)
        #expect(client.events.contains("left wifi: wifi left the path"), "\(client.events)")
        #expect(client.resumedAt.count == 2 && client.resumedAt[0] == 0 && client.resumedAt[1] >= 1_000_000)
    }

    /// Wi-Fi returns while the flow is on (expensive) cellular: probes test it while the app
    /// reads, and after three in a row connect the flow moves back, resuming where it was.
    @Test func theConnectionMovesBackToAReturningWiFiOnceItAnswersProbes() throws {
        let client = try Client(racer: ConnectionRacer(namespace: net.phone), server: server.serviceIPv4, port: port, monitor: monitor)
        try client.receive(until: 1_000_000)
        try backend.setCarrier(false, link: "wifi")
        net.waitForPath(containing: "wifi", false)
        try client.receive(until: 2_000_000)
        #expect(client.connection.currentInterface == "cell")
        try backend.setCarrier(true, link: "wifi")
        net.waitForPath(containing: "wifi", true)
        // On cellular's 20 Mbit/s, 50 MB is about 20 s: far more than three probes take.
        try client.receive(until: 50_000_000) { client.connection.currentInterface == "wifi" }
        #expect(client.intact)
        #expect(client.connection.connections.map { $0.winner?.candidate.route.interface } == ["wifi", "cell", "wifi"], "\(client.events)")
        #expect(client.events.contains("left cell: back to wifi, which answered 3 probes in a row"), "\(client.events)")
        #expect(client.events.filter { $0 == "probe wifi: connected" }.count >= 3, "\(client.events)")
        #expect(client.resumedAt.count == 3 && client.resumedAt[2] > 2_000_000)
    }

    @Test func aBlackholedWiFiIsLeftAfterTheStallThresholdAndHeldDown() throws {
        let client = try Client(racer: ConnectionRacer(namespace: net.phone), server: server.serviceIPv4, port: port, monitor: monitor)
        try client.receive(until: 1_000_000)
        try net.blackhole("wifi")
        try client.receive(until: 3_000_000)
        #expect(client.intact)
        #expect(client.events.contains { $0.hasPrefix("left wifi: no data for") }, "\(client.events)")
        #expect(client.connection.connections.last?.winner?.candidate.route.interface == "cell")
        // Nothing told the phone: its path still leads with Wi-Fi, which the race left out.
        #expect(monitor.currentPath?.primaryInterface?.name == "wifi")
        #expect(client.connection.stalledPaths.isHeldDown("wifi", at: ConnectionRacer.now()))
    }

    @Test func theAsyncAPIFollowsThePhoneAndReportsItsMoves() async throws {
        let received = Mutex<UInt64>(0)
        let connection = try AsyncHandoverConnection(racer: ConnectionRacer(namespace: net.phone), to: [server.serviceIPv4],
                                                     port: port, monitor: monitor) { descriptor, _ in
            var offset = received.withLock { $0 }.bigEndian
            guard write(descriptor.rawValue, &offset, 8) == 8 else { throw ClientError(message: "could not send the offset") }
        }
        let events = Task {
            var seen: [String] = []
            for await event in connection.events {
                switch event {
                case .connected(let metrics, _): seen.append("connected \(metrics.winner?.candidate.route.interface ?? "?")")
                case .left(let interface, let reason): seen.append("left \(interface): \(reason)")
                case .heldDown, .probe, .switchedSubflows: break
                }
            }
            return seen
        }
        var intact = true
        func receive(until total: UInt64) async throws {
            while received.withLock({ $0 }) < total {
                let bytes = try await connection.receive(upTo: 64 * 1024)
                guard !bytes.isEmpty else { throw ClientError(message: "the server closed the connection") }
                let start = received.withLock { $0 }
                for (index, byte) in bytes.enumerated() where byte != UInt8((start + UInt64(index)) % 251) { intact = false }
                received.withLock { $0 += UInt64(bytes.count) }
            }
        }
        try await receive(until: 1_000_000)
        #expect(await connection.currentInterface == "wifi")
        try backend.setCarrier(false, link: "wifi")
        net.waitForPath(containing: "wifi", false)
        try await receive(until: 3_000_000)
        #expect(intact, "every byte in order across the move")
        #expect(await connection.currentInterface == "cell")
        #expect(await connection.connections.count == 2)
        await connection.close()
        #expect(await events.value == ["connected wifi", "left wifi: wifi left the path", "connected cell"])
    }

    @Test(.timeLimit(.minutes(1))) func cancellingTheTaskEndsAReceiveThatWaits() async throws {
        // A resume hook that asks for nothing: the server sends nothing, and no stall moves the
        // connection within a minute.
        var configuration = HandoverConnection.Configuration()
        configuration.minimumStall = .seconds(60)
        configuration.maximumStall = .seconds(60)
        let connection = try AsyncHandoverConnection(racer: ConnectionRacer(namespace: net.phone), to: [server.serviceIPv4],
                                                     port: port, monitor: monitor, configuration: configuration) { _, _ in }
        let receiving = Task { try await connection.receive(upTo: 16) }
        var events = connection.events.makeAsyncIterator()
        guard case .connected = await events.next() else {
            Issue.record("the connection was not made")
            return
        }
        receiving.cancel()
        let result = await receiving.result
        #expect(throws: MultipathError.self) { try result.get() }
        if case .failure(let error as MultipathError) = result, error.code == .interrupted {} else {
            Issue.record("expected .interrupted, got \(result)")
        }
        // The connection is still usable afterwards: the next call is not interrupted by the old cancel.
        #expect(await connection.currentInterface == "wifi")
        await connection.close()
    }
}
