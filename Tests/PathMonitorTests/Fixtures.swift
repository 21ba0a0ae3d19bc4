import Netlink
@testable import PathMonitor

/// Builders for kernel-state fixtures: what a dump of links, addresses and routes would return.
enum Fixture {
    static func link(_ index: Int32, _ name: String, up: Bool = true, carrier: Bool = true, state: OperationalState? = nil,
                     hardware: HardwareType = .ethernet, alias: String? = nil, kind: String? = "veth") -> Link {
        var flags: InterfaceFlags = [.broadcast, .multicast]
        if up { flags.insert(.up) }
        if up && carrier { flags.formUnion([.running, .lowerUp]) }
        return Link(index: index, name: name, flags: flags,
                    operationalState: state ?? (up ? (carrier ? .up : .lowerLayerDown) : .down),
                    mtu: 1500, hardwareType: hardware, kind: kind, alias: alias)
    }

    static var loopback: Link {
        Link(index: 1, name: "lo", flags: [.up, .loopback, .running, .lowerUp], operationalState: .unknown,
             mtu: 65536, hardwareType: .loopback)
    }

    static var loopbackAddresses: [InterfaceAddress] {
        [address(1, "127.0.0.1/8", scope: .host), address(1, "::1/128", scope: .host)]
    }

    static func address(_ index: Int32, _ prefix: String, flags: AddressFlags = [], scope: Scope = .universe) -> InterfaceAddress {
        InterfaceAddress(interfaceIndex: index, prefix: IPPrefix(prefix)!, scope: scope, flags: flags)
    }

    static func defaultRoute(_ index: Int32, via gateway: String, metric: UInt32 = 0, table: RouteTable = .main) -> Route {
        .defaultRoute(via: IPAddress(gateway)!, interfaceIndex: index, metric: metric, table: table)
    }

    static func subnetRoute(_ index: Int32, _ prefix: String, metric: UInt32 = 0) -> Route {
        .direct(to: IPPrefix(prefix)!, interfaceIndex: index, metric: metric)
    }

    /// A phone: loopback, Wi-Fi (index 2, 198.18.0.2/24, metric 100) and cellular (index 3,
    /// 198.18.1.2/24, metric 200), both with default routes, tagged through their aliases.
    static func phone(wifiCarrier: Bool = true, cellCarrier: Bool = true, wifiAlias: String = "roam:type=wifi",
                      cellAlias: String = "roam:type=cellular") -> NetworkSnapshot {
        NetworkSnapshot(
            links: [loopback, link(2, "wlan0", carrier: wifiCarrier, alias: wifiAlias), link(3, "wwan0", carrier: cellCarrier, alias: cellAlias)],
            addresses: loopbackAddresses + [address(2, "198.18.0.2/24"), address(3, "198.18.1.2/24")],
            routes: [defaultRoute(2, via: "198.18.0.1", metric: 100), defaultRoute(3, via: "198.18.1.1", metric: 200),
                     subnetRoute(2, "198.18.0.0/24"), subnetRoute(3, "198.18.1.0/24")],
            trackedDestinations: [IPAddress("198.18.0.53")!])
    }
}
