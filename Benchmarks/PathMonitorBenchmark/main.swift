import Netlink
import Glibc
import Foundation
do {
    let ns = try NetworkNamespace.create(named: "roam-smoke")
    defer { try? ns.delete() }
    let sock = try NetlinkSocket(.route, in: ns)
    try sock.createVethPair("a0", peer: "b0")
    let links = try sock.links()
    print(links.map { "\($0.index) \($0.name) \($0.kind ?? "-") \($0.flags.rawValue) \($0.operationalState)" })
    let events = try NetlinkSocket(.route, in: ns)
    try events.subscribe(to: [.link, .ipv4Address, .ipv6Address, .ipv4Route, .ipv6Route])
    try events.setNonBlocking()
    let a = try sock.link(named: "a0")!
    let b = try sock.link(named: "b0")!
    try sock.setLink(index: a.index, up: true, alias: "roam:type=wifi")
    try sock.setLink(index: b.index, up: true)
    try sock.addAddress(IPPrefix("198.18.0.1/30")!, interfaceIndex: a.index)
    try sock.addAddress(IPPrefix("fd00::1/64")!, interfaceIndex: a.index)
    try sock.addRoute(.defaultRoute(via: IPAddress("198.18.0.2")!, interfaceIndex: a.index, metric: 100))
    var t0 = timespec(); clock_gettime(CLOCK_MONOTONIC, &t0)
    for _ in 0..<100 { _ = try sock.routes() }
    var t1 = timespec(); clock_gettime(CLOCK_MONOTONIC, &t1)
    print("route dump us", Double((t1.tv_sec - t0.tv_sec) * 1_000_000_000 + (t1.tv_nsec - t0.tv_nsec)) / 100 / 1000)
    let out = try events.receiveNotifications { print("event", $0) }
    print(out)
    print(try sock.routes().map { "\($0.family) \($0.table) \($0.destination) \($0.gateway.map(String.init(describing:)) ?? "-") \($0.interfaceIndices) m\($0.metric)" })
    print(try sock.addresses().map { "\($0.interfaceIndex) \($0.prefix) \($0.flags.rawValue)" })
    try sock.setLink(index: a.index, up: false)
    print(try sock.routes(family: .inet).map { "\($0.table) \($0.destination) \($0.interfaceIndices)" })
    let thread = try ns.spawnThread(name: "sysfs", isolatingSysfs: true) { r in
        print("thread", r, (try? String(contentsOfFile: "/sys/class/net/a0/ifalias", encoding: .utf8)) ?? "nil")
        var d = opendir("/sys/class/net"); var names: [String] = []
        while let e = readdir(d!) { names.append(withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }) }
        closedir(d!); print(names)
    }
    thread.join()
    print("host sees a0?", access("/sys/class/net/a0", F_OK) == 0)
} catch { print("ERR", error) }
