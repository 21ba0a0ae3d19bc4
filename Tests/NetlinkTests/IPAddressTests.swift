import Netlink
import Testing

@Suite struct IPAddressTests {
    @Test(arguments: ["198.18.0.1", "0.0.0.0", "255.255.255.255", "fd00::1", "::", "fe80::1:2:3:4", "2001:db8::ff00:42:8329"])
    func roundTrips(_ text: String) throws {
        let address = try #require(IPAddress(text))
        #expect(address.description == text)
        #expect(IPAddress(bytes: address.bytes) == address)
    }

    @Test func fromBytesOfAnyCollection() throws {
        let packet: [UInt8] = [0x45, 0, 198, 18, 0, 7, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        #expect(IPAddress(bytes: packet[2..<6]) == IPAddress("198.18.0.7"))
        #expect(IPAddress(bytes: packet[6..<22]) == IPAddress("fd00::1"))
        #expect(IPAddress(bytes: packet[2..<6].reversed()) == IPAddress("7.0.18.198"))
        for count in [0, 1, 3, 5, 15, 17] { #expect(IPAddress(bytes: packet.prefix(count)) == nil, "\(count) bytes") }
    }

    @Test(arguments: ["", "198.18.0", "198.18.0.256", "fd00:::1", "hello", "1.2.3.4/24"])
    func rejectsMalformed(_ text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func classifiesSpecialRanges() throws {
        #expect(try #require(IPAddress("127.0.0.53")).isLoopback)
        #expect(try #require(IPAddress("::1")).isLoopback)
        #expect(try #require(IPAddress("169.254.3.4")).isLinkLocal)
        #expect(try #require(IPAddress("fe80::1")).isLinkLocal)
        #expect(try #require(IPAddress("febf::1")).isLinkLocal)
        #expect(try !#require(IPAddress("fec0::1")).isLinkLocal)
        #expect(try !#require(IPAddress("198.18.0.1")).isLinkLocal)
    }

    @Test func prefixesContainTheirAddresses() throws {
        let prefix = try #require(IPPrefix("198.18.0.0/15"))
        #expect(prefix.contains(try #require(IPAddress("198.19.255.255"))))
        #expect(!prefix.contains(try #require(IPAddress("198.20.0.0"))))
        #expect(!prefix.contains(try #require(IPAddress("fd00::1"))))
        let odd = try #require(IPPrefix("fd00:0:0:0:8000::/65"))
        #expect(odd.contains(try #require(IPAddress("fd00::8000:0:0:1"))))
        #expect(!odd.contains(try #require(IPAddress("fd00::7fff:0:0:1"))))
        #expect(IPPrefix.any(.inet).contains(try #require(IPAddress("1.2.3.4"))))
        #expect(IPPrefix.any(.inet6).contains(try #require(IPAddress("2001:db8::1"))))
        #expect(IPPrefix("198.18.0.1/33") == nil)
        #expect(IPPrefix("198.18.0.1")?.length == 32)
    }

    @Test func ordersIPv4BeforeIPv6() throws {
        let sorted = [IPAddress("fd00::1")!, IPAddress("198.18.0.2")!, IPAddress("198.18.0.1")!].sorted()
        #expect(sorted.map(\.description) == ["198.18.0.1", "198.18.0.2", "fd00::1"])
    }
}

@Suite struct NetlinkErrorTests {
    @Test func mapsLibnlCodesToErrno() {
        let denied = NetlinkError.libnl(-28, "rtnl_link_add(x)")
        #expect(denied.isPermissionDenied)
        #expect(denied.errno == 1)
        #expect(denied.description.contains("rtnl_link_add(x)"))
        #expect(denied.description.contains("libnl 28"))
        #expect(NetlinkError.libnl(-31, "get link").isNotFound)
        #expect(NetlinkError.libnl(-6, "add").isAlreadyExists)
    }

    @Test func keepsErrnoAndHint() {
        let error = NetlinkError.posix("open(/run/netns/x)", errno: 2).withHint("no such namespace")
        #expect(error.isNotFound)
        #expect(error.description == "open(/run/netns/x): No such file or directory (errno 2); no such namespace")
    }

    @Test func rejectsBadNamespaceNames() {
        for name in ["", ".", "..", "a/b"] {
            #expect(throws: NetlinkError.self) { try NetworkNamespace.named(name) }
        }
        #expect((try? NetworkNamespace.named("phone"))?.path == "/run/netns/phone")
    }
}
