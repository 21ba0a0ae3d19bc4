import Foundation
import Glibc
import Netlink
import ScenarioModel
@testable import Simulator
import Testing
import TestSupport

/// Multicast on the userspace emulator, over real namespaces and TUN interfaces: the kernel's
/// IGMP and MLD reports cross a link outside its random draws, but not a direction that passes
/// nothing (a Wi-Fi whose every packet is lost passes no report either, which the run's
/// `carried` once counted), and an application's multicast (mDNS) is lost there as any packet is.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct EmulatorMulticastTests {
    typealias Network = EmulatorOffloadTests.Network

    /// A UDP or raw socket in `namespace`, bound to its interface `device`.
    static func socket(in namespace: NetworkNamespace, device: String, type: Int32, protocol number: Int32) throws -> Int32 {
        let fd = try namespace.perform { Glibc.socket(AF_INET, type | Int32(SOCK_CLOEXEC.rawValue), number) }
        try #require(fd >= 0, "socket: \(String(cString: strerror(errno)))")
        let bound = device.withCString { setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0, socklen_t(device.utf8.count + 1)) }
        try #require(bound == 0, "SO_BINDTODEVICE \(device): \(String(cString: strerror(errno)))")
        return fd
    }

    /// Sends `payload` to `address` (IPv4) on `fd`.
    static func send(_ fd: Int32, _ payload: [UInt8], to address: String, port: UInt16 = 0) throws {
        var destination = sockaddr_in()
        destination.sin_family = sa_family_t(AF_INET)
        destination.sin_port = port.bigEndian
        inet_pton(AF_INET, address, &destination.sin_addr)
        let sent = withUnsafePointer(to: &destination) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, payload, payload.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(sent == payload.count, "sendto \(address): \(String(cString: strerror(errno)))")
    }

    /// An IGMPv2 membership report for 224.0.0.251 as the kernel sends one: an IPv4 header
    /// (source and checksum left for the kernel to fill in) with protocol 2, TTL 1.
    static let igmpReport: [UInt8] = {
        var packet = [UInt8](repeating: 0, count: 28)
        packet[0] = 0x45
        packet[3] = 28
        packet[8] = 1
        packet[9] = 2
        packet[16...19] = [224, 0, 0, 251]
        packet[20] = 0x16
        packet[24...27] = [224, 0, 0, 251]
        return packet
    }()

    /// Packets received by each node's link interface.
    static func received(_ network: Network, sockets: (a: NetlinkSocket, b: NetlinkSocket), interfaces: (a: String, b: String)) throws -> (a: UInt64, b: UInt64) {
        let a = try #require(try sockets.a.interfaceCounters()[interfaces.a]), b = try #require(try sockets.b.interfaceCounters()[interfaces.b])
        return (a.receivedPackets, b.receivedPackets)
    }

    @Test func aDirectionThatPassesNothingPassesNoMulticastEither() throws {
        let network = try Network(offloads: true)
        defer { _ = network.finish() }
        let interfaces = (a: try #require(network.plan.node("a")?.interfaces.first?.name), b: try #require(network.plan.node("b")?.interfaces.first?.name))
        let aAddress = try #require(network.plan.node("a")?.interfaces.first?.ipv4.address).description
        let sockets = (a: try NetlinkSocket(.route, in: network.a), b: try NetlinkSocket(.route, in: network.b))
        // From a to b every packet is lost; from b to a everything passes.
        try network.backend.apply(LinkConditions(impairment: Impairment(loss: .random(rate: 1, correlation: 0))), link: "emu", direction: .up)

        // What b sends, a receives: each datagram read back proves the emulator turned once
        // more, and two in a row that everything written before the first was handled, the
        // change above included (it is applied at the top of a turn, before the reads).
        let listener = try Self.socket(in: network.a, device: interfaces.a, type: Int32(SOCK_DGRAM.rawValue), protocol: 0)
        defer { close(listener) }
        var any = sockaddr_in()
        any.sin_family = sa_family_t(AF_INET)
        any.sin_port = UInt16(7201).bigEndian
        let bound = withUnsafePointer(to: &any) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(bound == 0, "bind: \(String(cString: strerror(errno)))")
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let fromB = try Self.socket(in: network.b, device: interfaces.b, type: Int32(SOCK_DGRAM.rawValue), protocol: 0)
        defer { close(fromB) }
        func barrier() throws {
            for _ in 0..<2 {
                try Self.send(fromB, [1, 2, 3], to: aAddress, port: 7201)
                var buffer = [UInt8](repeating: 0, count: 64)
                try #require(recv(listener, &buffer, buffer.count, 0) == 3, "b's datagram reached a")
            }
        }
        try barrier()

        // a sends b an IGMP report, an mDNS query and a unicast datagram: none arrives.
        let rawA = try Self.socket(in: network.a, device: interfaces.a, type: Int32(SOCK_RAW.rawValue), protocol: Int32(IPPROTO_RAW))
        defer { close(rawA) }
        let udpA = try Self.socket(in: network.a, device: interfaces.a, type: Int32(SOCK_DGRAM.rawValue), protocol: 0)
        defer { close(udpA) }
        let before = try Self.received(network, sockets: sockets, interfaces: interfaces)
        try Self.send(rawA, Self.igmpReport, to: "224.0.0.251")
        try Self.send(udpA, [UInt8](repeating: 0, count: 32), to: "224.0.0.251", port: 5353)
        try Self.send(udpA, [UInt8](repeating: 0, count: 32), to: try network.address(.inet).description, port: 7202)
        try barrier()
        let after = try Self.received(network, sockets: sockets, interfaces: interfaces)
        #expect(after.b == before.b, "b received \(after.b - before.b) packet(s) over a direction that loses every packet")

        // b sends a the same: the report and the mDNS query arrive (not judged by a random draw).
        let rawB = try Self.socket(in: network.b, device: interfaces.b, type: Int32(SOCK_RAW.rawValue), protocol: Int32(IPPROTO_RAW))
        defer { close(rawB) }
        try Self.send(rawB, Self.igmpReport, to: "224.0.0.251")
        try Self.send(fromB, [UInt8](repeating: 0, count: 32), to: "224.0.0.251", port: 5353)
        try barrier()
        let passed = try Self.received(network, sockets: sockets, interfaces: interfaces)
        // The two multicast packets and the barrier's two datagrams (and any report of b's kernel).
        #expect(passed.a - after.a >= 4, "a received \(passed.a - after.a) packet(s) over the direction that passes")
    }
}
