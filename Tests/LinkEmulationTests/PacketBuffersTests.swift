@testable import LinkEmulation
import ScenarioModel
import Testing

/// The emulator threads' reused packet buffers.
@Suite struct PacketBuffersTests {
    static func bytes(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0) &+ seed } }

    /// A steady flow of packets of mixed sizes, each given back once written, allocates only
    /// for the first round: after it, every packet is copied into a buffer it reuses.
    @Test func aSteadyFlowAllocatesOnlyForItsFirstRound() {
        var buffers = PacketBuffers()
        let sizes = [64, 1500, 40, 1448 + 52, 9000, 64, 576]
        for round in 0..<50 {
            var line: [[UInt8]] = []
            for (number, size) in sizes.enumerated() {
                let packet = Self.bytes(size, seed: UInt8(truncatingIfNeeded: round * 7 + number))
                let taken = packet.withUnsafeBytes { buffers.take(copying: $0) }
                #expect(taken == packet)
                line.append(taken)
            }
            while let written = line.popLast() { buffers.recycle(written) }
        }
        #expect(buffers.allocated == sizes.count, "allocated \(buffers.allocated) buffers for \(sizes.count) packets in flight")
        #expect(buffers.count == sizes.count)
    }

    /// Through a link with a rate, a delay and a queue, every delivered packet's buffer is the
    /// packet's alone when it is given back (nothing in the pipeline still holds it), so that
    /// the flow reuses what it needs in flight and allocates nothing more.
    @Test(arguments: [false, true])
    func aLinkHandsBackBuffersNothingElseHolds(managed: Bool) {
        var impairment = Impairment(delay: .milliseconds(5))
        if managed { impairment.queue = .codel(CoDelParameters()) }
        var pipeline = LinkPipeline(conditions: LinkConditions(impairment: impairment), capacity: .rate(bitsPerSecond: 10_000_000), seed: 1)
        var buffers = PacketBuffers()
        var output: [[UInt8]] = []
        var now: Int64 = 0
        var delivered = 0
        let packet = Self.bytes(1500, seed: 3)
        // 5,000 packets at 90% of the rate (one every 1.333 ms where the link sends one every 1.2 ms).
        for _ in 0..<5000 {
            pipeline.arrive(packet.withUnsafeBytes { buffers.take(copying: $0) }, at: now)
            now += 1_333_333
            pipeline.release(upTo: now, into: &output)
            delivered += output.count
            while let written = output.popLast() { buffers.recycle(written) }
        }
        #expect(delivered > 4900)
        // In flight at once: about 5 ms of packets on the line and one being sent.
        #expect(buffers.allocated <= 10, "allocated \(buffers.allocated) buffers for \(delivered) packets")
    }

    /// A buffer another packet still holds (a duplicate's twin) keeps its bytes when it is
    /// taken again: the new packet gets storage of its own.
    @Test func aBufferStillHeldElsewhereKeepsItsBytes() {
        var buffers = PacketBuffers()
        let original = Self.bytes(100, seed: 1)
        let first = original.withUnsafeBytes { buffers.take(copying: $0) }
        let twin = first
        buffers.recycle(first)
        let next = Self.bytes(80, seed: 9).withUnsafeBytes { buffers.take(copying: $0) }
        #expect(twin == original)
        #expect(next == Self.bytes(80, seed: 9))
        #expect(buffers.allocated == 2, "the shared one's storage was left to its twin")
    }

    /// What a burst left behind is bounded: a class keeps at most its count and all of them
    /// at most their bytes; the rest goes back to the allocator.
    @Test func whatIsKeptIsBounded() {
        var buffers = PacketBuffers()
        var burst: [[UInt8]] = []
        for _ in 0..<(PacketBuffers.maximumPerClass + 100) { burst.append(buffers.take(capacity: 64)) }
        while let buffer = burst.popLast() { buffers.recycle(buffer) }
        #expect(buffers.count == PacketBuffers.maximumPerClass)
        for _ in 0..<1000 { burst.append(buffers.take(capacity: 65536)) }
        while let buffer = burst.popLast() { buffers.recycle(buffer) }
        #expect(buffers.bytesKept <= PacketBuffers.maximumBytes)
        #expect(buffers.bytesKept >= PacketBuffers.maximumBytes - 65536 - 4096)
        // Too small or too large to keep: not kept.
        buffers = PacketBuffers()
        buffers.recycle([1, 2, 3])
        #expect(buffers.count == 0)
        let large = buffers.take(capacity: 200_000)
        #expect(large.capacity >= 200_000)
        buffers.recycle(large)
        #expect(buffers.count == 1 && buffers.take(capacity: 65536).capacity >= 65536 && buffers.count == 0)
    }

    /// Segments cut with reused buffers are the segments cut without them, and a merge into a
    /// reused buffer is the merge into a new one.
    @Test(arguments: [UInt8(4), 6])
    func reusedBuffersCutAndMergeAsNewOnes(version: UInt8) throws {
        let start = version == 4 ? 20 : 40
        let packet = SegmenterTests.tcp(version: version, payload: SegmenterTests.payload(10_000), flags: 0x18)
        let header = SegmenterTests.header(version == 4 ? .tcpv4 : .tcpv6, size: 1448, start: start, offset: 16)
        let expected = try SegmenterTests.segment(header, packet)
        var buffers = PacketBuffers()
        var merged: [UInt8] = []
        for _ in 0..<3 {
            var segments: [[UInt8]] = []
            try packet.withUnsafeBytes { try Segmenter.segment(header, $0, into: &segments, buffers: &buffers) }
            #expect(segments == expected)
            let mergedHeader = Coalescer.merge(segments[0..<segments.count], into: &merged)
            let (newHeader, newMerged) = Coalescer.merge(expected[0..<expected.count])
            #expect(merged == newMerged)
            #expect(mergedHeader.bytes == newHeader.bytes)
            while let segment = segments.popLast() { buffers.recycle(segment) }
        }
        #expect(buffers.allocated == expected.count)
    }

    /// The header as written to the kernel: little-endian fields in their places.
    @Test func aHeadersBytesAreTheKernelsLayout() {
        var header = VirtioNetHeader()
        header.flags = 1
        header.gsoType = 4
        header.headerLength = 0x0102
        header.gsoSize = 1448
        header.checksumStart = 20
        header.checksumOffset = 16
        #expect(header.bytes == [1, 4, 0x02, 0x01, 0xa8, 0x05, 20, 0, 16, 0])
        #expect(header.bytes.withUnsafeBytes { VirtioNetHeader($0) }.bytes == header.bytes)
    }
}
