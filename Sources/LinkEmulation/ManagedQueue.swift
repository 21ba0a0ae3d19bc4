import ScenarioModel

/// A bottleneck queue with active queue management: CoDel (RFC 8289) over one queue, or
/// FQ-CoDel (RFC 8290) over flows served by deficit round robin, as Linux's `sch_codel` and
/// `sch_fq_codel` do (`include/net/codel_impl.h`, `net/sched/sch_fq_codel.c`). Pure state on the
/// caller's clock (nanoseconds): ``LinkPipeline`` enqueues what arrives and dequeues when its
/// transmitter is free; every decision depends only on those times, so it is deterministic.
///
/// Where it differs from Linux: the control law uses an exact `interval / √count` (Linux a
/// Newton step); flows are hashed with a fixed function of the 5-tuple (Linux perturbs its hash
/// at random); no ECN marking (Roam drops, as `sch_codel` does by default).
struct ManagedQueue: Sendable {
    struct Packet: Sendable {
        var number: UInt64
        var data: [UInt8]
        var arrivedAt: Int64
    }

    /// One flow's queue and its CoDel state (`struct codel_vars`).
    struct Flow: Sendable {
        var packets: [Packet] = []
        var head = 0
        var bytes = 0
        var deficit = 0
        var listed = false
        var count: Int = 0
        var lastCount: Int = 0
        var dropping = false
        var firstAboveTime: Int64 = 0
        var dropNext: Int64 = 0

        var isEmpty: Bool { head == packets.count }

        mutating func removeHead() -> Packet {
            let packet = packets[head]
            packets[head].data = []
            head += 1
            bytes -= packet.data.count
            if head == packets.count {
                packets.removeAll(keepingCapacity: packets.capacity <= 1024)
                head = 0
            } else if head > 1024 && head * 2 > packets.count {
                packets.removeFirst(head)
                head = 0
            }
            return packet
        }
    }

    let target: Int64
    let interval: Int64
    /// fq-codel: how many flow queues (nil: CoDel over one queue).
    let flowCount: Int?
    let quantum: Int
    /// Below this backlog (bytes) CoDel never drops: Linux's `psched_mtu` of an Ethernet device.
    static let mtu = 1514
    /// fq_codel drops at most this many packets from the fattest flow when full (its
    /// `drop_batch_size`).
    static let dropBatch = 64

    private(set) var flows: [Int: Flow] = [:]
    private var newFlows: [Int] = []
    private var newHead = 0
    private var oldFlows: [Int] = []
    private var oldHead = 0
    private(set) var count = 0
    private(set) var bytes = 0

    init(_ discipline: QueueDiscipline) {
        let parameters = discipline.codel ?? CoDelParameters()
        target = parameters.target.nanoseconds
        interval = parameters.interval.nanoseconds
        if case let .fqCodel(_, flows, quantum) = discipline {
            flowCount = flows
            self.quantum = quantum
        } else {
            flowCount = nil
            quantum = Self.mtu
        }
    }

    /// The default limit in packets: `sch_codel`'s 1000, `sch_fq_codel`'s 10240.
    var defaultPacketLimit: Int { flowCount == nil ? 1000 : 10240 }

    /// Every packet, oldest flow first (to move them to another queue when the discipline changes).
    mutating func drain() -> [Packet] {
        var all: [Packet] = []
        for key in flows.keys.sorted() {
            var flow = flows[key]!
            while !flow.isEmpty { all.append(flow.removeHead()) }
        }
        flows = [:]
        newFlows = []; newHead = 0; oldFlows = []; oldHead = 0
        count = 0; bytes = 0
        return all.sorted { ($0.arrivedAt, $0.number) < ($1.arrivedAt, $1.number) }
    }

    /// Adds a packet; past a limit, what must go: for CoDel the arriving packet (drop-tail, as
    /// `qdisc_drop`), for FQ-CoDel packets from the head of the flow holding the most bytes.
    mutating func enqueue(_ packet: Packet, packetLimit: Int, byteLimit: Int?) -> [Packet] {
        if flowCount == nil, count >= packetLimit || (byteLimit.map { bytes + packet.data.count > $0 } ?? false) {
            return [packet]
        }
        let key = flowCount.map { Self.flowHash(packet.data) % UInt64($0) }.map(Int.init) ?? 0
        var flow = flows[key] ?? Flow()
        flow.packets.append(packet)
        flow.bytes += packet.data.count
        if !flow.listed, flowCount != nil {
            flow.listed = true
            flow.deficit = quantum
            newFlows.append(key)
        }
        flows[key] = flow
        count += 1
        bytes += packet.data.count
        guard flowCount != nil, count > packetLimit || (byteLimit.map { bytes > $0 } ?? false) else { return [] }
        // fq_codel_drop: half the fattest flow's backlog, at most 64 packets.
        guard let fattest = flows.max(by: { ($0.value.bytes, $1.key) < ($1.value.bytes, $0.key) })?.key else { return [] }
        var dropped: [Packet] = []
        var fat = flows[fattest]!
        let threshold = fat.bytes / 2
        var freed = 0
        while !fat.isEmpty, dropped.count < Self.dropBatch, freed < threshold || dropped.isEmpty {
            let packet = fat.removeHead()
            freed += packet.data.count
            dropped.append(packet)
        }
        flows[fattest] = fat
        count -= dropped.count
        bytes -= freed
        return dropped
    }

    /// The packet to send at `now` (the transmitter is free), and those CoDel dropped first.
    mutating func dequeue(at now: Int64) -> (packet: Packet?, dropped: [Packet]) {
        var dropped: [Packet] = []
        guard flowCount != nil else {
            let packet = codelDequeue(key: 0, at: now, dropped: &dropped)
            return (packet, dropped)
        }
        while true {
            let fromNew: Bool
            let key: Int
            if newHead < newFlows.count {
                fromNew = true
                key = newFlows[newHead]
            } else if oldHead < oldFlows.count {
                fromNew = false
                key = oldFlows[oldHead]
            } else {
                return (nil, dropped)
            }
            if flows[key]!.deficit <= 0 {
                flows[key]!.deficit += quantum
                popList(fromNew)
                oldFlows.append(key)
                continue
            }
            guard let packet = codelDequeue(key: key, at: now, dropped: &dropped) else {
                // Empty: a new flow passes through the old list once (against starvation).
                popList(fromNew)
                if fromNew && oldHead < oldFlows.count {
                    oldFlows.append(key)
                } else {
                    // Its CoDel state stays (as Linux's flows array keeps it): a flow back
                    // soon resumes the drop rate it had.
                    flows[key]!.listed = false
                }
                continue
            }
            flows[key]!.deficit -= packet.data.count
            return (packet, dropped)
        }
    }

    private mutating func popList(_ new: Bool) {
        if new {
            newHead += 1
            if newHead > 256 && newHead * 2 > newFlows.count { newFlows.removeFirst(newHead); newHead = 0 }
        } else {
            oldHead += 1
            if oldHead > 256 && oldHead * 2 > oldFlows.count { oldFlows.removeFirst(oldHead); oldHead = 0 }
        }
    }

    private mutating func removeHead(_ key: Int) -> Packet? {
        guard var flow = flows[key], !flow.isEmpty else { return nil }
        let packet = flow.removeHead()
        flows[key] = flow
        count -= 1
        bytes -= packet.data.count
        return packet
    }

    /// `codel_should_drop`: the packet waited at least `target`, the queue holds more than one
    /// frame after it, and that has lasted an `interval`.
    private mutating func shouldDrop(_ packet: Packet?, key: Int, at now: Int64) -> Bool {
        guard let packet else {
            flows[key]?.firstAboveTime = 0
            return false
        }
        if now - packet.arrivedAt < target || bytes <= Self.mtu {
            flows[key]!.firstAboveTime = 0
            return false
        }
        if flows[key]!.firstAboveTime == 0 {
            flows[key]!.firstAboveTime = now + interval
            return false
        }
        return now > flows[key]!.firstAboveTime
    }

    private func controlLaw(_ time: Int64, count: Int) -> Int64 {
        time + Int64(Double(interval) / Double(max(1, count)).squareRoot())
    }

    /// `codel_dequeue` for one flow's queue.
    private mutating func codelDequeue(key: Int, at now: Int64, dropped: inout [Packet]) -> Packet? {
        var packet = removeHead(key)
        guard flows[key] != nil else { return nil }
        guard packet != nil else {
            flows[key]!.dropping = false
            return nil
        }
        var drop = shouldDrop(packet, key: key, at: now)
        if flows[key]!.dropping {
            if !drop {
                flows[key]!.dropping = false
            } else {
                while flows[key]!.dropping && now >= flows[key]!.dropNext {
                    flows[key]!.count += 1
                    dropped.append(packet!)
                    packet = removeHead(key)
                    if !shouldDrop(packet, key: key, at: now) {
                        flows[key]!.dropping = false
                    } else {
                        flows[key]!.dropNext = controlLaw(flows[key]!.dropNext, count: flows[key]!.count)
                    }
                }
            }
        } else if drop {
            dropped.append(packet!)
            packet = removeHead(key)
            drop = shouldDrop(packet, key: key, at: now)
            flows[key]!.dropping = true
            let delta = flows[key]!.count - flows[key]!.lastCount
            if delta > 1 && now - flows[key]!.dropNext < 16 * interval {
                flows[key]!.count = delta
            } else {
                flows[key]!.count = 1
            }
            flows[key]!.lastCount = flows[key]!.count
            flows[key]!.dropNext = controlLaw(now, count: flows[key]!.count)
        }
        return packet
    }

    /// A fixed hash of the packet's addresses, protocol and ports (IPv4 and IPv6): a flow's
    /// packets share a queue.
    static func flowHash(_ packet: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        guard let first = packet.first else { return 0 }
        let (addresses, proto, transport): (Range<Int>, Int, Int)
        if first >> 4 == 6 {
            guard packet.count >= 40 else { return 0 }
            (addresses, proto, transport) = (8..<40, 6, 40)
        } else {
            guard packet.count >= 20 else { return 0 }
            (addresses, proto, transport) = (12..<20, 9, Int(first & 0x0f) * 4)
        }
        for index in addresses { mix(packet[index]) }
        mix(packet[proto])
        if [6, 17].contains(packet[proto]), packet.count >= transport + 4 {
            for index in transport..<transport + 4 { mix(packet[index]) }
        }
        return hash
    }
}
