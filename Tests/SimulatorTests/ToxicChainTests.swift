import RoamSystem
import ScenarioModel
@testable import Simulator
import Testing

/// Each of toxiproxy's toxics on one direction of a connection, on a manual clock: when each
/// piece is due, what is cut or dropped, and when the connection ends.
@Suite struct ToxicChainTests {
    let origin = MonotonicInstant(nanoseconds: 1_000_000_000_000)
    func at(_ milliseconds: Int64) -> MonotonicInstant { origin + .milliseconds(milliseconds) }
    func bytes(_ count: Int) -> [UInt8] { [UInt8](repeating: 7, count: count) }
    func chain(_ toxics: [Toxic], stream: Toxic.Stream = .downstream) -> ToxicChain {
        ToxicChain(toxics: toxics, stream: stream, now: origin, seed: 42)
    }

    @Test func latencyDelaysEachChunkFromWhenItCameAndKeepsOrder() {
        var latency = chain([Toxic(.latency(latency: .milliseconds(100), jitter: .zero))])
        #expect(latency.receive(bytes(10), at: at(0)) == [.init(due: at(100), output: .data(bytes(10)))])
        #expect(latency.receive(bytes(5), at: at(30)).map(\.due) == [at(130)], "counted from when it came, not from the last one's leaving")
        #expect(latency.finish(at: at(40)).map(\.due) == [at(130)], "the end after the last piece, not delayed itself")
        // With jitter, no chunk overtakes the one before it, and each is within the jitter.
        var jittery = chain([Toxic(.latency(latency: .milliseconds(100), jitter: .milliseconds(50)))])
        var last = origin
        for index in 0..<200 {
            let due = jittery.receive(bytes(1), at: at(Int64(index)))[0].due
            #expect(due >= last && due >= at(Int64(index) + 50) && due <= max(last, at(Int64(index) + 150)))
            last = due
        }
    }

    @Test func bandwidthSendsEachPieceOnceItsTimeAtTheRateIsOver() {
        var bandwidth = chain([Toxic(.bandwidth(kilobytesPerSecond: 100))])
        // 25,000 bytes at 100 KB/s: pieces of 100 ms (10,000 bytes), the last one's time at 250 ms.
        let pieces = bandwidth.receive(bytes(25_000), at: at(0))
        #expect(pieces.map(\.due) == [at(100), at(200), at(250)])
        #expect(pieces.map { if case .data(let data) = $0.output { data.count } else { 0 } } == [10_000, 10_000, 5_000])
        #expect(bandwidth.receive(bytes(1000), at: at(100)).map(\.due) == [at(260)], "queued behind what came before")
        var unlimited = chain([Toxic(.bandwidth(kilobytesPerSecond: 0))])
        #expect(unlimited.receive(bytes(10), at: at(5)).map(\.due) == [at(5)])
    }

    @Test func slicerCutsChunksIntoPiecesDelayApart() {
        var slicer = chain([Toxic(.slicer(averageSize: 100, sizeVariation: 0, delay: .milliseconds(10)))])
        let pieces = slicer.receive(bytes(350), at: at(0))
        #expect(pieces.map(\.due) == [at(0), at(10), at(20), at(30)])
        #expect(pieces.map { if case .data(let data) = $0.output { data.count } else { 0 } } == [100, 100, 100, 50])
        var varied = chain([Toxic(.slicer(averageSize: 100, sizeVariation: 40, delay: .zero))])
        let sizes = varied.receive(bytes(10_000), at: at(0)).map { if case .data(let data) = $0.output { data.count } else { 0 } }
        #expect(sizes.reduce(0, +) == 10_000 && sizes.dropLast().allSatisfy { (60...140).contains($0) } && Set(sizes).count > 5)
    }

    @Test func limitDataPassesThatManyBytesThenEndsTheConnection() {
        var limit = chain([Toxic(.limitData(bytes: 1000))])
        #expect(limit.nextEnding == nil)
        #expect(limit.receive(bytes(600), at: at(0)).count == 1)
        let cut = limit.receive(bytes(600), at: at(10))
        #expect(cut == [.init(due: at(10), output: .data(bytes(400)))])
        #expect(limit.nextEnding?.at == at(10) && limit.nextEnding?.ending == .close)
        #expect(limit.receive(bytes(5), at: at(20)).isEmpty && limit.finish(at: at(30)).isEmpty)
    }

    @Test func slowCloseHoldsTheEndAndNothingElse() {
        var slow = chain([Toxic(.slowClose(delay: .milliseconds(500)))])
        #expect(slow.receive(bytes(10), at: at(0)).map(\.due) == [at(0)])
        #expect(slow.finish(at: at(20)) == [.init(due: at(520), output: .end)])
    }

    @Test func timeoutDropsEverythingAndClosesAfterItsTimeout() {
        var timeout = chain([Toxic(.timeout(timeout: .milliseconds(400)))])
        #expect(timeout.receive(bytes(10), at: at(0)).isEmpty)
        #expect(timeout.nextEnding?.at == at(400) && timeout.nextEnding?.ending == .close)
        var forever = chain([Toxic(.timeout(timeout: .zero))])
        #expect(forever.receive(bytes(10), at: at(0)).isEmpty && forever.nextEnding == nil, "0: data dropped, never closed")
        // Removed, the bytes pass again (what it dropped is gone).
        forever.update(toxics: [], now: at(50))
        #expect(forever.receive(bytes(3), at: at(60)) == [.init(due: at(60), output: .data(bytes(3)))])
    }

    @Test func resetPeerResetsAfterItsTimeoutCountedFromWhenItBegan() {
        var reset = chain([Toxic(.resetPeer(timeout: .milliseconds(300)))])
        #expect(reset.receive(bytes(10), at: at(0)).count == 1)
        #expect(reset.nextEnding?.at == at(300) && reset.nextEnding?.ending == .reset)
        // Added later to a connection: counted from then.
        var later = chain([])
        later.update(toxics: [Toxic(.resetPeer(timeout: .milliseconds(300)))], now: at(1000))
        #expect(later.nextEnding?.at == at(1300))
    }

    @Test func toxicsActInOrderOnTheirStreamAndToxicityIsDrawnPerConnection() {
        // Latency then bandwidth: the piece leaves the latency at 100 ms, then takes 10 ms at 100 KB/s.
        var both = chain([Toxic(.latency(latency: .milliseconds(100), jitter: .zero)), Toxic(.bandwidth(kilobytesPerSecond: 100))])
        #expect(both.receive(bytes(1000), at: at(0)).map(\.due) == [at(110)])
        // An upstream toxic does nothing downstream.
        var other = chain([Toxic(.latency(latency: .seconds(1), jitter: .zero), stream: .upstream)])
        #expect(other.isEmpty && other.receive(bytes(1), at: at(0)).map(\.due) == [at(0)])
        // toxicity 0 never acts, 1 always; 0.5 on about half of many connections.
        let never = Toxic(.latency(latency: .seconds(1), jitter: .zero), toxicity: 0)
        #expect(chain([never]).isEmpty)
        let half = Toxic(.latency(latency: .seconds(1), jitter: .zero), toxicity: 0.5)
        let acting = (0..<400).filter { !ToxicChain(toxics: [half], stream: .downstream, now: origin, seed: UInt64($0) &* 7919).isEmpty }.count
        #expect((140...260).contains(acting), "\(acting) of 400")
    }

    @Test func anUpdateKeepsWhatAToxicCountedAndChangesItsAttributes() {
        var limit = chain([Toxic(name: "cap", .limitData(bytes: 100))])
        _ = limit.receive(bytes(80), at: at(0))
        limit.update(toxics: [Toxic(name: "cap", .limitData(bytes: 90))], now: at(5))
        #expect(limit.receive(bytes(50), at: at(10)) == [.init(due: at(10), output: .data(bytes(10)))], "80 counted before the update")
    }
}
