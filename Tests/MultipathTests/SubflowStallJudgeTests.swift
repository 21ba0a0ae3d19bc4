import Multipath
import Testing

/// The rules that judge, from sock_diag samples of other programs' subflows, when an interface
/// stalls them; on a manual clock, a sample every 100 ms.
@Suite struct SubflowStallJudgeTests {
    /// A subflow sample: a carrying Wi-Fi subflow of connection 7 by default.
    func sample(_ interface: String = "wifi", connection: UInt32 = 7, subflow: UInt64 = 1, backup: Bool = false,
                unacknowledged: Int = 0, sinceData: Int = 0, sinceAck: Int = 0, rtt: Int? = 20,
                segments: UInt32 = 0, outOfOrder: UInt32 = 0, retransmissions: UInt32 = 0) -> SubflowStallJudge.Sample {
        SubflowStallJudge.Sample(interface: interface, connection: connection, subflow: subflow, isBackup: backup,
                                 unacknowledged: unacknowledged, sinceDataReceived: .milliseconds(sinceData),
                                 sinceAcknowledgementReceived: .milliseconds(sinceAck), smoothedRTT: rtt.map { .milliseconds($0) },
                                 dataSegmentsReceived: segments, outOfOrderPacketsReceived: outOfOrder, retransmissions: retransmissions)
    }

    func at(_ milliseconds: Int) -> Duration { .seconds(100) + .milliseconds(milliseconds) }

    /// A connection streams over Wi-Fi for a second (10 segments a sample), `outOfOrder` packets
    /// lost on the way in by the end; returns the judge and the time of the last data.
    func streamed(outOfOrder: UInt32) -> (SubflowStallJudge, segments: UInt32, last: Int) {
        var judge = SubflowStallJudge()
        var segments: UInt32 = 0
        for step in 0...10 {
            segments += 10
            let stalls = judge.observe([sample(segments: segments, outOfOrder: step == 10 ? outOfOrder : 0),
                                        sample("cell", subflow: 2, backup: true, sinceData: 5_000 + step * 100)], at: at(step * 100))
            #expect(stalls.isEmpty)
        }
        return (judge, segments, 1000)
    }

    /// Silence after a stream, on a subflow that lost packets on the way in: judged once, as a
    /// receiving stall of Wi-Fi, when the silence passes the threshold (4 × 20 ms + 200 ms, at
    /// least 300 ms); the backup subflow's long silence is never its own stall.
    @Test func silenceAfterAStreamOverALossySubflowIsAReceivingStall() {
        var (judge, segments, last) = streamed(outOfOrder: 3)
        var judged: [(Int, SubflowStallJudge.Stall)] = []
        for step in 1...10 {
            let now = last + step * 100
            for stall in judge.observe([sample(sinceData: now - last, segments: segments, outOfOrder: 3),
                                        sample("cell", subflow: 2, backup: true, sinceData: 6_000 + now)], at: at(now)) {
                judged.append((now - last, stall))
            }
        }
        #expect(judged.count == 1, "\(judged)")
        #expect(judged.first?.0 == 300)
        #expect(judged.first?.1.interface == "wifi" && judged.first?.1.direction == .receiving)
        #expect(judged.first?.1.threshold == .milliseconds(300))
    }

    /// The same silence on a subflow that lost nothing is a connection gone idle: never judged,
    /// however long it lasts, and a loss long after it went quiet does not make it one.
    @Test func silenceWithoutLossesIsIdleNotAStall() {
        var (judge, segments, last) = streamed(outOfOrder: 0)
        for step in 1...60 {
            let now = last + step * 100
            // A retransmission of its own (a request it sent) after 3 s of quiet.
            let stalls = judge.observe([sample(sinceData: now - last, segments: segments, retransmissions: step >= 30 ? 1 : 0)], at: at(now))
            #expect(stalls.isEmpty, "at \(now - last) ms: \(stalls)")
        }
    }

    /// One reply (data in one sample, then none) is not a stream: its silence is not judged even
    /// over a lossy subflow.
    @Test func oneReplyIsNotAStream() {
        var judge = SubflowStallJudge()
        _ = judge.observe([sample(segments: 0)], at: at(0))
        _ = judge.observe([sample(segments: 4, outOfOrder: 1)], at: at(100))
        for step in 2...20 {
            #expect(judge.observe([sample(sinceData: (step - 1) * 100, segments: 4, outOfOrder: 1)], at: at(step * 100)).isEmpty)
        }
    }

    /// Data out and no acknowledgement for the threshold: a sending stall, once; again only after
    /// an acknowledgement arrived and the next silence passed it. A backup's is never judged.
    @Test func unacknowledgedDataWithNoAcknowledgementIsASendingStall() {
        var judge = SubflowStallJudge()
        var judged: [Int] = []
        for step in 0...20 {
            let now = step * 100
            // Acknowledgements stop at 0 and start again at 1 s, stop at 1.2 s again.
            let sinceAck = now < 1000 ? now : now < 1200 ? 0 : now - 1200
            let stalls = judge.observe([sample(unacknowledged: 10, sinceAck: sinceAck),
                                        sample("cell", subflow: 2, backup: true, unacknowledged: 3, sinceAck: 10_000)], at: at(now))
            #expect(stalls.allSatisfy { $0.interface == "wifi" && $0.direction == .sending })
            if !stalls.isEmpty { judged.append(now) }
        }
        #expect(judged == [300, 1500], "\(judged)")
    }

    /// Nothing out: no sending stall however old the last acknowledgement.
    @Test func anIdleSenderIsNotStalled() {
        var judge = SubflowStallJudge()
        for step in 0...50 {
            #expect(judge.observe([sample(unacknowledged: 0, sinceAck: step * 100)], at: at(step * 100)).isEmpty)
        }
    }

    /// The threshold follows the subflow's RTT (4 × 150 ms + 200 ms = 800 ms), and two
    /// connections stalling over one interface in one sample are one stall of it.
    @Test func theThresholdFollowsTheRTTAndAnInterfaceStallsOncePerSample() {
        var judge = SubflowStallJudge()
        var first: Int?
        for step in 0...12 {
            let now = step * 100
            let stalls = judge.observe([sample(connection: 1, subflow: 1, unacknowledged: 2, sinceData: 60_000, sinceAck: now, rtt: 150),
                                        sample(connection: 2, subflow: 2, unacknowledged: 2, sinceData: 60_000, sinceAck: now, rtt: 150)], at: at(now))
            #expect(stalls.count <= 1)
            if !stalls.isEmpty, first == nil { first = now }
        }
        #expect(first == 800)
    }

    /// Subflows and connections that are gone are forgotten.
    @Test func goneConnectionsAreForgotten() {
        var (judge, _, _) = streamed(outOfOrder: 0)
        #expect(judge.connectionCount == 1)
        _ = judge.observe([], at: at(1100))
        #expect(judge.connectionCount == 0)
    }

    /// A connection that stalls while another moves over the same interface is its peer's
    /// trouble, not the interface's: not judged (a veto counted). With the other connection idle
    /// (nothing for longer than its threshold), the same stall is judged.
    @Test func aStallIsTheInterfacesOnlyWhenNoOtherConnectionMovesOverIt() {
        var judge = SubflowStallJudge()
        var judged: [SubflowStallJudge.Stall] = []
        for step in 0...10 {
            let now = step * 100
            judged += judge.observe([sample(connection: 1, subflow: 1, unacknowledged: 10, sinceAck: now),
                                     sample(connection: 2, subflow: 2, unacknowledged: 4, sinceData: 20, sinceAck: 10)], at: at(now))
        }
        #expect(judged.isEmpty && judge.vetoes == 1, "\(judged)")

        var alone = SubflowStallJudge()
        for step in 0...10 {
            let now = step * 100
            judged += alone.observe([sample(connection: 1, subflow: 1, unacknowledged: 10, sinceAck: now),
                                     sample(connection: 2, subflow: 2, sinceData: 60_000, sinceAck: 60_000)], at: at(now))
        }
        #expect(judged.map(\.interface) == ["wifi"] && alone.vetoes == 0, "\(judged)")
    }
}
