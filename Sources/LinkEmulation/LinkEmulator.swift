import CRoamLinux
import Glibc
import Logging
import Netlink
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

/// Roam's userspace link emulator: a few threads (one per core by default) move the packets of
/// every link of a run between its TUN interfaces, each direction through a ``LinkPipeline``.
/// Each link belongs to one thread (its ``Shard``), so a direction's pipeline is only ever
/// touched by one thread and its decisions stay deterministic; two busy links on two threads use
/// two cores. Each thread is one event loop on one monotonic clock: it sleeps in `epoll` on its
/// interfaces until a packet comes or its earliest pipeline event is due (nanosecond timeout),
/// so there are no per-packet timers.
package final class LinkEmulator: @unchecked Sendable {
    package struct Direction {
        package var link: Int
        package var pipeline: LinkPipeline
        package let source: TunInterface
        package let destination: TunInterface
        package var decisions: BufferedFile?
        package var capture: PcapWriter?
        /// Whether this is the direction the phone sends in, for a link with a cellular radio,
        /// and the one whose far end is the destination, for flows.
        package var isUplink = true
        /// The flows with conditions of their own (`match:`), seeded from ``flowSeed``.
        package var flows: FlowClasses
        /// The seed the flows' generators are drawn from (the direction's own).
        package var flowSeed: UInt64 = 0 {
            didSet { flows = FlowClasses(seed: flowSeed, logsDecisions: pipeline.logsDecisions) }
        }

        package init(link: Int, pipeline: LinkPipeline, source: TunInterface, destination: TunInterface, decisions: BufferedFile?, capture: PcapWriter?) {
            self.link = link
            self.pipeline = pipeline
            self.source = source
            self.destination = destination
            self.decisions = decisions
            self.capture = capture
            self.flows = FlowClasses(seed: 0, logsDecisions: pipeline.logsDecisions)
        }

        /// Puts a packet in its flow's pipeline, or the link's own.
        mutating func arrive(_ packet: [UInt8], at now: Int64, enteringAt entry: Int64?) {
            if !flows.classes.isEmpty, let index = packet.withUnsafeBytes({ flows.classify($0, uplink: isUplink) }) {
                flows.arrive(packet, class: index, at: now, enteringAt: entry)
            } else {
                pipeline.arrive(packet, at: now, enteringAt: entry)
            }
        }

        /// The next time anything of this direction is due.
        mutating func nextEvent() -> Int64? {
            let own = pipeline.nextEvent()
            guard !flows.isEmpty, let flow = flows.nextEvent() else { return own }
            return min(own ?? flow, flow)
        }
    }

    /// How the emulator's threads are scheduled.
    package enum Scheduling: Sendable, Hashable {
        /// The kernel's real-time class (`SCHED_FIFO`, the lowest priority) where the process may
        /// use it (root, or an `RLIMIT_RTPRIO` above zero), the ordinary class otherwise: a thread
        /// due to send a packet runs at once instead of waiting for a core that the run's own
        /// programs hold, as a wire does not wait for the machine's load. The kernel keeps 5%
        /// of every second for other threads (`sched_rt_runtime_us`). While a thread polls with
        /// nothing queued (``LinkEmulator/spin`` after a packet) it is in the ordinary class, so
        /// that the threads sharing its core run meanwhile.
        case realtime
        /// The ordinary class, sharing the cores with every other thread.
        case normal
    }

    package enum Command: Sendable {
        /// The link's own conditions for a direction, and its flows' (`match:`).
        case conditions(direction: Int, LinkConditions, LinkCapacity, distribution: [Int16]?, flows: [FlowSetup] = [])
        case carrier(link: Int, up: Bool)
    }

    /// The threads, and for each direction its thread and its place there.
    private let shards: [Shard]
    private let placement: [(shard: Int, index: Int)]
    /// Each link's thread.
    private let linkShard: [Int]
    private let stop: EventSignal
    /// What every thread counts.
    private let counters = Counters()

    final class Counters: Sendable {
        /// Packets written to an interface that refused them (its queue full): lost by the
        /// emulator, not by the link's conditions.
        let refused = Atomic<Int>(0)
        /// Packets dropped because their link's carrier was down when they were due.
        let carrierDrops = Atomic<Int>(0)
        /// Packets read with offloads that stood for more than one wire packet.
        let offloaded = Atomic<Int>(0)
        /// Packets read with offloads that could not be cut into wire packets (dropped).
        let malformed = Atomic<Int>(0)
        /// Writes that merged several wire packets into one (with offloads).
        let coalesced = Atomic<Int>(0)
        /// Threads that run in the real-time class.
        let realtimeThreads = Atomic<Int>(0)

        /// Counts a packet an interface did not take: lost to a full queue, or (EIO) to an
        /// interface that is down, as after its phone left its network, which is the carrier's doing.
        func countRefusal(_ packets: Int = 1) {
            if errno == EIO {
                carrierDrops.add(packets, ordering: .relaxed)
            } else {
                refused.add(packets, ordering: .relaxed)
            }
        }
    }

    /// Packets an interface refused because its queue was full: the emulator's own loss, when
    /// it could not keep up (the scenario's conditions did not drop them).
    package var refusedPackets: Int { counters.refused.load(ordering: .relaxed) }

    /// How many of the threads run in the real-time class (``Scheduling/realtime`` where the
    /// kernel allowed it); known once they started.
    package var realtimeThreads: Int { counters.realtimeThreads.load(ordering: .relaxed) }

    /// What the offloads did: packets read that stood for more than one wire packet, packets
    /// that could not be cut (dropped), and writes that merged several wire packets.
    package var offloadStatistics: (superPackets: Int, malformed: Int, merged: Int) {
        (counters.offloaded.load(ordering: .relaxed), counters.malformed.load(ordering: .relaxed), counters.coalesced.load(ordering: .relaxed))
    }
    /// Delivery lateness (write time minus due time, nanoseconds), when measured; known once
    /// the emulator finished.
    package private(set) var lateness: [Int64] = []
    /// CPU time the emulator's threads used, known once they ended.
    package private(set) var cpuTime: Duration = .zero
    /// How many threads move the packets.
    package var threadCount: Int { shards.count }
    /// Where ``finish()`` reports what the emulator itself lost (`warning`), and what each
    /// direction's queue and a down carrier dropped by design (`debug`).
    private let logger: Logger

    /// The default number of threads: one per online core.
    package static var defaultThreadCount: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// `threads`: how many event loops share the links (at most one per link; nil: one per core).
    /// `radios`: the cellular radios' RRC states, by link.
    package init(directions: [Direction], links: Int, threads: Int? = nil, measuresLateness: Bool = false, scheduling: Scheduling = .realtime,
                 radios: [Int: RadioStateMachine] = [:],
                 logger: Logger = Logger(label: "roam.link-emulator")) throws(LinkEmulationError) {
        self.logger = logger
        precondition(directions.allSatisfy { (0..<links).contains($0.link) }, "a direction of a link the emulator was not given")
        let count = max(1, min(threads ?? Self.defaultThreadCount, max(1, Set(directions.map(\.link)).count)))
        // Links go to threads in turn, in the order they come: both directions of a link share one.
        var linkShard = Array(repeating: 0, count: links)
        var next = 0
        var seen: Set<Int> = []
        for direction in directions where !seen.contains(direction.link) {
            seen.insert(direction.link)
            linkShard[direction.link] = next % count
            next += 1
        }
        self.linkShard = linkShard
        var grouped = Array(repeating: [Direction](), count: count)
        var placement: [(shard: Int, index: Int)] = []
        for var direction in directions {
            direction.pipeline.recordsDeliveryTimes = measuresLateness
            direction.flows.recordsDeliveryTimes = measuresLateness
            let shard = linkShard[direction.link]
            placement.append((shard, grouped[shard].count))
            grouped[shard].append(direction)
        }
        self.placement = placement
        do {
            let stop = try EventSignal()
            self.stop = stop
            var shards: [Shard] = []
            for directions in grouped {
                shards.append(try Shard(directions: directions, links: links, stop: stop, measuresLateness: measuresLateness, scheduling: scheduling,
                                        counters: counters, radios: radios))
            }
            self.shards = shards
        } catch {
            throw LinkEmulationError("cannot start the link emulator: eventfd: \(error)")
        }
    }

    package func start() throws(LinkEmulationError) {
        for shard in shards { try shard.start() }
    }

    /// Hands a change to the thread of its link, which applies it at once.
    package func post(_ command: Command) {
        switch command {
        case let .conditions(index, conditions, capacity, distribution, flows):
            guard index < placement.count else { return }
            let (shard, local) = placement[index]
            shards[shard].post(.conditions(direction: local, conditions, capacity, distribution: distribution, flows: flows))
        case let .carrier(link, _):
            guard link < linkShard.count else { return }
            shards[linkShard[link]].post(command)
        }
    }

    /// Stops the threads and waits for them; logs and captures are flushed.
    package func finish() -> [LinkPipeline.Statistics] {
        stop.signal()
        for shard in shards { shard.join() }
        lateness = shards.flatMap(\.lateness)
        cpuTime = shards.reduce(.zero) { $0 + $1.cpuTime }
        let statistics = placement.map { place in
            let shard = shards[place.shard]
            let direction = shard.directions[place.index]
            var counts = direction.pipeline.statistics
            counts.merge(direction.flows.statistics)
            if let radio = shard.radios[direction.link] {
                counts.promotions = direction.isUplink ? radio.promotions.up : radio.promotions.down
            }
            return counts
        }
        for (place, counts) in zip(placement, statistics) where counts.overflowed > 0 {
            let direction = shards[place.shard].directions[place.index]
            logger.debug("queue overflow drops", metadata: [
                "from": "\(direction.source.name)", "to": "\(direction.destination.name)",
                "overflowed": "\(counts.overflowed)", "arrived": "\(counts.arrived)",
            ])
        }
        let down = counters.carrierDrops.load(ordering: .relaxed)
        if down > 0 {
            logger.debug("packets due while their link's carrier was down", metadata: ["packets": "\(down)"])
        }
        let broken = counters.malformed.load(ordering: .relaxed)
        if broken > 0 {
            logger.warning("the emulator dropped packets handed over for segmentation that it could not cut into wire packets", metadata: ["packets": "\(broken)"])
        }
        let lost = counters.refused.load(ordering: .relaxed)
        if lost > 0 {
            logger.warning("the emulator lost packets that the link's conditions did not drop: a TUN interface refused them (its transmit queue was full); the emulator could not keep up with this load", metadata: ["packets": "\(lost)"])
        }
        return statistics
    }

    /// How long the loop keeps polling without sleeping after a packet came.
    static let spin: Int64 = 100_000
    /// How long before a packet is due the loop wakes to poll instead of sleeping.
    static let earlyWake: Int64 = 50_000

    /// The most UDP datagrams a transparent direction holds before writing them (merged).
    static let heldDatagrams = 64

    /// Whether `packet` is a UDP datagram (IPv4 without options, or IPv6 without extension
    /// headers), whole: one a run of its flow can be merged with.
    static func isUDP(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard packet.count >= 28 else { return false }
        switch packet[0] {
        case 0x45: return packet[9] == 17 && packet[6] & 0x3f == 0 && packet[7] == 0
        case 0x60...0x6f: return packet.count >= 48 && packet[6] == 17
        default: return false
        }
    }

    /// Whether the packet at `start` is the kernel's own multicast bookkeeping: IGMP (IPv4
    /// protocol 2) to 224.0.0.0/4, or ICMPv6 (MLD reports, router and neighbour solicitations;
    /// directly or after a hop-by-hop header, as MLD is sent) to ff00::/8. Other multicast (an
    /// application's mDNS, SSDP) is not: it crosses the link as any packet does.
    static func isKernelMulticast(_ buffer: [UInt8], from start: Int, _ count: Int) -> Bool {
        guard count - start >= 20 else { return false }
        switch buffer[start] >> 4 {
        case 4:
            return buffer[start + 16] & 0xf0 == 0xe0 && buffer[start + 9] == 2
        case 6:
            guard count - start >= 40, buffer[start + 24] == 0xff else { return false }
            let next = buffer[start + 6]
            return next == 58 || (next == 0 && count - start >= 48 && buffer[start + 40] == 58)
        default:
            return false
        }
    }
}

/// One of the emulator's threads and the links it owns.
final class Shard: @unchecked Sendable {
    /// Owned by the thread once it runs; read by ``LinkEmulator/finish()`` after it ended.
    var directions: [LinkEmulator.Direction]
    /// Each link's cellular radio, if it has one; both directions of a link are on one thread.
    private(set) var radios: [RadioStateMachine?]
    /// Each link's directions on this thread.
    private let linkDirections: [[Int]]
    private var carrierUp: [Bool]
    private let commands = Mutex<[LinkEmulator.Command]>([])
    private let wake: EventSignal
    private let stop: EventSignal
    /// The stop, the wake-up and every source interface, waited on together by the thread.
    private let poll: EventPoll
    private var thread: PinnedThread?
    private let measuresLateness: Bool
    private let scheduling: LinkEmulator.Scheduling
    private let counters: LinkEmulator.Counters
    /// Delivery lateness (nanoseconds), when measured; read after the thread ended.
    private(set) var lateness: [Int64] = []
    /// CPU time the thread used, known once it ended.
    private(set) var cpuTime: Duration = .zero

    init(directions: [LinkEmulator.Direction], links: Int, stop: EventSignal, measuresLateness: Bool, scheduling: LinkEmulator.Scheduling,
         counters: LinkEmulator.Counters,
         radios: [Int: RadioStateMachine] = [:]) throws(Errno) {
        self.directions = directions
        var linkDirections = Array(repeating: [Int](), count: links)
        for (index, direction) in directions.enumerated() { linkDirections[direction.link].append(index) }
        self.linkDirections = linkDirections
        self.radios = (0..<links).map { link in linkDirections[link].isEmpty ? nil : radios[link] }
        self.carrierUp = Array(repeating: true, count: links)
        self.stop = stop
        self.measuresLateness = measuresLateness
        self.scheduling = scheduling
        self.counters = counters
        wake = try EventSignal()
        // Tagged by their place in the loop's table: the stop, the wake-up, then each direction's
        // source interface.
        var poll = try EventPoll()
        try poll.add(stop.descriptor.rawValue, tag: 0)
        try poll.add(wake.descriptor.rawValue, tag: 1)
        for (index, direction) in directions.enumerated() { try poll.add(direction.source.descriptor, tag: index + 2) }
        self.poll = poll
    }

    func start() throws(LinkEmulationError) {
        do throws(NetlinkError) {
            thread = try PinnedThread(name: "roam-emulator") { [self] in loop() }
        } catch {
            throw LinkEmulationError("start the link emulator: \(error)")
        }
    }

    func post(_ command: LinkEmulator.Command) {
        commands.withLock { $0.append(command) }
        wake.signal()
    }

    func join() {
        thread?.join()
        thread = nil
        for index in directions.indices {
            directions[index].decisions?.close()
            directions[index].capture?.close()
        }
    }

    /// When a packet that arrived at `now` in direction `index` may enter its pipeline: nil
    /// (at once) unless its link has a cellular radio, which decides from both directions' queues
    /// as they stand at `now`.
    private static func radioEntry(_ index: Int, at now: Int64, directions: inout [LinkEmulator.Direction], radios: inout [RadioStateMachine?],
                                   linkDirections: [[Int]]) -> Int64? {
        let link = directions[index].link
        guard var radio = radios[link] else { return nil }
        var busy = false
        var lastTransmission = Int64.min
        for other in linkDirections[link] {
            directions[other].pipeline.advance(to: now)
            directions[other].flows.advance(to: now)
            busy = busy || directions[other].pipeline.queueLength > 0 || directions[other].flows.queueLength > 0
            lastTransmission = max(lastTransmission, directions[other].pipeline.lastTransmission, directions[other].flows.lastTransmission)
        }
        let entry = radio.admit(at: now, uplink: directions[index].isUplink, busy: busy, lastTransmission: lastTransmission)
        radios[link] = radio
        return entry
    }

    private func loop() {
        // The thread's own copies for its life, handed back when it ends: a class's stored
        // properties would be checked for exclusive access on every use, several times a packet.
        var directions = self.directions
        var radios = self.radios
        var carrierUp = self.carrierUp
        // Packet buffers reused from one packet to the next, and the buffer a merged write is built in.
        var buffers = PacketBuffers()
        var merged: [UInt8] = []
        defer {
            self.directions = directions
            self.radios = radios
            self.carrierUp = carrierUp
            var spent = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spent)
            cpuTime = .seconds(spent.tv_sec) + .nanoseconds(spent.tv_nsec)
        }
        // Timers of this thread fire when asked, not up to 50 µs later (the default slack).
        let slack = open("/proc/thread-self/timerslack_ns", O_WRONLY | O_CLOEXEC)
        if slack >= 0 {
            _ = write(slack, "1", 1)
            close(slack)
        }
        var isRealtime = false
        if scheduling == .realtime {
            // Refused (EPERM) without the right to: the thread stays in the ordinary class. It
            // still polls after a packet (``LinkEmulator/spin``): without it the round trip of
            // a request and its answer doubled, as the core sleeps between them.
            if ThreadScheduling.enterRealtimeClass() {
                counters.realtimeThreads.add(1, ordering: .relaxed)
                isRealtime = true
            }
        }
        // Whether a real-time thread is in the ordinary class for now, polling with nothing queued.
        var ordinaryWhilePolling = false
        func pollInOrdinaryClass(_ ordinary: Bool) {
            if ordinary ? ThreadScheduling.enterOrdinaryClass() : ThreadScheduling.enterRealtimeClass() { ordinaryWhilePolling = ordinary }
        }
        // What the last wait found ready: the stop, the wake-up, then each direction's source.
        var ready = [Bool](repeating: false, count: directions.count + 2)
        // The largest packet a TUN interface hands over (64 KB with offloads) and its header.
        var buffer = [UInt8](repeating: 0, count: 65536 + 2 * VirtioNetHeader.size)
        var output: [[UInt8]] = []
        // Due times of what flows delivered, after the link's own (when lateness is measured).
        var flowTimes: [Int64] = []
        var segments: [[UInt8]] = []
        // UDP datagrams a transparent direction passes on, held until the end of the batch
        // read, so that a burst of one flow's datagrams is one write (USO).
        var held: [[UInt8]] = []
        var spinUntil: Int64 = 0
        /// Writes the run of `packets` from `position` to `destination`: with offloads, a run of
        /// one flow's segments (or, with USO, datagrams) leaving together is one write. Returns
        /// where the run ended.
        func writeRun(_ packets: [[UInt8]], from position: Int, to destination: TunInterface) -> Int {
            let end = destination.headerLength > 0 ? Coalescer.run(packets, from: position, udp: destination.segmentsUDP) : position + 1
            let written: Int
            if end - position > 1 {
                let header = Coalescer.merge(packets[position..<end], into: &merged)
                written = merged.withUnsafeBytes { destination.write(header: header, packet: $0) }
                counters.coalesced.add(1, ordering: .relaxed)
            } else {
                written = packets[position].withUnsafeBytes { destination.write(packet: $0) }
            }
            if written < 0 { counters.countRefusal(end - position) }
            return end
        }
        /// Writes what is held, in order; the buffers are reused.
        func writeHeld(to destination: TunInterface) {
            var position = 0
            while position < held.count { position = writeRun(held, from: position, to: destination) }
            while let packet = held.popLast() { buffers.recycle(packet) }
        }
        while true {
            var next: Int64?
            for index in directions.indices {
                if let event = directions[index].nextEvent() { next = min(next ?? event, event) }
            }
            let polled = MonotonicInstant.now
            let deadline: MonotonicInstant?
            if polled.nanoseconds < spinUntil {
                // Just busy: poll without sleeping for a moment, since waking a sleeping thread
                // costs tens of microseconds on a virtual CPU, on every packet of a request and
                // its answer.
                deadline = polled
            } else if let next {
                // Wake a little early and poll the rest of the way: a sleeping thread's wake-up
                // is late by tens of microseconds, more on a busy virtual CPU.
                deadline = MonotonicInstant(nanoseconds: next - LinkEmulator.earlyWake)
            } else {
                deadline = nil
            }
            // Polling with nothing queued, a real-time thread steps down to the ordinary class
            // until a packet comes or it sleeps: a real-time thread polling keeps every ordinary
            // thread the scheduler put on its core (the sender, the receiver, the peer about to
            // answer) waiting until it stops, where an ordinary one shares the core.
            let pollsIdle = polled.nanoseconds < spinUntil && next == nil
            if isRealtime, pollsIdle != ordinaryWhilePolling { pollInOrdinaryClass(pollsIdle) }
            let count: Int
            do { count = try poll.wait(until: deadline) { ready[$0] = true } } catch { break }
            if count > 0, ordinaryWhilePolling { pollInOrdinaryClass(false) }
            if count == 0, polled.nanoseconds >= spinUntil, let next, MonotonicInstant.now.nanoseconds < next { spinUntil = next }
            if ready[0] { break }
            if ready[1] {
                wake.reset()
                for command in commands.withLock({ commands -> [LinkEmulator.Command] in defer { commands = [] }; return commands }) {
                    switch command {
                    case let .conditions(index, conditions, capacity, distribution, flows):
                        directions[index].pipeline.update(conditions.withoutFlows, capacity: capacity, distribution: distribution)
                        if !flows.isEmpty || !directions[index].flows.classes.isEmpty { directions[index].flows.update(flows) }
                    case let .carrier(link, up):
                        carrierUp[link] = up
                        // Coverage again: the phone's radio connects anew.
                        if up { radios[link]?.reset() }
                    }
                }
            }
            var now = MonotonicInstant.now.nanoseconds
            if count > (ready[1] ? 1 : 0) { spinUntil = now + LinkEmulator.spin }
            for index in directions.indices where ready[index + 2] {
                let source = directions[index].source, destination = directions[index].destination
                let header = source.headerLength
                // A bounded batch per interface per turn, so that one busy link cannot starve the others.
                for _ in 0..<256 {
                    let count = buffer.withUnsafeMutableBytes { read(source.descriptor, $0.baseAddress, $0.count) }
                    guard count > header else { break }
                    if LinkEmulator.isKernelMulticast(buffer, from: header, count) {
                        // The kernel's multicast bookkeeping (MLD and IGMP reports), sent at
                        // randomized times (and whenever an interface changes, as a retag of its
                        // quality does): passed on as is, so that it neither consumes the link's
                        // random numbers nor shifts its decision log; but not where the direction
                        // passes nothing (its carrier down, blackholed, every packet lost), where a
                        // real link would not carry it either.
                        if carrierUp[directions[index].link], !directions[index].pipeline.conditions.passesNothing {
                            if !held.isEmpty { writeHeld(to: destination) }
                            _ = buffer.withUnsafeBytes { write(destination.descriptor, $0.baseAddress, count) }
                        }
                        continue
                    }
                    let offload = header > 0 ? buffer.withUnsafeBytes { VirtioNetHeader($0) } : nil
                    if directions[index].pipeline.isTransparent, directions[index].flows.classes.isEmpty, directions[index].capture == nil,
                       header == destination.headerLength, radios[directions[index].link] == nil {
                        // Nothing to do to it: straight out, whole (a 64 KB segment with offloads),
                        // without a copy or a heap entry; counted as the wire packets it stands for.
                        let wire = offload.map { offload in buffer.withUnsafeBytes { Segmenter.wirePackets(offload, UnsafeRawBufferPointer(rebasing: $0[header..<count])) } } ?? 1
                        if wire > 1 { counters.offloaded.add(1, ordering: .relaxed) }
                        if carrierUp[directions[index].link] {
                            if wire == 1, destination.segmentsUDP, let offload, offload.gsoType == 0,
                               buffer.withUnsafeBytes({ LinkEmulator.isUDP(UnsafeRawBufferPointer(rebasing: $0[header..<count])) }) {
                                // Held, its checksum completed, to go with the rest of its burst.
                                let completed: Void? = buffer.withUnsafeBytes { bytes in
                                    try? Segmenter.segment(offload, UnsafeRawBufferPointer(rebasing: bytes[header..<count]), into: &held, buffers: &buffers)
                                }
                                if completed == nil { counters.malformed.add(1, ordering: .relaxed) }
                                // A burst's first datagram waits for at most this many reads.
                                if held.count == LinkEmulator.heldDatagrams { writeHeld(to: destination) }
                            } else {
                                // In order: what is held goes first.
                                if !held.isEmpty { writeHeld(to: destination) }
                                let written = buffer.withUnsafeBytes { write(destination.descriptor, $0.baseAddress, count) }
                                if written < 0 { counters.countRefusal(wire) }
                            }
                        } else {
                            counters.carrierDrops.add(wire, ordering: .relaxed)
                        }
                        directions[index].pipeline.passedThrough(wirePackets: wire)
                        continue
                    }
                    guard let offload, offload.isOffloaded else {
                        let entry = Self.radioEntry(index, at: now, directions: &directions, radios: &radios, linkDirections: linkDirections)
                        let packet = buffer.withUnsafeBytes { buffers.take(copying: UnsafeRawBufferPointer(rebasing: $0[header..<count])) }
                        directions[index].arrive(packet, at: now, enteringAt: entry)
                        continue
                    }
                    // Cut into the wire packets it stands for, each decided on alone.
                    segments.removeAll(keepingCapacity: true)
                    let cut = buffer.withUnsafeBytes { bytes -> Bool in
                        do {
                            try Segmenter.segment(offload, UnsafeRawBufferPointer(rebasing: bytes[header..<count]), into: &segments, buffers: &buffers)
                            return true
                        } catch {
                            return false
                        }
                    }
                    guard cut else {
                        counters.malformed.add(1, ordering: .relaxed)
                        continue
                    }
                    if segments.count > 1 { counters.offloaded.add(1, ordering: .relaxed) }
                    let entry = Self.radioEntry(index, at: now, directions: &directions, radios: &radios, linkDirections: linkDirections)
                    for segment in segments { directions[index].arrive(segment, at: now, enteringAt: entry) }
                    // The pipeline holds them now: their buffers are reused once written only if nothing else does.
                    segments.removeAll(keepingCapacity: true)
                }
                if !held.isEmpty { writeHeld(to: destination) }
            }
            now = MonotonicInstant.now.nanoseconds
            for index in directions.indices {
                // The last direction's packets are written: their buffers serve the next ones.
                while let packet = output.popLast() { buffers.recycle(packet) }
                directions[index].pipeline.release(upTo: now, into: &output)
                let hasFlows = !directions[index].flows.isEmpty
                if hasFlows {
                    if measuresLateness { flowTimes = directions[index].pipeline.deliveryTimes }
                    directions[index].flows.release(upTo: now, into: &output, times: &flowTimes)
                }
                if directions[index].pipeline.logsDecisions, let log = directions[index].decisions {
                    for decision in directions[index].pipeline.takeDecisions() { log.append(decision.description + "\n") }
                    if hasFlows { for line in directions[index].flows.takeDecisions() { log.append(line + "\n") } }
                }
                guard !output.isEmpty else { continue }
                guard carrierUp[directions[index].link] else {
                    counters.carrierDrops.add(output.count, ordering: .relaxed)
                    continue
                }
                let destination = directions[index].destination
                var position = 0
                while position < output.count {
                    let end = writeRun(output, from: position, to: destination)
                    for number in position..<end {
                        directions[index].capture?.record(output[number])
                        if measuresLateness, lateness.count < 10_000_000 {
                            let due = hasFlows ? flowTimes[number] : directions[index].pipeline.deliveryTimes[number]
                            lateness.append(MonotonicInstant.now.nanoseconds - due)
                        }
                    }
                    position = end
                }
            }
            for index in ready.indices { ready[index] = false }
        }
    }
}
