import RoamCore
import RoamSystem
import Foundation
import Glibc
import LinkEmulation
import Netlink
import Synchronization
@testable import ScenarioModel
import Testing
import TestSupport
@testable import Simulator

/// The userspace emulator with the kernel's TUN offloads, over real namespaces: 64 KB TCP
/// segments cross a link that changes nothing whole, and a link that decides per packet cuts
/// them into the wire packets they stand for, with complete checksums, so that what arrives is
/// intact and the decisions are those the same traffic gets without offloads.
@Suite(.enabled(if: TestEnvironment.isRoot, "needs root to create network namespaces"), .serialized)
struct EmulatorOffloadTests {
    /// Two nodes joined by one emulated link.
    struct Network {
        let topology: Topology
        let backend: UserspaceBackend
        let plan: TopologyPlan
        var a: NetworkNamespace { topology.namespace(of: "a")! }
        var b: NetworkNamespace { topology.namespace(of: "b")! }

        init(offloads: Bool, seed: UInt64 = 1, recording: UserspaceBackend.Recording? = nil, links: Int = 1, threads: Int? = nil,
             scheduling: LinkEmulator.Scheduling = .realtime) throws {
            let scenario = try #require(ScenarioReader.parse("""
                name: offloads
                duration: 10s
                nodes: { a: {}, b: {} }
                links:
                """ + (0..<links).map { "\n  - { name: \($0 == 0 ? "emu" : "emu\($0 + 1)"), between: [a, b] }" }.joined(), file: "offloads.yaml").scenario)
            plan = try TopologyPlan(scenario: scenario, runID: RunRegistry.newRunID())
            backend = UserspaceBackend(plan: plan, seed: seed, recording: recording)
            backend.offloads = offloads
            backend.threads = threads
            backend.scheduling = scheduling
            topology = try Topology.build(plan, backend: backend)
            do {
                try backend.start(topology)
            } catch {
                topology.teardown()
                throw error
            }
        }

        /// b's address on a link.
        func address(_ family: AddressFamily, link: String = "emu") throws -> IPAddress {
            let interface = try #require(plan.node("a")?.interfaces.first { $0.link == link })
            return family == .inet ? interface.peerIPv4 : interface.peerIPv6
        }

        /// The transmit queue length of a's interfaces (`ip link set ... txqueuelen`): room for
        /// a burst the test sends at once.
        func setQueueLength(_ length: Int) throws {
            let namespace = try #require(a.name)
            for interface in try #require(plan.node("a")).interfaces {
                let result = try RunningCommand.run("/usr/sbin/ip", ["-n", namespace, "link", "set", interface.name, "txqueuelen", "\(length)"], timeout: 10)
                try #require(result.status == 0, "ip link set \(interface.name) txqueuelen: \(result.error)")
            }
        }

        func apply(_ impairment: Impairment, link: String = "emu") throws {
            for direction in TrafficDirection.allCases { try backend.apply(LinkConditions(impairment: impairment), link: link, direction: direction) }
        }

        /// Stops the emulator and removes the namespaces: the data direction's counters.
        func finish() -> LinkPipeline.Statistics? {
            backend.stop()
            topology.teardown()
            return backend.linkStatistics.first { $0.direction == .up }?.counters
        }
    }

    static func sockaddr(_ address: IPAddress, port: UInt16) -> (sockaddr_storage, socklen_t) {
        var storage = sockaddr_storage()
        let text = address.description
        if address.family == .inet {
            var value = sockaddr_in()
            value.sin_family = sa_family_t(AF_INET)
            value.sin_port = port.bigEndian
            inet_pton(AF_INET, text, &value.sin_addr)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: value, as: sockaddr_in.self) }
            return (storage, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        var value = sockaddr_in6()
        value.sin6_family = sa_family_t(AF_INET6)
        value.sin6_port = port.bigEndian
        inet_pton(AF_INET6, text, &value.sin6_addr)
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: value, as: sockaddr_in6.self) }
        return (storage, socklen_t(MemoryLayout<sockaddr_in6>.size))
    }

    static func socket(in namespace: NetworkNamespace, _ family: AddressFamily, _ type: Int32) throws -> Int32 {
        let fd = try namespace.perform { Glibc.socket(family.rawValue, type | Int32(SOCK_CLOEXEC.rawValue), 0) }
        try #require(fd >= 0, "socket: \(String(cString: strerror(errno)))")
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// A fresh directory of this test's own (`mkdtemp`: never one another user made first).
    static func scratchDirectory(_ prefix: String) throws -> String { try TestEnvironment.scratchDirectory(prefix) }

    /// The bytes a transfer sends: a pattern that a misplaced or reordered segment would break.
    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 11) } }

    /// Sends `bytes` over TCP from a to b; returns what b received.
    static func transfer(_ network: Network, _ family: AddressFamily, _ bytes: [UInt8], port: UInt16) throws -> [UInt8] {
        let listener = try socket(in: network.b, family, Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        var (address, length) = sockaddr(try network.address(family), port: port)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        try #require(bound == 0 && listen(listener, 1) == 0, "listen: \(String(cString: strerror(errno)))")
        let received = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var all: [UInt8] = []
            while true {
                let count = read(connection, &buffer, buffer.count)
                if count <= 0 { break }
                all += buffer[..<count]
            }
            received.withLock { $0 = all }
        }.start()
        let sender = try socket(in: network.a, family, Int32(SOCK_STREAM.rawValue))
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { connect(sender, $0, length) } }
        try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { write(sender, $0.baseAddress, min($0.count, 1 << 18)) }
            guard count > 0 else { break }
            sent += count
        }
        close(sender)
        done.wait()
        #expect(sent == bytes.count)
        return received.withLock { $0 }
    }

    /// With nothing to decide, TCP's 64 KB segments cross whole: far fewer reads than wire packets.
    @Test(arguments: [AddressFamily.inet, .inet6])
    func segmentsCrossWholeAndIntactWhenNothingIsDecided(family: AddressFamily) throws {
        let network = try Network(offloads: true)
        let data = Self.pattern(8 << 20)
        let received = try Self.transfer(network, family, data, port: 7101)
        let counters = try #require(network.finish())
        #expect(received.count == data.count && received == data)
        #expect(network.backend.superPackets > 0, "the kernel handed over segmented packets")
        // Each wire packet is counted, however it crossed: at least the data's MSS-sized share.
        #expect(counters.delivered >= data.count / 1500)
    }

    /// Loss, corruption and duplication decided per wire packet, through a delay: TCP recovers
    /// everything, and the flipped bits were caught by the receiver's checksum (complete on every
    /// cut segment), or the data would differ.
    @Test(arguments: [AddressFamily.inet, .inet6])
    func cutSegmentsAreDecidedOnOneByOneAndArriveIntact(family: AddressFamily) throws {
        let network = try Network(offloads: true, seed: 3)
        try network.apply(Impairment(delay: .milliseconds(1), loss: .random(rate: 0.01, correlation: 0), duplicate: 0.01, corrupt: 0.005))
        let data = Self.pattern(4 << 20)
        let received = try Self.transfer(network, family, data, port: 7102)
        let counters = try #require(network.finish())
        #expect(received.count == data.count && received == data)
        #expect(network.backend.superPackets > 0, "the kernel handed over segmented packets, cut here")
        #expect(network.backend.mergedWrites > 0, "segments leaving together were written as one")
        #expect(counters.lost > 0 && counters.corrupted > 0 && counters.duplicated > 0, "\(counters)")
        // Wire packets, not 64 KB segments: 4 MB is over 2,800 of them.
        #expect(counters.arrived >= data.count / 1500, "\(counters)")
    }

    /// The same datagrams (sent with UDP_SEGMENT, so that with offloads the kernel hands them
    /// over 8 at a time) through 10% loss and 5% duplication: the decision logs of a run with
    /// offloads and one without are the same, line for line.
    @Test func theSameSeedDecidesTheSameWithOffloadsOnAndOff() throws {
        let scratch = try Self.scratchDirectory("roam-offloads")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var logs: [String] = []
        var superPackets: [Int] = []
        var receivedCounts: [Int] = []
        for offloads in [true, false] {
            let path = scratch + "/\(offloads)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let recording = UserspaceBackend.Recording(directory: try SecureDirectory.open(path), decisionLogs: true, capturedLinks: [])
            let network = try Network(offloads: offloads, seed: 42, recording: recording)
            try network.apply(Impairment(loss: .random(rate: 0.1, correlation: 0), duplicate: 0.05))
            let receiver = try Self.socket(in: network.b, .inet, Int32(SOCK_DGRAM.rawValue))
            defer { close(receiver) }
            // Room for every datagram until they are read at the end.
            var room: Int32 = 16 << 20
            setsockopt(receiver, SOL_SOCKET, SO_RCVBUFFORCE, &room, 4)
            var (address, length) = Self.sockaddr(try network.address(.inet), port: 7103)
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { bind(receiver, $0, length) } }
            try #require(bound == 0)
            let sender = try Self.socket(in: network.a, .inet, Int32(SOCK_DGRAM.rawValue))
            defer { close(sender) }
            var segment: Int32 = 1000
            try #require(setsockopt(sender, Int32(IPPROTO_UDP), 103 /* UDP_SEGMENT */, &segment, 4) == 0)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { connect(sender, $0, length) } }
            try #require(connected == 0)
            // Sent at once: the sending interface's queue holds the whole burst (1,200 datagrams
            // without offloads), and a full send buffer blocks the sender, so nothing is dropped
            // on the way that the other run kept.
            try network.setQueueLength(2048)
            var payload = [UInt8](repeating: 0, count: 8000)
            for round in 0..<150 {
                payload[0] = UInt8(truncatingIfNeeded: round)
                #expect(send(sender, payload, payload.count, 0) == payload.count)
            }
            let count = try Self.drainToMarker(receiver: receiver, sender: sender)
            _ = network.finish()
            superPackets.append(network.backend.superPackets)
            receivedCounts.append(count)
            let directory = try SecureDirectory.open(path)
            logs.append(String(decoding: try directory.readFile(named: "decisions-emu-up.log", maximumBytes: 1 << 20), as: UTF8.self))
        }
        #expect(superPackets[0] > 0 && superPackets[1] == 0, "\(superPackets)")
        // The data's decisions come first, one a datagram; the markers' after them.
        let data = logs.map { $0.split(separator: "\n").prefix(1200) }
        #expect(data[0].count == 1200, "one decision per datagram: \(data[0].count)")
        #expect(data[0].contains { $0.hasSuffix(" loss") } && data[0].contains { $0.hasSuffix(" duplicate") })
        #expect(data[0] == data[1], "the same decisions with offloads on and off")
        #expect(receivedCounts[0] == receivedCounts[1] && receivedCounts[0] > 1000, "\(receivedCounts)")
    }

    /// Bursts of one flow's UDP datagrams, of mixed sizes, through a link that decides nothing:
    /// each arrives once, in order, with its own length and bytes, though the datagrams of a
    /// burst that the emulator read together went to the receiving stack as one write (USO).
    @Test(arguments: [AddressFamily.inet, .inet6])
    func burstsOfDatagramsArriveEachAsSentThoughWrittenTogether(family: AddressFamily) throws {
        let network = try Network(offloads: true)
        var finished = false
        defer { if !finished { _ = network.finish() } }
        let receiver = try Self.socket(in: network.b, family, Int32(SOCK_DGRAM.rawValue))
        defer { close(receiver) }
        var room: Int32 = 16 << 20
        setsockopt(receiver, SOL_SOCKET, SO_RCVBUFFORCE, &room, 4)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var (address, length) = Self.sockaddr(try network.address(family), port: 7105)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { bind(receiver, $0, length) } }
        try #require(bound == 0)
        let sender = try Self.socket(in: network.a, family, Int32(SOCK_DGRAM.rawValue))
        defer { close(sender) }
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { connect(sender, $0, length) } }
        try #require(connected == 0)
        // Runs of equal sizes, a shorter one ending each (as merging allows), and single ones.
        let sizes = [1000, 1000, 1000, 300, 64, 64, 64, 64, 500, 1200, 8]
        func datagram(_ number: Int) -> [UInt8] {
            (0..<sizes[number % sizes.count]).map { $0 < 4 ? UInt8(truncatingIfNeeded: number >> ($0 * 8)) : UInt8(truncatingIfNeeded: number &* 7 &+ $0) }
        }
        var buffer = [UInt8](repeating: 0, count: 2048)
        var next = 0
        var received = 0
        var wrong: [String] = []
        for _ in 0..<20 {
            // A burst within the interface's queue, sent as fast as the sender can.
            let first = next
            for _ in 0..<200 {
                let bytes = datagram(next)
                #expect(send(sender, bytes, bytes.count, 0) == bytes.count)
                next += 1
            }
            for number in first..<next {
                let count = recv(receiver, &buffer, buffer.count, 0)
                guard count >= 0 else {
                    wrong.append("datagram \(number) did not come: \(String(cString: strerror(errno)))")
                    break
                }
                received += 1
                if Array(buffer[..<count]) != datagram(number) {
                    let came = count >= 4 ? Int(buffer[0]) | Int(buffer[1]) << 8 | Int(buffer[2]) << 16 : -1
                    if wrong.count < 5 { wrong.append("expected datagram \(number) (\(sizes[number % sizes.count]) bytes), got \(count) bytes of \(came)") }
                }
            }
        }
        finished = true
        let counters = try #require(network.finish())
        #expect(wrong.isEmpty, "\(wrong)")
        #expect(received == next)
        #expect(network.backend.mergedWrites > 0, "bursts went as one write: \(counters)")
        #expect(counters.delivered >= next, "each datagram counted: \(counters)")
    }

    /// 400 datagrams through each of two links, sent at once, and each receiver read until a
    /// marker sent after them has come (``drainToMarker(receiver:sender:)``): the data
    /// datagrams that came, per link.
    static func burst(_ network: Network, links: [String], port: UInt16) throws -> [Int] {
        var receivers: [Int32] = []
        defer { receivers.forEach { close($0) } }
        var senders: [Int32] = []
        defer { senders.forEach { close($0) } }
        for (index, link) in links.enumerated() {
            let receiver = try socket(in: network.b, .inet, Int32(SOCK_DGRAM.rawValue))
            receivers.append(receiver)
            var room: Int32 = 16 << 20
            setsockopt(receiver, SOL_SOCKET, SO_RCVBUFFORCE, &room, 4)
            var (address, length) = sockaddr(try network.address(.inet, link: link), port: port + UInt16(index))
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { bind(receiver, $0, length) } }
            try #require(bound == 0)
            let sender = try socket(in: network.a, .inet, Int32(SOCK_DGRAM.rawValue))
            senders.append(sender)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: Glibc.sockaddr.self, capacity: 1) { connect(sender, $0, length) } }
            try #require(connected == 0)
        }
        // The interfaces' queues hold the whole burst; a full send buffer blocks the sender.
        try network.setQueueLength(2048)
        var payload = [UInt8](repeating: 0, count: 1200)
        for round in 0..<400 {
            payload[0] = UInt8(truncatingIfNeeded: round)
            for sender in senders { #expect(send(sender, payload, payload.count, 0) == payload.count) }
        }
        return try zip(receivers, senders).map { receiver, sender in try drainToMarker(receiver: receiver, sender: sender) }
    }

    /// Reads `receiver` until a marker sent through `sender` after the data has come: a link
    /// keeps its packets' order (none of these reorders), so by then every datagram sent before
    /// it has been delivered or lost, and the read is complete without waiting for a silence.
    /// A marker is one byte (data datagrams are longer); one the link loses is sent again when
    /// nothing at all has come for half a second. The data datagrams that came.
    static func drainToMarker(receiver: Int32, sender: Int32) throws -> Int {
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let marker: [UInt8] = [0xff]
        var count = 0
        for _ in 0..<40 {
            #expect(send(sender, marker, marker.count, 0) == marker.count)
            while true {
                let received = recv(receiver, &buffer, buffer.count, 0)
                if received == marker.count { return count }
                if received > 0 {
                    count += 1
                    continue
                }
                try #require(errno == EAGAIN || errno == EWOULDBLOCK, "recv: \(String(cString: strerror(errno)))")
                break
            }
        }
        Issue.record("none of 40 markers came back")
        return count
    }

    /// CPU time of this process's threads named `name`, by thread (`schedstat`: nanoseconds on
    /// a core, not the clock's ticks).
    static func cpuTime(ofThreadsNamed name: String) -> [pid_t: Duration] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Dictionary(uniqueKeysWithValues: tasks.compactMap { task -> (pid_t, Duration)? in
            guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                  comm.trimmingCharacters(in: .whitespacesAndNewlines) == name, let thread = pid_t(task),
                  let schedstat = try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8),
                  let nanoseconds = schedstat.split(separator: " ").first.flatMap({ Int64($0) }) else { return nil }
            return (thread, .nanoseconds(nanoseconds))
        })
    }

    /// The scheduling class of each thread named `name` of this process (`SCHED_OTHER`, `SCHED_FIFO`, ...).
    static func schedulingPolicies(ofThreadsNamed name: String) -> [Int32] {
        schedulingPoliciesByThread(ofThreadsNamed: name).map(\.policy)
    }

    static func schedulingPoliciesByThread(ofThreadsNamed name: String) -> [(thread: pid_t, policy: Int32)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task -> (pid_t, Int32)? in
            guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                  comm.trimmingCharacters(in: .whitespacesAndNewlines) == name, let tid = pid_t(task) else { return nil }
            let policy = sched_getscheduler(tid)
            return policy < 0 ? nil : (tid, policy)
        }
    }

    /// The threads named `name` seen in the real-time class while looking for up to `window`
    /// (until all `expected` are), and how many there are. A real-time emulator thread steps
    /// into the ordinary class while it polls with nothing queued, a short while after each
    /// packet; on a busy machine it may sit there longer, waiting for a core: one sample can
    /// catch it there (a CI rehearsal did, with a build beside it).
    static func threadsSeenRealtime(named name: String, expected: Int, window: Duration) -> (realtime: Int, threads: Int) {
        var seen = Set<pid_t>()
        var threads = Set<pid_t>()
        let deadline = ContinuousClock.now + window
        repeat {
            for (thread, policy) in schedulingPoliciesByThread(ofThreadsNamed: name) {
                threads.insert(thread)
                if policy == SCHED_FIFO { seen.insert(thread) }
            }
            if seen.count >= expected { break }
            var none: [pollfd] = []
            _ = poll(&none, 0, 1)
        } while ContinuousClock.now < deadline
        return (seen.count, threads.count)
    }

    /// The emulator's threads run in the real-time class where the process may (root, as here),
    /// so that a packet due to leave does not wait for a core the run's programs hold; asked
    /// for the ordinary class, they stay in it. Either way the packets cross.
    @Test func theEmulatorsThreadsAreRealTimeUnlessAskedNot() throws {
        for scheduling in [LinkEmulator.Scheduling.realtime, .normal] {
            #expect(Self.schedulingPolicies(ofThreadsNamed: "roam-emulator").isEmpty, "no emulator of another test is running")
            let network = try Network(offloads: true, links: 2, threads: 2, scheduling: scheduling)
            // Packets through both links: both threads are in their loops, their class set.
            let received = try Self.burst(network, links: ["emu", "emu2"], port: 7301)
            // Real-time: each thread seen in the class within 2 s; ordinary: none, in 200 ms of looking.
            let seen = Self.threadsSeenRealtime(named: "roam-emulator", expected: scheduling == .realtime ? 2 : 3,
                                                window: scheduling == .realtime ? .seconds(2) : .milliseconds(200))
            _ = network.finish()
            #expect(received.allSatisfy { $0 > 300 }, "\(received)")
            #expect(seen.threads == 2)
            #expect(seen.realtime == (scheduling == .realtime ? 2 : 0), "\(scheduling): \(seen.realtime) of \(seen.threads) seen real-time")
            #expect(network.backend.realtimeThreads == seen.realtime)
        }
    }

    /// Two links on two threads: each thread moves its own link's packets (both spend CPU), and
    /// the decisions are those of the same traffic on one thread, link by link.
    @Test func twoLinksOnTwoThreadsDecideAsOnOne() throws {
        let scratch = try Self.scratchDirectory("roam-threads")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var logs: [[String]] = []
        var received: [[Int]] = []
        for threads in [2, 1] {
            let path = scratch + "/\(threads)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let recording = UserspaceBackend.Recording(directory: try SecureDirectory.open(path), decisionLogs: true, capturedLinks: [])
            let before = PinnedThread.runningCount(named: "roam-emulator")
            let network = try Network(offloads: true, seed: 9, recording: recording, links: 2, threads: threads)
            #expect(PinnedThread.runningCount(named: "roam-emulator") - before == threads)
            for link in ["emu", "emu2"] {
                try network.apply(Impairment(delay: .microseconds(200), loss: .random(rate: 0.05, correlation: 0), duplicate: 0.02), link: link)
            }
            let cpuBefore = Self.cpuTime(ofThreadsNamed: "roam-emulator")
            received.append(try Self.burst(network, links: ["emu", "emu2"], port: 7201))
            let cpu = Self.cpuTime(ofThreadsNamed: "roam-emulator")
            if threads == 2 {
                // Both threads of this run worked while the packets crossed.
                #expect(Set(cpu.keys) == Set(cpuBefore.keys) && cpu.count == 2, "\(cpuBefore) → \(cpu)")
                #expect(cpu.allSatisfy { thread, time in time > cpuBefore[thread, default: .zero] }, "\(cpuBefore) → \(cpu)")
            }
            _ = network.finish()
            let directory = try SecureDirectory.open(path)
            logs.append(try ["emu", "emu2"].map { String(decoding: try directory.readFile(named: "decisions-\($0)-up.log", maximumBytes: 1 << 20), as: UTF8.self) })
        }
        // The data's decisions, one a datagram, come before the markers'.
        let data = logs.map { $0.map { $0.split(separator: "\n").prefix(400) } }
        #expect(data[0][0].count == 400 && data[0][1].count == 400)
        #expect(data[0][0] != data[0][1], "each link draws from its own seed")
        #expect(data[0] == data[1], "the same decisions on two threads as on one")
        #expect(received[0] == received[1] && received[0].allSatisfy { $0 > 300 }, "\(received)")
    }
}
