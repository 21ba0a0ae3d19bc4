import Glibc
@testable import Netlink
import Testing

/// Reading a sock_diag answer (`inet_diag_msg`, `INET_DIAG_INFO`, `INET_DIAG_ULP_INFO`) into an
/// MPTCP subflow: the fields in their places, a socket that is not a subflow left out, and any
/// truncation read or refused, never past its end.
@Suite struct MPTCPSubflowInfoTests {
    /// linux/inet_diag.h and linux/mptcp.h, as the kernel numbers them.
    static let diagInfo: UInt16 = 2, ulpInfo: UInt16 = 19, ulpName: UInt16 = 1, ulpMPTCP: UInt16 = 3
    static let tokenLocal: UInt16 = 2, flags: UInt16 = 8

    func attribute(_ type: UInt16, _ value: [UInt8]) -> [UInt8] {
        let length = UInt16(4 + value.count)
        var bytes = withUnsafeBytes(of: length.littleEndian, Array.init) + withUnsafeBytes(of: type.littleEndian, Array.init) + value
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    func word(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

    /// A subflow 198.18.0.1:40000 -> 198.19.255.2:5201, bound to interface 3, token 0x9badefce,
    /// a backup here, with `ulp` as its upper-layer protocol.
    func message(ulp: String? = "mptcp") -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 72)
        header[0] = UInt8(AF_INET)
        header[1] = UInt8(TCP_ESTABLISHED)
        header[4] = 0x9c; header[5] = 0x40          // 40000, big-endian
        header[6] = 0x14; header[7] = 0x51          // 5201
        header.replaceSubrange(8..<12, with: [198, 18, 0, 1])
        header.replaceSubrange(24..<28, with: [198, 19, 255, 2])
        header.replaceSubrange(40..<44, with: word(3))
        header.replaceSubrange(44..<52, with: word(0x1234) + word(0x1))
        var info = [UInt8](repeating: 0, count: 232)
        info[4] = 2                                             // backoff
        info.replaceSubrange(24..<28, with: word(5))            // unacked
        info.replaceSubrange(52..<56, with: word(1500))         // last_data_recv, ms
        info.replaceSubrange(56..<60, with: word(40))           // last_ack_recv
        info.replaceSubrange(68..<72, with: word(20_000))       // rtt, µs
        info.replaceSubrange(100..<104, with: word(7))          // total_retrans
        info.replaceSubrange(152..<156, with: word(900))        // data_segs_in
        info.replaceSubrange(224..<228, with: word(3))          // rcv_ooopack
        var bytes = header + attribute(Self.diagInfo, info)
        if let ulp {
            let subflow = attribute(Self.tokenLocal, word(0x9bad_efce)) + attribute(Self.flags, word(1 << 5 | 1 << 6))
            bytes += attribute(Self.ulpInfo, attribute(Self.ulpName, Array(ulp.utf8) + [0]) + attribute(Self.ulpMPTCP, subflow))
        }
        return bytes
    }

    @Test func readsTheSubflowsFieldsFromTheirPlaces() throws {
        let subflow = try #require(message().withUnsafeBytes { MPTCPSubflowInfo(message: $0) })
        #expect(subflow.local == IPAddress("198.18.0.1") && subflow.localPort == 40000)
        #expect(subflow.remote == IPAddress("198.19.255.2") && subflow.remotePort == 5201)
        #expect(subflow.boundInterfaceIndex == 3 && subflow.cookie == 0x1_0000_1234)
        #expect(subflow.token == 0x9bad_efce && subflow.isBackup && !subflow.isBackupForPeer)
        #expect(subflow.state == UInt8(TCP_ESTABLISHED) && subflow.backoff == 2 && subflow.unacknowledged == 5)
        #expect(subflow.sinceDataReceived == .milliseconds(1500) && subflow.sinceAcknowledgementReceived == .milliseconds(40))
        #expect(subflow.smoothedRTT == .milliseconds(20))
        #expect(subflow.totalRetransmissions == 7 && subflow.dataSegmentsReceived == 900 && subflow.outOfOrderPacketsReceived == 3)
    }

    /// A plain TCP socket, or one with another upper-layer protocol (kTLS), is not a subflow.
    @Test func aSocketThatIsNotASubflowIsLeftOut() {
        #expect(message(ulp: nil).withUnsafeBytes { MPTCPSubflowInfo(message: $0) } == nil)
        #expect(message(ulp: "tls").withUnsafeBytes { MPTCPSubflowInfo(message: $0) } == nil)
    }

    /// Every prefix of the message and every byte changed: read or refused, never read past its
    /// end. A prefix cuts the last attribute (the upper-layer protocol's) short, so none is a
    /// subflow.
    @Test func everyTruncationAndCorruptionIsReadOrRefused() {
        let whole = message()
        for length in 0..<whole.count {
            let prefix = Array(whole.prefix(length))
            let read = prefix.withUnsafeBytes { MPTCPSubflowInfo(message: $0) }
            #expect(read == nil, "a prefix of \(length) bytes")
        }
        for index in whole.indices {
            for value: UInt8 in [0, 0xff, 0x7f] {
                var corrupt = whole
                corrupt[index] = value
                _ = corrupt.withUnsafeBytes { MPTCPSubflowInfo(message: $0) }
            }
        }
    }
}
