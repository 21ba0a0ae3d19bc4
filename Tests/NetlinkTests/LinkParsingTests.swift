import Glibc
@testable import Netlink
import Testing
import TestSupport

/// Link notifications are read directly, not through libnl's parser (a path monitor's hot
/// path): on every kind of link message a real kernel sends (created, renamed, retagged,
/// enslaved to a bridge, moved between states, deleted; veth, bridge, TUN, loopback), the two
/// readings are the same ``Link``.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct LinkParsingTests {
    @Test func linksReadDirectlyAreTheLinksLibnlReads() async throws {
        try await TestNamespace.with { test in
            let events = try NetlinkSocket(.route, in: test.namespace)
            try events.subscribe(to: [.link])
            try events.setNonBlocking()
            try events.setReceiveBufferSize(8 << 20)
            let name = test.name
            func ip(_ arguments: String) throws {
                let result = try RunningCommand.run("/usr/sbin/ip", ["-n", name] + arguments.split(separator: " ").map(String.init))
                #expect(result.status == 0, "ip \(arguments): \(result.error)")
            }
            let lo = try test.index(of: "lo")
            try test.socket.setLink(index: lo, up: true, alias: "roam:type=wired,expensive")
            try test.socket.createVethPair("pa0", peer: "pa1")
            let veth = try test.index(of: "pa0")
            try test.socket.setLink(index: veth, up: true, alias: "roam:type=cellular", mtu: 1400)
            try ip("link add br0 type bridge")
            try ip("link set pa1 master br0")
            try ip("link set br0 up")
            try ip("link set pa1 up")
            try ip("tuntap add mode tun name tn0")
            try ip("link set tn0 up")
            try test.socket.setLink(index: veth, alias: "a longer alias with spaces and é, and more: \(String(repeating: "x", count: 100))")
            try test.socket.setLink(index: veth, up: false, name: "renamed0")
            try ip("link set pa1 nomaster")
            try ip("link del tn0")
            try ip("link del br0")

            var pairs: [(direct: Link?, libnl: Link?)] = []
            let outcome = try events.drainDatagrams { pairs += NetlinkSocket.linksReadBothWays(in: $0) }
            #expect(outcome == .drained)
            #expect(pairs.count >= 15, "\(pairs.count) link messages")
            for (direct, libnl) in pairs {
                #expect(libnl != nil)
                #expect(direct == libnl)
            }
            let read = pairs.compactMap(\.direct)
            #expect(read.contains { $0.name == "renamed0" && !$0.isUp && $0.alias?.hasPrefix("a longer alias") == true })
            #expect(read.contains { $0.name == "pa1" && $0.masterIndex != nil })
            #expect(read.contains { $0.kind == "bridge" } && read.contains { $0.kind == "tun" } && read.contains { $0.kind == "veth" && $0.mtu == 1400 })
            #expect(read.contains { $0.isLoopback && $0.alias == "roam:type=wired,expensive" && $0.hardwareAddress == [0, 0, 0, 0, 0, 0] })
        }
    }

    /// Payloads a kernel would never send (cut short, attributes that run past the end) are
    /// refused or read as far as they go, without reading outside them.
    @Test func damagedLinkMessagesAreReadWithinTheirBounds() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<64 {
            for _ in 0..<200 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let link = bytes.withUnsafeBytes { Link(rtnetlink: $0) }
                #expect((link == nil) == (length < 16))
            }
        }
    }
}
