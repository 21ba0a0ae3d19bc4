/// Where one direction of an emulated link gets its capacity.
import ScenarioModel
public enum LinkCapacity: Sendable, Hashable {
    /// No serialization: packets go straight to the delay line.
    case unlimited
    /// Serialization at a bit rate.
    case rate(bitsPerSecond: Double)
    /// Delivery opportunities from a trace, which starts at `origin` (nanoseconds).
    case trace(DeliveryTrace, origin: Int64)
}

/// One decision about one packet, for the decision log: deterministic for a seed and a
/// sequence of packets (it holds no clock readings, only what the pipeline drew).
public struct PacketDecision: Sendable, Hashable, CustomStringConvertible {
    public enum Action: String, Sendable, Hashable {
        /// Lost by the random or Gilbert-Elliott model.
        case loss
        /// Dropped because the link is blackholed.
        case blackhole
        /// A bit flipped.
        case corrupt
        /// A copy made; the copy follows as its own packet with the same number.
        case duplicate
        /// Dropped at the tail of a full queue.
        case overflow
        /// Sent ahead of the delayed packets (`reorder`).
        case reorder
        /// Scheduled for delivery after `delay`.
        case deliver
    }

    /// What a decision is about beyond its action, where the action alone would mislead.
    public enum Detail: String, Sendable, Hashable {
        /// Dropped at the head of the queue by its AQM (CoDel, FQ-CoDel); the action is
        /// `overflow` (dropped by the queue).
        case aqm
        /// Held until the cellular radio was connected (`RadioStateMachine`); the action is
        /// `deliver` and `delay` is the wait. The packet's other decisions follow.
        case radio
    }

    /// The packet's number in its direction, from 1.
    public var number: UInt64
    public var size: Int
    public var action: Action
    /// For `deliver` and `reorder`: the propagation delay drawn (delay and jitter); for `radio`,
    /// the wait for the radio; in microseconds.
    public var delayMicroseconds: Int64?
    /// An AQM drop or a wait for the radio (nil for every other decision).
    public var detail: Detail? = nil

    /// `17 1500 deliver 40213`; `18 1500 aqm`; `19 1500 radio 260000`.
    public var description: String {
        "\(number) \(size) \(detail?.rawValue ?? action.rawValue)" + (delayMicroseconds.map { " \($0)" } ?? "")
    }
}

/// One direction of an emulated link, as pure state advanced by its caller's clock (nanoseconds
/// on any monotonic scale): packets arrive, go through loss, corruption, duplication, a
/// drop-tail queue, serialization at the rate (or a trace's delivery opportunities) and the delay
/// line with jitter, and come out at their delivery time. No threads, no timers: the event loop
/// asks `nextEvent` when to come back and calls ``release(upTo:into:)`` then.
///
/// Order of the stages, as in netem: loss first (a lost packet costs no queue space), then
/// corruption and duplication, then the bottleneck queue and its serialization, then
/// propagation delay. Packets leave in order unless the scenario asks for `reorder`: jitter alone
/// only stretches gaps, as on a real path where packets share one queue.
public struct LinkPipeline: Sendable {
    public private(set) var conditions: LinkConditions
    public private(set) var capacity: LinkCapacity
    /// A distribution table as netem's (`*.dist`: values scaled by 8192); nil: uniform jitter.
    private var distribution: [Int16]?

    private var random: LinkRandom
    private var lossDraw = CorrelatedDraw()
    private var delayDraw = CorrelatedDraw()
    private var inBadState = false

    private struct Queued: Sendable {
        var number: UInt64
        var data: [UInt8]
        var arrivedAt: Int64
    }
    private var queue: [Queued] = []
    private var queueHead = 0
    private var fifoBytes = 0
    /// With `queue: codel` or `fq-codel` behind a rate: the managed queue, and the packet the
    /// transmitter is sending (dequeued when the transmitter came free, as a qdisc's dequeue).
    private var managed: ManagedQueue?
    private var managedDiscipline: QueueDiscipline?
    private var inService: (number: UInt64, data: [UInt8], departure: Int64)?
    private var queuedBytes: Int { fifoBytes + (managed?.bytes ?? 0) + (inService?.data.count ?? 0) }
    /// When the transmitter finishes the packet it is serializing.
    private var transmitterFreeAt: Int64 = .min
    /// The trace opportunity in use (its absolute number; -1 before the first) and the bytes it
    /// has left. An opportunity no packet was waiting for is lost, as in mahimahi.
    private var opportunity: (index: Int64, bytesLeft: Int) = (-1, 0)

    private struct Flying: Sendable {
        var deliverAt: Int64
        var sequence: UInt64
        var data: [UInt8]
    }
    private var delayLine = MinHeap<Flying> { ($0.deliverAt, $0.sequence) < ($1.deliverAt, $1.sequence) }
    private var flyingBytes = 0
    private var sequence: UInt64 = 0
    private var lastDeliverAt: Int64 = .min
    private var numbered: UInt64 = 0

    /// When each packet released by the last ``release(upTo:into:)`` was due, when recorded
    /// (for measuring the event loop's precision).
    public var recordsDeliveryTimes = false
    public var deliveryTimes: [Int64] = []

    /// Decisions since the last ``takeDecisions()``, when logging is on.
    private var decisions: [PacketDecision] = []
    public var logsDecisions: Bool

    /// Counters for reports.
    public private(set) var statistics = Statistics()
    public struct Statistics: Sendable, Hashable {
        public var arrived = 0, delivered = 0, lost = 0, blackholed = 0, overflowed = 0, corrupted = 0, duplicated = 0, reordered = 0
        /// Packets that waited for the cellular radio to connect.
        public var heldForRadio = 0
        /// Promotions of the cellular radio (idle to connected) this direction's packets started.
        public var promotions = 0
        /// Packets the queue's AQM (CoDel, FQ-CoDel) dropped.
        public var aqmDropped = 0
        /// How late each delivered packet left against its due time (from when the emulator
        /// read it): what a starved emulator changes. While the queue is non-empty, each
        /// departure is scheduled at the configured rate from the one before, so the rate is
        /// held exactly but for this lateness.
        public var lateness = LatenessHistogram()
        /// The packets the configured loss would drop on average (the sum of each arriving
        /// packet's mean loss probability, blackholed ones aside): what ``lost`` is drawn
        /// against.
        public var expectedLost: Double = 0
    }

    /// The queue limit when a scenario sets none: 1000 packets (netem's default), and with a
    /// rate 100 ms of it in bytes (at least 64 KiB), like the netem backend's tbf.
    public static let defaultPacketLimit = LinkConditions.emulatorQueuePackets

    /// The most one direction holds, queue and delay line together: 32 MiB. A long delay with a
    /// flood behind it (`delay: 60s` under a UDP blast) would otherwise hold everything sent in
    /// the last minute; beyond this, arriving packets are dropped as a full queue drops them
    /// (counted as overflow). At 1 Gbit/s that is 268 ms of data.
    public static let maximumBytesHeld = 32 << 20

    /// Bytes held: waiting for the transmitter or on the delay line.
    public var bytesHeld: Int { queuedBytes + flyingBytes }

    public init(conditions: LinkConditions, capacity: LinkCapacity, seed: UInt64, distribution: [Int16]? = nil, logsDecisions: Bool = false) {
        self.conditions = conditions
        self.capacity = capacity
        self.distribution = distribution
        self.random = LinkRandom(seed: seed)
        self.logsDecisions = logsDecisions
        managedDiscipline = Self.managedDiscipline(conditions, capacity)
        managed = managedDiscipline.map(ManagedQueue.init)
    }

    /// Packets waiting for the transmitter (or being sent, with a managed queue).
    public var queueLength: Int { queue.count - queueHead + (managed?.count ?? 0) + (inService == nil ? 0 : 1) }
    /// Packets on the delay line.
    public var inFlight: Int { delayLine.count }
    /// The latest time a packet left the transmitter (`.min` before the first).
    public private(set) var lastTransmission: Int64 = .min

    private var packetLimit: Int {
        conditions.impairment.limit ?? (conditions.impairment.limitBytes != nil ? Int.max : managed?.defaultPacketLimit ?? Self.defaultPacketLimit)
    }

    private var byteLimit: Int? {
        if let bytes = conditions.impairment.limitBytes { return bytes }
        guard managed == nil, conditions.impairment.limit == nil, case .rate(let bitsPerSecond) = capacity else { return nil }
        return max(65536, Int(bitsPerSecond / 8 * 0.1))
    }

    /// The managed queue's discipline for these conditions: CoDel or FQ-CoDel behind a rate.
    private static func managedDiscipline(_ conditions: LinkConditions, _ capacity: LinkCapacity) -> QueueDiscipline? {
        guard case .rate = capacity, let queue = conditions.impairment.queue, queue != .dropTail else { return nil }
        return queue
    }

    /// New conditions from the timeline. Queued and flying packets stay; a smaller queue limit
    /// drops from the tail what no longer fits.
    public mutating func update(_ conditions: LinkConditions, capacity: LinkCapacity, distribution: [Int16]?) {
        self.conditions = conditions
        self.capacity = capacity
        self.distribution = distribution
        let discipline = Self.managedDiscipline(conditions, capacity)
        if discipline != managedDiscipline {
            // Another discipline: what waits moves over in arrival order; the packet being
            // sent stays in service (back at the head of a plain queue).
            var waiting = queue[queueHead...].map { ManagedQueue.Packet(number: $0.number, data: $0.data, arrivedAt: $0.arrivedAt) }
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
            fifoBytes = 0
            if var old = managed { waiting = old.drain() + waiting }
            managed = discipline.map(ManagedQueue.init)
            managedDiscipline = discipline
            if managed != nil {
                for packet in waiting {
                    for dropped in managed!.enqueue(packet, packetLimit: packetLimit, byteLimit: byteLimit) {
                        statistics.overflowed += 1
                        record(dropped.number, dropped.data.count, .overflow)
                    }
                }
                if inService == nil, let first = waiting.first { startService(at: max(transmitterFreeAt, first.arrivedAt)) }
            } else {
                if let service = inService {
                    // Sent again from the head of the plain queue: it leaves at most one packet
                    // time later than planned (a change of discipline is rare).
                    queue.append(Queued(number: service.number, data: service.data, arrivedAt: service.departure))
                    fifoBytes += service.data.count
                    inService = nil
                }
                for packet in waiting {
                    queue.append(Queued(number: packet.number, data: packet.data, arrivedAt: packet.arrivedAt))
                    fifoBytes += packet.data.count
                }
            }
        }
        guard managed == nil else { return }
        while queueLength > packetLimit || (byteLimit.map { queuedBytes > $0 } ?? false) {
            let dropped = queue.removeLast()
            fifoBytes -= dropped.data.count
            statistics.overflowed += 1
            record(dropped.number, dropped.data.count, .overflow)
        }
    }

    private mutating func record(_ number: UInt64, _ size: Int, _ action: PacketDecision.Action, delay: Int64? = nil,
                                 detail: PacketDecision.Detail? = nil) {
        guard logsDecisions else { return }
        decisions.append(PacketDecision(number: number, size: size, action: action, delayMicroseconds: delay.map { $0 / 1000 }, detail: detail))
    }

    /// The decisions made since the last call.
    public mutating func takeDecisions() -> [PacketDecision] {
        defer { decisions.removeAll(keepingCapacity: true) }
        return decisions
    }

    private mutating func chance(_ probability: Double?) -> Bool {
        guard let probability, probability > 0 else { return false }
        return random.unit() < probability
    }

    /// Whether the loss model drops the next packet (netem's order of draws for Gilbert-Elliott:
    /// the state moves first, the loss is judged by the state the packet arrived in).
    private mutating func lost() -> Bool {
        switch conditions.impairment.loss {
        case nil:
            return false
        case .random(let rate, let correlation)?:
            guard rate > 0 else { return false }
            return lossDraw.next(&random, correlation: correlation) < rate
        case let .gilbertElliott(p, r, lossInBad, lossInGood)?:
            if inBadState {
                if random.unit() < r { inBadState = false }
                return random.unit() < lossInBad
            }
            if random.unit() < p { inBadState = true }
            return random.unit() < lossInGood
        }
    }

    /// Whether a packet arriving now would leave at once, unchanged and with no random draw:
    /// no impairment, no capacity limit, nothing queued or in flight, no decision log. The
    /// event loop then forwards it without copying it (``passedThrough()`` counts it).
    public var isTransparent: Bool {
        guard !logsDecisions, !recordsDeliveryTimes, !conditions.isBlackholed, queueHead == queue.count, delayLine.count == 0 else { return false }
        guard case .unlimited = capacity else { return false }
        let impairment = conditions.impairment
        return (impairment.delay ?? .zero) <= .zero && (impairment.jitter ?? .zero) <= .zero && (impairment.loss?.meanLoss ?? 0) <= 0
            && impairment.loss.map({ if case .gilbertElliott = $0 { return false } else { return true } }) ?? true
            && (impairment.duplicate ?? 0) <= 0 && (impairment.corrupt ?? 0) <= 0
    }

    /// Counts a packet forwarded on the transparent path.
    public mutating func passedThrough() {
        passedThrough(wirePackets: 1)
    }

    /// Counts a packet forwarded on the transparent path that stood for `wirePackets` wire
    /// packets (a segmented packet moved whole).
    public mutating func passedThrough(wirePackets: Int) {
        numbered += UInt64(wirePackets)
        statistics.arrived += wirePackets
        statistics.delivered += wirePackets
        statistics.lateness.recordOnTime(wirePackets)
    }

    /// A packet sent into this direction at `now`.
    public mutating func arrive(_ data: [UInt8], at now: Int64) {
        arrive(data, at: now, enteringAt: nil)
    }

    /// A packet sent into this direction at `now`. `enteringAt` (later than `now`): the packet
    /// waits until then before it takes its place in the queue (a cellular radio's promotion);
    /// the loss, corruption and duplication decisions are made now, in arrival order.
    public mutating func arrive(_ data: [UInt8], at now: Int64, enteringAt entry: Int64?) {
        // A managed queue decides at the times things happen: the queue as it stands now.
        if managed != nil { advance(to: now) }
        numbered += 1
        statistics.arrived += 1
        let number = numbered
        if conditions.isBlackholed {
            statistics.blackholed += 1
            record(number, data.count, .blackhole)
            return
        }
        if let loss = conditions.impairment.loss { statistics.expectedLost += loss.meanLoss }
        if lost() {
            statistics.lost += 1
            record(number, data.count, .loss)
            return
        }
        let entry = max(now, entry ?? now)
        if entry > now {
            statistics.heldForRadio += 1
            record(number, data.count, .deliver, delay: entry - now, detail: .radio)
        }
        var packet = data
        if chance(conditions.impairment.corrupt) {
            // A bit past the IP header, so that the transport's checksum is what catches it.
            let header = (packet.first ?? 0) >> 4 == 6 ? 40 : 20
            if packet.count > header {
                let bit = Int(random.next() % UInt64((packet.count - header) * 8))
                packet[header + bit / 8] ^= UInt8(1 << (bit % 8))
                statistics.corrupted += 1
                record(number, packet.count, .corrupt)
            }
        }
        enqueue(number, packet, at: entry)
        if chance(conditions.impairment.duplicate) {
            statistics.duplicated += 1
            record(number, packet.count, .duplicate)
            enqueue(number, packet, at: entry)
        }
    }

    private mutating func enqueue(_ number: UInt64, _ data: [UInt8], at now: Int64) {
        if bytesHeld + data.count > Self.maximumBytesHeld {
            statistics.overflowed += 1
            record(number, data.count, .overflow)
            return
        }
        if case .unlimited = capacity {
            schedule(number, data, leavingAt: now)
            return
        }
        if managed != nil {
            for dropped in managed!.enqueue(ManagedQueue.Packet(number: number, data: data, arrivedAt: now), packetLimit: packetLimit, byteLimit: byteLimit) {
                statistics.overflowed += 1
                record(dropped.number, dropped.data.count, .overflow)
            }
            if inService == nil { startService(at: max(now, transmitterFreeAt)) }
            return
        }
        if queueLength >= packetLimit || (byteLimit.map { queuedBytes + data.count > $0 } ?? false) {
            statistics.overflowed += 1
            record(number, data.count, .overflow)
            return
        }
        queue.append(Queued(number: number, data: data, arrivedAt: now))
        fifoBytes += data.count
    }

    /// Puts a packet that left the transmitter at `time` on the delay line.
    private mutating func schedule(_ number: UInt64, _ data: [UInt8], leavingAt time: Int64) {
        let impairment = conditions.impairment
        let base = (impairment.delay ?? .zero).nanoseconds
        var delay = base
        var action = PacketDecision.Action.deliver
        if base > 0, chance(impairment.reorder) {
            delay = 0
            action = .reorder
            statistics.reordered += 1
        } else if let jitter = impairment.jitter, jitter > .zero {
            let sigma = Double(jitter.nanoseconds)
            let draw = delayDraw.next(&random, correlation: impairment.delayCorrelation ?? 0)
            if let table = distribution, !table.isEmpty {
                // netem's tabledist: a value from the table, scaled so that 8192 is one sigma.
                let value = Double(table[min(table.count - 1, Int(draw * Double(table.count)))])
                delay = base + Int64(value * sigma / 8192)
            } else {
                delay = base + Int64((draw * 2 - 1) * sigma)
            }
            delay = max(0, delay)
        }
        lastTransmission = max(lastTransmission, time)
        var deliverAt = time + delay
        if action == .deliver, (impairment.reorder ?? 0) <= 0 {
            // In order unless reordering is asked for: a packet never overtakes the one before.
            deliverAt = max(deliverAt, lastDeliverAt)
        }
        lastDeliverAt = max(lastDeliverAt, deliverAt)
        sequence += 1
        flyingBytes += data.count
        delayLine.insert(Flying(deliverAt: deliverAt, sequence: sequence, data: data))
        record(number, data.count, action, delay: delay)
    }

    /// The transmitter is free at `time`: the managed queue hands it its next packet (dropping
    /// what its AQM drops first).
    private mutating func startService(at time: Int64) {
        guard case .rate(let bitsPerSecond) = capacity, bitsPerSecond > 0, managed != nil else { return }
        let (packet, dropped) = managed!.dequeue(at: time)
        for packet in dropped {
            statistics.aqmDropped += 1
            record(packet.number, packet.data.count, .overflow, detail: .aqm)
        }
        guard let packet else { return }
        let departure = time + Int64((Double(packet.data.count * 8) / bitsPerSecond * 1e9).rounded(.up))
        inService = (packet.number, packet.data, departure)
    }

    /// When the head of the queue leaves the transmitter, if it can be known now.
    private mutating func headDeparture() -> Int64? {
        if managed != nil { return inService?.departure }
        guard queueHead < queue.count else { return nil }
        let head = queue[queueHead]
        switch capacity {
        case .unlimited:
            return head.arrivedAt
        case .rate(let bitsPerSecond):
            let start = max(head.arrivedAt, transmitterFreeAt)
            guard bitsPerSecond > 0 else { return nil }
            return start + Int64((Double(head.data.count * 8) / bitsPerSecond * 1e9).rounded(.up))
        case .trace(let trace, let origin):
            return traceOpportunity(for: head, trace: trace, origin: origin).time
        }
    }

    /// The trace opportunity the head packet leaves in: the one in use if it has room and came
    /// after the packet, otherwise the next one at or after the packet's arrival.
    private func traceOpportunity(for head: Queued, trace: DeliveryTrace, origin: Int64) -> (index: Int64, time: Int64) {
        let arrived = head.arrivedAt - origin
        let needed = min(head.data.count, DeliveryTrace.opportunityBytes)
        if opportunity.index >= 0, opportunity.bytesLeft >= needed, trace.time(ofIndex: opportunity.index) >= arrived {
            return (opportunity.index, origin + trace.time(ofIndex: opportunity.index))
        }
        let index = max(opportunity.index + 1, trace.index(atOrAfter: arrived))
        return (index, origin + trace.time(ofIndex: index))
    }

    /// Moves every packet whose time has come through the transmitter and off the delay line,
    /// appending those delivered by `now` to `output` in delivery order.
    public mutating func release(upTo now: Int64, into output: inout [[UInt8]]) {
        if recordsDeliveryTimes { deliveryTimes.removeAll(keepingCapacity: true) }
        advance(to: now)
        while let first = delayLine.peek, first.deliverAt <= now {
            flyingBytes -= first.data.count
            output.append(delayLine.pop()!.data)
            if recordsDeliveryTimes { deliveryTimes.append(first.deliverAt) }
            statistics.delivered += 1
            statistics.lateness.record(now - first.deliverAt)
        }
    }

    /// Moves every packet that has left the transmitter by `now` onto the delay line (delivering
    /// nothing): the queue as it stands at `now`.
    public mutating func advance(to now: Int64) {
        if managed != nil {
            while let service = inService, service.departure <= now {
                inService = nil
                transmitterFreeAt = service.departure
                schedule(service.number, service.data, leavingAt: service.departure)
                startService(at: service.departure)
            }
            return
        }
        while let departure = headDeparture(), departure <= now {
            let head = queue[queueHead]
            // The slot lets go of the packet now, not when the queue is next compacted: its
            // buffer is then the delivered packet's alone, to be reused once it is written.
            queue[queueHead].data = []
            queueHead += 1
            fifoBytes -= head.data.count
            switch capacity {
            case .rate:
                transmitterFreeAt = departure
            case .trace(let trace, let origin):
                let used = traceOpportunity(for: head, trace: trace, origin: origin)
                if used.index != opportunity.index { opportunity = (used.index, DeliveryTrace.opportunityBytes) }
                opportunity.bytesLeft -= min(head.data.count, DeliveryTrace.opportunityBytes)
            case .unlimited:
                break
            }
            schedule(head.number, head.data, leavingAt: departure)
        }
        if queueHead > 1024 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    /// The next time something happens (a packet leaves the transmitter or the delay line).
    public mutating func nextEvent() -> Int64? {
        let departure = headDeparture()
        let delivery = delayLine.peek?.deliverAt
        switch (departure, delivery) {
        case let (a?, b?): return min(a, b)
        case let (a?, nil): return a
        case let (nil, b?): return b
        case (nil, nil): return nil
        }
    }
}

/// A binary min-heap ordered by a closure: the emulator's timer heap.
struct MinHeap<Element: Sendable>: Sendable {
    private var items: [Element] = []
    private let before: @Sendable (Element, Element) -> Bool

    init(by before: @escaping @Sendable (Element, Element) -> Bool) {
        self.before = before
    }

    var count: Int { items.count }
    var peek: Element? { items.first }

    mutating func insert(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, before(items[left], items[smallest]) { smallest = left }
            if right < items.count, before(items[right], items[smallest]) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}

extension LinkConditions {
    /// Whether a direction under these conditions delivers no packet at all: blackholed, or a
    /// loss model that drops every packet (a random loss of 100%; Gilbert-Elliott losing all in
    /// both states). Flows aside: the packets this is asked of never reach them.
    var passesNothing: Bool {
        if isBlackholed { return true }
        switch impairment.loss {
        case nil: return false
        case .random(let rate, _)?: return rate >= 1
        case let .gilbertElliott(_, _, lossInBad, lossInGood)?: return lossInBad >= 1 && lossInGood >= 1
        }
    }
}
