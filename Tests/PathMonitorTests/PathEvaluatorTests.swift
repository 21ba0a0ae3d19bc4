import Netlink
import RoamCore
import Testing
@testable import PathMonitor

@Suite struct PathEvaluatorTests {
    let resolvers = ResolverConfiguration(parsing: "# comment\nsearch lab\nnameserver 198.18.0.53\n")

    @Test func prefersTheBestDefaultRoute() {
        let path = PathEvaluator().path(for: Fixture.phone(), resolvers: resolvers)
        #expect(path.status == .satisfied)
        #expect(path.unsatisfiedReason == nil)
        #expect(path.primaryInterface?.name == "wlan0")
        #expect(path.availableInterfaces.map(\.name) == ["wlan0", "wwan0", "lo"])
        #expect(path.availableInterfaces.map(\.type) == [.wifi, .cellular, .loopback])
        #expect(path.availableInterfaces[1].isExpensive)
        #expect(!path.isExpensive)
        #expect(path.supportsIPv4)
        #expect(!path.supportsIPv6)
        #expect(path.supportsDNS)
        #expect(path.gateways.map(\.description) == ["198.18.0.1", "198.18.1.1"])
        #expect(path.usesInterfaceType(.wifi))
        #expect(!path.usesInterfaceType(.cellular))
    }

    /// With validation, the primary is a validated interface before one still being checked,
    /// and both before one behind a portal or without internet, whatever the routes prefer
    /// (Android's default network, iOS while a hotel's Wi-Fi holds it); all unknown, the routes
    /// decide as before.
    @Test(arguments: [
        (InterfaceConnectivity.State.unknown, InterfaceConnectivity.State.unknown, "wlan0"),
        (.validated, .validated, "wlan0"),
        (.unknown, .validated, "wwan0"),
        (.portal, .validated, "wwan0"),
        (.limited, .unknown, "wwan0"),
        (.portal, .limited, "wlan0"),
    ])
    func theValidatedInterfaceIsPrimary(_ wifi: InterfaceConnectivity.State, _ cell: InterfaceConnectivity.State, _ primary: String) {
        let evaluator = PathEvaluator()
        let (path, _) = evaluator.evaluate(Fixture.phone(), facts: [:], resolvers: resolvers,
                                           connectivity: [2: InterfaceConnectivity(state: wifi), 3: InterfaceConnectivity(state: cell)]) {
            evaluator.classifier.classify($0, facts: $1)
        }
        #expect(path.primaryInterface?.name == primary)
        #expect(path.availableInterfaces.first?.name == primary)
        #expect(path.connectivity == (primary == "wlan0" ? wifi : cell))
        #expect(path.isExpensive == (primary == "wwan0"))
    }

    /// The monitor's path under each connectivity rule (the rule races, moves and subflows
    /// follow, `ConnectivityRuleTests`): by default every interface is listed; `.prefer` leaves
    /// out a portal's or a network without internet while another is validated; `.require`
    /// keeps only the validated, and with none the path is unsatisfied for the portal.
    @Test(arguments: [
        (InterfaceConnectivity.State.portal, InterfaceConnectivity.State.validated, ValidationRule.ignore, ["wwan0", "wlan0"], nil as UnsatisfiedReason?),
        (.portal, .validated, .prefer, ["wwan0"], nil),
        (.limited, .validated, .prefer, ["wwan0"], nil),
        (.unknown, .validated, .prefer, ["wwan0", "wlan0"], nil),
        (.portal, .unknown, .prefer, ["wwan0", "wlan0"], nil),
        (.portal, .limited, .prefer, ["wlan0", "wwan0"], nil),
        (.unknown, .validated, .require, ["wwan0"], nil),
        (.portal, .limited, .require, [], .portal),
    ])
    func theConnectivityRuleDecidesWhatThePathLists(_ wifi: InterfaceConnectivity.State, _ cell: InterfaceConnectivity.State, _ rule: ValidationRule,
                                                    _ listed: [String], _ reason: UnsatisfiedReason?) {
        let evaluator = PathEvaluator(policy: PathPolicy(validation: rule))
        let (path, _) = evaluator.evaluate(Fixture.phone(), facts: [:], resolvers: resolvers,
                                           connectivity: [2: InterfaceConnectivity(state: wifi), 3: InterfaceConnectivity(state: cell)]) {
            evaluator.classifier.classify($0, facts: $1)
        }
        #expect(path.availableInterfaces.map(\.name).filter { $0 != "lo" } == listed)
        #expect(path.unsatisfiedReason == reason)
        #expect(path.status == (reason == nil ? .satisfied : .unsatisfied))
    }

    /// A monitor derives again only the interfaces that changed, and the path is the one a
    /// derivation from nothing gives, through every kind of change and back.
    @Test func anIncrementalDerivationReusesUnchangedInterfacesAndGivesTheSamePath() {
        var snapshots: [(NetworkSnapshot, [Int32: InterfaceConnectivity], derived: Int)] = [
            (Fixture.phone(), [:], 3),
            (Fixture.phone(wifiAlias: "roam:type=cellular"), [:], 1),
            (Fixture.phone(wifiAlias: "roam:type=cellular"), [:], 0),
            (Fixture.phone(wifiCarrier: false, wifiAlias: "roam:type=cellular"), [:], 1),
            (Fixture.phone(wifiCarrier: false), [:], 1),
            (Fixture.phone(), [2: InterfaceConnectivity(state: .portal)], 1),
            (Fixture.phone(), [2: InterfaceConnectivity(state: .portal), 3: InterfaceConnectivity(state: .validated)], 1),
            (Fixture.phone(cellCarrier: false), [:], 2),
        ]
        var renumbered = Fixture.phone()
        _ = renumbered.apply(.newAddress(Fixture.address(2, "198.18.0.9/24")))
        snapshots.append((renumbered, [:], 2))  // a second address on Wi-Fi, and cellular's carrier back
        var rerouted = renumbered
        _ = rerouted.apply(.newRoute(Fixture.defaultRoute(3, via: "198.18.1.1", metric: 50)))
        snapshots.append((rerouted, [:], 1))
        var gone = rerouted
        _ = gone.apply(.deletedLink(Fixture.link(2, "wlan0")))
        snapshots.append((gone, [:], 0))

        let evaluator = PathEvaluator()
        let classify = { evaluator.classifier.classify($0, facts: $1) }
        var cache = PathEvaluator.CandidateCache()
        for (step, (snapshot, connectivity, derived)) in snapshots.enumerated() {
            let incremental = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: connectivity, cache: &cache, classify: classify)
            let fresh = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: connectivity, classify: classify)
            #expect(incremental.path == fresh.path, "step \(step)")
            #expect(incremental.probeable == fresh.probeable, "step \(step)")
            #expect(cache.derived == derived, "step \(step): \(cache.derived) interfaces derived")
        }
        // A new policy derives everything again.
        var strict = evaluator
        strict.policy.allowsExpensive = false
        let path = strict.evaluate(Fixture.phone(), facts: [:], resolvers: resolvers, connectivity: [:], cache: &cache, classify: classify).path
        #expect(cache.derived == 3)
        #expect(path == strict.path(for: Fixture.phone(), resolvers: resolvers))
    }

    /// Told what changed, as a monitor is by the notifications it applies, a derivation
    /// reuses the other interfaces without comparing them, and still gives the path a
    /// derivation from nothing gives: over random sequences of every kind of notification.
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func aDerivationToldWhatChangedGivesTheSamePath(seed: UInt64) {
        var state = seed
        func next() -> UInt64 { splitMix64(&state) }
        func pick<T>(_ choices: [T]) -> T { choices[Int(next() % UInt64(choices.count))] }
        let aliases: [String?] = [nil, "roam:type=wifi", "roam:type=cellular", "roam:type=cellular,constrained", "roam:type=wired,expensive"]
        let prefixes = ["198.18.0.2/24", "198.18.0.9/24", "198.18.1.2/24", "fd00::2/64", "fe80::2/64", "169.254.0.2/16"]
        let evaluator = PathEvaluator()
        let classify = { evaluator.classifier.classify($0, facts: $1) }
        var snapshot = Fixture.phone()
        var connectivity: [Int32: InterfaceConnectivity] = [:]
        var cache = PathEvaluator.CandidateCache()
        var changes = PathEvaluator.Changes.everything
        var reused = 0
        for step in 0..<400 {
            let index = pick([Int32(2), 3, 4, 5])
            let notification: NetlinkNotification
            switch next() % 9 {
            case 0, 1: notification = .newLink(Fixture.link(index, "if\(index)", alias: pick(aliases)))
            case 2: notification = .newLink(Fixture.link(index, "if\(index)", up: next() % 2 == 0, carrier: next() % 2 == 0, alias: pick(aliases)))
            case 3: notification = .deletedLink(Fixture.link(index, "if\(index)"))
            case 4: notification = .newAddress(Fixture.address(index, pick(prefixes), flags: next() % 5 == 0 ? [.tentative] : []))
            case 5: notification = .deletedAddress(Fixture.address(index, pick(prefixes)))
            case 6: notification = .newRoute(Fixture.defaultRoute(index, via: pick(["198.18.0.1", "198.18.1.1"]), metric: UInt32(next() % 3) * 100))
            case 7: notification = .deletedRoute(Fixture.defaultRoute(index, via: pick(["198.18.0.1", "198.18.1.1"]), metric: UInt32(next() % 3) * 100))
            default:
                notification = .newLink(Fixture.link(index, "if\(index)"))
                connectivity[index] = next() % 2 == 0 ? nil : InterfaceConnectivity(state: pick([.validated, .portal, .limited]))
            }
            switch snapshot.apply(notification) {
            case .unchanged: break
            case .changed: changes.record(notification)
            // The monitor dumps routes again after this: a change of everything.
            case .routesNeedResync: changes.markEverythingChanged()
            }
            let toldOnly = !changes.isEverything
            let incremental = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: connectivity,
                                                 cache: &cache, changes: changes, classify: classify)
            let fresh = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: connectivity, classify: classify)
            #expect(incremental.path == fresh.path, "seed \(seed), step \(step): \(notification)")
            #expect(incremental.probeable == fresh.probeable, "seed \(seed), step \(step)")
            if toldOnly { reused += snapshot.links.count - cache.derived }
            changes = .none
        }
        // Told only of interfaces, the others were reused (the test would pass vacuously otherwise).
        #expect(reused > 200, "\(reused) interfaces reused without comparing")
    }

    /// Told of one interface, a derivation derives that one alone; told of nothing, none.
    @Test func aDerivationToldOfOneInterfaceDerivesItAlone() {
        let evaluator = PathEvaluator()
        let classify = { evaluator.classifier.classify($0, facts: $1) }
        var snapshot = Fixture.phone()
        var cache = PathEvaluator.CandidateCache()
        _ = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: [:], cache: &cache, classify: classify)
        #expect(cache.derived == 3)
        let retag = NetlinkNotification.newLink(Fixture.link(2, "wlan0", alias: "roam:type=cellular"))
        #expect(snapshot.apply(retag) == .changed)
        var changes = PathEvaluator.Changes.none
        changes.record(retag)
        let path = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: [:], cache: &cache, changes: changes, classify: classify).path
        #expect(cache.derived == 1)
        #expect(path.isExpensive)
        #expect(path == evaluator.path(for: snapshot, resolvers: resolvers))
        _ = evaluator.evaluate(snapshot, facts: [:], resolvers: resolvers, connectivity: [:], cache: &cache, changes: .none, classify: classify)
        #expect(cache.derived == 0)
        // A route is a change of everything.
        changes = .none
        changes.record(.newRoute(Fixture.defaultRoute(3, via: "198.18.1.1", metric: 50)))
        #expect(changes.isEverything)
    }

    @Test func fallsBackToCellularWhenWifiLosesCarrier() {
        let path = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false), resolvers: resolvers)
        #expect(path.status == .satisfied)
        #expect(path.primaryInterface?.name == "wwan0")
        #expect(path.isExpensive)
        #expect(path.usesInterfaceType(.cellular))
        #expect(path.availableInterfaces.map(\.name) == ["wwan0", "lo"])
        #expect(path.gateways.map(\.description) == ["198.18.1.1"])
        // The resolver's subnet route is over Wi-Fi, which has no carrier: the kernel (with
        // ignore_routes_with_linkdown) routes the query through cellular's default route instead.
        #expect(path.supportsDNS)
    }

    @Test func isUnsatisfiedWithoutUsableInterfaces() {
        let path = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false, cellCarrier: false), resolvers: resolvers)
        #expect(path.status == .unsatisfied)
        #expect(path.unsatisfiedReason == .noUsableInterface)
        #expect(path.primaryInterface == nil)
        #expect(path.availableInterfaces.map(\.name) == ["lo"])
        #expect(!path.supportsIPv4 && !path.supportsDNS && path.gateways.isEmpty)
    }

    @Test func isUnsatisfiedWithoutADefaultRoute() {
        let snapshot = NetworkSnapshot(
            links: [Fixture.loopback, Fixture.link(2, "eth0")],
            addresses: Fixture.loopbackAddresses + [Fixture.address(2, "198.18.0.2/24")],
            routes: [Fixture.subnetRoute(2, "198.18.0.0/24")])
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.status == .unsatisfied)
        #expect(path.unsatisfiedReason == .noRoute)
        #expect(path.availableInterfaces.map(\.name) == ["eth0", "lo"])
    }

    @Test func needsAnAddressOfTheRoutesFamily() {
        // An IPv6 default route with only a link-local address, and an IPv4 route with a
        // tentative address: neither can carry traffic yet.
        let snapshot = NetworkSnapshot(
            links: [Fixture.loopback, Fixture.link(2, "eth0")],
            addresses: [Fixture.address(2, "fe80::2/64", scope: .link), Fixture.address(2, "198.18.0.2/24", flags: .tentative)],
            routes: [Fixture.defaultRoute(2, via: "fe80::1"), Fixture.defaultRoute(2, via: "198.18.0.1")])
        #expect(PathEvaluator().path(for: snapshot).unsatisfiedReason == .noUsableInterface)
        let ready = NetworkSnapshot(
            links: [Fixture.loopback, Fixture.link(2, "eth0")],
            addresses: [Fixture.address(2, "fe80::2/64", scope: .link), Fixture.address(2, "fd00::2/64")],
            routes: [Fixture.defaultRoute(2, via: "fe80::1")])
        let path = PathEvaluator().path(for: ready)
        #expect(path.status == .satisfied)
        #expect(path.supportsIPv6 && !path.supportsIPv4)
        #expect(path.availableInterfaces.first?.addresses.map(\.description) == ["fd00::2/64", "fe80::2/64"])
    }

    @Test func prohibitsExpensivePaths() {
        let evaluator = PathEvaluator(policy: PathPolicy(allowsExpensive: false))
        let onlyCellular = evaluator.path(for: Fixture.phone(wifiCarrier: false))
        #expect(onlyCellular.status == .unsatisfied)
        #expect(onlyCellular.unsatisfiedReason == .prohibitedExpensive)
        #expect(onlyCellular.availableInterfaces.map(\.name) == ["lo"])
        let both = evaluator.path(for: Fixture.phone())
        #expect(both.status == .satisfied)
        #expect(both.availableInterfaces.map(\.name) == ["wlan0", "lo"])
    }

    @Test func prohibitsConstrainedPaths() {
        let lowDataMode = Fixture.phone(wifiAlias: "roam:type=wifi,constrained")
        let evaluator = PathEvaluator(policy: PathPolicy(allowsConstrained: false))
        #expect(evaluator.path(for: lowDataMode).primaryInterface?.name == "wwan0")
        let path = PathEvaluator().path(for: lowDataMode)
        #expect(path.isConstrained)
        #expect(path.primaryInterface?.name == "wlan0")
        let onlyConstrained = evaluator.path(for: Fixture.phone(cellCarrier: false, wifiAlias: "roam:type=wifi,constrained"))
        #expect(onlyConstrained.unsatisfiedReason == .prohibitedConstrained)
    }

    @Test func reportsTheReasonOfTheInterfaceThatWouldHaveBeenUsed() {
        // Wi-Fi (primary by metric) is constrained, cellular is expensive; both are prohibited.
        let snapshot = Fixture.phone(wifiAlias: "roam:type=wifi,constrained")
        let path = PathEvaluator(policy: PathPolicy(allowsExpensive: false, allowsConstrained: false)).path(for: snapshot)
        #expect(path.unsatisfiedReason == .prohibitedConstrained)
    }

    @Test func honoursRequiredAndProhibitedTypes() {
        let wiredOnly = PathEvaluator(policy: PathPolicy(requiredInterfaceType: .wiredEthernet)).path(for: Fixture.phone())
        #expect(wiredOnly.status == .unsatisfied)
        #expect(wiredOnly.unsatisfiedReason == .prohibitedInterfaceType)
        #expect(wiredOnly.availableInterfaces.isEmpty)
        let cellularOnly = PathEvaluator(policy: PathPolicy(requiredInterfaceType: .cellular)).path(for: Fixture.phone())
        #expect(cellularOnly.primaryInterface?.name == "wwan0")
        let noWifi = PathEvaluator(policy: PathPolicy(prohibitedInterfaceTypes: [.wifi])).path(for: Fixture.phone())
        #expect(noWifi.primaryInterface?.name == "wwan0")
        let loopback = PathEvaluator(policy: PathPolicy(requiredInterfaceType: .loopback)).path(for: Fixture.phone(wifiCarrier: false, cellCarrier: false))
        #expect(loopback.status == .satisfied)
        #expect(loopback.primaryInterface?.name == "lo")
    }

    @Test func waitsForADormantInterface() {
        let snapshot = NetworkSnapshot(
            links: [Fixture.loopback, Fixture.link(2, "wlan0", carrier: false, state: .dormant, alias: "roam:type=wifi")],
            addresses: Fixture.loopbackAddresses,
            routes: [])
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.status == .requiresConnection)
        #expect(path.unsatisfiedReason == .noUsableInterface)
    }

    @Test func prefersMainTableRoutesForThePrimaryInterface() {
        // Per-interface policy tables hold defaults too; unbound sockets use the main table.
        var snapshot = Fixture.phone()
        _ = snapshot.apply(.deletedRoute(Fixture.defaultRoute(2, via: "198.18.0.1", metric: 100)))
        _ = snapshot.apply(.newRoute(Fixture.defaultRoute(2, via: "198.18.0.1", metric: 0, table: RouteTable(1002))))
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.primaryInterface?.name == "wwan0")
        #expect(path.availableInterfaces.map(\.name) == ["wwan0", "wlan0", "lo"])
    }

    @Test func ordersFreeInterfacesBeforeCostlyOnes() {
        // Cellular holds the better metric, so it is primary; the free Wi-Fi still comes before
        // other costly ones, and wired before Wi-Fi at equal cost.
        let snapshot = NetworkSnapshot(
            links: [Fixture.loopback, Fixture.link(2, "wwan0", alias: "roam:type=cellular"), Fixture.link(3, "wlan0", alias: "roam:type=wifi"),
                    Fixture.link(4, "usb0", alias: "roam:type=wired,expensive"), Fixture.link(5, "eth0")],
            addresses: [Fixture.address(2, "198.18.2.2/24"), Fixture.address(3, "198.18.3.2/24"),
                        Fixture.address(4, "198.18.4.2/24"), Fixture.address(5, "198.18.5.2/24")],
            routes: [Fixture.defaultRoute(2, via: "198.18.2.1", metric: 10), Fixture.defaultRoute(3, via: "198.18.3.1", metric: 300),
                     Fixture.defaultRoute(4, via: "198.18.4.1", metric: 20), Fixture.defaultRoute(5, via: "198.18.5.1", metric: 400)])
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.availableInterfaces.map(\.name) == ["wwan0", "eth0", "wlan0", "usb0"])
        #expect(path.isExpensive)
    }

    @Test func findsResolversThroughTheRightRoute() {
        let stub = ResolverConfiguration(parsing: "nameserver 127.0.0.53\n")
        #expect(PathEvaluator().path(for: Fixture.phone(), resolvers: stub).supportsDNS)
        #expect(!PathEvaluator().path(for: Fixture.phone(), resolvers: ResolverConfiguration()).supportsDNS)
        // A resolver reachable only over the default route of a prohibited interface.
        let remote = ResolverConfiguration(parsing: "nameserver 203.0.113.53\n")
        var snapshot = Fixture.phone(wifiCarrier: false)
        snapshot.setTrackedDestinations([IPAddress("203.0.113.53")!])
        #expect(PathEvaluator().path(for: snapshot, resolvers: remote).supportsDNS)
        #expect(!PathEvaluator(policy: PathPolicy(requiredInterfaceType: .loopback)).path(for: snapshot, resolvers: remote).supportsDNS)
        let scoped = ResolverConfiguration(parsing: "nameserver fe80::1%wlan0\n")
        #expect(scoped.nameservers.first?.interfaceName == "wlan0")
        #expect(PathEvaluator().path(for: Fixture.phone(), resolvers: scoped).supportsDNS)
        #expect(!PathEvaluator().path(for: Fixture.phone(wifiCarrier: false), resolvers: scoped).supportsDNS)
    }

    /// Found by the stress test: two default routes of equal metric, one per family, listed their
    /// gateways in the order the snapshot happened to learn them.
    @Test func theSameStateGivesTheSamePathWhateverTheOrderItWasLearnt() {
        let routes = [Fixture.defaultRoute(2, via: "198.18.0.1", metric: 300), Fixture.defaultRoute(2, via: "fd00::1", metric: 300),
                      Fixture.defaultRoute(2, via: "fd00::9", metric: 300, table: RouteTable(100))]
        let addresses = Fixture.loopbackAddresses + [Fixture.address(2, "198.18.0.2/24"), Fixture.address(2, "fd00::2/64")]
        var paths: Set<NetworkPath> = []
        for order in [routes, routes.reversed(), [routes[1], routes[2], routes[0]]] {
            var snapshot = NetworkSnapshot(links: [Fixture.loopback, Fixture.link(2, "eth0")], addresses: addresses)
            for route in order { _ = snapshot.apply(.newRoute(route)) }
            paths.insert(PathEvaluator().path(for: snapshot))
        }
        #expect(paths.count == 1)
        #expect(paths.first?.gateways == [IPAddress("198.18.0.1")!, IPAddress("fd00::1")!, IPAddress("fd00::9")!])
    }

    @Test func ultraConstrainedAndLinkQualityComeFromThePrimaryAndThePolicyCanRefuseThem() {
        let snapshot = Fixture.phone(wifiCarrier: false, cellAlias: "roam:type=cellular,ultraConstrained,quality=minimal")
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.primaryInterface?.name == "wwan0")
        #expect(path.isUltraConstrained && path.isConstrained && path.isExpensive)
        #expect(path.linkQuality == .minimal)
        #expect(path.summary.hasPrefix("satisfied via wwan0 (cellular) expensive ultra-constrained quality minimal ipv4"))
        let refused = PathEvaluator(policy: PathPolicy(allowsUltraConstrained: false)).path(for: snapshot)
        #expect(refused.status == .unsatisfied)
        #expect(refused.unsatisfiedReason == .prohibitedUltraConstrained)
        // With Wi-Fi back, the free link is primary and the satellite is last in preference.
        let both = PathEvaluator().path(for: Fixture.phone(wifiAlias: "roam:type=wifi,quality=good", cellAlias: "roam:type=cellular,ultraConstrained"))
        #expect(!both.isUltraConstrained && both.linkQuality == .good)
        #expect(both.availableInterfaces.map(\.name) == ["wlan0", "wwan0", "lo"])
        #expect(PathEvaluator().path(for: Fixture.phone(wifiCarrier: false, cellCarrier: false)).linkQuality == .unknown)
    }
}
