@testable import LinkEmulation
import Testing

/// Cutting what a TUN interface with offloads hands over into wire packets, checked against a
/// plain big-endian checksum written out here, not the one under test.
@Suite struct SegmenterTests {
    /// RFC 1071 the slow way: 16-bit big-endian words.
    static func referenceSum(_ bytes: [UInt8]) -> UInt32 {
        var sum: UInt32 = 0
        var index = 0
        while index + 1 < bytes.count {
            sum += UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
            index += 2
        }
        if index < bytes.count { sum += UInt32(bytes[index]) << 8 }
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return sum
    }

    /// Whether the transport checksum of a complete packet verifies (the sum with the
    /// pseudo-header is all ones).
    static func transportChecksumVerifies(_ packet: [UInt8]) -> Bool {
        let version = packet[0] >> 4
        let start = version == 4 ? Int(packet[0] & 0x0f) * 4 : 40
        let proto = version == 4 ? packet[9] : packet[6]
        let length = packet.count - start
        var pseudo = version == 4 ? Array(packet[12..<20]) : Array(packet[8..<40])
        pseudo += [0, proto, UInt8(length >> 8), UInt8(length & 0xff)]
        return referenceSum(pseudo + Array(packet[start...]) + (length % 2 == 1 ? [0] : [])) == 0xffff
            || referenceSum(pseudo + Array(packet[start...])) == 0xffff
    }

    static func be16(_ packet: [UInt8], _ offset: Int) -> Int { Int(packet[offset]) << 8 | Int(packet[offset + 1]) }
    static func be32(_ packet: [UInt8], _ offset: Int) -> UInt32 { (0..<4).reduce(0) { $0 << 8 | UInt32(packet[offset + $1]) } }

    static func payload(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) } }

    /// A TCP packet as the kernel hands it over: the pseudo-header's sum in the checksum field.
    static func tcp(version: UInt8, payload: [UInt8], flags: UInt8, options: Int = 12) -> [UInt8] {
        let tcpHeader = 20 + options
        var tcp = [UInt8](repeating: 0, count: tcpHeader)
        tcp[0] = 0x30; tcp[1] = 0x39; tcp[2] = 0x1f; tcp[3] = 0x90   // ports 12345 → 8080
        tcp[4] = 0xff; tcp[5] = 0xff; tcp[6] = 0xf0; tcp[7] = 0x00   // a sequence number that wraps
        tcp[12] = UInt8(tcpHeader / 4) << 4
        tcp[13] = flags
        tcp[14] = 0x01; tcp[15] = 0x00
        for index in 20..<tcpHeader { tcp[index] = 1 }              // NOPs
        return ip(version: version, proto: 6, transport: tcp + payload)
    }

    static func udp(version: UInt8, payload: [UInt8]) -> [UInt8] {
        var udp = [UInt8](repeating: 0, count: 8)
        udp[0] = 0x13; udp[1] = 0x89; udp[2] = 0x13; udp[3] = 0x8a
        let length = 8 + payload.count
        udp[4] = UInt8(truncatingIfNeeded: length >> 8); udp[5] = UInt8(truncatingIfNeeded: length)
        return ip(version: version, proto: 17, transport: udp + payload)
    }

    static func ip(version: UInt8, proto: UInt8, transport: [UInt8]) -> [UInt8] {
        var header: [UInt8]
        if version == 4 {
            header = [0x45, 0, 0, 0, 0xff, 0xfe, 0x40, 0, 64, proto, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]
            let total = 20 + transport.count
            header[2] = UInt8(truncatingIfNeeded: total >> 8); header[3] = UInt8(truncatingIfNeeded: total)
        } else {
            header = [0x60, 0, 0, 0, UInt8(truncatingIfNeeded: transport.count >> 8), UInt8(truncatingIfNeeded: transport.count), proto, 64]
            header += [0xfd, 0] + [UInt8](repeating: 0, count: 13) + [1]
            header += [0xfd, 0] + [UInt8](repeating: 0, count: 13) + [2]
        }
        return header + transport
    }

    static func header(_ type: VirtioNetHeader.Segmentation, size: Int, start: Int, offset: Int) -> VirtioNetHeader {
        var header = VirtioNetHeader()
        header.flags = VirtioNetHeader.needsChecksum
        header.gsoType = type.rawValue
        header.gsoSize = UInt16(size)
        header.checksumStart = UInt16(start)
        header.checksumOffset = UInt16(offset)
        return header
    }

    static func segment(_ header: VirtioNetHeader, _ packet: [UInt8]) throws -> [[UInt8]] {
        var output: [[UInt8]] = []
        try packet.withUnsafeBytes { try Segmenter.segment(header, $0, into: &output) }
        return output
    }

    @Test(arguments: [UInt8(4), 6])
    func aTCPSegmentIsCutAsTheKernelCutsIt(version: UInt8) throws {
        let data = Self.payload(4000)
        // CWR, FIN, PSH and ACK on the whole: CWR stays on the first, FIN and PSH on the last.
        let packet = Self.tcp(version: version, payload: data, flags: 0x80 | 0x10 | 0x08 | 0x01)
        let start = version == 4 ? 20 : 40
        let header = Self.header(version == 4 ? .tcpv4 : .tcpv6, size: 1448, start: start, offset: 16)
        let segments = try Self.segment(header, packet)
        #expect(packet.withUnsafeBytes { Segmenter.wirePackets(header, $0) } == 3)
        #expect(segments.map(\.count) == [start + 32 + 1448, start + 32 + 1448, start + 32 + 1104])
        var joined: [UInt8] = []
        for (index, segment) in segments.enumerated() {
            if version == 4 {
                #expect(Self.be16(segment, 2) == segment.count)
                #expect(Self.be16(segment, 4) == (0xfffe + index) & 0xffff, "the identification counts up")
                #expect(Self.referenceSum(Array(segment[..<20])) == 0xffff, "IPv4 header checksum")
            } else {
                #expect(Self.be16(segment, 4) == segment.count - 40)
            }
            #expect(Self.be32(segment, start + 4) == 0xfffff000 &+ UInt32(index * 1448), "sequence numbers wrap as TCP's do")
            let flags = segment[start + 13]
            #expect(flags & 0x80 == (index == 0 ? 0x80 : 0))
            #expect(flags & 0x09 == (index == 2 ? 0x09 : 0))
            #expect(flags & 0x10 == 0x10)
            #expect(Array(segment[(start + 20)..<(start + 32)]) == [UInt8](repeating: 1, count: 12), "options copied")
            #expect(Self.transportChecksumVerifies(segment), "TCP checksum of segment \(index)")
            joined += segment[(start + 32)...]
        }
        #expect(joined == data)
    }

    @Test(arguments: [UInt8(4), 6])
    func aUDPSegmentIsCutIntoDatagramsOfItsSize(version: UInt8) throws {
        let data = Self.payload(3001)   // odd: the last datagram's checksum covers a padded byte
        let packet = Self.udp(version: version, payload: data)
        let start = version == 4 ? 20 : 40
        let segments = try Self.segment(Self.header(.udpL4, size: 1000, start: start, offset: 6), packet)
        #expect(segments.map { $0.count - start - 8 } == [1000, 1000, 1000, 1])
        for segment in segments {
            #expect(Self.be16(segment, start + 4) == segment.count - start)
            #expect(Self.transportChecksumVerifies(segment))
            #expect(Self.be16(segment, start + 6) != 0, "UDP's zero means no checksum")
        }
        #expect(segments.flatMap { $0[(start + 8)...] } == data)
    }

    /// A packet that needs only its checksum finished: the field holds the pseudo-header's sum,
    /// as the kernel leaves it (`CHECKSUM_PARTIAL`).
    @Test(arguments: [UInt8(4), 6])
    func aPartialChecksumIsFinished(version: UInt8) throws {
        var packet = Self.tcp(version: version, payload: Self.payload(333), flags: 0x18)
        let start = version == 4 ? 20 : 40
        let length = packet.count - start
        var pseudo = version == 4 ? Array(packet[12..<20]) : Array(packet[8..<40])
        pseudo += [0, 6, UInt8(length >> 8), UInt8(length & 0xff)]
        let partial = Self.referenceSum(pseudo)
        packet[start + 16] = UInt8(partial >> 8)
        packet[start + 17] = UInt8(partial & 0xff)
        var header = Self.header(.none, size: 0, start: start, offset: 16)
        header.gsoType = 0
        let segments = try Self.segment(header, packet)
        #expect(segments.count == 1 && segments[0].count == packet.count)
        #expect(Self.transportChecksumVerifies(segments[0]))
        // Already complete (no flag): passed on untouched.
        header.flags = 0
        #expect(try Self.segment(header, packet) == [packet])
    }

    /// What would be cut wrong is refused: every field the cut relies on, broken in turn.
    @Test func aPacketThatCannotBeCutIsRefused() {
        let good = Self.tcp(version: 4, payload: Self.payload(3000), flags: 0x10)
        let header = Self.header(.tcpv4, size: 1448, start: 20, offset: 16)
        var cases: [(String, VirtioNetHeader, [UInt8])] = []
        var h = header; h.gsoSize = 0; cases.append(("segment size 0", h, good))
        h = header; h.gsoType = VirtioNetHeader.Segmentation.tcpv6.rawValue; cases.append(("IPv4 as TCPv6", h, good))
        h = header; h.gsoType = VirtioNetHeader.Segmentation.udp.rawValue; cases.append(("UFO, never asked for", h, good))
        h = header; h.gsoType = 9; cases.append(("unknown type", h, good))
        h = header; h.gsoSize = 1; cases.append(("more than 1024 segments", h, good))
        var p = good; p[9] = 17; cases.append(("UDP under a TCP header", header, p))
        p = good; p[0] = 0x4f; cases.append(("IPv4 header longer than the packet allows", header, Array(p.prefix(50))))
        p = good; p[32] = 0x10; cases.append(("TCP data offset 4", header, p))
        cases.append(("truncated in the TCP header", header, Array(good.prefix(30))))
        cases.append(("no IP header", header, Array(good.prefix(10))))
        p = Self.tcp(version: 6, payload: Self.payload(100), flags: 0x10)
        h = Self.header(.tcpv6, size: 50, start: 30, offset: 16); cases.append(("IPv6 transport inside the IPv6 header", h, p))
        h = Self.header(.none, size: 0, start: 60000, offset: 16); h.gsoType = 0; cases.append(("checksum outside the packet", h, good))
        for (name, header, packet) in cases {
            #expect(throws: Segmenter.Malformed.self, "\(name)") { try Self.segment(header, packet) }
        }
    }

    /// Seeded mutations of good packets: never a trap, never more out than the limits allow.
    @Test func mutatedPacketsAreCutOrRefusedWithinBounds() {
        var random = LinkRandom(seed: 7)
        let bases: [(VirtioNetHeader, [UInt8])] = [
            (Self.header(.tcpv4, size: 1448, start: 20, offset: 16), Self.tcp(version: 4, payload: Self.payload(9000), flags: 0x19)),
            (Self.header(.tcpv6, size: 1428, start: 40, offset: 16), Self.tcp(version: 6, payload: Self.payload(9000), flags: 0x19)),
            (Self.header(.udpL4, size: 1200, start: 20, offset: 6), Self.udp(version: 4, payload: Self.payload(5000))),
        ]
        var cut = 0
        for round in 0..<20_000 {
            var (header, packet) = bases[round % bases.count]
            for _ in 0..<(1 + Int(random.next() % 4)) {
                switch random.next() % 6 {
                case 0: packet[Int(random.next() % UInt64(min(packet.count, 80)))] = UInt8(truncatingIfNeeded: random.next())
                case 1: packet = Array(packet.prefix(Int(random.next() % UInt64(packet.count + 1))))
                case 2: header.gsoSize = UInt16(truncatingIfNeeded: random.next())
                case 3: header.checksumStart = UInt16(truncatingIfNeeded: random.next() % 128)
                case 4: header.gsoType = UInt8(truncatingIfNeeded: random.next() % 8)
                default: header.flags = UInt8(truncatingIfNeeded: random.next() % 4)
                }
            }
            guard let segments = try? Self.segment(header, packet) else { continue }
            cut += 1
            #expect(segments.count <= Segmenter.maximumSegments)
            #expect(segments.allSatisfy { $0.count <= packet.count })
        }
        #expect(cut > 1000, "most mutations leave something to cut")
    }

    @Test func theChecksumAgreesWithTheReferenceAtEveryLengthAndAlignment() {
        let bytes = Self.payload(301)
        for start in 0..<8 {
            for end in stride(from: start, through: bytes.count, by: 7) {
                let slice = Array(bytes[start..<end])
                let sum = slice.withUnsafeBytes { Checksum.sum($0) }
                let stored = Checksum.finish(sum, udp: false)
                // Stored in memory order, read back big-endian: the complement of the reference.
                let bigEndian = withUnsafeBytes(of: stored) { UInt16($0[0]) << 8 | UInt16($0[1]) }
                let reference = UInt16(Self.referenceSum(slice))
                #expect(bigEndian == ~reference || (reference == 0xffff && bigEndian == 0xffff), "\(start)..<\(end)")
            }
        }
    }

    /// Cut, then merged back: the merged packet, cut again, gives the same wire packets.
    @Test(arguments: [UInt8(4), 6])
    func mergedSegmentsCutBackIntoTheSameWirePackets(version: UInt8) throws {
        let start = version == 4 ? 20 : 40
        let packet = Self.tcp(version: version, payload: Self.payload(10_000), flags: 0x18)
        let segments = try Self.segment(Self.header(version == 4 ? .tcpv4 : .tcpv6, size: 1448, start: start, offset: 16), packet)
        #expect(segments.count == 7)
        #expect(Coalescer.run(segments, from: 0) == 7)
        let (header, merged) = Coalescer.merge(segments[0..<7])
        #expect(header.gsoSize == 1448 && header.checksumStart == start && header.flags == VirtioNetHeader.needsChecksum)
        #expect(try Self.segment(header, merged) == segments)
    }

    /// What the kernel would not merge, or a receiver must see alone, ends a run.
    @Test func aRunEndsWhereTheKernelWouldNotMerge() throws {
        let packet = Self.tcp(version: 4, payload: Self.payload(6000), flags: 0x18)
        let segments = try Self.segment(Self.header(.tcpv4, size: 1448, start: 20, offset: 16), packet)
        #expect(segments.count == 5 && Coalescer.run(segments, from: 0) == 5)
        var corrupted = segments
        corrupted[2][100] ^= 0x04                      // a bit the link flipped
        #expect(Coalescer.run(corrupted, from: 0) == 2, "a corrupted segment is not merged")
        #expect(Coalescer.run(corrupted, from: 2) == 3, "nor merged with what follows")
        var gap = segments
        gap.remove(at: 2)                               // a lost segment
        #expect(Coalescer.run(gap, from: 0) == 2)
        var other = segments
        other[3][18] ^= 0x01                            // another destination
        #expect(Coalescer.run(other, from: 0) == 3)
        var pushed = try Self.segment(Self.header(.tcpv4, size: 1448, start: 20, offset: 16), packet)
        pushed[1][33] |= 0x08                           // PSH before the end
        #expect(Coalescer.run(pushed, from: 0) <= 2)
        // A SYN, or a lone packet, goes alone.
        #expect(Coalescer.run([Self.tcp(version: 4, payload: [], flags: 0x02)] + segments, from: 0) == 1)
        #expect(Coalescer.run([segments[0]], from: 0) == 1)
    }

    /// UDP datagrams of one flow, cut from a USO packet: merged back only where the interface
    /// takes USO, into one packet the kernel cuts into the same datagrams.
    @Test(arguments: [UInt8(4), 6])
    func datagramsOfOneFlowMergeAndCutBackIntoTheSameDatagrams(version: UInt8) throws {
        let start = version == 4 ? 20 : 40
        let packet = Self.udp(version: version, payload: Self.payload(10 * 1200 + 500))
        let datagrams = try Self.segment(Self.header(.udpL4, size: 1200, start: start, offset: 6), packet)
        #expect(datagrams.count == 11)
        #expect(Coalescer.run(datagrams, from: 0) == 1, "not without USO")
        #expect(Coalescer.run(datagrams, from: 0, udp: true) == 11)
        let (header, merged) = Coalescer.merge(datagrams[0..<11])
        #expect(header.segmentation == .udpL4 && header.gsoSize == 1200 && header.checksumStart == start && header.checksumOffset == 6)
        #expect(header.flags == VirtioNetHeader.needsChecksum)
        #expect(try Self.segment(header, merged) == datagrams, "the same datagrams, lengths, identifications and checksums")
        // From the third on.
        #expect(Coalescer.run(datagrams, from: 2, udp: true) == 11)
        let (rest, restMerged) = Coalescer.merge(datagrams[2..<11])
        #expect(try Self.segment(rest, restMerged) == Array(datagrams[2..<11]))
    }

    /// What the kernel would not cut back into the same datagrams ends a run.
    @Test func aRunOfDatagramsEndsWhereTheyWouldNotComeBackTheSame() throws {
        let cut = { (payload: Int, size: Int) throws -> [[UInt8]] in
            try Self.segment(Self.header(.udpL4, size: size, start: 20, offset: 6), Self.udp(version: 4, payload: Self.payload(payload)))
        }
        let datagrams = try cut(6 * 1000, 1000)
        #expect(Coalescer.run(datagrams, from: 0, udp: true) == 6)
        var gap = datagrams
        gap.remove(at: 3)                               // a lost datagram: the identification skips
        #expect(Coalescer.run(gap, from: 0, udp: true) == 3)
        var corrupted = datagrams
        corrupted[2][100] ^= 0x04
        #expect(Coalescer.run(corrupted, from: 0, udp: true) == 2, "a corrupted datagram is not merged")
        var port = datagrams
        port[4][22] ^= 0x01                             // another destination port
        #expect(Coalescer.run(port, from: 0, udp: true) == 4)
        var unchecked = datagrams
        unchecked[1][26] = 0; unchecked[1][27] = 0       // no checksum: cutting would add one
        #expect(Coalescer.run(unchecked, from: 0, udp: true) == 1)
        // A shorter datagram ends a run after it; a longer one is not in it.
        let short = try cut(1000 + 400, 1000)
        let long = try cut(2 * 1000, 1000)
        #expect(Coalescer.run(short + long, from: 0, udp: true) == 2)
        #expect(Coalescer.run([long[0]] + short, from: 0, udp: true) == 1, "identifications restart")
        // At most UDP_MAX_SEGMENTS datagrams in one.
        let small = try cut(200 * 36, 36)
        #expect(small.count == 200 && Coalescer.run(small, from: 0, udp: true) == 128)
        let (header, merged) = Coalescer.merge(small[0..<128])
        #expect(try Self.segment(header, merged) == Array(small[0..<128]))
    }
}
