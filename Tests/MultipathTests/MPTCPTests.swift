import Foundation
import Glibc
import Synchronization
import Netlink
import PathMonitor
import Simulator
import Testing
import TestSupport
@testable import Multipath

/// What the path manager asks of the kernel for each service type (pure).
@Suite struct MPTCPEndpointPlanTests {
    func interface(_ name: String, _ type: InterfaceType, index: Int32, expensive: Bool = false, addresses: [String]) -> NetworkInterface {
        NetworkInterface(name: name, index: index, type: type, isExpensive: expensive, addresses: addresses.map { IPPrefix($0)! })
    }

    var both: NetworkPath {
        let interfaces = [interface("wifi", .wifi, index: 2, addresses: ["198.18.0.1/24", "fd00::1/64", "fe80::1/64"]),
                          interface("cell", .cellular, index: 3, expensive: true, addresses: ["198.18.1.1/24"]),
                          interface("lo", .loopback, index: 1, addresses: ["127.0.0.1/8"])]
        return NetworkPath(status: .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces, primaryInterface: interfaces[0],
                           isExpensive: false, isConstrained: false, supportsIPv4: true, supportsIPv6: true, supportsDNS: false, gateways: [])
    }

    func plan(_ path: NetworkPath, _ type: MultipathServiceType, policy: PathPolicy = PathPolicy(), stalled: Set<String> = [],
              withdrawn: Set<String> = []) -> [String] {
        MPTCPPathManager.endpoints(for: path, serviceType: type, policy: policy, stalled: stalled, withdrawn: withdrawn).map { entry in
            "\(entry.interface) \(entry.endpoint.address) #\(entry.endpoint.interfaceIndex ?? 0)" + (entry.endpoint.flags.contains(.backup) ? " backup" : "")
        }
    }

    @Test func handoverMakesEveryPathButThePreferredOneABackup() {
        #expect(plan(both, .handover) == ["wifi 198.18.0.1 #2", "wifi fd00::1 #2", "cell 198.18.1.1 #3 backup"])
    }

    @Test func interactiveAndAggregateUseEveryPath() {
        #expect(plan(both, .interactive) == ["wifi 198.18.0.1 #2", "wifi fd00::1 #2", "cell 198.18.1.1 #3"])
        #expect(plan(both, .aggregate) == plan(both, .interactive))
    }

    @Test func aStalledInterfaceBecomesTheBackup() {
        #expect(plan(both, .handover, stalled: ["wifi"]) == ["cell 198.18.1.1 #3", "wifi 198.18.0.1 #2 backup", "wifi fd00::1 #2 backup"])
    }

    /// A withdrawn stalled interface has no endpoints while another can carry; the only one left
    /// keeps its own, as the least preferred.
    @Test func aWithdrawnInterfaceHasNoEndpointsUnlessItIsTheOnlyOne() {
        #expect(plan(both, .handover, stalled: ["wifi"], withdrawn: ["wifi"]) == ["cell 198.18.1.1 #3"])
        #expect(plan(both, .interactive, stalled: ["wifi"], withdrawn: ["wifi"]) == ["cell 198.18.1.1 #3"])
        var wifiOnly = both
        wifiOnly.availableInterfaces.remove(at: 1)
        #expect(plan(wifiOnly, .handover, stalled: ["wifi"], withdrawn: ["wifi"]) == ["wifi 198.18.0.1 #2", "wifi fd00::1 #2"])
    }

    @Test func whenWiFiLeavesCellularCarriesTheData() {
        var cellOnly = both
        cellOnly.availableInterfaces.removeFirst()
        #expect(plan(cellOnly, .handover) == ["cell 198.18.1.1 #3"])
    }

    @Test func thePolicyAndServiceTypeNoneLeaveNoEndpoints() {
        #expect(plan(both, .handover, policy: PathPolicy(allowsExpensive: false)) == ["wifi 198.18.0.1 #2", "wifi fd00::1 #2"])
        #expect(plan(both, .none).isEmpty)
        #expect(plan(both, .handover, policy: PathPolicy(requiredInterfaceType: .wiredEthernet)).isEmpty)
    }
}

/// Real MPTCP connections between two namespaces joined by Wi-Fi and cellular links played by
/// the userspace emulator, with the path manager following the phone's PathMonitor. Root only,
/// on a kernel with MPTCP.
@Suite(.enabled(if: TestEnvironment.isRoot && UserspaceBackend.probe() == nil && MPTCP.availability() == .available,
                "needs root, /dev/net/tun and a kernel with MPTCP"), .serialized)
final class MPTCPConnectionTests {
    let net: PhoneAndServer
    var backend: UserspaceBackend { net.backend }
    var monitor: NetworkPathMonitor { net.monitor }
    var server: TopologyPlan.Node { net.server }
    var phone: NetworkNamespace { net.phone }
    var serverNamespace: NetworkNamespace { net.serverNamespace }

    init() throws {
        net = try PhoneAndServer(wifi: "delay: 5ms, rate: 40mbit", cell: "delay: 20ms, rate: 20mbit")
    }

    /// A listening socket on the server's service address: MPTCP or plain TCP.
    func listen(port: UInt16, mptcp: Bool) throws -> Int32 {
        let fd = try serverNamespace.perform { () -> Int32 in
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), mptcp ? Int32(IPPROTO_MPTCP) : 0)
        }
        try #require(fd >= 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        try #require(server.serviceIPv4.withSocketAddress(port: port) { bind(fd, $0, $1) } == 0)
        try #require(Glibc.listen(fd, 8) == 0)
        return fd
    }

    /// Connects from the phone (MPTCP or plain TCP), from `source` if given; returns the
    /// connected (blocking) socket and the server's end.
    func connect(port: UInt16, listener: Int32, mptcp: Bool, from source: IPAddress? = nil) throws -> (client: Int32, accepted: Int32) {
        let fd = try phone.perform { () -> Int32 in
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), mptcp ? Int32(IPPROTO_MPTCP) : 0)
        }
        try #require(fd >= 0)
        if let source { try #require(source.withSocketAddress(port: 0) { bind(fd, $0, $1) } == 0) }
        try #require(server.serviceIPv4.withSocketAddress(port: port) { Glibc.connect(fd, $0, $1) } == 0, "connect: \(errno)")
        let accepted = accept(listener, nil, nil)
        try #require(accepted >= 0)
        return (fd, accepted)
    }

    /// Polls `condition` every 10 ms until it holds or `seconds` pass.
    func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    @Test func theProbeSeesMPTCPAndItsSysctl() throws {
        #expect(MPTCP.availability(in: phone) == .available)
        try phone.setSysctls(["net.mptcp.enabled": "0"])
        defer { try? phone.setSysctls(["net.mptcp.enabled": "1"]) }
        #expect(MPTCP.availability(in: phone) == .disabled)
    }

    /// An MPTCP client and a plain TCP server (or the reverse) speak plain TCP, and both ends
    /// can tell.
    @Test func fallbackToPlainTCPIsDetected() throws {
        let plain = try listen(port: 7501, mptcp: false)
        defer { close(plain) }
        let first = try connect(port: 7501, listener: plain, mptcp: true)
        defer { close(first.client); close(first.accepted) }
        #expect(MPTCP.mode(of: first.client) == .fallback)
        #expect(MPTCP.mode(of: first.accepted) == .tcp)
        #expect(MPTCP.subflows(of: first.client).isEmpty)

        let multipath = try listen(port: 7502, mptcp: true)
        defer { close(multipath) }
        let second = try connect(port: 7502, listener: multipath, mptcp: false)
        defer { close(second.client); close(second.accepted) }
        #expect(MPTCP.mode(of: second.client) == .tcp)
        // The MPTCP listener accepted plain TCP, and accept() hands out a plain TCP socket for it.
        #expect(MPTCP.mode(of: second.accepted) == .tcp)
        var byte: UInt8 = 7
        #expect(send(second.client, &byte, 1, 0) == 1 && recv(second.accepted, &byte, 1, 0) == 1 && byte == 7)
    }

    /// `handover`: the path manager gives cellular a backup subflow; when Wi-Fi loses its
    /// carrier, the same connection carries on over cellular without losing or reordering a
    /// byte, and when Wi-Fi comes back the kernel opens a subflow over it again.
    @Test func aHandoverConnectionSurvivesWiFiGoingAndComingBack() throws {
        try MPTCPPathManager.acceptSubflows(in: serverNamespace)
        let manager = try MPTCPPathManager(namespace: phone, serviceType: .handover)
        defer { manager.stop() }
        let subscription = manager.follow(monitor)
        defer { subscription.cancel() }
        #expect(eventually { manager.endpoints.map(\.interface).sorted() == ["cell", "cell", "wifi", "wifi"] }, "\(manager.endpoints)")
        #expect(manager.endpoints.filter { $0.interface == "cell" }.allSatisfy { $0.endpoint.flags.contains(.backup) })

        let listener = try listen(port: 7503, mptcp: true)
        defer { close(listener) }
        let wifiAddress = try net.phoneAddress(on: "wifi")
        let (client, accepted) = try connect(port: 7503, listener: listener, mptcp: true, from: wifiAddress)
        defer { close(client) }
        #expect(MPTCP.mode(of: client) == .multipath)
        #expect(MPTCP.mode(of: accepted) == .multipath)
        // The server sends a counting pattern until the phone hangs up.
        let sender = Thread {
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            var next: UInt8 = 0
            while true {
                for index in buffer.indices { buffer[index] = next; next = next &+ 1 == 251 ? 0 : next &+ 1 }
                if send(accepted, buffer, buffer.count, Int32(MSG_NOSIGNAL)) <= 0 { break }
            }
            close(accepted)
        }
        sender.start()
        // The kernel adds subflows once the connection is fully established (data has moved).
        #expect(eventually { MPTCP.subflows(of: client).count == 2 }, "a backup subflow over cellular joined: \(MPTCP.subflows(of: client))")

        var expected: UInt8 = 0
        var received = 0
        var intact = true
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func receive(until total: Int) -> Bool {
            while received < total {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return false }
                for byte in buffer[..<count] {
                    if byte != expected { intact = false }
                    expected = expected &+ 1 == 251 ? 0 : expected &+ 1
                }
                received += count
            }
            return true
        }
        let cellAddress = try net.phoneAddress(on: "cell")
        func bytes(over address: IPAddress) -> UInt64 {
            MPTCP.subflows(of: client).filter { $0.local == address }.reduce(0) { $0 + $1.bytesReceived }
        }
        #expect(receive(until: 2_000_000))
        let cellBefore = bytes(over: cellAddress)

        try backend.setCarrier(false, link: "wifi")
        #expect(eventually { manager.endpoints.allSatisfy { $0.interface == "cell" && !$0.endpoint.flags.contains(.backup) } },
                "Wi-Fi's endpoints went and cellular's stopped being a backup: \(manager.endpoints)")
        #expect(receive(until: received + 4_000_000), "the connection carried on")
        #expect(bytes(over: cellAddress) > cellBefore + 3_000_000, "over cellular")

        try backend.setCarrier(true, link: "wifi")
        #expect(eventually { MPTCP.subflows(of: client).contains { $0.local == wifiAddress } }, "a subflow over Wi-Fi again")
        // Cellular is a backup again: once the peer has heard so, the data moves back to Wi-Fi.
        let cellBack = bytes(over: cellAddress)
        let start = received
        #expect(receive(until: received + 8_000_000))
        let overCell = bytes(over: cellAddress) - cellBack
        #expect(overCell < UInt64(received - start) / 4, "back on Wi-Fi: \(overCell) of \(received - start) bytes over cellular; \(MPTCP.subflows(of: client).map { "\($0) \($0.bytesReceived)" })")
        #expect(intact, "no byte lost, duplicated or reordered")
        shutdown(client, Int32(SHUT_RDWR))
    }

    /// What `roam daemon --mptcp` does for programs it did not write: sock_diag shows every
    /// subflow of the phone's MPTCP connection (its token, its interface's address, which one is
    /// the backup); when Wi-Fi passes nothing while an upload runs, its subflow's data goes
    /// unacknowledged, Wi-Fi is judged stalled and its endpoints withdrawn (the kernel closes its
    /// subflow and sends what it held over cellular, which stops being the backup) and the upload
    /// carries on over cellular; after the 1 s hold-down Wi-Fi gets its endpoints back.
    @Test func aSubflowThatStallsIsDemotedForItsHoldDownAndRestored() throws {
        try MPTCPPathManager.acceptSubflows(in: serverNamespace)
        let manager = try MPTCPPathManager(namespace: phone, serviceType: .handover)
        defer { manager.stop() }
        let subscription = manager.follow(monitor)
        defer { subscription.cancel() }
        #expect(eventually { manager.endpoints.count == 4 }, "\(manager.endpoints)")
        let events = Mutex<[MPTCPStallDemotion.Event]>([])
        let demotion = try MPTCPStallDemotion(manager: manager) { event in events.withLock { $0.append(event) } }
        defer { demotion.stop() }

        let listener = try listen(port: 7504, mptcp: true)
        defer { close(listener) }
        let wifiAddress = try net.phoneAddress(on: "wifi")
        let cellAddress = try net.phoneAddress(on: "cell")
        let (client, accepted) = try connect(port: 7504, listener: listener, mptcp: true, from: wifiAddress)
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(accepted, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // The phone uploads until it hangs up; the server counts what arrives.
        let received = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        let uploader = Thread {
            let buffer = [UInt8](repeating: 7, count: 16 * 1024)
            while !stopping.load(ordering: .relaxed) {
                if send(client, buffer, buffer.count, Int32(MSG_NOSIGNAL)) < 0 && errno != EAGAIN { break }
            }
        }
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !stopping.load(ordering: .relaxed) {
                let count = recv(accepted, &buffer, buffer.count, 0)
                if count > 0 { received.add(count, ordering: .relaxed) } else if count == 0 || errno != EAGAIN { break }
            }
        }
        uploader.start()
        reader.start()
        defer {
            stopping.store(true, ordering: .relaxed)
            shutdown(client, Int32(SHUT_RDWR))
            close(client)
            close(accepted)
        }

        // sock_diag sees both subflows of the one connection: Wi-Fi carries, cellular is the backup.
        let diagnostics = try MPTCPSubflowDiagnostics(namespace: phone)
        var subflows: [MPTCPSubflowInfo] = []
        #expect(eventually { subflows = (try? diagnostics.subflows()) ?? []; return subflows.count == 2 }, "\(subflows)")
        #expect(Set(subflows.map(\.token)).count == 1 && subflows.first?.token != 0, "one connection: \(subflows)")
        #expect(subflows.first { $0.local == wifiAddress }.map { !$0.isBackup } == true, "\(subflows)")
        #expect(subflows.first { $0.local == cellAddress }?.isBackup == true, "\(subflows)")
        #expect(subflows.allSatisfy { $0.remote == server.serviceIPv4 && $0.remotePort == 7504 && $0.state == UInt8(TCP_ESTABLISHED) })
        #expect(try diagnostics.connectionCount() >= 1)
        #expect(eventually { received.load(ordering: .relaxed) > 1_000_000 }, "the upload runs")
        #expect(events.withLock { $0.isEmpty }, "nothing judged while Wi-Fi carries: \(events.withLock { $0 })")

        try net.blackhole("wifi")
        func demoted() -> SubflowStallJudge.Stall? {
            events.withLock { events in
                events.lazy.compactMap { if case let .demoted(stall, _, _) = $0 { stall } else { nil } }.first
            }
        }
        #expect(eventually(10) { demoted() != nil }, "Wi-Fi judged stalled: \(events.withLock { $0 })")
        #expect(demoted()?.interface == "wifi" && demoted()?.direction == .sending, "\(String(describing: demoted()))")
        #expect(manager.preferredInterface == "cell")
        #expect(manager.endpoints.map(\.interface) == ["cell", "cell"] && manager.endpoints.allSatisfy { !$0.endpoint.flags.contains(.backup) },
                "\(manager.endpoints)")
        #expect(eventually { ((try? diagnostics.subflows()) ?? []).allSatisfy { $0.local != wifiAddress } }, "Wi-Fi's subflow closed")
        let atDemotion = received.load(ordering: .relaxed)
        #expect(eventually(10) { received.load(ordering: .relaxed) > atDemotion + 1_000_000 }, "the upload carries on over cellular")

        // The hold-down passes: Wi-Fi's endpoints back (it is still blackholed, so it may stall
        // again, held down twice as long).
        #expect(eventually(5) { events.withLock { $0.contains { if case .restored("wifi", _) = $0 { true } else { false } } } },
                "restored after 1 s: \(events.withLock { $0 })")
        #expect(manager.endpoints.filter { $0.interface == "wifi" }.count == 2 || events.withLock { $0.count } > 2, "\(manager.endpoints)")
    }
}
