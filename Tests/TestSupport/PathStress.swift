import Foundation
import Glibc
import Netlink
import PathMonitor
import Synchronization

/// A random number generator that plays the same numbers again from the same seed (SplitMix64),
/// so that a failing stress sequence can be replayed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The differential stress test of ``NetworkPathMonitor``: random sequences of the kernel
/// changes that make or break a path, made at full speed in a throwaway namespace while several
/// monitors watch it; after each sequence, once the kernel has gone quiet, every monitor's last
/// path (through ``NetworkPathMonitor/currentPath``, ``NetworkPathMonitor/onUpdate(queue:_:)``
/// and ``NetworkPathMonitor/paths``) must equal the path derived from a fresh dump
/// (``NetworkPathMonitor/evaluate(namespace:configuration:)``).
///
/// Shared by the suite (a few hundred sequences) and `PathMonitorBenchmark` (ten thousand).
public final class PathStress: @unchecked Sendable {
    /// How a run goes.
    public struct Options: Sendable {
        /// The seed of the run: sequence `n` uses `seed + n`. Each sequence starts from the state
        /// the ones before it left, so a run replays from its first sequence.
        public var seed: UInt64
        /// How many sequences to play.
        public var sequences: Int
        /// The most operations in one sequence (each has 1 to this many).
        public var maximumOperations: Int
        /// How long the namespace must go without a notification before the paths are compared:
        /// longer than the 50 ms a monitor has to settle.
        public var quietPeriod: Duration

        public init(seed: UInt64, sequences: Int, maximumOperations: Int = 24, quietPeriod: Duration = .milliseconds(60)) {
            self.seed = seed
            self.sequences = sequences
            self.maximumOperations = maximumOperations
            self.quietPeriod = quietPeriod
        }
    }

    /// A monitor whose last path did not match the kernel's.
    public struct Mismatch: Sendable, CustomStringConvertible {
        public var seed: UInt64
        public var sequence: Int
        public var observer: String
        public var expected: String
        public var actual: String
        public var operations: [String]

        public var description: String {
            """
            sequence \(sequence) of seed \(seed) (replay: ROAM_STRESS_SEED=\(seed) ROAM_STRESS_SEQUENCES=\(sequence + 1)): \(observer)
              kernel:  \(expected)
              monitor: \(actual)
              operations: \(operations.joined(separator: "; "))
            """
        }
    }

    /// What a run measured.
    public struct Report: Sendable {
        public var sequences = 0
        public var operations = 0
        /// Operations the kernel refused (an address on a missing interface, a rename while up):
        /// they are part of the storm too.
        public var refused = 0
        public var mismatches: [Mismatch] = []
        /// Per monitor: settle times in nanoseconds, from the last change (notification, or
        /// the request that caused it) to the publication of the final path; 0 when the last
        /// changes did not change the path.
        public var settleNanoseconds: [String: [UInt64]] = [:]
        /// Per monitor: its statistics at the end.
        public var statistics: [String: NetworkPathMonitor.Statistics] = [:]
        /// How many sequences ended in each final status (of the default monitor).
        public var finalStatuses: [String: Int] = [:]
        /// Operations made, by kind.
        public var operationCounts: [String: Int] = [:]
        /// Comparisons made again because the kernel notified a change while they were made:
        /// quiet for the quiet period is not always done (a carrier change the kernel's
        /// linkwatch holds back comes up to a second later), and a monitor cannot be held to a
        /// change it has not been told of.
        public var comparisonsRepeated = 0
        /// Wall time of the run.
        public var seconds = 0.0
    }

    /// One monitor under test and what it delivered.
    final class Observer: @unchecked Sendable {
        let name: String
        let monitor: NetworkPathMonitor
        let configuration: NetworkPathMonitor.Configuration
        private let lock = NSCondition()
        private var lastCallback: (path: NetworkPath, time: UInt64)?
        private var lastStreamed: NetworkPath?
        private var subscription: PathUpdateSubscription?
        private var consumer: Task<Void, Never>?

        init(name: String, namespace: NetworkNamespace, configuration: NetworkPathMonitor.Configuration, streams: Bool) throws {
            self.name = name
            self.configuration = configuration
            monitor = NetworkPathMonitor(namespace: namespace, configuration: configuration)
            subscription = monitor.onUpdate { [weak self] path in
                guard let self else { return }
                self.lock.lock()
                self.lastCallback = (path, monotonicNanoseconds())
                self.lock.unlock()
            }
            try monitor.start()
            if streams {
                let paths = monitor.paths
                consumer = Task.detached { [weak self] in
                    for await path in paths {
                        guard let self else { return }
                        self.received(path)
                    }
                }
            }
        }

        private func received(_ path: NetworkPath) {
            lock.lock()
            lastStreamed = path
            lock.broadcast()
            lock.unlock()
        }

        var callback: (path: NetworkPath, time: UInt64)? {
            lock.lock()
            defer { lock.unlock() }
            return lastCallback
        }

        /// Waits (bounded) until the stream has delivered `path`; the stream's consumer runs on
        /// the cooperative pool and may be a moment behind the monitor's thread.
        func streamed(_ path: NetworkPath, timeout: TimeInterval = 5) -> NetworkPath?? {
            guard consumer != nil else { return .none }
            let deadline = Date(timeIntervalSinceNow: timeout)
            lock.lock()
            defer { lock.unlock() }
            while lastStreamed != path {
                if !lock.wait(until: deadline) { break }
            }
            return .some(lastStreamed)
        }

        func stop() {
            subscription?.cancel()
            monitor.cancel()
            consumer?.cancel()
        }
    }

    /// One veth pair the sequences play with.
    struct Slot {
        /// The interface's name now (renames switch it between `stN` and `srN`).
        var name: String
        /// The peer's name, which stays.
        let peerName: String
        var peerIsFar = false
    }

    private let options: Options
    private let near: TestNamespace
    private let far: TestNamespace
    private let directory: String
    private let resolverPath: String
    private var slots: [Slot]
    private var observers: [Observer] = []
    private let notifications: NotificationClock

    /// Makes the namespaces (the one watched and one for far peers) and starts the monitors.
    public init(options: Options) throws {
        self.options = options
        near = try TestNamespace()
        far = try TestNamespace()
        directory = "/tmp/\(near.name)-stress"
        resolverPath = directory + "/resolv.conf"
        slots = (0..<5).map { Slot(name: "st\($0)", peerName: "pt\($0)") }
        mkdir(directory, 0o755)
        // Duplicate address detection in about 10 ms instead of up to a second: the kernel goes
        // quiet sooner after an IPv6 address, and sequences stay short.
        try near.namespace.setSysctls([
            "net.ipv6.conf.all.router_solicitation_delay": "0", "net.ipv6.conf.default.router_solicitation_delay": "0",
            "net.ipv6.conf.all.dad_transmits": "1", "net.ipv6.conf.default.dad_transmits": "1",
        ])
        notifications = try NotificationClock(namespace: near.namespace)
        let resolverPath = self.resolverPath
        func configuration(_ policy: PathPolicy = PathPolicy(), receiveBufferSize: Int = 4 << 20, coalescing: Duration = .zero) -> NetworkPathMonitor.Configuration {
            .init(policy: policy, resolverConfigurationPath: resolverPath, coalescingDelay: coalescing, receiveBufferSize: receiveBufferSize)
        }
        observers = [
            try Observer(name: "default", namespace: near.namespace, configuration: configuration(), streams: true),
            try Observer(name: "4 KiB buffer", namespace: near.namespace, configuration: configuration(receiveBufferSize: 4096), streams: false),
            try Observer(name: "no expensive, 5 ms coalescing", namespace: near.namespace,
                         configuration: configuration(PathPolicy(allowsExpensive: false), coalescing: .milliseconds(5)), streams: true),
        ]
    }

    deinit {
        stop()
    }

    /// The names of the namespaces used, for leak checks.
    public var namespaceNames: [String] { [near.name, far.name] }

    /// Plays the sequences and compares after each one. `progress` is called after each sequence.
    public func run(progress: ((Int, Report) -> Void)? = nil) -> Report {
        var report = Report()
        let start = monotonicNanoseconds()
        for sequence in 0..<options.sequences {
            var random = SeededGenerator(seed: options.seed &+ UInt64(sequence))
            let count = Int.random(in: 1...max(1, options.maximumOperations), using: &random)
            var done: [String] = []
            for _ in 0..<count {
                let (kind, description, accepted) = operate(&random)
                report.operations += 1
                report.operationCounts[kind, default: 0] += 1
                if !accepted { report.refused += 1 }
                done.append(description + (accepted ? "" : " (refused)"))
            }
            var lastChange = notifications.waitForQuiet(after: monotonicNanoseconds(), quiet: options.quietPeriod)
            var comparison = Comparison()
            for attempt in 0... {
                comparison = Comparison()
                compare(sequence: sequence, operations: done, lastChange: lastChange, into: &comparison)
                // Compared against a kernel that was still changing: once it is quiet again,
                // compare again (at most three times: a kernel that keeps changing is itself
                // a finding, and the last comparison stands).
                guard attempt < 3, lastChange != nil, notifications.changedSinceLastWait() else { break }
                report.comparisonsRepeated += 1
                lastChange = notifications.waitForQuiet(after: monotonicNanoseconds(), quiet: options.quietPeriod)
            }
            report.mismatches += comparison.mismatches
            for (name, settle) in comparison.settleNanoseconds { report.settleNanoseconds[name, default: []].append(settle) }
            if let status = comparison.finalStatus { report.finalStatuses[status, default: 0] += 1 }
            report.sequences += 1
            progress?(sequence, report)
        }
        for observer in observers { report.statistics[observer.name] = observer.monitor.statistics }
        report.seconds = Double(monotonicNanoseconds() - start) / 1e9
        return report
    }

    /// What one comparison found.
    private struct Comparison {
        var mismatches: [Mismatch] = []
        var settleNanoseconds: [(String, UInt64)] = []
        var finalStatus: String?
    }

    private func compare(sequence: Int, operations: [String], lastChange: UInt64?, into report: inout Comparison) {
        guard let lastChange else {
            report.mismatches.append(Mismatch(seed: options.seed, sequence: sequence, observer: "kernel",
                                              expected: "quiet for \(options.quietPeriod)", actual: "still changing after 10 s", operations: operations))
            return
        }
        for observer in observers {
            let fresh: NetworkPath
            do {
                fresh = try NetworkPathMonitor.evaluate(namespace: near.namespace, configuration: observer.configuration)
            } catch {
                report.mismatches.append(Mismatch(seed: options.seed, sequence: sequence, observer: observer.name,
                                                  expected: "a fresh evaluation", actual: "\(error)", operations: operations))
                continue
            }
            if observer.name == "default" { report.finalStatus = fresh.status.rawValue }
            func mismatch(_ through: String, _ actual: NetworkPath?) {
                report.mismatches.append(Mismatch(seed: options.seed, sequence: sequence, observer: "\(observer.name) through \(through)",
                                                  expected: fresh.summary, actual: actual?.summary ?? "nothing", operations: operations))
            }
            let current = observer.monitor.currentPath
            if current != fresh { mismatch("currentPath", current) }
            let callback = observer.callback
            if callback?.path != fresh { mismatch("onUpdate", callback?.path) }
            if case .some(let streamed) = observer.streamed(fresh), streamed != fresh { mismatch("paths", streamed) }
            if let callback {
                report.settleNanoseconds.append((observer.name, callback.time > lastChange ? callback.time - lastChange : 0))
            }
        }
    }

    // MARK: - Operations

    private func operate(_ random: inout SeededGenerator) -> (kind: String, description: String, accepted: Bool) {
        let slot = Int.random(in: 0..<slots.count, using: &random)
        let name = slots[slot].name
        let roll = Int.random(in: 0..<100, using: &random)
        let socket = near.socket
        func attempt(_ kind: String, _ description: String, _ body: () throws -> Void) -> (String, String, Bool) {
            do {
                try body()
                return (kind, description, true)
            } catch {
                return (kind, description, false)
            }
        }
        func index(_ name: String) throws -> Int32 {
            guard let link = try socket.link(named: name) else { throw NetlinkError(.errno(ENODEV), operation: "find \(name)") }
            return link.index
        }
        let subnet = UInt8(slot)
        let host = UInt8.random(in: 2...3, using: &random)
        let metric = [UInt32(100), 200, 300].randomElement(using: &random)!
        let table = Bool.random(using: &random) ? RouteTable.main : RouteTable(100)

        switch roll {
        case 0..<6:
            let far = Bool.random(using: &random)
            let up = Int.random(in: 0..<4, using: &random) != 0
            return attempt("create interface", "create \(name) (peer \(far ? "far" : "near"))\(up ? " up" : "")") {
                try socket.createVethPair(name, peer: slots[slot].peerName, peerNamespace: far ? self.far.namespace : near.namespace)
                slots[slot].peerIsFar = far
                // A namespace has no default for this: each new device takes the kernel's 1 s.
                try near.namespace.setSysctls(["net.ipv6.neigh.\(name).retrans_time_ms": "10"])
                if up {
                    try socket.setLink(index: try index(name), up: true)
                    try peerSocket(slot).setLink(index: try peerIndex(slot), up: true)
                }
            }
        case 6..<9:
            let fromPeer = Bool.random(using: &random)
            return attempt("delete interface", "delete \(fromPeer ? slots[slot].peerName : name)") {
                if fromPeer {
                    try peerSocket(slot).deleteLink(index: try peerIndex(slot))
                } else {
                    try socket.deleteLink(index: try index(name))
                }
            }
        case 9..<12:
            let newName = name.hasPrefix("st") ? "sr" + name.dropFirst(2) : "st" + name.dropFirst(2)
            let downFirst = Bool.random(using: &random)
            return attempt("rename interface", "rename \(name) to \(newName)\(downFirst ? " (down, rename, up)" : "")") {
                let linkIndex = try index(name)
                if downFirst { try socket.setLink(index: linkIndex, up: false) }
                try socket.setLink(index: linkIndex, name: newName)
                slots[slot].name = newName
                if downFirst { try socket.setLink(index: linkIndex, up: true) }
            }
        case 12..<20:
            let up = Bool.random(using: &random)
            return attempt("admin state", "\(name) \(up ? "up" : "down")") { try socket.setLink(index: try index(name), up: up) }
        case 20..<32:
            let up = Bool.random(using: &random)
            return attempt("carrier", "carrier of \(name) \(up ? "on" : "off") (\(slots[slot].peerIsFar ? "far" : "near") peer)") {
                try peerSocket(slot).setLink(index: try peerIndex(slot), up: up)
            }
        case 32..<40:
            let prefix = IPPrefix("198.18.\(subnet).\(host)/24")!
            let add = Int.random(in: 0..<3, using: &random) != 0
            return attempt("IPv4 address", "\(add ? "add" : "delete") \(prefix) on \(name)") {
                if add { try socket.addAddress(prefix, interfaceIndex: try index(name)) } else { try socket.deleteAddress(prefix, interfaceIndex: try index(name)) }
            }
        case 40..<47:
            let prefix = IPPrefix("fd00:0:0:\(subnet)::\(host)/64")!
            let add = Int.random(in: 0..<3, using: &random) != 0
            let skipDAD = Bool.random(using: &random)
            return attempt("IPv6 address", "\(add ? "add" : "delete") \(prefix)\(add && !skipDAD ? " (tentative)" : "") on \(name)") {
                if add {
                    try socket.addAddress(prefix, interfaceIndex: try index(name), skipDAD: skipDAD)
                } else {
                    try socket.deleteAddress(prefix, interfaceIndex: try index(name))
                }
            }
        case 47..<58:
            let action = Int.random(in: 0..<3, using: &random)
            let gateway = IPAddress("198.18.\(subnet).1")!
            return attempt("IPv4 default route", "\(["add", "replace", "delete"][action]) default via \(gateway) dev \(name) metric \(metric) table \(table)") {
                let route = Route.defaultRoute(via: gateway, interfaceIndex: try index(name), metric: metric, table: table)
                if action == 2 { try socket.deleteRoute(route) } else { try socket.addRoute(route, replace: action == 1) }
            }
        case 58..<64:
            let action = Int.random(in: 0..<3, using: &random)
            let gateway = IPAddress("fd00:0:0:\(subnet)::1")!
            return attempt("IPv6 default route", "\(["add", "replace", "delete"][action]) default via \(gateway) dev \(name) metric \(metric) table \(table)") {
                let route = Route.defaultRoute(via: gateway, interfaceIndex: try index(name), metric: metric, table: table)
                if action == 2 { try socket.deleteRoute(route) } else { try socket.addRoute(route, replace: action == 1) }
            }
        case 64..<68:
            // A change of metric, as `ip route change` does it for IPv4: the old one goes, a new one comes.
            let gateway = IPAddress("198.18.\(subnet).1")!
            let old = metric, new = metric == 300 ? 100 : metric + 100
            return attempt("route metric", "metric of default via \(gateway) dev \(name) \(old) -> \(new)") {
                let linkIndex = try index(name)
                try socket.deleteRoute(.defaultRoute(via: gateway, interfaceIndex: linkIndex, metric: old))
                try socket.addRoute(.defaultRoute(via: gateway, interfaceIndex: linkIndex, metric: new))
            }
        case 68..<72:
            let other = (slot + Int.random(in: 1..<slots.count, using: &random)) % slots.count
            let add = Bool.random(using: &random)
            return attempt("multipath route", "\(add ? "add" : "delete") default metric 50 via \(name) and \(slots[other].name)") {
                let route = Route(family: .inet, destination: .any(.inet), metric: 50, nextHops: [
                    .init(interfaceIndex: try index(name), gateway: IPAddress("198.18.\(subnet).1")!),
                    .init(interfaceIndex: try index(slots[other].name), gateway: IPAddress("198.18.\(other).1")!),
                ])
                if add { try socket.addRoute(route, replace: true) } else { try socket.deleteRoute(route) }
            }
        case 72..<78:
            // Routes to the resolvers' networks decide supportsDNS; others should change nothing.
            let destination = [IPPrefix("198.19.53.0/24")!, IPPrefix("198.19.0.0/16")!, IPPrefix("fd00:53::/64")!, IPPrefix("198.19.99.0/24")!]
                .randomElement(using: &random)!
            let add = Bool.random(using: &random)
            return attempt("specific route", "\(add ? "add" : "delete") \(destination) dev \(name)") {
                let route = Route.direct(to: destination, interfaceIndex: try index(name), metric: metric)
                if add { try socket.addRoute(route, replace: true) } else { try socket.deleteRoute(route) }
            }
        case 78..<82:
            let rule = RoutingRule(family: .inet, priority: 1000 + UInt32(slot), source: IPPrefix("198.18.\(subnet).0/24")!, table: RouteTable(100))
            let add = Bool.random(using: &random)
            return attempt("policy rule", "\(add ? "add" : "delete") rule from \(rule.source!) table 100") {
                if add { try socket.addRule(rule) } else { try socket.deleteRule(rule) }
            }
        case 82..<90:
            let alias = ["roam:type=wifi", "roam:type=cellular", "roam:type=wifi,constrained", "roam:expensive", "", "uplink roam:type=cellular,expensive=false"]
                .randomElement(using: &random)!
            return attempt("alias retag", "alias of \(name) '\(alias)'") { try socket.setLink(index: try index(name), alias: alias) }
        case 90..<93:
            let mtu = [UInt32(1280), 1400, 1500].randomElement(using: &random)!
            return attempt("MTU", "mtu of \(name) \(mtu)") { try socket.setLink(index: try index(name), mtu: mtu) }
        default:
            let servers = ["198.19.53.53", "198.18.\(subnet).1", "fd00:53::53", "127.0.0.53", "fe80::1%\(name)", "198.19.99.1"]
            let chosen = (0..<Int.random(in: 0...2, using: &random)).map { _ in servers.randomElement(using: &random)! }
            let mode = Int.random(in: 0..<4, using: &random)
            let text = chosen.map { "nameserver \($0)\n" }.joined()
            return attempt("resolv.conf", "resolv.conf [\(chosen.joined(separator: ", "))] \(["renamed over", "rewritten in place", "rewritten in place", "removed"][mode])") {
                switch mode {
                case 0:
                    try text.write(toFile: resolverPath + ".new", atomically: false, encoding: .utf8)
                    guard rename(resolverPath + ".new", resolverPath) == 0 else { throw NetlinkError.posix("rename", errno: errno) }
                case 3:
                    unlink(resolverPath)
                default:
                    let fd = open(resolverPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                    guard fd >= 0 else { throw NetlinkError.posix("open", errno: errno) }
                    _ = text.withCString { write(fd, $0, strlen($0)) }
                    close(fd)
                }
            }
        }
    }

    private func peerSocket(_ slot: Int) -> NetlinkSocket {
        slots[slot].peerIsFar ? far.socket : near.socket
    }

    private func peerIndex(_ slot: Int) throws -> Int32 {
        guard let link = try peerSocket(slot).link(named: slots[slot].peerName) else {
            throw NetlinkError(.errno(ENODEV), operation: "find \(slots[slot].peerName)")
        }
        return link.index
    }

    /// Ends the monitors and removes the namespaces and the resolver file.
    public func stop() {
        for observer in observers { observer.stop() }
        try? near.namespace.delete()
        try? far.namespace.delete()
        unlink(resolverPath)
        unlink(resolverPath + ".new")
        rmdir(directory)
    }
}

/// The time of the latest rtnetlink notification in a namespace, from a socket of its own that
/// joins every group a path depends on (and rules, which it should not depend on).
final class NotificationClock {
    private let fd: Int32
    private var latest: UInt64 = 0

    init(namespace: NetworkNamespace) throws {
        fd = try namespace.perform { () throws -> Int32 in
            // NETLINK_ROUTE is protocol 0.
            let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { throw NetlinkError.posix("socket(AF_NETLINK)", errno: errno) }
            return fd
        }
        var size: Int32 = 16 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        // struct sockaddr_nl { sa_family_t nl_family; unsigned short pad; u32 nl_pid; u32 nl_groups; }
        var address = [UInt8](repeating: 0, count: 12)
        address[0] = UInt8(AF_NETLINK & 0xFF)
        address[1] = UInt8(AF_NETLINK >> 8)
        let bound = address.withUnsafeBytes {
            bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), 12)
        }
        guard bound == 0 else {
            close(fd)
            throw NetlinkError.posix("bind(AF_NETLINK)", errno: errno)
        }
        // RTNLGRP_LINK, IPV4_IFADDR, IPV4_ROUTE, IPV4_RULE, IPV6_IFADDR, IPV6_ROUTE, IPV6_RULE
        // (<linux/rtnetlink.h>); 270 is SOL_NETLINK, 1 NETLINK_ADD_MEMBERSHIP.
        for var group: Int32 in [1, 5, 7, 8, 9, 11, 19] {
            _ = setsockopt(fd, 270, 1, &group, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    deinit {
        close(fd)
    }

    /// Whether the kernel notified a change since ``waitForQuiet(after:quiet:)`` last returned.
    func changedSinceLastWait() -> Bool { drain() }

    /// Reads what is queued; true when anything was.
    private func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var any = false
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { any = true; continue }
            if count < 0 && errno == EINTR { continue }
            // ENOBUFS: notifications were lost, which still means the kernel changed.
            if count < 0 && errno == ENOBUFS { any = true; continue }
            return any
        }
    }

    /// Waits until no notification has come for `quiet` since `start` (the end of the last
    /// request) and returns the time of the last change: the later of `start` and the last
    /// notification. Nil when the kernel is still changing after 10 s.
    func waitForQuiet(after start: UInt64, quiet: Duration) -> UInt64? {
        let quietNanoseconds = UInt64(quiet.components.seconds) * 1_000_000_000 + UInt64(quiet.components.attoseconds / 1_000_000_000)
        var last = start
        if drain() { last = max(last, monotonicNanoseconds()) }
        let limit = start + 10_000_000_000
        while true {
            let now = monotonicNanoseconds()
            if now >= last + quietNanoseconds { return last }
            if now >= limit { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32((last + quietNanoseconds - now + 999_999) / 1_000_000)
            if poll(&descriptor, 1, milliseconds) > 0, drain() {
                last = monotonicNanoseconds()
            }
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
public func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
