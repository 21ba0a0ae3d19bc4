import Glibc
import Netlink
import Testing
import TestSupport

/// Real netlink sockets in real namespaces. Root only; each test makes and removes its own namespace.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct NetlinkKernelTests {
    @Test func createsListsAndDeletesNamespaces() throws {
        let before = try HostNetworkState.capture()
        let name = "roam-test-\(getpid())-lifecycle"
        let namespace = try NetworkNamespace.create(named: name)
        #expect(NetworkNamespace.list().contains(name))
        #expect(throws: NetlinkError.self) { try NetworkNamespace.create(named: name) }
        let links = try NetlinkSocket(.route, in: namespace).links()
        #expect(links.map(\.name) == ["lo"])
        try namespace.delete()
        #expect(!NetworkNamespace.list().contains(name))
        #expect(!namespace.exists)
        #expect(try HostNetworkState.capture() == before)
    }

    /// Where the kernel has no Wi-Fi stack (this machine's), nl80211 requests fail with an
    /// error that says so; where it has one, a veth is no Wi-Fi interface to it.
    @Test func wirelessRequestsSayWhatTheKernelLacks() throws {
        let test = try TestNamespace()
        let socket = try NetlinkSocket(.generic, in: test.namespace)
        if access("/sys/class/ieee80211", F_OK) != 0 {
            #expect(!socket.hasWireless())
            let error = try #require(throws: NetlinkError.self) { try socket.wirelessStations(interfaceIndex: 1) }
            #expect(error.description.contains("nl80211") && error.description.contains("cfg80211"), "\(error)")
        } else {
            #expect(socket.hasWireless())
            #expect(throws: NetlinkError.self) { try socket.wirelessInterfaceMode(interfaceIndex: 1) }
        }
    }

    @Test func reportsMissingNamespaceClearly() throws {
        let error = #expect(throws: NetlinkError.self) {
            _ = try NetlinkSocket(.route, in: try .named("roam-test-does-not-exist"))
        }
        #expect(error?.isNotFound == true)
        #expect(error?.description.contains("ip netns list") == true)
    }

    @Test func changesLinksAddressesAndRoutesInsideTheNamespaceOnly() async throws {
        let before = try HostNetworkState.capture()
        try await TestNamespace.with { test in
            let (index, peer) = try test.addUplink("up0", subnet: 7, metric: 50, alias: "roam:type=wifi")
            let link = try #require(try test.socket.link(index: index))
            #expect(link.name == "up0")
            #expect(link.kind == "veth")
            #expect(link.alias == "roam:type=wifi")
            #expect(link.isUp)
            try test.socket.addAddress(IPPrefix("fd00:7::2/64")!, interfaceIndex: index)
            let addresses = try test.socket.addresses().filter { $0.interfaceIndex == index }
            #expect(addresses.contains { $0.prefix == IPPrefix("198.18.7.2/24")! })
            #expect(addresses.contains { $0.prefix == IPPrefix("fd00:7::2/64")! && $0.isUsable })
            let defaults = try test.socket.routes(family: .inet).filter(\.isDefault)
            #expect(defaults.count == 1)
            #expect(defaults.first?.gateway == IPAddress("198.18.7.1"))
            #expect(defaults.first?.metric == 50)
            #expect(defaults.first?.interfaceIndices == [index])

            try test.socket.setLink(index: index, mtu: 1400)
            #expect(try test.socket.link(index: index)?.mtu == 1400)
            try test.socket.deleteRoute(defaults[0])
            #expect(try test.socket.routes(family: .inet).filter(\.isDefault).isEmpty)
            try test.socket.deleteAddress(IPPrefix("198.18.7.2/24")!, interfaceIndex: index)
            #expect(!(try test.socket.addresses()).contains { $0.prefix == IPPrefix("198.18.7.2/24")! })
            try test.socket.deleteLink(index: peer)
            #expect(try test.socket.link(index: index) == nil)
        }
        #expect(try HostNetworkState.capture() == before)
    }

    @Test func createsVethAcrossNamespaces() async throws {
        try await TestNamespace.with { left in
            try await TestNamespace.with { right in
                try left.socket.createVethPair("x0", peer: "x1", peerNamespace: right.namespace)
                #expect(try left.socket.link(named: "x0") != nil)
                #expect(try left.socket.link(named: "x1") == nil)
                #expect(try right.socket.link(named: "x1") != nil)
            }
        }
    }

    @Test func deliversNotifications() async throws {
        try await TestNamespace.with { test in
            let events = try NetlinkSocket(.route, in: test.namespace)
            try events.subscribe(to: [.link, .ipv4Address, .ipv4Route])
            try events.setNonBlocking()
            let (index, _) = try test.addUplink("ev0", subnet: 9, metric: 10, alias: nil)
            var seen: [NetlinkNotification] = []
            // The requests above were acknowledged, so their notifications are already queued.
            #expect(try events.receiveNotifications { seen.append($0) } == .drained)
            #expect(seen.contains { if case .newLink(let link) = $0 { link.index == index && link.isUp } else { false } })
            #expect(seen.contains { if case .newAddress(let address) = $0 { address.prefix == IPPrefix("198.18.9.2/24")! } else { false } })
            #expect(seen.contains { if case .newRoute(let route) = $0 { route.isDefault && route.interfaceIndices == [index] } else { false } })
        }
    }

    /// One call reads everything queued, in order, however many reads of
    /// ``NetlinkSocket/datagramsPerRead`` it takes, and the next finds nothing.
    @Test func drainsEveryQueuedNotificationInOrder() async throws {
        try await TestNamespace.with { test in
            let events = try NetlinkSocket(.route, in: test.namespace)
            try events.subscribe(to: [.link])
            try events.setNonBlocking()
            // Room for them all (a link message takes about 9 KB of the socket's buffer).
            try events.setReceiveBufferSize(4 << 20)
            let lo = try test.index(of: "lo")
            let count = 5 * NetlinkSocket.datagramsPerRead + 3
            for n in 0..<count { try test.socket.setLink(index: lo, alias: "queued \(n)") }
            var aliases: [String] = []
            #expect(try events.receiveNotifications { if case .newLink(let link) = $0, let alias = link.alias { aliases.append(alias) } } == .drained)
            #expect(aliases == (0..<count).map { "queued \($0)" })
            var more = 0
            #expect(try events.receiveNotifications { _ in more += 1 } == .drained)
            #expect(more == 0)
        }
    }

    @Test func reportsOverrunWhenTheReceiveBufferOverflows() async throws {
        try await TestNamespace.with { test in
            let events = try NetlinkSocket(.route, in: test.namespace)
            try events.subscribe(to: [.link])
            try events.setNonBlocking()
            try events.setReceiveBufferSize(4096)
            let lo = try test.index(of: "lo")
            for n in 0..<400 { try test.socket.setLink(index: lo, alias: "flood \(n)") }
            var outcomes: [NetlinkSocket.ReceiveOutcome] = []
            while true {
                let outcome = try events.receiveNotifications { _ in }
                outcomes.append(outcome)
                if outcome == .drained { break }
            }
            #expect(outcomes.contains(.overrun))
        }
    }

    @Test func pinnedThreadSeesTheNamespaceSysfs() async throws {
        try await TestNamespace.with { test in
            try test.socket.createVethPair("sysfs0", peer: "sysfs1")
            #expect(access("/sys/class/net/sysfs0", F_OK) != 0, "the host's sysfs must not show the namespace's interface")
            let seen = Recorder<Bool>()
            let thread = try test.namespace.spawnThread(name: "sysfs-test") { entered in
                guard case .success = entered, (try? NetworkNamespace.mountPrivateSysfsOnCurrentThread()) != nil else {
                    seen.append(false)
                    return
                }
                seen.append(access("/sys/class/net/sysfs0", F_OK) == 0)
            }
            thread.join()
            #expect(seen.values == [true])
            #expect(access("/sys/class/net/sysfs0", F_OK) != 0, "the private mount must not leak to the process")
        }
    }

    @Test func openSysfsShowsTheNamespaceToAnyThread() async throws {
        try await TestNamespace.with { test in
            try test.socket.createVethPair("sysfs0", peer: "sysfs1")
            let sysfs = try test.namespace.openSysfs()
            // The thread that mounted it has ended; the test's thread, in the host's namespaces,
            // reads the namespace's interfaces below the descriptor.
            #expect(access("/proc/self/fd/\(sysfs.rawValue)/class/net/sysfs0/uevent", F_OK) == 0)
            #expect(access("/sys/class/net/sysfs0", F_OK) != 0, "the private mount must not leak to the process")
            let host = try NetworkNamespace.current.openSysfs()
            #expect(access("/proc/self/fd/\(host.rawValue)/class/net/sysfs0", F_OK) != 0)
            #expect(access("/proc/self/fd/\(host.rawValue)/class/net/lo", F_OK) == 0)
        }
    }

    @Test func performRunsOnAnotherThreadAndLeavesTheCallerAlone() async throws {
        try await TestNamespace.with { test in
            let mine = try NetlinkSocket(.route).links().count
            let theirs = try test.namespace.perform { try NetlinkSocket(.route).links().map(\.name) }
            #expect(theirs == ["lo"])
            #expect(try NetlinkSocket(.route).links().count == mine)
        }
    }
}

@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct NamespaceSettingsTests {
    @Test func sysctlsStayInTheirNamespace() async throws {
        let host = try NetworkNamespace.current.sysctl("net.ipv4.ip_forward")
        try await TestNamespace.with { test in
            let inside = test.namespace
            try inside.setSysctls(["net.ipv4.ip_forward": host == "1" ? "0" : "1"])
            #expect(try inside.sysctl("net.ipv4.ip_forward") == (host == "1" ? "0" : "1"))
            #expect(try NetworkNamespace.current.sysctl("net.ipv4.ip_forward") == host)
            #expect(throws: NetlinkError.self) { try inside.setSysctls(["kernel.hostname": "x"]) }
        }
    }

    @Test func addsAndDeletesRules() async throws {
        try await TestNamespace.with { test in
            let rule = RoutingRule(family: .inet, priority: 1000, source: IPPrefix("198.18.0.1/32")!, table: RouteTable(100))
            try test.socket.addRule(rule)
            #expect(try test.socket.rules().contains(rule))
            try test.socket.deleteRule(rule)
            #expect(try !test.socket.rules().contains(rule))
            // By firewall mark (`ip rule add fwmark 0x524f0100 lookup …`), of both families.
            for family in [AddressFamily.inet, .inet6] {
                let marked = RoutingRule(family: family, priority: 9000, source: nil, table: RouteTable(0x524f_0100), mark: 0x524f_0100)
                try test.socket.addRule(marked)
                #expect(try test.socket.rules().contains(marked))
                #expect(try test.socket.rules().filter { $0.priority == 9000 }.allSatisfy { $0.mark == 0x524f_0100 })
                try test.socket.deleteRule(marked)
                #expect(try !test.socket.rules().contains(marked))
            }
            #expect(try test.socket.rules().allSatisfy { $0.mark == nil }, "the kernel's own rules have no mark")
        }
    }
}

/// A qdisc's counters as the kernel keeps them (issue 57: the netem backend's fidelity section
/// reports them). tbf is on this machine; netem is read the same way in the VM's netem check.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct QdiscStatisticsTests {
    @Test func aQdiscCountsWhatPassesItAndWhatItHoldsBack() async throws {
        try await TestNamespace.with { test in
            let lo = try test.index(of: "lo")
            // 100 kbit/s with a bucket of one packet: the pings that follow are held back (overlimits).
            try test.socket.replaceTokenBucket(TokenBucketConfiguration(rate: 12_500, bucket: 1_600, limit: 100_000), interfaceIndex: lo,
                                               handle: QdiscHandle(major: 2, minor: 0), parent: .root)
            let before = try #require(try test.socket.qdiscs().first { $0.interfaceIndex == lo && $0.kind == .tokenBucket })
            #expect(before.statistics.packets == 0)
            let ping = try RunningCommand.run("/usr/sbin/ip", ["netns", "exec", test.name, "ping", "-n", "-q", "-c", "20", "-i", "0.002", "-s", "1000",
                                                               "-W", "2", "127.0.0.1"], timeout: 30)
            #expect(ping.status == 0 || ping.status == 1, "\(ping.error)")
            let after = try #require(try test.socket.qdiscs().first { $0.interfaceIndex == lo && $0.kind == .tokenBucket })
            // Each echo and its reply pass lo: 40 packets of about 1 KB.
            #expect(after.statistics.packets >= 20, "\(after.statistics)")
            #expect(after.statistics.bytes >= after.statistics.packets * 1_000, "\(after.statistics)")
            #expect(after.statistics.overlimits > 0, "\(after.statistics)")
        }
    }
}
