@testable import LinkEmulation
import ScenarioModel
import Testing

/// CoDel and FQ-CoDel in the emulator's pipeline, on a manual clock (nanoseconds).
@Suite struct ManagedQueueTests {
    static let ms: Int64 = 1_000_000

    /// An IPv4 UDP packet of `size` bytes from `port`.
    static func packet(_ size: Int, port: UInt16) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        bytes[0] = 0x45
        bytes[9] = 17
        bytes[12...15] = [198, 18, 0, 1]
        bytes[16...19] = [198, 18, 0, 2]
        bytes[20] = UInt8(port >> 8)
        bytes[21] = UInt8(port & 0xff)
        bytes[23] = 9
        return bytes
    }

    struct Flow {
        var port: UInt16
        var gap: Int64
        var size = 1500
    }

    /// Plays flows of packets (each every `gap`, from time 0) into a pipeline for `seconds`;
    /// returns each delivered packet's port and its time through the pipeline.
    static func play(_ pipeline: inout LinkPipeline, _ flows: [Flow], seconds: Int64) -> [(port: UInt16, sent: Int64, delay: Int64)] {
        let end = seconds * 1000 * ms
        var next = flows.map { _ in Int64(0) }
        var sentAt: [UInt16: [Int64]] = [:]
        var delivered: [(UInt16, Int64, Int64)] = []
        var now: Int64 = 0
        // Each packet carries its send time in its payload, so that a drop anywhere is no matter.
        func stamp(_ packet: inout [UInt8], _ time: Int64) {
            for index in 0..<8 { packet[28 + index] = UInt8(truncatingIfNeeded: time >> (8 * index)) }
        }
        func readStamp(_ packet: [UInt8]) -> Int64 {
            (0..<8).reduce(Int64(0)) { $0 | Int64(packet[28 + $1]) << (8 * $1) }
        }
        while now <= end + 5000 * ms {
            for (index, flow) in flows.enumerated() where next[index] <= now && now <= end {
                var packet = Self.packet(flow.size, port: flow.port)
                stamp(&packet, now)
                pipeline.arrive(packet, at: now)
                sentAt[flow.port, default: []].append(now)
                next[index] += flow.gap
            }
            var output: [[UInt8]] = []
            pipeline.release(upTo: now, into: &output)
            for packet in output {
                let port = UInt16(packet[20]) << 8 | UInt16(packet[21])
                let sent = readStamp(packet)
                delivered.append((port, sent, now - sent))
            }
            let arrival = now <= end ? next.min()! : Int64.max
            guard let soonest = [pipeline.nextEvent(), arrival].compactMap({ $0 }).min(), soonest != .max else { break }
            now = max(now + 1, soonest)
        }
        return delivered
    }

    static func pipeline(_ queue: QueueDiscipline?, rate: Double = 12e6, limit: Int? = nil) -> LinkPipeline {
        var impairment = Impairment(rate: Rate(bitsPerSecond: rate), limit: limit)
        impairment.queue = queue
        return LinkPipeline(conditions: LinkConditions(impairment: impairment), capacity: .rate(bitsPerSecond: rate), seed: 1, logsDecisions: true)
    }

    static func median(_ values: [Int64]) -> Int64 { values.sorted()[values.count / 2] }

    /// 10% more than the link carries (1,100 packets a second into 1,000) for 10 s: drop-tail
    /// with 1000 packets of buffer ends a second behind; CoDel finds the drop rate that keeps
    /// the standing queue near its 5 ms target.
    @Test func coDelKeepsTheStandingQueueNearItsTargetWhereDropTailBloats() {
        let overload = [Flow(port: 1, gap: 1000 * Self.ms / 1100)]
        var tail = Self.pipeline(nil, limit: 1000)
        let bloated = Self.play(&tail, overload, seconds: 10).filter { $0.sent >= 7000 * Self.ms }.map(\.delay)
        var codel = Self.pipeline(.codel(CoDelParameters()))
        let managed = Self.play(&codel, overload, seconds: 10).filter { $0.sent >= 7000 * Self.ms }.map(\.delay)
        let bloatedMedian = Self.median(bloated), managedMedian = Self.median(managed)
        #expect(bloatedMedian > 800 * Self.ms, "drop-tail: \(bloatedMedian / Self.ms) ms")
        #expect(managedMedian < 30 * Self.ms, "codel: \(Double(managedMedian) / 1e6) ms")
        #expect(codel.statistics.aqmDropped > 0 && codel.statistics.overflowed == 0)
        #expect(tail.statistics.aqmDropped == 0 && tail.statistics.overflowed > 0)
        // Roughly the 10% it must shed, not more: CoDel drops only what the link cannot carry.
        let shed = Double(codel.statistics.aqmDropped) / Double(codel.statistics.arrived)
        #expect(shed > 0.05 && shed < 0.15, "shed \(shed)")
        #expect(codel.takeDecisions().contains { $0.detail == .aqm && $0.action == .overflow && $0.description.hasSuffix(" aqm") })
    }

    @Test func belowTheRateCoDelDropsNothing() {
        var codel = Self.pipeline(.codel(CoDelParameters()))
        let delivered = Self.play(&codel, [Flow(port: 1, gap: 2 * Self.ms)], seconds: 5)
        #expect(codel.statistics.aqmDropped == 0)
        #expect(delivered.count == codel.statistics.arrived)
        // One packet at 12 Mbit/s: exactly 1 ms through an idle transmitter.
        #expect(delivered.allSatisfy { $0.delay == Self.ms })
    }

    /// A sparse flow (a packet every 10 ms, a voice call) beside one that overloads the link:
    /// with one queue it waits as long as the bulk does; FQ-CoDel serves it first, as a new flow
    /// each time, so it barely waits.
    @Test func fqCoDelIsolatesASparseFlowFromABulkOne() {
        let flows = [Flow(port: 1, gap: 1000 * Self.ms / 1200), Flow(port: 2, gap: 10 * Self.ms, size: 200)]
        var single = Self.pipeline(.codel(CoDelParameters()))
        let shared = Self.play(&single, flows, seconds: 8).filter { $0.port == 2 && $0.sent >= 4000 * Self.ms }.map(\.delay)
        var fair = Self.pipeline(.fqCodel(CoDelParameters(), flows: QueueDiscipline.defaultFlows, quantum: QueueDiscipline.defaultQuantum))
        let isolated = Self.play(&fair, flows, seconds: 8).filter { $0.port == 2 && $0.sent >= 4000 * Self.ms }.map(\.delay)
        // FQ-CoDel delivered every one of the sparse flow's 401 packets from 4 s to 8 s; one
        // queue dropped some of them with the bulk's.
        #expect(!shared.isEmpty && isolated.count == 401, "\(shared.count) \(isolated.count)")
        let sharedMedian = Self.median(shared), isolatedMedian = Self.median(isolated)
        #expect(sharedMedian >= 5 * Self.ms, "codel, sparse flow: \(Double(sharedMedian) / 1e6) ms")
        // At most the bulk packet in service (1 ms) and its own time on the wire.
        #expect(isolatedMedian <= 2 * Self.ms, "fq-codel, sparse flow: \(Double(isolatedMedian) / 1e6) ms")
        #expect(fair.statistics.aqmDropped > 0)
    }

    /// Full, FQ-CoDel drops from the flow holding the most bytes, not what arrives.
    @Test func aFullFqCoDelDropsFromTheFattestFlow() {
        var queue = ManagedQueue(.fqCodel(CoDelParameters(), flows: 1024, quantum: 1514))
        for number in 0..<10 {
            _ = queue.enqueue(.init(number: UInt64(number), data: Self.packet(1500, port: 1), arrivedAt: 0), packetLimit: 12, byteLimit: nil)
        }
        _ = queue.enqueue(.init(number: 100, data: Self.packet(100, port: 2), arrivedAt: 0), packetLimit: 12, byteLimit: nil)
        _ = queue.enqueue(.init(number: 101, data: Self.packet(100, port: 2), arrivedAt: 0), packetLimit: 12, byteLimit: nil)
        let dropped = queue.enqueue(.init(number: 102, data: Self.packet(100, port: 3), arrivedAt: 0), packetLimit: 12, byteLimit: nil)
        // Half the fat flow's 15,000 bytes: five of its packets, from its head.
        #expect(dropped.map(\.number) == [0, 1, 2, 3, 4])
        #expect(queue.count == 8)
    }

    /// Same packets, same decisions: the log of a CoDel run is identical when played twice.
    @Test func theDecisionsAreDeterministic() {
        let flows = [Flow(port: 1, gap: 1000 * Self.ms / 1300), Flow(port: 7, gap: 3 * Self.ms, size: 600)]
        var first = Self.pipeline(.fqCodel(CoDelParameters(), flows: 64, quantum: 1514))
        var second = Self.pipeline(.fqCodel(CoDelParameters(), flows: 64, quantum: 1514))
        _ = Self.play(&first, flows, seconds: 3)
        _ = Self.play(&second, flows, seconds: 3)
        let log = first.takeDecisions()
        #expect(log.count > 1000 && log == second.takeDecisions())
    }

    /// A timeline that turns CoDel on mid-run keeps every queued packet.
    @Test func switchingDisciplineKeepsWhatWaits() {
        var pipeline = Self.pipeline(nil, limit: 100)
        for number in 0..<50 { pipeline.arrive(Self.packet(1500, port: UInt16(number)), at: 0) }
        var codel = Impairment(rate: Rate(bitsPerSecond: 12e6), limit: 100)
        codel.queue = .codel(CoDelParameters())
        pipeline.update(LinkConditions(impairment: codel), capacity: .rate(bitsPerSecond: 12e6), distribution: nil)
        #expect(pipeline.queueLength == 50)
        pipeline.update(LinkConditions(impairment: Impairment(rate: Rate(bitsPerSecond: 12e6), limit: 100)), capacity: .rate(bitsPerSecond: 12e6),
                        distribution: nil)
        #expect(pipeline.queueLength == 50)
        var output: [[UInt8]] = []
        pipeline.release(upTo: 60 * Self.ms, into: &output)
        #expect(output.count == 50 && pipeline.statistics.overflowed == 0)
    }
}
