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

/// Roam's own toxics: HTTP/1.x requests answered by the proxy, responses cut short, a stall of
/// the server's first bytes; and how messages are found in a stream (kept-alive, pipelined,
/// chunked, heads too long).
@Suite struct HTTPToxicTests {
    let origin = MonotonicInstant(nanoseconds: 1_000_000_000_000)
    func at(_ milliseconds: Int64) -> MonotonicInstant { origin + .milliseconds(milliseconds) }
    func text(_ outputs: [ToxicChain.Scheduled]) -> [String] {
        outputs.map {
            switch $0.output {
            case .data(let bytes): "data:" + String(decoding: bytes, as: UTF8.self)
            case .answer(let bytes): "answer:" + String(decoding: bytes.prefix(12), as: UTF8.self)
            case .end: "end"
            }
        }
    }

    @Test func aChosenRequestIsAnsweredByTheProxyAndNothingAfterItPasses() {
        var chain = ToxicChain(toxics: [Toxic(.httpStatus(status: 503, percent: 100), stream: .upstream)], stream: .upstream, now: origin, seed: 1)
        // Split anywhere: the head is held until whole.
        #expect(chain.receive(Array("GET / HTTP/1.1\r\nHost: a\r".utf8), at: at(0)).isEmpty)
        #expect(text(chain.receive(Array("\n\r\nGET /next HTTP/1.1\r\n\r\n".utf8), at: at(1))) == ["answer:HTTP/1.1 503"])
        #expect(chain.receive(Array("more".utf8), at: at(2)).isEmpty)
        // None chosen: requests and their bodies pass as they were, kept-alive and pipelined.
        var none = ToxicChain(toxics: [Toxic(.httpStatus(status: 503, percent: 0), stream: .upstream)], stream: .upstream, now: origin, seed: 1)
        let requests = "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\n\r\n"
        #expect(text(none.receive(Array(requests.utf8), at: at(0))).joined() == "data:" + requests)
    }

    @Test func aShareOfRequestsIsAnsweredDrawnFromTheSeed() {
        var answered = 0
        for seed in 0..<200 {
            var chain = ToxicChain(toxics: [Toxic(.httpStatus(status: 502, percent: 30), stream: .upstream)], stream: .upstream, now: origin, seed: UInt64(seed))
            if text(chain.receive(Array("GET / HTTP/1.1\r\n\r\n".utf8), at: at(0))).first?.hasPrefix("answer") == true { answered += 1 }
        }
        #expect((35...85).contains(answered), "\(answered) of 200 at 30%")
    }

    @Test func aChosenResponseIsCutAndTheConnectionEnds() {
        var chain = ToxicChain(toxics: [Toxic(.httpTruncate(bytes: 4, percent: 100))], stream: .downstream, now: origin, seed: 1)
        let response = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"
        #expect(text(chain.receive(Array(response.utf8), at: at(5))) == ["data:HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123"])
        #expect(chain.nextEnding?.at == at(5) && chain.nextEnding?.ending == .close)
        #expect(chain.receive(Array("x".utf8), at: at(6)).isEmpty && chain.finish(at: at(7)).isEmpty)
        // A body shorter than the cut passes whole, and the connection ends after it.
        var short = ToxicChain(toxics: [Toxic(.httpTruncate(bytes: 100, percent: 100))], stream: .downstream, now: origin, seed: 1)
        #expect(text(short.receive(Array(response.utf8), at: at(0))).joined().hasSuffix("0123456789") && short.nextEnding != nil)
        // No body to cut (204, 304, 1xx): untouched, and the next response is the one cut.
        var skip = ToxicChain(toxics: [Toxic(.httpTruncate(bytes: 2, percent: 100))], stream: .downstream, now: origin, seed: 1)
        let two = "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        #expect(text(skip.receive(Array(two.utf8), at: at(0))).joined() == "data:HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe")
    }

    @Test func framingThatCannotBeKnownPassesUntouched() {
        // Chunked: not cut, nor anything after it on the connection.
        var chunked = ToxicChain(toxics: [Toxic(.httpTruncate(bytes: 1, percent: 0))], stream: .downstream, now: origin, seed: 1)
        let body = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        #expect(text(chunked.receive(Array(body.utf8), at: at(0))).joined() == "data:" + body)
        #expect(text(chunked.receive(Array("anything".utf8), at: at(1))) == ["data:anything"])
        // Two lengths that disagree: untouched.
        #expect(HTTPFraming.framing(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".utf8), response: true) == .unknown)
        #expect(HTTPFraming.framing(Array("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n".utf8), response: false) == .unknown)
        #expect(HTTPFraming.framing(Array("GET / HTTP/1.1\r\n\r\n".utf8), response: false) == .none)
        // A head longer than 64 KiB: given up on, every byte passes, in order.
        var long = ToxicChain(toxics: [Toxic(.httpStatus(status: 503, percent: 100), stream: .upstream)], stream: .upstream, now: origin, seed: 1)
        let huge = Array("GET / HTTP/1.1\r\nX: ".utf8) + [UInt8](repeating: 97, count: HTTPFraming.maximumHead + 10)
        var passed: [UInt8] = []
        for piece in stride(from: 0, to: huge.count, by: 4096) {
            for item in long.receive(Array(huge[piece..<min(huge.count, piece + 4096)]), at: at(0)) {
                if case .data(let bytes) = item.output { passed += bytes } else { Issue.record("\(item)") }
            }
        }
        #expect(passed == huge)
    }

    @Test func aStallHoldsTheFirstBytesUntilItsDelay() {
        var chain = ToxicChain(toxics: [Toxic(.tlsStall(delay: .milliseconds(300)))], stream: .downstream, now: origin, seed: 1)
        #expect(chain.receive(Array("hello".utf8), at: at(10)).map(\.due) == [at(300)])
        #expect(chain.receive(Array("more".utf8), at: at(20)).map(\.due) == [at(300)])
        #expect(chain.receive(Array("later".utf8), at: at(400)).map(\.due) == [at(400)])
    }
}
