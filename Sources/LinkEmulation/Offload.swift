/// The header a TUN interface opened with `IFF_VNET_HDR` puts before every packet it reads and
/// expects before every packet written to it: `struct virtio_net_hdr` (10 bytes, little-endian
/// on this platform). With offloads on, the kernel hands over TCP (and UDP, with USO) packets of
/// up to 64 KB with `gsoSize` saying how they are cut into wire packets, and checksums left
/// partial (`needsChecksum`: only the pseudo-header's sum is in the field).
package struct VirtioNetHeader: Sendable, Hashable {
    package static let size = 10
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum from `checksumStart` to the end is to be
    /// completed, at `checksumStart + checksumOffset`.
    package static let needsChecksum: UInt8 = 1
    /// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was verified.
    package static let dataValid: UInt8 = 2

    /// `VIRTIO_NET_HDR_GSO_*`, without the ECN bit (0x80).
    package enum Segmentation: UInt8, Sendable {
        case none = 0, tcpv4 = 1, udp = 3, tcpv6 = 4, udpL4 = 5
    }

    package var flags: UInt8 = 0
    /// The segmentation type with the ECN bit.
    package var gsoType: UInt8 = 0
    /// Not trusted: TUN puts the packet's linear length there, not its headers' length.
    package var headerLength: UInt16 = 0
    package var gsoSize: UInt16 = 0
    package var checksumStart: UInt16 = 0
    package var checksumOffset: UInt16 = 0

    package init() {}

    package init(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= Self.size)
        func u16(_ offset: Int) -> UInt16 { UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8 }
        flags = bytes[0]
        gsoType = bytes[1]
        headerLength = u16(2)
        gsoSize = u16(4)
        checksumStart = u16(6)
        checksumOffset = u16(8)
    }

    package var segmentation: Segmentation? { Segmentation(rawValue: gsoType & 0x7f) }
    /// Whether the packet must be changed before it is a wire packet (cut or its checksum
    /// completed).
    package var isOffloaded: Bool { gsoType != 0 || flags & Self.needsChecksum != 0 }

    package var bytes: [UInt8] { withBytes { [UInt8]($0) } }

    /// Calls `body` with the header as the kernel reads it (little-endian fields), without
    /// allocating.
    package func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var wire: (UInt8, UInt8, UInt16, UInt16, UInt16, UInt16) = (flags, gsoType, headerLength.littleEndian, gsoSize.littleEndian,
                                                                   checksumStart.littleEndian, checksumOffset.littleEndian)
        return withUnsafeBytes(of: &wire) { body(UnsafeRawBufferPointer(rebasing: $0[..<Self.size])) }
    }
}

/// Turns what a TUN interface with offloads hands over into the wire packets it stands for, as
/// the kernel's own software segmentation would cut them (`tcp_gso_segment`,
/// `__udp_gso_segment`): headers copied, lengths, IPv4 identification, TCP sequence numbers and
/// flags per segment, every checksum complete. Each wire packet then goes through a link's
/// pipeline alone, so that loss, corruption, duplication, reordering, a full queue, the rate and
/// the decision log see exactly the packets they would see without offloads.
package enum Segmenter {
    /// Why a packet could not be cut: it is dropped (and counted) rather than passed on wrong.
    package struct Malformed: Error, Sendable, Hashable, CustomStringConvertible {
        package var description: String
    }

    /// The most wire packets one packet may stand for: 64 KB of TCP at its smallest segment
    /// size (88 bytes) is about 745; UDP allows 128. More is not the kernel's doing.
    package static let maximumSegments = 1024

    private struct Layout {
        var version: UInt8
        var transport: Int
        var transportHeader: Int
        var proto: UInt8
        var headers: Int { transport + transportHeader }
    }

    private static func layout(_ header: VirtioNetHeader, _ packet: UnsafeRawBufferPointer) throws(Malformed) -> Layout {
        guard let segmentation = header.segmentation, segmentation != .none, segmentation != .udp else {
            throw Malformed(description: "segmentation type \(header.gsoType) not asked for")
        }
        guard packet.count >= 20 else { throw Malformed(description: "\(packet.count) bytes: no IP header") }
        let version = packet[0] >> 4
        let proto: UInt8 = segmentation == .udpL4 ? 17 : 6
        var transport: Int
        switch (version, segmentation) {
        case (4, .tcpv4), (4, .udpL4):
            transport = Int(packet[0] & 0x0f) * 4
            guard transport >= 20, packet[9] == proto else { throw Malformed(description: "IPv4 header does not lead to the segmented protocol") }
        case (6, .tcpv6), (6, .udpL4):
            guard packet.count >= 40 else { throw Malformed(description: "short IPv6 header") }
            // Extension headers: the kernel's checksum start is where the transport begins.
            transport = header.flags & VirtioNetHeader.needsChecksum != 0 ? Int(header.checksumStart) : 40
            guard transport >= 40, transport == 40 ? packet[6] == proto : true else {
                throw Malformed(description: "IPv6 header does not lead to the segmented protocol")
            }
        default:
            throw Malformed(description: "IP version \(version) with segmentation type \(header.gsoType)")
        }
        let transportHeader: Int
        if proto == 6 {
            guard transport + 20 <= packet.count else { throw Malformed(description: "short TCP header") }
            transportHeader = Int(packet[transport + 12] >> 4) * 4
            guard transportHeader >= 20 else { throw Malformed(description: "TCP data offset \(transportHeader)") }
        } else {
            transportHeader = 8
        }
        guard transport + transportHeader <= packet.count else { throw Malformed(description: "headers longer than the packet") }
        return Layout(version: version, transport: transport, transportHeader: transportHeader, proto: proto)
    }

    /// How many wire packets a packet read with `header` stands for (1 unless segmented).
    package static func wirePackets(_ header: VirtioNetHeader, _ packet: UnsafeRawBufferPointer) -> Int {
        guard header.gsoType != 0, header.gsoSize > 0, let layout = try? layout(header, packet) else { return 1 }
        let payload = packet.count - layout.headers
        return max(1, (payload + Int(header.gsoSize) - 1) / Int(header.gsoSize))
    }

    /// Appends the wire packets `packet` (read with `header`) stands for to `output`.
    package static func segment(_ header: VirtioNetHeader, _ packet: UnsafeRawBufferPointer, into output: inout [[UInt8]]) throws(Malformed) {
        var buffers = PacketBuffers()
        try segment(header, packet, into: &output, buffers: &buffers)
    }

    /// Appends the wire packets `packet` (read with `header`) stands for to `output`, each in
    /// a buffer taken from `buffers`.
    static func segment(_ header: VirtioNetHeader, _ packet: UnsafeRawBufferPointer, into output: inout [[UInt8]],
                        buffers: inout PacketBuffers) throws(Malformed) {
        if header.gsoType == 0 {
            var copy = buffers.take(copying: packet)
            if header.flags & VirtioNetHeader.needsChecksum != 0 {
                let start = Int(header.checksumStart), field = start + Int(header.checksumOffset)
                guard start < copy.count, field + 2 <= copy.count else {
                    throw Malformed(description: "checksum at \(start)+\(header.checksumOffset) outside \(copy.count) bytes")
                }
                copy.withUnsafeMutableBytes { bytes in
                    // The field holds the pseudo-header's sum: the rest is added to it.
                    let sum = Checksum.sum(UnsafeRawBufferPointer(rebasing: bytes[start...]))
                    bytes.storeBytes(of: Checksum.finish(sum, udp: isUDP(bytes)), toByteOffset: field, as: UInt16.self)
                }
            }
            output.append(copy)
            return
        }
        let layout = try layout(header, packet)
        let size = Int(header.gsoSize)
        guard size > 0 else { throw Malformed(description: "segmented packet with a segment size of 0") }
        let payload = packet.count - layout.headers
        let count = max(1, (payload + size - 1) / size)
        guard count <= maximumSegments else { throw Malformed(description: "\(count) segments of \(size) bytes") }
        let headers = UnsafeRawBufferPointer(rebasing: packet[..<layout.headers])
        let identification = layout.version == 4 ? UInt16(packet[4]) << 8 | UInt16(packet[5]) : 0
        let sequence = layout.proto == 6 ? (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[layout.transport + 4 + $1]) } : 0
        let tcpFlags = layout.proto == 6 ? packet[layout.transport + 13] : 0
        for index in 0..<count {
            let start = layout.headers + index * size
            let length = min(size, payload - index * size)
            var segment = buffers.take(capacity: layout.headers + max(0, length))
            segment.append(contentsOf: headers)
            if length > 0 { segment.append(contentsOf: UnsafeRawBufferPointer(rebasing: packet[start..<(start + length)])) }
            segment.withUnsafeMutableBytes { bytes in
                let total = bytes.count
                let transportLength = total - layout.transport
                if layout.version == 4 {
                    bytes.storeBigEndian(2, UInt16(total))
                    bytes.storeBigEndian(4, identification &+ UInt16(truncatingIfNeeded: index))
                    bytes.storeBigEndian(10, UInt16(0))
                    let ipHeader = UnsafeRawBufferPointer(rebasing: bytes[..<layout.transport])
                    bytes.storeBytes(of: Checksum.finish(Checksum.sum(ipHeader), udp: false), toByteOffset: 10, as: UInt16.self)
                } else {
                    bytes.storeBigEndian(4, UInt16(total - 40))
                }
                let field: Int
                if layout.proto == 6 {
                    bytes.storeBigEndian(layout.transport + 4, sequence &+ UInt32(truncatingIfNeeded: index * size))
                    var flags = tcpFlags
                    if index > 0 { flags &= ~0x80 }              // CWR on the first segment only
                    if index < count - 1 { flags &= ~(0x01 | 0x08) } // FIN and PSH on the last only
                    bytes[layout.transport + 13] = flags
                    field = layout.transport + 16
                } else {
                    bytes.storeBigEndian(layout.transport + 4, UInt16(transportLength))
                    field = layout.transport + 6
                }
                bytes.storeBigEndian(field, UInt16(0))
                var sum = Checksum.pseudoHeader(UnsafeRawBufferPointer(bytes), version: layout.version, proto: layout.proto, length: transportLength)
                sum &+= Checksum.sum(UnsafeRawBufferPointer(rebasing: bytes[layout.transport...]))
                bytes.storeBytes(of: Checksum.finish(sum, udp: layout.proto == 17), toByteOffset: field, as: UInt16.self)
            }
            output.append(segment)
        }
    }

    private static func isUDP(_ bytes: UnsafeMutableRawBufferPointer) -> Bool {
        switch bytes[0] >> 4 {
        case 4: return bytes.count > 9 && bytes[9] == 17
        case 6: return bytes.count > 6 && bytes[6] == 17
        default: return false
        }
    }


}

/// The Internet checksum (RFC 1071), summed in the machine's byte order (the sum of byte-swapped
/// words is the byte-swapped sum), so that the result is stored as it comes.
package enum Checksum {
    /// The unfolded one's-complement sum of `bytes` as 16-bit words in memory order.
    package static func sum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var sum: UInt64 = 0
        var offset = 0
        let count = bytes.count
        while offset + 8 <= count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            sum &+= word & 0xffff_ffff
            sum &+= word >> 32
            offset += 8
        }
        while offset + 2 <= count {
            sum &+= UInt64(bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            offset += 2
        }
        if offset < count {
            // The odd byte is the high byte of a word padded with zero, in memory order.
            var last: UInt16 = 0
            withUnsafeMutableBytes(of: &last) { $0[0] = bytes[offset] }
            sum &+= UInt64(last)
        }
        return sum
    }

    /// The pseudo-header's sum (RFC 768, RFC 8200 §8.1) of an IPv4 or IPv6 packet whose
    /// transport (`proto`) is `length` bytes long.
    package static func pseudoHeader(_ packet: UnsafeRawBufferPointer, version: UInt8, proto: UInt8, length: Int) -> UInt64 {
        let addresses = version == 4 ? UnsafeRawBufferPointer(rebasing: packet[12..<20]) : UnsafeRawBufferPointer(rebasing: packet[8..<40])
        var sum = Checksum.sum(addresses)
        sum &+= UInt64(UInt16(proto).bigEndian)
        sum &+= UInt64(UInt16(truncatingIfNeeded: length).bigEndian) &+ UInt64(UInt16(truncatingIfNeeded: length >> 16).bigEndian)
        return sum
    }

    /// Folds a sum and complements it: the value to store in a checksum field. UDP's zero (no
    /// checksum) is sent as all ones, as the kernel does.
    package static func finish(_ sum: UInt64, udp: Bool) -> UInt16 {
        var folded = sum
        while folded >> 16 != 0 { folded = (folded & 0xffff) + (folded >> 16) }
        let result = ~UInt16(folded)
        return result == 0 && udp ? 0xffff : result
    }
}

/// The other way: consecutive wire packets of one TCP flow that leave a direction together are
/// written as one segmented packet (userspace GRO, as `tcp_gro_receive` merges them), so that a
/// link that decides per packet still costs one write, and the receiving stack one packet, per
/// run. Only what the kernel would merge is merged (same addresses, ports, acknowledgement,
/// window and options, contiguous sequence numbers, full-sized segments but the last, no flag
/// but ACK and a final PSH), and only segments whose checksum verifies: a segment the link
/// corrupted goes alone, so that the receiver's checksum still catches it.
///
/// UDP too, where the interface takes USO (`udp: true`): datagrams of one flow (every IP and
/// UDP header byte the same but lengths, checksums and, for IPv4, an identification one more
/// than the last's), all of the first one's size but the last, which may be shorter, each with
/// a checksum that verifies (not 0, "none"), go as one `VIRTIO_NET_HDR_GSO_UDP_L4` packet that
/// the receiving stack cuts back into the same datagrams (`__udp_gso_segment`): the receiver
/// sees each datagram as it was sent, boundaries included.
package enum Coalescer {
    private struct Segment {
        var version: UInt8
        var proto: UInt8
        var transport: Int
        var headers: Int
        var payload: Int
        var sequence: UInt32
        var flags: UInt8
    }

    /// The most bytes one merged packet holds (IPv4's total length).
    static let maximumLength = 65_535
    /// The most datagrams one merged UDP packet stands for (the kernel's `UDP_MAX_SEGMENTS`).
    static let maximumDatagrams = 128

    private static func parse(_ packet: [UInt8], udp: Bool) -> Segment? {
        guard packet.count >= 28 else { return nil }
        let version = packet[0] >> 4
        let transport: Int
        let proto: UInt8
        switch version {
        case 4:
            // No IP options, not a fragment.
            guard packet[0] == 0x45, packet[6] & 0x3f == 0, packet[7] == 0,
                  Int(packet[2]) << 8 | Int(packet[3]) == packet.count else { return nil }
            transport = 20
            proto = packet[9]
        case 6:
            guard packet.count >= 48, Int(packet[4]) << 8 | Int(packet[5]) == packet.count - 40 else { return nil }
            transport = 40
            proto = packet[6]
        default:
            return nil
        }
        if proto == 17, udp {
            // The UDP length is the packet's; a checksum of 0 is "none", which the kernel's
            // cutting would fill in.
            guard Int(packet[transport + 4]) << 8 | Int(packet[transport + 5]) == packet.count - transport,
                  packet[transport + 6] | packet[transport + 7] != 0 else { return nil }
            // The IPv4 identification stands where TCP's sequence number does.
            let sequence = version == 4 ? UInt32(packet[4]) << 8 | UInt32(packet[5]) : 0
            return Segment(version: version, proto: 17, transport: transport, headers: transport + 8,
                           payload: packet.count - transport - 8, sequence: sequence, flags: 0)
        }
        guard proto == 6, packet.count >= transport + 20 else { return nil }
        let headerLength = Int(packet[transport + 12] >> 4) * 4
        guard headerLength >= 20, transport + headerLength <= packet.count else { return nil }
        let flags = packet[transport + 13]
        // ACK, with PSH at most: no SYN, FIN, RST, URG, ECE or CWR.
        guard flags & 0x10 != 0, flags & ~UInt8(0x18) == 0 else { return nil }
        let sequence = (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[transport + 4 + $1]) }
        return Segment(version: version, proto: 6, transport: transport, headers: transport + headerLength,
                       payload: packet.count - transport - headerLength, sequence: sequence, flags: flags)
    }

    private static func verifies(_ packet: [UInt8], _ segment: Segment) -> Bool {
        packet.withUnsafeBytes { bytes in
            let sum = Checksum.pseudoHeader(bytes, version: segment.version, proto: segment.proto, length: packet.count - segment.transport)
                &+ Checksum.sum(UnsafeRawBufferPointer(rebasing: bytes[segment.transport...]))
            return Checksum.finish(sum, udp: false) == 0
        }
    }

    /// Whether `next` continues `first`'s flow where `previous` ended: every header byte the
    /// same but lengths, identification, checksums, sequence number and PSH.
    private static func continues(_ first: [UInt8], _ head: Segment, _ next: [UInt8], _ segment: Segment) -> Bool {
        guard segment.version == head.version, segment.proto == head.proto, segment.headers == head.headers else { return false }
        if head.version == 4 {
            // Version, TOS; flags and fragment; TTL, protocol; addresses.
            guard first[0] == next[0], first[1] == next[1], first[6] == next[6], first[8] == next[8], first[9] == next[9],
                  first[12..<20].elementsEqual(next[12..<20]) else { return false }
        } else {
            guard first[0..<4].elementsEqual(next[0..<4]), first[6..<40].elementsEqual(next[6..<40]) else { return false }
        }
        let t = head.transport
        // UDP: the ports (the length and checksum are the datagram's own).
        guard head.proto == 6 else { return first[t..<(t + 4)].elementsEqual(next[t..<(t + 4)]) }
        // Ports, acknowledgement, data offset, window, urgent pointer and options.
        return first[t..<(t + 4)].elementsEqual(next[t..<(t + 4)]) && first[(t + 8)..<(t + 13)].elementsEqual(next[(t + 8)..<(t + 13)])
            && first[(t + 14)..<(t + 16)].elementsEqual(next[(t + 14)..<(t + 16)])
            && first[(t + 18)..<head.headers].elementsEqual(next[(t + 18)..<head.headers])
    }

    /// Where the run of packets that can be merged with `packets[start]` ends (`start + 1`
    /// when it goes alone). UDP datagrams are merged only with `udp` (an interface with USO).
    package static func run(_ packets: [[UInt8]], from start: Int, udp: Bool = false) -> Int {
        guard start + 1 < packets.count, let head = parse(packets[start], udp: udp), head.payload > 0,
              head.flags & 0x08 == 0, verifies(packets[start], head) else { return start + 1 }
        var end = start + 1
        var last = head
        var length = packets[start].count
        while end < packets.count, head.proto == 6 || end - start < maximumDatagrams,
              let segment = parse(packets[end], udp: udp), segment.payload > 0, segment.payload <= head.payload,
              last.payload == head.payload, last.flags & 0x08 == 0,
              segment.sequence == (head.proto == 6 ? last.sequence &+ UInt32(last.payload) : head.version == 4 ? (last.sequence &+ 1) & 0xffff : 0),
              length + segment.payload <= maximumLength,
              continues(packets[start], head, packets[end], segment), verifies(packets[end], segment) {
            length += segment.payload
            last = segment
            end += 1
        }
        return end
    }

    /// `packets[range]` merged into one packet and the header that hands it to the kernel as
    /// segments of the first one's size, its checksum left partial (the pseudo-header's sum).
    package static func merge(_ packets: ArraySlice<[UInt8]>) -> (VirtioNetHeader, [UInt8]) {
        var merged: [UInt8] = []
        let header = merge(packets, into: &merged)
        return (header, merged)
    }

    /// `packets[range]` merged into `merged` (what it held is replaced; its storage is reused),
    /// and the header that hands it to the kernel, as ``merge(_:)``.
    package static func merge(_ packets: ArraySlice<[UInt8]>, into merged: inout [UInt8]) -> VirtioNetHeader {
        let first = packets[packets.startIndex]
        let head = parse(first, udp: true)!
        merged.removeAll(keepingCapacity: true)
        merged.append(contentsOf: first)
        var lastFlags = head.flags
        for packet in packets.dropFirst() {
            merged.append(contentsOf: packet[head.headers...])
            if head.proto == 6 { lastFlags = packet[head.transport + 13] }
        }
        let total = merged.count
        let transportLength = total - head.transport
        let field = head.transport + (head.proto == 6 ? 16 : 6)
        merged.withUnsafeMutableBytes { bytes in
            if head.version == 4 {
                bytes.storeBigEndian(2, UInt16(total))
                bytes.storeBigEndian(10, UInt16(0))
                bytes.storeBytes(of: Checksum.finish(Checksum.sum(UnsafeRawBufferPointer(rebasing: bytes[..<20])), udp: false), toByteOffset: 10, as: UInt16.self)
            } else {
                bytes.storeBigEndian(4, UInt16(transportLength))
            }
            if head.proto == 6 {
                bytes[head.transport + 13] = head.flags | (lastFlags & 0x08)
            } else {
                // The whole: `__udp_gso_segment` puts each datagram's own length in its place.
                bytes.storeBigEndian(head.transport + 4, UInt16(transportLength))
            }
            // CHECKSUM_PARTIAL: the pseudo-header's sum, folded and not complemented.
            let sum = Checksum.pseudoHeader(UnsafeRawBufferPointer(bytes), version: head.version, proto: head.proto, length: transportLength)
            bytes.storeBytes(of: ~Checksum.finish(sum, udp: false), toByteOffset: field, as: UInt16.self)
        }
        var header = VirtioNetHeader()
        header.flags = VirtioNetHeader.needsChecksum
        if head.proto == 6 {
            header.gsoType = head.version == 4 ? VirtioNetHeader.Segmentation.tcpv4.rawValue : VirtioNetHeader.Segmentation.tcpv6.rawValue
        } else {
            header.gsoType = VirtioNetHeader.Segmentation.udpL4.rawValue
        }
        header.headerLength = UInt16(head.headers)
        header.gsoSize = UInt16(head.payload)
        header.checksumStart = UInt16(head.transport)
        header.checksumOffset = UInt16(field - head.transport)
        return header
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Stores a 16-bit field at `offset` in network byte order.
    fileprivate func storeBigEndian(_ offset: Int, _ value: UInt16) {
        storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt16.self)
    }

    /// Stores a 32-bit field at `offset` in network byte order.
    fileprivate func storeBigEndian(_ offset: Int, _ value: UInt32) {
        storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
    }
}
