import Netlink
import PathMonitor
import RoamControl
import RoamCore
import Testing

/// `roam daemon --cgroup-policy` apart from the kernel: the file, and what a path makes of it
/// (each group's table and the nftables rules). Root-free (the kernel's part, with byte counters:
/// RoamCLITests.DaemonCgroupPolicyTests).
struct CgroupPolicyTests {
    @Test func readsEachGroupsPolicy() throws {
        let policies = try CgroupPolicies(parsing: """
            # the backup job never on a metered link; the call only on a validated one
            system.slice/backup.service   prohibit=expensive,constrained
            user.slice/call.scope\trequire=validated prohibit=cellular   # and never cellular
            """, source: "policy")
        #expect(policies.entries.map(\.cgroup) == ["system.slice/backup.service", "user.slice/call.scope"])
        let backup = policies.entries[0].policy, call = policies.entries[1].policy
        #expect(!backup.allowsExpensive && !backup.allowsConstrained && backup.allowsCellular && backup.validation == .ignore)
        #expect(call.allowsExpensive && !call.allowsCellular && call.validation == .require)
    }

    @Test(arguments: [
        ("/system.slice prohibit=expensive", "policy:1: error: '/system.slice' is not a control group below the root"),
        ("a/../b prohibit=expensive", "'a/../b' is not a control group"),
        ("a//b prohibit=expensive", "'a//b' is not a control group"),
        ("a\"b prohibit=expensive", "is not a control group"),
        ("a prohibit=money", "policy:1: error: cannot prohibit 'money'"),
        ("a require=portal", "require= takes validated, not 'portal'"),
        ("a allow=all", "'allow' is not prohibit= or require="),
        ("a expensive", "'expensive' is not prohibit=LIST or require=validated"),
        ("a", "nothing for 'a'"),
        ("a prohibit=expensive\na prohibit=cellular", "policy:2: error: 'a' has a line already"),
    ])
    func refusesWhatItCannotApply(_ text: String, _ message: String) {
        #expect(throws: CgroupPolicies.ParseError.self) { try CgroupPolicies(parsing: text, source: "policy") }
        do {
            _ = try CgroupPolicies(parsing: text, source: "policy")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test func atMostSixtyFourGroupsAndTwentyProblems() {
        let many = (0...CgroupPolicies.maximumEntries).map { "g\($0) prohibit=expensive" }.joined(separator: "\n")
        #expect(throws: CgroupPolicies.ParseError.self) { try CgroupPolicies(parsing: many, source: "p") }
        let bad = (0..<500).map { "/g\($0) prohibit=expensive" }.joined(separator: "\n")
        do {
            _ = try CgroupPolicies(parsing: bad, source: "p")
            Issue.record("500 bad lines were read")
        } catch {
            #expect(error.description.split(separator: "\n").count == 21, "twenty problems and a line saying there are more")
        }
    }

    static func path(wifiUp: Bool) -> NetworkPath {
        var interfaces = [NetworkInterface(name: "ce0", index: 3, type: .cellular, isExpensive: true, addresses: [IPPrefix("198.18.1.2/24")!])]
        if wifiUp { interfaces.insert(NetworkInterface(name: "wl0", index: 2, type: .wifi, addresses: [IPPrefix("198.18.0.2/24")!]), at: 0) }
        return NetworkPath(status: .satisfied, unsatisfiedReason: nil, availableInterfaces: interfaces, primaryInterface: interfaces.first,
                           isExpensive: !wifiUp, isConstrained: false, supportsIPv4: true, supportsIPv6: false, supportsDNS: false, gateways: [])
    }

    static let routes = [
        Route.defaultRoute(via: IPAddress("198.18.0.1")!, interfaceIndex: 2, metric: 100),
        Route.direct(to: IPPrefix("198.18.0.0/24")!, interfaceIndex: 2),
        Route.defaultRoute(via: IPAddress("198.18.1.1")!, interfaceIndex: 3, metric: 200),
        Route.defaultRoute(via: IPAddress("10.0.0.1")!, interfaceIndex: 3, metric: 100, table: RouteTable(7)),
    ]

    @Test func eachGroupsTableHoldsThePermittedDefaultsThenUnreachable() throws {
        let policies = try CgroupPolicies(parsing: "backup prohibit=expensive\nvideo prohibit=wifi\n", source: "p")
        let home = CgroupPolicyPlan.tables(policies, path: Self.path(wifiUp: true), routes: Self.routes)
        #expect(home.map(\.interfaces) == [["wl0"], ["ce0"]])
        #expect(home[0].mark == CgroupPolicyPlan.markBase && home[1].mark == CgroupPolicyPlan.markBase + 1 && home[0].table != home[1].table)
        let backup = home[0].routes
        #expect(backup.filter { $0.type == .unicast }.map { $0.nextHops.first?.interfaceIndex } == [2, 2], "only the Wi-Fi's, not table 7's")
        #expect(backup.filter { $0.type == .unicast }.map(\.destination.description) == ["0.0.0.0/0", "198.18.0.0/24"], "its default and its subnet")
        #expect(backup.allSatisfy { $0.table == home[0].table })
        #expect(backup.filter { $0.type == .unreachable }.map(\.family) == [.inet, .inet6], "nothing falls through to main")
        #expect(backup.filter { $0.type == .unreachable }.allSatisfy { $0.metric == UInt32.max && $0.isDefault == false })
        // Away: the backup job has no interface, only the unreachable defaults.
        let away = CgroupPolicyPlan.tables(policies, path: Self.path(wifiUp: false), routes: Self.routes)
        #expect(away[0].interfaces.isEmpty && away[0].routes.allSatisfy { $0.type == .unreachable })
        #expect(away[1].interfaces == ["ce0"])
    }

    @Test func theRulesetMarksEachPresentGroupOnce() throws {
        let policies = try CgroupPolicies(parsing: "system.slice/backup.service prohibit=expensive\nmissing.scope prohibit=cellular\n", source: "p")
        let tables = CgroupPolicyPlan.tables(policies, path: Self.path(wifiUp: true), routes: Self.routes)
        let ruleset = CgroupPolicyPlan.ruleset(tables, present: ["system.slice/backup.service"])
        #expect(ruleset.contains("socket cgroupv2 level 2 \"system.slice/backup.service\" meta mark set 0x524f0100 counter"))
        #expect(!ruleset.contains("missing.scope"), "nft refuses a group that does not exist")
        #expect(ruleset.hasPrefix("table inet roam-cgroup-policy {}\ndelete table inet roam-cgroup-policy\n"), "replaced whole, atomically")
        #expect(ruleset.contains("type route hook output priority mangle") && ruleset.contains("masquerade"))
    }
}
