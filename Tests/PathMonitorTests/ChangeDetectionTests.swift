import Netlink
import Testing
import TestSupport
@testable import PathMonitor

@Suite struct NetworkSnapshotTests {
    @Test func ignoresRepeatedAddressEvents() {
        var snapshot = Fixture.phone()
        let address = Fixture.address(2, "198.18.0.2/24")
        #expect(snapshot.apply(.newAddress(address)) == .unchanged)
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "198.18.0.9/24"))) == .changed)
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "198.18.0.9/24"))) == .unchanged)
        // The kernel removes IPv4 routes that used an address without saying so: routes are read again.
        #expect(snapshot.apply(.deletedAddress(Fixture.address(2, "198.18.0.9/24"))) == .routesNeedResync)
        #expect(snapshot.apply(.deletedAddress(Fixture.address(2, "198.18.0.9/24"))) == .unchanged)
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "fd00::2/64"))) == .changed)
        #expect(snapshot.apply(.deletedAddress(Fixture.address(2, "fd00::2/64"))) == .changed)
    }

    /// Found by the stress test: the last IPv4 address of an interface went, the kernel flushed
    /// its default route silently, the address came back, and the monitor still had the route.
    @Test func aFlushedRouteDoesNotComeBackWithTheAddress() {
        var snapshot = Fixture.phone()
        #expect(snapshot.apply(.deletedAddress(Fixture.address(2, "198.18.0.2/24"))) == .routesNeedResync)
        // What the route dump then says: wlan0's routes are gone.
        snapshot.replaceRoutes([Fixture.defaultRoute(3, via: "198.18.1.1", metric: 200)])
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "198.18.0.2/24"))) == .changed)
        #expect(PathEvaluator().path(for: snapshot).primaryInterface?.name == "wwan0")
    }

    /// Found by the stress test: `ip -6 route replace` announced the new default route only,
    /// and the monitor kept the one it replaced.
    @Test func asksForRoutesWhenAnIPv6RouteMayHaveReplacedAnother() {
        var snapshot = Fixture.phone()
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "fd00::2/64"))) == .changed)
        #expect(snapshot.apply(.newAddress(Fixture.address(3, "fd00:1::2/64"))) == .changed)
        #expect(snapshot.apply(.newRoute(Fixture.defaultRoute(2, via: "fd00::1", metric: 200))) == .changed)
        #expect(snapshot.apply(.newRoute(Fixture.defaultRoute(3, via: "fd00:1::1", metric: 200))) == .routesNeedResync)
        // Another metric is another route; the same route again is nothing.
        #expect(snapshot.apply(.newRoute(Fixture.defaultRoute(3, via: "fd00:1::1", metric: 300))) == .changed)
        #expect(snapshot.apply(.newRoute(Fixture.defaultRoute(3, via: "fd00:1::1", metric: 300))) == .unchanged)
    }

    @Test func asksForRoutesWhenAnInterfaceWithDeadNextHopsComesBack() {
        // A multipath default route over both interfaces, whose Wi-Fi hop the kernel marked dead.
        let multipath = Route(family: .inet, destination: .any(.inet), metric: 50, nextHops: [
            .init(interfaceIndex: 2, gateway: IPAddress("198.18.0.1")!, flags: 1),  // RTNH_F_DEAD
            .init(interfaceIndex: 3, gateway: IPAddress("198.18.1.1")!),
        ])
        var snapshot = Fixture.phone()
        snapshot.replaceRoutes([multipath])
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", up: false, alias: "roam:type=wifi"))) == .routesNeedResync)
        // Up again: the kernel revives the hop without a notification.
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", alias: "roam:type=wifi"))) == .routesNeedResync)
        // An IPv4 address revives dead hops too (the kernel kills them when the last one goes).
        snapshot.replaceRoutes([multipath])
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "198.18.0.7/24"))) == .routesNeedResync)
        #expect(snapshot.apply(.newAddress(Fixture.address(2, "fd00::7/64"))) == .changed)
        // Without dead hops, a carrier coming back is an ordinary change.
        snapshot.replaceRoutes([Fixture.defaultRoute(2, via: "198.18.0.1", metric: 100)])
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", carrier: false, alias: "roam:type=wifi"))) == .changed)
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", alias: "roam:type=wifi"))) == .changed)
    }

    @Test func asksForRoutesWhenAnInterfaceGoesDownOrAway() {
        var snapshot = Fixture.phone()
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", carrier: false, alias: "roam:type=wifi"))) == .changed)
        #expect(snapshot.apply(.newLink(Fixture.link(2, "wlan0", up: false, alias: "roam:type=wifi"))) == .routesNeedResync)
        #expect(snapshot.apply(.deletedLink(Fixture.link(3, "wwan0"))) == .routesNeedResync)
        #expect(snapshot.links[3] == nil)
        #expect(!snapshot.addresses.values.contains { $0.interfaceIndex == 3 })
    }

    /// An interface that goes down loses only its own routes: without any in the snapshot (the
    /// far end of a veth, say), there is nothing to dump.
    @Test func anInterfaceWithoutRoutesGoesDownWithoutADump() {
        var snapshot = Fixture.phone()
        #expect(snapshot.apply(.newLink(Fixture.link(4, "peer0"))) == .changed)
        #expect(snapshot.apply(.newLink(Fixture.link(4, "peer0", up: false))) == .changed)
        #expect(snapshot.apply(.newLink(Fixture.link(4, "peer0"))) == .changed)
        // A multipath route with a hop through it is a route through it.
        let multipath = Route(family: .inet, destination: .any(.inet), metric: 50, nextHops: [
            .init(interfaceIndex: 3, gateway: IPAddress("198.18.1.1")!), .init(interfaceIndex: 4, gateway: IPAddress("198.18.4.1")!),
        ])
        #expect(snapshot.apply(.newRoute(multipath)) == .changed)
        #expect(snapshot.apply(.newLink(Fixture.link(4, "peer0", up: false))) == .routesNeedResync)
    }

    @Test func keepsOnlyRoutesAPathDependsOn() {
        var snapshot = Fixture.phone()
        let unrelated = Fixture.subnetRoute(2, "203.0.113.0/24")
        #expect(snapshot.apply(.newRoute(unrelated)) == .unchanged)
        var local = Fixture.subnetRoute(2, "198.18.0.2/32")
        local.table = .local
        #expect(snapshot.apply(.newRoute(local)) == .unchanged)
        #expect(snapshot.apply(.newRoute(Fixture.defaultRoute(2, via: "198.18.0.254", metric: 5))) == .changed)
        // The resolver 198.18.0.53 is tracked: its subnet route stays.
        #expect(snapshot.routes.values.contains { $0.destination == IPPrefix("198.18.0.0/24")! })
        #expect(!snapshot.routes.values.contains { $0.destination == IPPrefix("198.18.1.0/24")! })
    }

    @Test func aBurstDerivesOnlyItsFinalState() {
        // A flapping Wi-Fi: the path of the last state is what one evaluation after the burst gives.
        var snapshot = Fixture.phone()
        for n in 0..<1001 {
            _ = snapshot.apply(.newLink(Fixture.link(2, "wlan0", carrier: n % 2 == 1, alias: "roam:type=wifi")))
        }
        let path = PathEvaluator().path(for: snapshot)
        #expect(path.primaryInterface?.name == "wwan0")
        #expect(path.isExpensive)
    }
}

@Suite struct PathDeliveryTests {
    @Test func publishesOnlyPathsThatDiffer() async throws {
        let core = MonitorCore()
        core.startDeliveringWithoutWatching()
        defer { core.cancel() }
        let recorder = Recorder<NetworkPath>()
        let subscription = core.subscribe(queue: nil) { recorder.append($0) }
        let wifi = PathEvaluator().path(for: Fixture.phone())
        let cellular = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false))
        for path in [wifi, wifi, cellular, cellular, cellular, wifi] { core.publish(path) }
        #expect(recorder.wait { $0.count >= 3 } == [wifi, cellular, wifi])
        #expect(core.statistics.pathsPublished == 3)
        subscription.cancel()
        core.publish(cellular)
        // A marker subscriber sees the last publication: the cancelled one was passed over.
        let marker = Recorder<NetworkPath>()
        let markerSubscription = core.subscribe(queue: nil) { marker.append($0) }
        #expect(marker.wait { !$0.isEmpty } == [cellular])
        #expect(recorder.values.count == 3)
        markerSubscription.cancel()
    }

    @Test func noCallbackAfterCancel() async throws {
        let core = MonitorCore()
        core.startDeliveringWithoutWatching()
        let recorder = Recorder<NetworkPath>()
        let subscription = core.subscribe(queue: nil) { recorder.append($0) }
        let paths = (0..<200).map { n in PathEvaluator().path(for: Fixture.phone(wifiCarrier: n % 2 == 0)) }
        for path in paths { core.publish(path) }
        core.cancel()
        let delivered = recorder.values.count
        core.publish(paths[0])
        #expect(recorder.values.count == delivered)
        #expect(recorder.values == Array(paths.prefix(delivered)), "what was delivered came in order")
        _ = subscription
    }

    @Test func streamsStartWithTheCurrentPathAndKeepTheNewest() async throws {
        let core = MonitorCore()
        core.startDeliveringWithoutWatching()
        let wifi = PathEvaluator().path(for: Fixture.phone())
        let cellular = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false))
        let none = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false, cellCarrier: false))
        core.publish(wifi)
        let stream = core.makeStream()
        // A slow consumer: three paths published before it reads; only the current one at
        // subscription and the newest survive.
        core.publish(cellular)
        core.publish(none)
        core.cancel()
        var seen: [NetworkPath] = []
        for await path in stream { seen.append(path) }
        #expect(seen == [none])
        let late = core.makeStream()
        var afterCancel = 0
        for await _ in late { afterCancel += 1 }
        #expect(afterCancel == 0)
    }

    @Test func callbacksRunOnTheirQueueInOrder() async throws {
        let core = MonitorCore()
        core.startDeliveringWithoutWatching()
        defer { core.cancel() }
        let recorder = Recorder<PathStatus>()
        let queue = DispatchQueue(label: "test.callbacks")
        let subscription = core.subscribe(queue: queue) { recorder.append($0.status) }
        let paths = [Fixture.phone(), Fixture.phone(wifiCarrier: false, cellCarrier: false), Fixture.phone()].map { PathEvaluator().path(for: $0) }
        for path in paths { core.publish(path) }
        #expect(recorder.wait { $0.count == 3 } == [.satisfied, .unsatisfied, .satisfied])
        _ = subscription
    }
}

import Dispatch

@Suite struct RenderingTests {
    @Test func jsonHasTheDocumentedKeysInOrder() {
        let path = PathEvaluator().path(for: Fixture.phone(), resolvers: ResolverConfiguration(parsing: "nameserver 198.18.0.53"))
        let line = path.json(time: "2026-11-23T08:15:02.123456Z").serialized
        #expect(line.hasPrefix(#"{"time":"2026-11-23T08:15:02.123456Z","status":"satisfied","unsatisfiedReason":null,"isExpensive":false,"isConstrained":false,"supportsIPv4":true,"supportsIPv6":false,"supportsDNS":true,"primaryInterface":"wlan0","gateways":["198.18.0.1","198.18.1.1"],"interfaces":[{"name":"wlan0","index":2,"type":"wifi","isExpensive":false,"isConstrained":false,"state":"up","mtu":1500,"addresses":["198.18.0.2/24"],"isUltraConstrained":false,"linkQuality":"unknown","connectivity":{"state":"unknown","portalURL":null,"reason":null,"sessionRemainingSeconds":null}}"#))
        // Keys added later come last, so the order of the first release holds.
        #expect(line.hasSuffix(#"],"isUltraConstrained":false,"linkQuality":"unknown","connectivity":"unknown"}"#))
        let unsatisfied = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false, cellCarrier: false)).json(time: "t").serialized
        #expect(unsatisfied.contains(#""status":"unsatisfied","unsatisfiedReason":"noUsableInterface""#))
        #expect(unsatisfied.contains(#""primaryInterface":null"#))
    }

    @Test func escapesStrings() {
        #expect(JSONValue.string("a\"b\\c\n\u{01}é").serialized == #""a\"b\\c\n\u0001é""#)
        #expect(JSONValue.object([("z", 1), ("a", .array([true, nil]))]).serialized == #"{"z":1,"a":[true,null]}"#)
    }

    @Test func formatsRFC3339WithMicroseconds() {
        #expect(RFC3339.format(seconds: 0, nanoseconds: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(RFC3339.format(seconds: 1_795_000_000, nanoseconds: 123_456_789) == "2026-11-18T11:06:40.123456Z")
        #expect(RFC3339.now().count == 27)
    }

    @Test func summarizesInOneLine() {
        let line = PathEvaluator().path(for: Fixture.phone(wifiCarrier: false)).summary
        #expect(line == "satisfied via wwan0 (cellular) expensive ipv4 gw 198.18.1.1 | wwan0 cellular expensive up mtu 1500 198.18.1.2/24; lo loopback unknown mtu 65536 127.0.0.1/8 ::1/128")
    }
}
