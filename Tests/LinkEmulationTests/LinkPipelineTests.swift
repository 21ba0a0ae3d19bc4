@testable import LinkEmulation
@testable import ScenarioModel
import Testing

/// The emulator's pipeline, driven by a manual clock (nanoseconds): no threads, no sleeps.
@Suite struct LinkPipelineTests {
    static let ms: Int64 = 1_000_000

    func packet(_ size: Int, number: UInt8 = 0) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        bytes[0] = 0x45
        if size > 1 { bytes[1] = number }
        return bytes
    }

    /// Sends `count` packets of `size` bytes `gap` apart and releases as time goes, returning
    /// each delivered packet's delivery time.
    func play(_ pipeline: inout LinkPipeline, count: Int, size: Int = 100, gap: Int64 = Self.ms, until end: Int64? = nil)
        -> [(time: Int64, data: [UInt8])] {
        var delivered: [(Int64, [UInt8])] = []
        var now: Int64 = 0
        var sent = 0
        let stop = end ?? Int64(count) * gap + 10_000 * Self.ms
        while now <= stop {
            if sent < count, now >= Int64(sent) * gap {
                pipeline.arrive(packet(size, number: UInt8(truncatingIfNeeded: sent)), at: now)
                sent += 1
            }
            var output: [[UInt8]] = []
            pipeline.release(upTo: now, into: &output)
            delivered += output.map { (now, $0) }
            let nextArrival = sent < count ? Int64(sent) * gap : Int64.max
            guard let next = [pipeline.nextEvent(), nextArrival].compactMap({ $0 }).min(), next != Int64.max else { break }
            now = max(now + 1, next)
        }
        return delivered
    }

    @Test func delaysEveryPacketByTheConfiguredDelay() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(40))), capacity: .unlimited, seed: 1)
        let delivered = play(&pipeline, count: 10)
        #expect(delivered.count == 10)
        #expect(delivered.enumerated().allSatisfy { $1.time == Int64($0) * Self.ms + 40 * Self.ms })
    }

    @Test func jitterSpreadsDelaysUniformlyAndKeepsOrder() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(50), jitter: .milliseconds(10))),
                                    capacity: .unlimited, seed: 7, logsDecisions: true)
        let delivered = play(&pipeline, count: 5000, gap: 20 * Self.ms)
        #expect(delivered.count == 5000)
        let delays = pipeline.takeDecisions().compactMap(\.delayMicroseconds).map { Double($0) / 1000 }
        #expect(delays.allSatisfy { $0 >= 40 && $0 <= 60 })
        let mean = delays.reduce(0, +) / Double(delays.count)
        #expect(abs(mean - 50) < 0.3, "mean \(mean)")
        // Uniform on ±10 ms: a standard deviation of 10/√3 = 5.77 ms.
        let deviation = (delays.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(delays.count)).squareRoot()
        #expect(abs(deviation - 5.77) < 0.3, "deviation \(deviation)")
        // Packets 20 ms apart with ±10 ms can never overtake; order holds by construction anyway.
        #expect(zip(delivered, delivered.dropFirst()).allSatisfy { $0.data[1] &+ 1 == $1.data[1] })
    }

    @Test func jitterWithoutReorderNeverReorders() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(50), jitter: .milliseconds(20))),
                                    capacity: .unlimited, seed: 3)
        let delivered = play(&pipeline, count: 1000, gap: Self.ms)
        #expect(delivered.count == 1000, "nothing is lost")
        #expect(zip(delivered, delivered.dropFirst()).allSatisfy { $0.data[1] &+ 1 == $1.data[1] && $0.time <= $1.time })
    }

    @Test func reorderSendsSomePacketsAhead() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(20), reorder: 0.25)),
                                    capacity: .unlimited, seed: 3)
        let delivered = play(&pipeline, count: 1000, gap: Self.ms)
        #expect(delivered.count == 1000)
        let overtaken = zip(delivered, delivered.dropFirst()).filter { $0.data[1] &+ 1 != $1.data[1] }.count
        #expect(overtaken > 100)
        #expect(pipeline.statistics.reordered > 200 && pipeline.statistics.reordered < 300)
    }

    /// 10% loss over 20,000 packets: 2000 expected, σ = 42.4; 4σ allows 1830 to 2170.
    @Test func randomLossMatchesItsRate() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(loss: .random(rate: 0.1, correlation: 0))),
                                    capacity: .unlimited, seed: 11)
        let delivered = play(&pipeline, count: 20_000, gap: 1000)
        #expect(pipeline.statistics.lost == 20_000 - delivered.count)
        #expect((1830...2170).contains(pipeline.statistics.lost), "\(pipeline.statistics.lost)")
    }

    /// Gilbert-Elliott p = 5%, r = 45%, all lost in the bad state: 10% lost, in bursts of mean
    /// length 1/r = 2.22.
    @Test func gilbertElliottLossHasItsRateAndBurstLength() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(loss: .gilbertElliott(p: 0.05, r: 0.45, lossInBad: 1, lossInGood: 0)))
                                    , capacity: .unlimited, seed: 5, logsDecisions: true)
        _ = play(&pipeline, count: 50_000, gap: 1000)
        let actions = pipeline.takeDecisions().map(\.action)
        let lost = actions.filter { $0 == .loss }.count
        #expect(abs(Double(lost) / 50_000 - 0.1) < 0.01, "\(lost)")
        var bursts: [Int] = []
        var run = 0
        for action in actions {
            if action == .loss { run += 1 } else if run > 0 { bursts.append(run); run = 0 }
        }
        let meanBurst = Double(bursts.reduce(0, +)) / Double(bursts.count)
        #expect(abs(meanBurst - 1 / 0.45) < 0.15, "mean burst \(meanBurst)")
    }

    /// 1500-byte packets at 12 Mbit/s take 1 ms each to serialize.
    @Test func rateSerializesPacketsBackToBack() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(rate: .mbit(12))), capacity: .rate(bitsPerSecond: 12e6), seed: 1)
        var output: [[UInt8]] = []
        for _ in 0..<5 { pipeline.arrive(packet(1500), at: 0) }
        var times: [Int64] = []
        while let next = pipeline.nextEvent() {
            pipeline.release(upTo: next, into: &output)
            times.append(next)
        }
        #expect(output.count == 5)
        #expect(times == [1, 2, 3, 4, 5].map { $0 * Self.ms })
    }

    @Test func aFullQueueDropsTheTail() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(rate: .mbit(1), limit: 10)),
                                    capacity: .rate(bitsPerSecond: 1e6), seed: 1, logsDecisions: true)
        for _ in 0..<25 { pipeline.arrive(packet(1000), at: 0) }
        #expect(pipeline.queueLength == 10)
        #expect(pipeline.statistics.overflowed == 15)
        #expect(pipeline.takeDecisions().filter { $0.action == .overflow }.map(\.number) == Array(11...25).map(UInt64.init))
        // Halving the limit live drops what no longer fits, from the tail; nothing else is lost.
        pipeline.update(LinkConditions(impairment: Impairment(rate: .mbit(1), limit: 5)), capacity: .rate(bitsPerSecond: 1e6), distribution: nil)
        #expect(pipeline.queueLength == 5)
        var output: [[UInt8]] = []
        pipeline.release(upTo: 1_000 * Self.ms, into: &output)
        #expect(output.count == 5)
    }

    @Test func liveChangesKeepQueuedPackets() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(100), rate: .mbit(1))),
                                    capacity: .rate(bitsPerSecond: 1e6), seed: 1)
        for _ in 0..<20 { pipeline.arrive(packet(1250), at: 0) }   // 10 ms each at 1 Mbit/s
        var output: [[UInt8]] = []
        pipeline.release(upTo: 50 * Self.ms, into: &output)
        pipeline.update(LinkConditions(impairment: Impairment(delay: .milliseconds(10), rate: .mbit(10))),
                        capacity: .rate(bitsPerSecond: 10e6), distribution: nil)
        pipeline.release(upTo: 10_000 * Self.ms, into: &output)
        #expect(output.count == 20)
    }

    @Test func tracesDeliverAtTheirOpportunitiesAndRepeat() throws {
        let trace = try DeliveryTrace.parse("5\n5\n10\n").get()
        #expect(trace.period == 10 && abs(trace.meanRate - 3.6e6) < 1)
        #expect(trace.opportunity(atOrAfter: 0) == 5 * Self.ms)
        #expect(trace.opportunity(atOrAfter: 6 * Self.ms) == 10 * Self.ms)
        #expect(trace.opportunity(atOrAfter: 11 * Self.ms) == 15 * Self.ms)
        // A period's last opportunity is at the next one's start: asked for exactly then, it is
        // the one (it was skipped for the next period's first).
        #expect(trace.index(atOrAfter: 10 * Self.ms) == 2 && trace.opportunity(atOrAfter: 10 * Self.ms) == 10 * Self.ms)
        #expect(trace.index(atOrAfter: 20 * Self.ms) == 5 && trace.index(atOrAfter: 20 * Self.ms + 1) == 6)
        var pipeline = LinkPipeline(conditions: LinkConditions(), capacity: .trace(trace, origin: 0), seed: 1)
        for _ in 0..<6 { pipeline.arrive(packet(1500), at: 0) }
        var output: [[UInt8]] = []
        var times: [Int64] = []
        while let next = pipeline.nextEvent() {
            let before = output.count
            pipeline.release(upTo: next, into: &output)
            times += Array(repeating: next / Self.ms, count: output.count - before)
        }
        #expect(times == [5, 5, 10, 15, 15, 20])
        // Small packets share an opportunity's 1500 bytes.
        var small = LinkPipeline(conditions: LinkConditions(), capacity: .trace(trace, origin: 0), seed: 1)
        for _ in 0..<4 { small.arrive(packet(500), at: 0) }
        output = []
        small.release(upTo: 5 * Self.ms, into: &output)
        #expect(output.count == 4, "two opportunities at 5 ms carry 3000 bytes")
        #expect(throws: TraceError.self) { try DeliveryTrace.parse("3\n2\n").get() }
        #expect(throws: TraceError.self) { try DeliveryTrace.parse("x\n").get() }
    }

    @Test func theSameSeedMakesTheSameDecisions() {
        func log(seed: UInt64) -> [PacketDecision] {
            var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(30), jitter: .milliseconds(5),
                                        loss: .gilbertElliott(p: 0.02, r: 0.3, lossInBad: 0.8, lossInGood: 0.01), duplicate: 0.01, corrupt: 0.01)),
                                        capacity: .unlimited, seed: seed, logsDecisions: true)
            _ = play(&pipeline, count: 2000, size: 200)
            return pipeline.takeDecisions()
        }
        let first = log(seed: 42)
        #expect(first == log(seed: 42))
        #expect(first != log(seed: 43))
        #expect(Set(first.map(\.action)).isSuperset(of: [.loss, .deliver, .duplicate, .corrupt]))
    }

    @Test func blackholePassesNothing() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .milliseconds(5)), isBlackholed: true),
                                    capacity: .unlimited, seed: 1)
        #expect(play(&pipeline, count: 100).isEmpty)
        #expect(pipeline.statistics.blackholed == 100)
    }

    @Test func corruptionFlipsOneBitPastTheHeader() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(corrupt: 1)), capacity: .unlimited, seed: 9)
        let delivered = play(&pipeline, count: 50, size: 100)
        // Corrupted, every one, but none lost: the check below sees all 50.
        #expect(delivered.count == 50)
        for (index, item) in delivered.enumerated() {
            let original = packet(100, number: UInt8(index))
            let flipped = zip(item.data, original).map { ($0 ^ $1).nonzeroBitCount }
            #expect(flipped.reduce(0, +) == 1 && flipped.prefix(20).allSatisfy { $0 == 0 })
        }
    }

    /// A minute's delay under a flood holds at most ``LinkPipeline/maximumBytesHeld``; the rest
    /// is dropped as a full queue drops it, and counted (issue 30, item 13).
    @Test func aLongDelayUnderAFloodHoldsABoundedAmount() {
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: Impairment(delay: .seconds(60))), capacity: .unlimited, seed: 1)
        let packet = [UInt8](repeating: 0x45, count: 1500)
        let sent = 2 * LinkPipeline.maximumBytesHeld / packet.count
        for index in 0..<sent { pipeline.arrive(packet, at: Int64(index) * 1000) }
        #expect(pipeline.bytesHeld <= LinkPipeline.maximumBytesHeld)
        #expect(pipeline.bytesHeld > LinkPipeline.maximumBytesHeld - packet.count)
        #expect(pipeline.statistics.overflowed == sent - pipeline.inFlight)
        var out: [[UInt8]] = []
        pipeline.release(upTo: 61_000_000_000 + Int64(sent) * 1000, into: &out)
        #expect(out.count == pipeline.statistics.delivered && out.count == sent - pipeline.statistics.overflowed)
        #expect(pipeline.bytesHeld == 0)
    }
}
