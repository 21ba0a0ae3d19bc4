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

    /// An MPTCP connection over the loopback of a namespace of its own: the events group says it
    /// was created, established (with its addresses and ports) and closed, under one token.
    @Test func eventsTellOfEveryConnectionOfTheNamespace() throws {
        let test = try TestNamespace()
        defer { try? test.namespace.delete() }
        let events = try NetlinkSocket(.generic, in: test.namespace)
        try events.subscribeToMPTCPEvents()
        try events.setNonBlocking()
        let port: UInt16 = 7402
        let loopback = IPAddress("127.0.0.1")!
        let (listener, client) = try test.namespace.perform { () -> (Int32, Int32) in
            (socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_MPTCP)),
             socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_MPTCP)))
        }
        try #require(listener >= 0 && client >= 0)
        #expect(loopback.withSocketAddress(port: port) { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 4) == 0)
        #expect(loopback.withSocketAddress(port: port) { connect(client, $0, $1) } == 0)
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        close(client)
        close(accepted)
        close(listener)

        // Wait for the events (the kernel sends them as the states change), up to 5 s.
        var heard: [MPTCPEvent] = []
        var entry = pollfd(fd: events.fileDescriptor, events: Int16(POLLIN), revents: 0)
        while !heard.contains(where: { $0.kind == .closed }), poll(&entry, 1, 5000) > 0 {
            _ = try events.receiveMPTCPEvents { heard.append($0) }
        }
        let established = heard.filter { $0.kind == .established }
        #expect(!established.isEmpty, "\(heard)")
        // The client's end: from the loopback to the listener's port.
        let outgoing = try #require(established.first { $0.remotePort == port }, "\(heard)")
        #expect(outgoing.local == loopback && outgoing.remote == loopback && outgoing.token != 0)
        #expect(heard.contains { $0.kind == .created && $0.token == outgoing.token })
        #expect(heard.contains { $0.kind == .closed && $0.token == outgoing.token }, "\(heard)")
    }

    @Test func eventsNeedASubscription() throws {
        let socket = try NetlinkSocket(.generic)
        #expect(throws: NetlinkError.self) { _ = try socket.receiveMPTCPEvents { _ in } }
    }

    /// The userspace path manager on one connection over the loopback: a second subflow from
    /// another local address opened, made a backup, and closed, each step heard as an event.
    @Test func theUserspacePathManagerOpensChangesAndClosesSubflows() throws {
        let test = try TestNamespace()
        defer { try? test.namespace.delete() }
        try test.namespace.setSysctls(["net.mptcp.pm_type": "1"])
        let events = try NetlinkSocket(.generic, in: test.namespace)
        try events.subscribeToMPTCPEvents()
        try events.setNonBlocking()
        let pm = try NetlinkSocket(.generic, in: test.namespace)
        let port: UInt16 = 7403
        let server = IPAddress("127.0.0.1")!
        let second = IPAddress("127.0.0.2")!
        let (listener, client) = try test.namespace.perform { () -> (Int32, Int32) in
            (socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_MPTCP)),
             socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_MPTCP)))
        }
        defer {
            close(client)
            close(listener)
        }
        try #require(listener >= 0 && client >= 0)
        #expect(server.withSocketAddress(port: port) { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 4) == 0)
        #expect(server.withSocketAddress(port: port) { connect(client, $0, $1) } == 0)
        let accepted = accept(listener, nil, nil)
        defer { close(accepted) }
        // A connection counts as established (and takes subflows) once data went both ways.
        var byte: UInt8 = 1
        #expect(write(client, &byte, 1) == 1 && read(accepted, &byte, 1) == 1)
        #expect(write(accepted, &byte, 1) == 1 && read(client, &byte, 1) == 1)

        var heard: [MPTCPEvent] = []
        /// Reads events until one matches, up to 5 s.
        func waitFor(_ matches: (MPTCPEvent) -> Bool) throws -> MPTCPEvent? {
            var entry = pollfd(fd: events.fileDescriptor, events: Int16(POLLIN), revents: 0)
            while !heard.contains(where: matches), poll(&entry, 1, 5000) > 0 {
                _ = try events.receiveMPTCPEvents { heard.append($0) }
            }
            return heard.first(where: matches)
        }
        let connection = try #require(try waitFor { (event: MPTCPEvent) in event.kind == .established && event.remotePort == port }, "\(heard)")
        try pm.createMPTCPSubflow(token: connection.token, from: MPTCPEndpoint(address: second, flags: []), to: server, port: port)
        let subflow = try #require(try waitFor { (event: MPTCPEvent) in event.kind == .subflowEstablished && event.token == connection.token && event.local == second }, "\(heard)")
        #expect(subflow.isBackup == false)
        let localPort = try #require(subflow.localPort)

        try pm.setMPTCPSubflowBackup(token: connection.token, local: second, remote: server, remotePort: port, backup: true)
        // The peer hears it (MP_PRIO): its end of the subflow is now a backup.
        let priority = try waitFor { (event: MPTCPEvent) in event.kind == .subflowPriority && event.remote == second }
        #expect(priority?.isBackup == true, "\(heard)")

        try pm.destroyMPTCPSubflow(token: connection.token, local: second, localPort: localPort, remote: server, remotePort: port)
        let closed = try waitFor { (event: MPTCPEvent) in event.kind == .subflowClosed && event.token == connection.token && event.local == second }
        #expect(closed != nil, "\(heard)")
        // A connection that does not exist is refused.
        #expect(throws: NetlinkError.self) {
            try pm.createMPTCPSubflow(token: connection.token &+ 1, from: MPTCPEndpoint(address: second, flags: []), to: server, port: port)
        }
    }
}
