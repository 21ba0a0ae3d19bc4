import Glibc
import Netlink
import Testing
import TestSupport

/// The `mptcp_pm` generic-netlink client against the kernel, in a namespace of its own (its
/// endpoints and limits are per namespace). Root only, and a kernel with MPTCP.
@Suite(.enabled(if: TestEnvironment.isRoot && ((try? NetlinkSocket(.generic))?.hasMPTCPPathManager() ?? false), "needs root and a kernel with MPTCP"),
       .serialized)
struct MPTCPEndpointTests {
    @Test func endpointsAreAddedListedChangedAndRemoved() throws {
        let test = try TestNamespace()
        defer { try? test.namespace.delete() }
        let wifi = try test.addUplink("wifi", subnet: 10, metric: 100, alias: nil)
        let cell = try test.addUplink("cell", subnet: 11, metric: 200, alias: nil)
        try test.socket.addAddress(IPPrefix("fd00:11::2/64")!, interfaceIndex: cell.index)
        let pm = try NetlinkSocket(.generic, in: test.namespace)
        #expect(try pm.mptcpEndpoints().isEmpty, "a new namespace has no endpoints")

        let first = try pm.addMPTCPEndpoint(MPTCPEndpoint(address: IPAddress("198.18.10.2")!, interfaceIndex: wifi.index, flags: [.subflow]))
        #expect(first.id != 0, "the kernel chose an identifier")
        let second = try pm.addMPTCPEndpoint(MPTCPEndpoint(id: 42, address: IPAddress("198.18.11.2")!, interfaceIndex: cell.index, flags: [.subflow, .backup]))
        #expect(second.id == 42)
        let third = try pm.addMPTCPEndpoint(MPTCPEndpoint(address: IPAddress("fd00:11::2")!, port: 7000, flags: [.signal]))

        var listed = try pm.mptcpEndpoints().sorted { $0.id < $1.id }
        #expect(Set(listed.map(\.address)) == [IPAddress("198.18.10.2")!, IPAddress("198.18.11.2")!, IPAddress("fd00:11::2")!])
        let byAddress = Dictionary(uniqueKeysWithValues: listed.map { ($0.address, $0) })
        #expect(byAddress[IPAddress("198.18.10.2")!]?.flags == [.subflow])
        #expect(byAddress[IPAddress("198.18.10.2")!]?.interfaceIndex == wifi.index)
        #expect(byAddress[IPAddress("198.18.11.2")!]?.flags == [.subflow, .backup])
        #expect(byAddress[IPAddress("198.18.11.2")!]?.id == 42)
        #expect(byAddress[IPAddress("fd00:11::2")!]?.port == 7000)
        #expect(byAddress[IPAddress("fd00:11::2")!]?.flags == [.signal])

        // The same address twice is refused, as `ip mptcp endpoint add` refuses it.
        #expect(throws: NetlinkError.self) { try pm.addMPTCPEndpoint(MPTCPEndpoint(address: IPAddress("198.18.10.2")!, flags: [.subflow])) }

        try pm.setMPTCPEndpoint(id: 42, address: IPAddress("198.18.11.2")!, backup: false)
        try pm.setMPTCPEndpoint(id: first.id, address: first.address, backup: true)
        listed = try pm.mptcpEndpoints()
        #expect(listed.first { $0.id == 42 }?.flags == [.subflow])
        #expect(listed.first { $0.id == first.id }?.flags == [.subflow, .backup])

        try pm.removeMPTCPEndpoint(id: 42)
        #expect(Set(try pm.mptcpEndpoints().map(\.id)) == [first.id, third.id])
        #expect(throws: NetlinkError.self) { try pm.removeMPTCPEndpoint(id: 42) }
        try pm.flushMPTCPEndpoints()
        #expect(try pm.mptcpEndpoints().isEmpty)
    }

    @Test func limitsAreReadAndSet() throws {
        let test = try TestNamespace()
        defer { try? test.namespace.delete() }
        let pm = try NetlinkSocket(.generic, in: test.namespace)
        let initial = try pm.mptcpLimits()
        let wanted = MPTCPLimits(subflows: initial.subflows == 5 ? 6 : 5, addAddressAccepted: 3)
        try pm.setMPTCPLimits(wanted)
        #expect(try pm.mptcpLimits() == wanted)
        // Two reads and a write in a row on one socket: acknowledgements are not left behind.
        #expect(try pm.mptcpLimits() == wanted)
        #expect(throws: NetlinkError.self) { try pm.setMPTCPLimits(MPTCPLimits(subflows: 9, addAddressAccepted: 0)) }
        // Another namespace's limits are its own.
        #expect(try NetlinkSocket(.generic).mptcpLimits() != wanted)
    }

    @Test func aRouteSocketIsRefusedWithAClearError() throws {
        let route = try NetlinkSocket(.route)
        #expect(!route.hasMPTCPPathManager())
        do {
            _ = try route.mptcpEndpoints()
            Issue.record("a route socket listed MPTCP endpoints")
        } catch {
            #expect(error.description.contains("generic netlink"))
        }
    }
}
