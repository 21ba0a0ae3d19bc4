import CRoamLinux
import Glibc
import Logging
import Netlink
import RoamSystem
import ScenarioModel
import Synchronization

/// Roam's userspace link emulator: one thread moves the packets of every link of a run between
/// its TUN interfaces, each direction through a ``LinkPipeline``. One event loop, one monotonic
/// clock: the loop sleeps in `ppoll` on every interface until a packet comes or the earliest
/// pipeline event is due (nanosecond timeout), so there are no per-packet timers or threads.
package final class LinkEmulator: @unchecked Sendable {
    package struct Direction {
        package var link: Int
        package var pipeline: LinkPipeline
        package let source: TunInterface
        package let destination: TunInterface
        package var decisions: BufferedFile?
        package var capture: PcapWriter?

        package init(link: Int, pipeline: LinkPipeline, source: TunInterface, destination: TunInterface, decisions: BufferedFile?, capture: PcapWriter?) {
            self.link = link
            self.pipeline = pipeline
            self.source = source
            self.destination = destination
            self.decisions = decisions
            self.capture = capture
        }
    }

    package enum Command: Sendable {
        case conditions(direction: Int, LinkConditions, LinkCapacity, distribution: [Int16]?)
        case carrier(link: Int, up: Bool)
    }

    /// Owned by the loop thread once it runs.
    private var directions: [Direction]
    private var carrierUp: [Bool]
    private let commands = Mutex<[Command]>([])
    private let wake: EventSignal
    private let stop: EventSignal
    private var thread: PinnedThread?
    /// Packets written to an interface that refused them (its queue full): lost by the
    /// emulator, not by the link's conditions.
    private let refused = Atomic<Int>(0)

    /// Counts a packet an interface did not take: lost to a full queue, or (EIO) to an interface
    /// that is down, as after its phone left its network, which is the carrier's doing.
    private func countRefusal() {
        if errno == EIO {
            carrierDrops.add(1, ordering: .relaxed)
        } else {
            refused.add(1, ordering: .relaxed)
        }
    }
    /// Packets dropped because their link's carrier was down when they were due.
    private let carrierDrops = Atomic<Int>(0)
    /// Delivery lateness (write time minus due time, nanoseconds), when measured.
    package private(set) var lateness: [Int64] = []
    private let measuresLateness: Bool
    /// CPU time the loop's thread used, known once it ended.
    package private(set) var cpuTime: Duration = .zero
    /// Where ``finish()`` reports what the emulator itself lost (`warning`), and what each
    /// direction's queue and a down carrier dropped by design (`debug`).
    private let logger: Logger

    package init(directions: [Direction], links: Int, measuresLateness: Bool = false,
                 logger: Logger = Logger(label: "roam.link-emulator")) throws(LinkEmulationError) {
        self.measuresLateness = measuresLateness
        self.logger = logger
        self.directions = directions
        for index in self.directions.indices { self.directions[index].pipeline.recordsDeliveryTimes = measuresLateness }
        carrierUp = Array(repeating: true, count: links)
        do {
            stop = try EventSignal()
            wake = try EventSignal()
        } catch {
            throw LinkEmulationError("cannot start the link emulator: eventfd: \(error)")
        }
    }

    package func start() throws(LinkEmulationError) {
        do throws(NetlinkError) {
            thread = try PinnedThread(name: "roam-emulator") { [self] in loop() }
        } catch {
            throw LinkEmulationError("start the link emulator: \(error)")
        }
    }

    /// Hands a change to the loop, which applies it at once.
    package func post(_ command: Command) {
        commands.withLock { $0.append(command) }
        wake.signal()
    }

    /// Stops the loop and waits for it; logs and captures are flushed.
    package func finish() -> [LinkPipeline.Statistics] {
        stop.signal()
        thread?.join()
        thread = nil
        for index in directions.indices {
            directions[index].decisions?.close()
            directions[index].capture?.close()
        }
        let statistics = directions.map(\.pipeline.statistics)
        for (direction, counts) in zip(directions, statistics) where counts.overflowed > 0 {
            logger.debug("queue overflow drops", metadata: [
                "from": "\(direction.source.name)", "to": "\(direction.destination.name)",
                "overflowed": "\(counts.overflowed)", "arrived": "\(counts.arrived)",
            ])
        }
        let down = carrierDrops.load(ordering: .relaxed)
        if down > 0 {
            logger.debug("packets due while their link's carrier was down", metadata: ["packets": "\(down)"])
        }
        let lost = refused.load(ordering: .relaxed)
        if lost > 0 {
            logger.warning("the emulator lost packets that the link's conditions did not drop: a TUN interface refused them (its transmit queue was full); the emulator could not keep up with this load", metadata: ["packets": "\(lost)"])
        }
        return statistics
    }

    /// How long the loop keeps polling without sleeping after a packet came.
    static let spin: Int64 = 100_000
    /// How long before a packet is due the loop wakes to poll instead of sleeping.
    static let earlyWake: Int64 = 50_000

    /// Whether a packet goes to a multicast address (IPv4 224.0.0.0/4, IPv6 ff00::/8).
    static func isLinkControl(_ packet: [UInt8], _ count: Int) -> Bool {
        guard count >= 20 else { return false }
        switch packet[0] >> 4 {
        case 4: return packet[16] & 0xf0 == 0xe0
        case 6: return count >= 40 && packet[24] == 0xff
        default: return false
        }
    }

    private func loop() {
        defer {
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
        var entries = [stop.pollEntry, wake.pollEntry]
        // One entry per direction: its source interface.
        for direction in directions { entries.append(pollfd(fd: direction.source.descriptor, events: Int16(POLLIN), revents: 0)) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var output: [[UInt8]] = []
        var spinUntil: Int64 = 0
        while true {
            var next: Int64?
            for index in directions.indices {
                if let event = directions[index].pipeline.nextEvent() { next = min(next ?? event, event) }
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
                deadline = MonotonicInstant(nanoseconds: next - Self.earlyWake)
            } else {
                deadline = nil
            }
            let ready: Int
            do { ready = try waitForEvents(&entries, until: deadline) } catch { break }
            if ready == 0, polled.nanoseconds >= spinUntil, let next, MonotonicInstant.now.nanoseconds < next { spinUntil = next }
            if entries[0].revents != 0 { break }
            if entries[1].revents != 0 {
                wake.reset()
                for command in commands.withLock({ commands -> [Command] in defer { commands = [] }; return commands }) {
                    switch command {
                    case let .conditions(index, conditions, capacity, distribution):
                        directions[index].pipeline.update(conditions, capacity: capacity, distribution: distribution)
                    case let .carrier(link, up):
                        carrierUp[link] = up
                    }
                }
            }
            var now = MonotonicInstant.now.nanoseconds
            if entries[2...].contains(where: { $0.revents != 0 }) { spinUntil = now + Self.spin }
            for index in directions.indices where entries[index + 2].revents != 0 {
                // A bounded batch per interface per turn, so that one busy link cannot starve the others.
                for _ in 0..<256 {
                    let count = buffer.withUnsafeMutableBytes { read(directions[index].source.descriptor, $0.baseAddress, $0.count) }
                    guard count > 0 else { break }
                    if Self.isLinkControl(buffer, count) {
                        // Multicast (MLD reports, IGMP) is the kernel's own bookkeeping, sent at
                        // randomized times: passed on as is, so that it neither consumes the
                        // link's random numbers nor shifts its decision log.
                        if carrierUp[directions[index].link], !directions[index].pipeline.conditions.isBlackholed {
                            _ = buffer.withUnsafeBytes { write(directions[index].destination.descriptor, $0.baseAddress, count) }
                        }
                        continue
                    }
                    if directions[index].pipeline.isTransparent, directions[index].capture == nil {
                        // Nothing to do to it: straight out, without a copy or a heap entry.
                        if carrierUp[directions[index].link] {
                            let written = buffer.withUnsafeBytes { write(directions[index].destination.descriptor, $0.baseAddress, count) }
                            if written < 0 { countRefusal() }
                        } else {
                            carrierDrops.add(1, ordering: .relaxed)
                        }
                        directions[index].pipeline.passedThrough()
                        continue
                    }
                    directions[index].pipeline.arrive(Array(buffer[..<count]), at: now)
                }
            }
            now = MonotonicInstant.now.nanoseconds
            for index in directions.indices {
                output.removeAll(keepingCapacity: true)
                directions[index].pipeline.release(upTo: now, into: &output)
                if directions[index].pipeline.logsDecisions, let log = directions[index].decisions {
                    for decision in directions[index].pipeline.takeDecisions() { log.append(decision.description + "\n") }
                }
                guard !output.isEmpty else { continue }
                guard carrierUp[directions[index].link] else {
                    carrierDrops.add(output.count, ordering: .relaxed)
                    continue
                }
                let destination = directions[index].destination.descriptor
                for (number, packet) in output.enumerated() {
                    let written = packet.withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                    if written < 0 { countRefusal() }
                    directions[index].capture?.record(packet)
                    if measuresLateness, lateness.count < 10_000_000 {
                        lateness.append(MonotonicInstant.now.nanoseconds - directions[index].pipeline.deliveryTimes[number])
                    }
                }
            }
            for index in entries.indices { entries[index].revents = 0 }
        }
    }
}
