import Dispatch
import Foundation
import Glibc
import Logging
import Netlink
import Testing
import TestSupport
@testable import PathMonitor
import RoamCore

/// The monitor against the real kernel: each test makes its own namespace and veth pairs,
/// changes them, and checks the sequence of paths published. Root only.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct MonitorKernelTests {
    /// Starts a monitor of `test`'s namespace that records every path it publishes.
    func record(_ test: TestNamespace, policy: PathPolicy = PathPolicy(), receiveBufferSize: Int = 4 << 20,
                logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                handler: (@Sendable (NetworkPath) -> Void)? = nil) throws -> (NetworkPathMonitor, Recorder<NetworkPath>, PathUpdateSubscription) {
        let monitor = NetworkPathMonitor(namespace: test.namespace, configuration: .init(
            policy: policy, resolverConfigurationPath: "/nonexistent/resolv.conf", receiveBufferSize: receiveBufferSize, logger: logger))
        let recorder = Recorder<NetworkPath>()
        let subscription = monitor.onUpdate { path in
            recorder.append(path)
            handler?(path)
        }
        try monitor.start()
        return (monitor, recorder, subscription)
    }

    @Test func followsCarrierAdminStateAddressesAndRoutes() async throws {
        let before = try HostNetworkState.capture()
        try await TestNamespace.with { test in
            let (monitor, recorder, subscription) = try record(test)
            defer { monitor.cancel(); subscription.cancel() }
            #expect(recorder.values.first?.status == .unsatisfied)
            #expect(recorder.values.first?.unsatisfiedReason == .noUsableInterface)

            let (wifi, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let up = try #require(recorder.waitForLast { $0.status == .satisfied })
            #expect(up.primaryInterface?.name == "wl0")
            #expect(up.primaryInterface?.type == .wifi)
            #expect(up.gateways == [IPAddress("198.18.0.1")!])
            #expect(up.supportsIPv4 && !up.isExpensive)

            // Carrier loss: the peer goes down, wl0 stays administratively up.
            try test.socket.setLink(index: wifiPeer, up: false)
            let lost = try #require(recorder.waitForLast { $0.status == .unsatisfied })
            #expect(lost.unsatisfiedReason == .noUsableInterface)
            try test.socket.setLink(index: wifiPeer, up: true)
            #expect(recorder.waitForLast { $0.status == .satisfied && $0.primaryInterface?.name == "wl0" } != nil)

            // The route goes: interfaces remain but nothing leads out.
            try test.socket.deleteRoute(Route.defaultRoute(via: IPAddress("198.18.0.1")!, interfaceIndex: wifi, metric: 100))
            #expect(recorder.waitForLast { $0.unsatisfiedReason == .noRoute } != nil)
            try test.socket.addRoute(Route.defaultRoute(via: IPAddress("198.18.0.1")!, interfaceIndex: wifi, metric: 100))
            #expect(recorder.waitForLast { $0.status == .satisfied } != nil)

            // Admin down flushes IPv4 routes without notifying them; the monitor re-reads routes.
            try test.socket.setLink(index: wifi, up: false)
            #expect(recorder.waitForLast { $0.unsatisfiedReason == .noUsableInterface } != nil)
            try test.socket.setLink(index: wifi, up: true)
            let noRoute = try #require(recorder.waitForLast { $0.unsatisfiedReason == .noRoute && $0.availableInterfaces.contains { $0.name == "wl0" } })
            #expect(noRoute.primaryInterface == nil)
            #expect(monitor.statistics.routeDumps >= 1)

            // An address change on its own is a path change; removing the address removes the interface.
            try test.socket.addRoute(Route.defaultRoute(via: IPAddress("198.18.0.1")!, interfaceIndex: wifi, metric: 100))
            try test.socket.addAddress(IPPrefix("198.18.0.3/24")!, interfaceIndex: wifi)
            #expect(recorder.waitForLast { $0.primaryInterface?.addresses.contains(IPPrefix("198.18.0.3/24")!) == true } != nil)

            // Consecutive paths always differ: nothing is published twice.
            let values = recorder.values
            for (previous, next) in zip(values, values.dropFirst()) { #expect(previous != next) }
            #expect(monitor.currentPath == values.last)
        }
        #expect(try HostNetworkState.capture() == before)
    }

    @Test func becomesExpensiveWhenCellularBecomesPrimary() async throws {
        try await TestNamespace.with { test in
            let (wifi, wifiPeer) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let (monitor, recorder, subscription) = try record(test)
            defer { monitor.cancel(); subscription.cancel() }
            let first = try #require(recorder.values.first)
            #expect(first.primaryInterface?.name == "wl0")
            #expect(first.availableInterfaces.map(\.name) == ["wl0", "ce0", "lo"])
            #expect(!first.isExpensive)

            try test.socket.setLink(index: wifiPeer, up: false)
            let cellular = try #require(recorder.waitForLast { $0.primaryInterface?.name == "ce0" })
            #expect(cellular.isExpensive)
            #expect(cellular.usesInterfaceType(.cellular))

            try test.socket.setLink(index: wifiPeer, up: true)
            #expect(recorder.waitForLast { $0.primaryInterface?.name == "wl0" && !$0.isExpensive } != nil)

            // Retagging the alias reclassifies at once: Wi-Fi becomes a constrained hotspot.
            try test.socket.setLink(index: wifi, alias: "roam:type=wifi,expensive,constrained")
            let hotspot = try #require(recorder.waitForLast { $0.isConstrained })
            #expect(hotspot.isExpensive)
            #expect(hotspot.primaryInterface?.name == "wl0")
        }
    }

    /// Rules given while the monitor runs classify every interface again at once (NetworkManager's
    /// metered flag in `roam daemon`), and nothing else publishes a path for them.
    @Test func newInterfaceRulesReclassifyWhileItRuns() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let (monitor, recorder, subscription) = try record(test)
            defer { monitor.cancel(); subscription.cancel() }
            let first = try #require(recorder.values.first)
            #expect(!first.isExpensive && first.availableInterfaces.first { $0.name == "ce0" }?.isExpensive == true)
            monitor.updateInterfaceRules(InterfaceRules([InterfaceRules.Rule(pattern: "wl0", attributes: InterfaceAttributes(isExpensive: true)),
                                                         InterfaceRules.Rule(pattern: "ce*", attributes: InterfaceAttributes(isExpensive: false))]))
            let metered = try #require(recorder.waitForLast { $0.isExpensive })
            #expect(metered.primaryInterface?.name == "wl0" && metered.availableInterfaces.first { $0.name == "ce0" }?.isExpensive == false)
            // Back to the configuration's (none): as at first.
            monitor.updateInterfaceRules(InterfaceRules())
            let back = try #require(recorder.waitForLast { !$0.isExpensive })
            #expect(back.availableInterfaces.first { $0.name == "ce0" }?.isExpensive == true)
            #expect(recorder.values.count == 3, "one path per change of rules: \(recorder.values.map(\.summary))")
        }
    }

    @Test func appliesThePolicy() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("ce0", subnet: 1, metric: 200, alias: "roam:type=cellular")
            let (monitor, recorder, subscription) = try record(test, policy: PathPolicy(allowsExpensive: false))
            defer { monitor.cancel(); subscription.cancel() }
            #expect(recorder.values.last?.unsatisfiedReason == .prohibitedExpensive)
            let (_, _) = try test.addUplink("wl0", subnet: 0, metric: 300, alias: "roam:type=wifi,constrained")
            let wifi = try #require(recorder.waitForLast { $0.status == .satisfied })
            #expect(wifi.primaryInterface?.name == "wl0")
            #expect(wifi.isConstrained)
            #expect(!wifi.availableInterfaces.contains { $0.name == "ce0" })
        }
    }

    @Test func recoversTheTrueStateAfterTheKernelDropsNotifications() async throws {
        try await TestNamespace.with { test in
            let (wifi, _) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let gate = DispatchSemaphore(value: 0)
            let blocked = Recorder<Bool>()
            // The handler holds the monitor's thread on the first change, so the storm below
            // overflows the (deliberately small) receive buffer.
            let log = RecordingLogHandler.Recorder()
            let (monitor, recorder, subscription) = try record(test, receiveBufferSize: 4096, logger: log.logger()) { path in
                if path.isExpensive && blocked.values.isEmpty {
                    blocked.append(true)
                    gate.wait()
                }
            }
            defer { monitor.cancel(); subscription.cancel() }
            try test.socket.setLink(index: wifi, alias: "roam:type=cellular")
            #expect(blocked.wait { !$0.isEmpty } != nil)
            for n in 0..<1000 {
                try test.socket.setLink(index: wifi, alias: n % 2 == 0 ? "roam:type=wifi" : "roam:type=wiredEthernet")
            }
            try test.socket.setLink(index: wifi, alias: "roam:type=cellular,constrained")
            gate.signal()
            let final = try #require(recorder.waitForLast { $0.isConstrained })
            #expect(final.primaryInterface?.type == .cellular)
            #expect(final.isExpensive)
            #expect(monitor.statistics.overruns >= 1)
            #expect(monitor.statistics.fullDumps >= 2)
            // The app's logger heard of it: once per recovery, not once per overrun, with the
            // namespace; and the dump that repaired it, at debug.
            let warnings = log.recorded.filter { $0.level == .warning }
            #expect(warnings.contains { $0.message.contains("dropped rtnetlink notifications") && $0.metadata["netns"] == "\(test.namespace)" })
            #expect(warnings.count <= monitor.statistics.fullDumps)
            #expect(log.recorded.contains { $0.level == .debug && $0.message.contains("full dump") })
            // What the monitor ended with equals a fresh look at the kernel.
            let socket = test.socket
            let fresh = PathEvaluator().path(for: NetworkSnapshot(links: try socket.links(), addresses: try socket.addresses(), routes: try socket.routes()))
            #expect(monitor.currentPath == fresh)
        }
    }

    @Test func deliversThroughTheAsyncSequence() async throws {
        try await TestNamespace.with { test in
            let monitor = NetworkPathMonitor(namespace: test.namespace)
            try monitor.start()
            var iterator = monitor.paths.makeAsyncIterator()
            let first = await iterator.next()
            #expect(first?.status == .unsatisfied)
            try test.addUplink("eth0", subnet: 4, metric: 10, alias: nil)
            var last = first
            while last?.status != .satisfied { last = await iterator.next() }
            #expect(last?.primaryInterface?.type == .wiredEthernet)
            monitor.cancel()
            #expect(await iterator.next() == nil)
        }
    }

    @Test func runEndsWhenItsTaskIsCancelled() async throws {
        try await TestNamespace.with { test in
            let monitor = NetworkPathMonitor(namespace: test.namespace)
            let task = Task { try await monitor.run() }
            for await _ in monitor.paths { break }
            task.cancel()
            try await task.value
            var after = 0
            for await _ in monitor.paths { after += 1 }
            #expect(after == 0)
        }
    }

    @Test func cancelsAndRestartsWithoutLeaks() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("eth0", subnet: 4, metric: 10, alias: nil)
            // Other suites run at the same time and open files and threads of their own, so count
            // only what a monitor owns: its pinned thread and its eventfd and inotify descriptors,
            // which live and die with its netlink sockets. (Counting threads by name would not
            // do: threads that a pinned thread spawns, such as Dispatch workers, inherit its name.)
            func entries(_ directory: String) -> [String] {
                guard let handle = opendir(directory) else { return [] }
                defer { closedir(handle) }
                var names: [String] = []
                while let entry = readdir(handle) {
                    names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) })
                }
                return names.filter { $0 != "." && $0 != ".." }
            }
            func monitorThreads() -> Int { PinnedThread.runningCount(named: "roam-pathmon") }
            func monitorDescriptors() -> Int {
                entries("/proc/self/fd").filter { fd in
                    var buffer = [CChar](repeating: 0, count: 256)
                    let count = readlink("/proc/self/fd/\(fd)", &buffer, 255)
                    guard count > 0 else { return false }
                    let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    return target == "anon_inode:[eventfd]" || target == "anon_inode:inotify"
                }.count
            }
            // Descriptors and threads of other tests (in parallel suites, or a monitor of an
            // earlier test released from another thread) come and go; a count that settles on
            // the expected value within the deadline passes, a leak does not.
            func settles(_ condition: () -> Bool) async throws -> Bool {
                let deadline = ContinuousClock.now + .seconds(5)
                while !condition() {
                    guard ContinuousClock.now < deadline else { return false }
                    try await Task.sleep(for: .milliseconds(5))
                }
                return true
            }
            #expect(try await settles { monitorThreads() == 0 })
            let descriptors = monitorDescriptors()
            var running: [NetworkPathMonitor] = []
            for _ in 0..<3 {
                let monitor = NetworkPathMonitor(namespace: test.namespace)
                try monitor.start()
                running.append(monitor)
            }
            #expect(monitorThreads() == 3)
            // Dispatch opens and closes eventfds of its own at times: allow for two of them.
            let noise = 2
            #expect(monitorDescriptors() >= descriptors + 6 - noise)
            for monitor in running { monitor.cancel() }
            for _ in 0..<50 {
                let monitor = NetworkPathMonitor(namespace: test.namespace)
                try monitor.start()
                #expect(monitor.currentPath?.status == .satisfied)
                monitor.cancel()
            }
            #expect(monitorThreads() == 0, "after cancel")
            // Releasing a started monitor without cancel() cancels it too.
            do {
                let forgotten = NetworkPathMonitor(namespace: test.namespace)
                try forgotten.start()
            }
            #expect(monitorThreads() == 0)
            // 53 monitors came and went: a leak would leave 100 or more descriptors behind.
            #expect(try await settles { abs(monitorDescriptors() - descriptors) <= noise })
        }
    }

    @Test func reportsBadNamespacesAndMisuse() async throws {
        let missing = NetworkPathMonitor(namespace: try .named("roam-test-no-such-namespace"))
        let error = #expect(throws: PathMonitorError.self) { try missing.start() }
        #expect(error?.code == .namespaceUnavailable)
        #expect(error?.message.contains("no network namespace named 'roam-test-no-such-namespace'") == true)
        #expect(missing.currentPath == nil)

        try await TestNamespace.with { test in
            let monitor = NetworkPathMonitor(namespace: test.namespace)
            try monitor.start()
            #expect(throws: PathMonitorError.self) { try monitor.start() }
            monitor.cancel()
            let restart = #expect(throws: PathMonitorError.self) { try monitor.start() }
            #expect(restart?.code == .invalidState)
        }
    }

    @Test func currentMeansTheCallingThreadsNamespace() async throws {
        try await TestNamespace.with { test in
            try test.addUplink("eth7", subnet: 7, metric: 10, alias: "roam:type=cellular")
            // Code running on a thread pinned to a node (as a test of an app would) gets that node's path.
            let path = try test.namespace.perform { () throws -> NetworkPath? in
                let monitor = NetworkPathMonitor()
                try monitor.start()
                defer { monitor.cancel() }
                return monitor.currentPath
            }
            #expect(path?.primaryInterface?.name == "eth7")
            #expect(path?.isExpensive == true)
            let here = NetworkPathMonitor()
            try here.start()
            #expect(here.currentPath?.availableInterfaces.contains { $0.name == "eth7" } == false)
            here.cancel()
        }
    }

    @Test func coalescesABurstWithinTheDelay() async throws {
        try await TestNamespace.with { test in
            let (wifi, _) = try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let monitor = NetworkPathMonitor(namespace: test.namespace, configuration: .init(
                resolverConfigurationPath: "/nonexistent/resolv.conf", coalescingDelay: .seconds(2)))
            let recorder = Recorder<NetworkPath>()
            let subscription = monitor.onUpdate { recorder.append($0) }
            defer { monitor.cancel(); subscription.cancel() }
            try monitor.start()
            // Ten retags back to back, well inside the two-second window: one update, the last state.
            for n in 0..<10 {
                try test.socket.setLink(index: wifi, alias: n % 2 == 0 ? "roam:type=cellular" : "roam:type=wifi,constrained")
            }
            let final = try #require(recorder.waitForLast { $0.isConstrained })
            #expect(!final.isExpensive)
            #expect(recorder.values.count == 2)
        }
    }

    /// Watched with inotify, or, where no inotify instance can be had (128 a user by default: a
    /// run of more nodes meets the limit), read again every second.
    @Test(arguments: [true, false]) func followsTheNamespacesResolverFile(watched: Bool) async throws {
        try await TestNamespace.with { test in
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let directory = "/etc/netns/\(test.name)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try "nameserver 198.18.0.53\n".write(toFile: directory + "/resolv.conf", atomically: false, encoding: .utf8)
            var configuration = NetworkPathMonitor.Configuration()
            configuration.watchesResolverFile = watched
            let monitor = NetworkPathMonitor(namespace: test.namespace, configuration: configuration)
            let recorder = Recorder<NetworkPath>()
            let subscription = monitor.onUpdate { recorder.append($0) }
            defer { monitor.cancel(); subscription.cancel() }
            try monitor.start()
            #expect(recorder.values.first?.supportsDNS == true)
            try "# no resolvers\n".write(toFile: directory + "/resolv.conf", atomically: false, encoding: .utf8)
            #expect(recorder.waitForLast { !$0.supportsDNS } != nil)
            // Replaced by rename, as resolvconf and NetworkManager do.
            try "nameserver 198.18.0.53\n".write(toFile: directory + "/resolv.conf", atomically: true, encoding: .utf8)
            #expect(recorder.waitForLast { $0.supportsDNS } != nil)
        }
    }

    @Test func cancellingFromAHandlerDoesNotDeadlock() async throws {
        try await TestNamespace.with { test in
            let monitor = NetworkPathMonitor(namespace: test.namespace)
            let done = Recorder<Bool>()
            let subscription = monitor.onUpdate { path in
                if path.status == .satisfied {
                    monitor.cancel()
                    done.append(true)
                }
            }
            try monitor.start()
            try test.addUplink("eth0", subnet: 4, metric: 10, alias: nil)
            #expect(done.wait { !$0.isEmpty } != nil)
            subscription.cancel()
            // The detached thread ends on its own once the handler returns; leak checks in other
            // tests of this serialized suite count on it being gone.
            let deadline = ContinuousClock.now + .seconds(5)
            func running() -> Int { PinnedThread.runningCount(named: "roam-pathmon") }
            while running() > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(running() == 0, "the monitor's threads ended")
        }
    }

    /// Threads inherit their namespaces from the thread that starts them, and Dispatch starts
    /// workers from whichever thread enqueues work: a monitor that delivered from its thread in
    /// the watched namespace would leave pool threads there, and later tasks would run in it.
    @Test func updatesReachSubscribersOutsideTheWatchedNamespace() async throws {
        let host = threadNetworkNamespace()
        try await TestNamespace.with { test in
            let monitor = NetworkPathMonitor(namespace: test.namespace, configuration: .init(resolverConfigurationPath: "/nonexistent/resolv.conf"))
            let seen = Recorder<String>()
            var subscriptions = [monitor.onUpdate { _ in seen.append(threadNetworkNamespace()) }]
            // Handlers on 24 queues that wait for one another: Dispatch must start a thread for
            // each while the monitor delivers, from the thread that delivers.
            let queues = 24
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            for index in 0..<queues {
                let queue = DispatchQueue(label: "roam.test.subscriber.\(index)")
                subscriptions.append(monitor.onUpdate(queue: queue) { _ in
                    seen.append(threadNetworkNamespace())
                    started.signal()
                    _ = release.wait(timeout: .now() + 5)
                })
            }
            let paths = monitor.paths
            let streamed = Task.detached { () -> [String] in
                var namespaces: [String] = []
                for await path in paths {
                    namespaces.append(threadNetworkNamespace())
                    if path.status == .satisfied { break }
                }
                return namespaces
            }
            try monitor.start()
            for _ in 0..<queues { #expect(started.wait(timeout: .now() + 10) == .success) }
            for _ in 0..<queues { release.signal() }
            try test.addUplink("wl0", subnet: 0, metric: 100, alias: "roam:type=wifi")
            let fromStream = await streamed.value
            #expect(seen.wait { $0.count >= 2 + 2 * queues } != nil)
            for _ in 0..<queues { release.signal() }
            monitor.cancel()
            subscriptions.removeAll()
            #expect(!fromStream.isEmpty)
            let namespaces = Set(seen.values + fromStream)
            #expect(namespaces == [host], "handlers ran in \(namespaces.sorted()), the test in \(host)")
            // And a task started now runs where the test does.
            #expect(await Task.detached { threadNetworkNamespace() }.value == host)
        }
    }
}

/// The network namespace of the calling thread, as `net:[INODE]`.
func threadNetworkNamespace() -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self/ns/net", &buffer, buffer.count - 1)
    return count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
}
