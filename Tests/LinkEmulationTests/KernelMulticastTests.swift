@testable import LinkEmulation
import ScenarioModel
import Testing

/// What the emulator passes outside a link's random draws (the kernel's MLD and IGMP reports)
/// and where it stops passing even that: the packets are built byte by byte here.
@Suite struct KernelMulticastTests {
    /// An IPv4 header (20 bytes) to `destination` with `protocol`, and `payload` bytes after it.
    static func ipv4(to destination: [UInt8], protocol number: UInt8, payload: Int = 8) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: 20 + payload)
        packet[0] = 0x45
        packet[8] = 1
        packet[9] = number
        packet[12...15] = [198, 18, 0, 1]
        packet[16...19] = destination[0...3]
        return packet
    }

    /// An IPv6 header (40 bytes) to `destination` whose next header is `next`, then `payload`.
    static func ipv6(to destination: [UInt8], next: UInt8, payload: [UInt8]) -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: 40) + payload
        packet[0] = 0x60
        packet[6] = next
        packet[7] = 1
        packet[8] = 0xfe
        packet[9] = 0x80
        packet[24...39] = destination[0...15]
        return packet
    }

    static let allMLDRouters: [UInt8] = [0xff, 0x02] + [UInt8](repeating: 0, count: 13) + [0x16]
    static let mDNS6: [UInt8] = [0xff, 0x02] + [UInt8](repeating: 0, count: 13) + [0xfb]
    static let unicast6: [UInt8] = [0xfd, 0x72, 0x6f, 0x61, 0x6d, 0x00] + [UInt8](repeating: 0, count: 9) + [0x02]

    @Test func theKernelsReportsAreToldFromEverythingElse() {
        // MLDv2 as the kernel sends it: a hop-by-hop header (router alert), then ICMPv6 type 143.
        let hopByHop: [UInt8] = [58, 0, 5, 2, 0, 0, 1, 0]
        let mld = Self.ipv6(to: Self.allMLDRouters, next: 0, payload: hopByHop + [143, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 20))
        let solicitation = Self.ipv6(to: Self.allMLDRouters, next: 58, payload: [133, 0, 0, 0, 0, 0, 0, 0])
        let igmp = Self.ipv4(to: [224, 0, 0, 22], protocol: 2)
        let cases: [(String, [UInt8], Bool)] = [
            ("MLDv2 report after a hop-by-hop header", mld, true),
            ("router solicitation to a multicast address", solicitation, true),
            ("IGMP report", igmp, true),
            ("mDNS over IPv4 (UDP to 224.0.0.251)", Self.ipv4(to: [224, 0, 0, 251], protocol: 17), false),
            ("mDNS over IPv6 (UDP to ff02::fb)", Self.ipv6(to: Self.mDNS6, next: 17, payload: [UInt8](repeating: 0, count: 8)), false),
            ("UDP after a hop-by-hop header to a multicast address", Self.ipv6(to: Self.mDNS6, next: 0, payload: [17] + [UInt8](repeating: 0, count: 15)), false),
            ("ICMPv6 to a unicast address", Self.ipv6(to: Self.unicast6, next: 58, payload: [128, 0, 0, 0, 0, 0, 0, 0]), false),
            ("IGMP's protocol to a unicast address", Self.ipv4(to: [198, 18, 0, 2], protocol: 2), false),
            ("a truncated IPv6 header", Array(mld.prefix(30)), false),
            ("a hop-by-hop header cut short", Array(mld.prefix(44)), false),
        ]
        for (what, packet, kernel) in cases {
            #expect(LinkEmulator.isKernelMulticast(packet, from: 0, packet.count) == kernel, "\(what)")
            // Behind a virtio-net header, as a TUN interface with offloads hands it over.
            let behind = [UInt8](repeating: 0xaa, count: 12) + packet
            #expect(LinkEmulator.isKernelMulticast(behind, from: 12, behind.count) == kernel, "\(what), after a 12-byte header")
        }
    }

    @Test func aDirectionPassesNothingOnlyWhenEveryPacketIsLost() {
        #expect(!LinkConditions().passesNothing)
        #expect(LinkConditions(isBlackholed: true).passesNothing)
        #expect(LinkConditions(impairment: Impairment(loss: .random(rate: 1, correlation: 0))).passesNothing)
        #expect(LinkConditions(impairment: Impairment(loss: .random(rate: 1, correlation: 0.5))).passesNothing)
        #expect(!LinkConditions(impairment: Impairment(loss: .random(rate: 0.999, correlation: 0))).passesNothing)
        #expect(LinkConditions(impairment: Impairment(loss: .gilbertElliott(p: 0.1, r: 0.2, lossInBad: 1, lossInGood: 1))).passesNothing)
        #expect(!LinkConditions(impairment: Impairment(loss: .gilbertElliott(p: 0.1, r: 0.2, lossInBad: 1, lossInGood: 0))).passesNothing)
    }
}
