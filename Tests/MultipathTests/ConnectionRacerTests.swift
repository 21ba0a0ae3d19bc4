import Foundation
import Glibc
import Netlink
import PathMonitor
import Simulator
import Testing
import TestSupport
@testable import Multipath

/// The racer with real sockets between two namespaces joined by Wi-Fi and cellular links played
/// by Roam's userspace emulator (so a Wi-Fi that is up but passes nothing can be made on any
/// kernel). Root only.
@Suite(.enabled(if: TestEnvironment.isRoot && UserspaceBackend.probe() == nil, "needs root and /dev/net/tun"), .serialized)
final class ConnectionRacerTests {
    let net: PhoneAndServer
    let listeners: [Int32]
    let port: UInt16 = 7443
    var topology: Topology { net.topology }
    var backend: UserspaceBackend { net.backend }
    var monitor: NetworkPathMonitor { net.monitor }
    var server: TopologyPlan.Node { net.server }

    init() throws {
        let net = try PhoneAndServer(wifi: "delay: 5ms", cell: "delay: 30ms")
        self.net = net
        let port = self.port
        listeners = try [net.server.serviceIPv6, net.server.serviceIPv4].map { address in
            try net.serverNamespace.perform { () -> Int32 in
                let fd = socket(address.family == .inet ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
                _ = address.withSocketAddress(port: port) { bind(fd, $0, $1) }
                listen(fd, 16)
                return fd
            }
        }
    }

    deinit {
        for fd in listeners { close(fd) }
    }

    var racer: ConnectionRacer { ConnectionRacer(namespace: topology.namespace(of: "phone")!) }
    var destinations: [IPAddress] { [server.serviceIPv4, server.serviceIPv6] }

    @Test func aHealthyWiFiWinsAtOnceOverIPv6() throws {
        let path = try #require(monitor.currentPath)
        let connection = try racer.connect(to: destinations, port: port, over: path)
        defer { close(connection.descriptor) }
        #expect(connection.metrics.attempts.count == 1)
        #expect(connection.metrics.winner?.candidate.route.interface == "wifi")
        #expect(connection.metrics.winner?.candidate.destination == server.serviceIPv6)
    }

    /// Wi-Fi up, passing nothing: the cellular attempt starts one attempt delay after Wi-Fi's
    /// and wins; the Wi-Fi attempt is cancelled. No connect timeout is waited for.
    @Test func aBlackholedWiFiCostsOneAttemptDelay() throws {
        try net.blackhole("wifi")
        let path = try #require(monitor.currentPath)
        #expect(path.primaryInterface?.name == "wifi", "nothing tells the phone")
        let connection = try racer.connect(to: destinations, port: port, over: path)
        defer { close(connection.descriptor) }
        let attempts = connection.metrics.attempts
        #expect(connection.metrics.winner?.candidate.route.interface == "cell")
        #expect(attempts.first?.candidate.route.interface == "wifi" && attempts.first?.outcome == .cancelled)
        let second = try #require(attempts.first { $0.candidate.route.interface == "cell" })
        #expect(second.started - attempts[0].started >= .milliseconds(250))
        // The winner's socket really carries data over cellular.
        var local = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(connection.descriptor, $0, &length) } }
        let source = withUnsafeBytes(of: local.sin6_addr) { IPAddress(bytes: Array($0)) }
        #expect(source == second.candidate.source)
    }

    /// A name whose AAAA answer is slow: A answers at once, the race waits the resolution delay
    /// (50 ms) for AAAA, then starts over IPv4 without it; the lookups ran on their own threads.
    @Test func aSlowAAAAAnswerCostsTheResolutionDelay() throws {
        let server = self.server
        let path = try #require(monitor.currentPath)
        let connection = try racer.connect(toHost: "server.roam.test", port: port, over: path) { host, family in
            #expect(host == "server.roam.test")
            if family == .inet6 { usleep(400_000) }
            return [family == .inet ? server.serviceIPv4 : server.serviceIPv6]
        }
        defer { close(connection.descriptor) }
        let metrics = connection.metrics
        #expect(metrics.winner?.candidate.destination == server.serviceIPv4)
        let first = try #require(metrics.attempts.first)
        #expect(first.candidate.destination.family == .inet && first.started >= .milliseconds(50))
        #expect(try #require(metrics.resolved[.inet]) < .milliseconds(400))
    }

    @Test func aNameWithNoAddressesFailsAsSuch() throws {
        let path = try #require(monitor.currentPath)
        do {
            _ = try racer.connect(toHost: "nowhere.roam.test", port: port, over: path) { _, _ in [] }
            Issue.record("connected to a name without addresses")
        } catch {
            #expect(error.code == .connectFailed && error.raceFailure == .resolutionFailed, "\(error)")
        }
    }

    /// The system resolver reads the hosts file without any network.
    @Test func theSystemResolverFindsLocalhost() {
        #expect(ConnectionRacer.systemResolver("localhost", .inet).contains(IPAddress("127.0.0.1")!))
    }

    /// Wi-Fi gone and expensive paths forbidden: the error says that cost is the reason.
    @Test func aPolicyThatForbidsTheOnlyPathSaysWhy() throws {
        try backend.setCarrier(false, link: "wifi")
        net.waitForPath(containing: "wifi", false)
        let path = try #require(monitor.currentPath)
        #expect(path.primaryInterface?.name == "cell")
        var strict = racer
        strict.policy = PathPolicy(allowsExpensive: false)
        let error = #expect(throws: MultipathError.self) { try strict.connect(to: destinations, port: port, over: path) }
        #expect(error?.code == .noPermittedPath)
        let refusal = try #require(error?.refusal, "expected a refusal, got \(String(describing: error))")
        #expect(refusal.onlyExpensive)
    }
}
