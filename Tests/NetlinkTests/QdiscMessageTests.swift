import Netlink
import Testing

/// The netem and tbf requests as bytes, taken apart the way the kernel reads them: no root,
/// no kernel. Attribute numbers are the kernel's (linux/pkt_sched.h), written out so that the
/// test does not share a mistake with the code.
@Suite struct QdiscMessageTests {
    static let tcaKind: UInt16 = 1, tcaOptions: UInt16 = 2
    static let netemLoss: UInt16 = 5, netemPRNGSeed: UInt16 = 14, lossGilbertElliott: UInt16 = 2
    static let tbfParameters: UInt16 = 1

    struct Attribute {
        var type: UInt16
        var payload: ArraySlice<UInt8>
    }

    static func u16(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt16 {
        UInt16(bytes[bytes.startIndex + offset]) | UInt16(bytes[bytes.startIndex + offset + 1]) << 8
    }

    static func u32(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[bytes.startIndex + offset + $1]) << (8 * $1) }
    }

    static func u64(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[bytes.startIndex + offset + $1]) << (8 * $1) }
    }

    /// The attributes in `bytes`, each aligned to 4 bytes; nil if one runs past the end.
    static func attributes(_ bytes: ArraySlice<UInt8>) -> [Attribute]? {
        var result: [Attribute] = []
        var offset = 0
        while offset + 4 <= bytes.count {
            let length = Int(u16(bytes, offset)), type = u16(bytes, offset + 2) & 0x3fff
            guard length >= 4, offset + length <= bytes.count else { return nil }
            result.append(Attribute(type: type, payload: bytes[(bytes.startIndex + offset + 4)..<(bytes.startIndex + offset + length)]))
            offset += (length + 3) & ~3
        }
        return result
    }

    /// The message's attributes after the netlink header (16 bytes) and the tcmsg (20 bytes).
    static func top(_ message: NetlinkMessage) throws -> (header: ArraySlice<UInt8>, attributes: [Attribute]) {
        let bytes = message.bytes
        #expect(Int(u32(bytes[...], 0)) == bytes.count, "nlmsg_len covers the message")
        #expect(u16(bytes[...], 4) == 36, "RTM_NEWQDISC")
        return (bytes[0..<36], try #require(attributes(bytes[36...])))
    }

    @Test func netemCarriesTheGilbertElliottModelAndTheSeedInsideItsOptions() throws {
        var configuration = NetemConfiguration()
        configuration.delay = .milliseconds(40)
        configuration.limit = 2000
        configuration.loss = .gilbertElliott(p: 0.05, r: 0.45, lossInBad: 1, lossInGood: 0.01)
        configuration.seed = 0x0123_4567_89ab_cdef
        let message = try NetlinkMessage.netem(configuration, interfaceIndex: 7, handle: QdiscHandle(major: 1, minor: 0),
                                               parent: .root, flags: 0)
        let (header, attributes) = try Self.top(message)
        #expect(Self.u32(header, 20) == 7, "tcm_ifindex")
        #expect(Self.u32(header, 24) == 0x0001_0000, "tcm_handle 1:")
        #expect(Self.u32(header, 28) == 0xffff_ffff, "tcm_parent root")
        let kind = try #require(attributes.first { $0.type == Self.tcaKind })
        #expect(Array(kind.payload) == Array("netem\0".utf8))
        // TCA_OPTIONS is the last attribute and spans the rest of the message: a tc_netem_qopt
        // (six u32: latency, limit, loss, gap, duplicate, jitter), then netem's own attributes.
        let options = try #require(attributes.last)
        #expect(options.type == Self.tcaOptions)
        #expect(options.payload.endIndex == message.bytes.count)
        #expect(Self.u32(options.payload, 4) == 2000, "limit")
        #expect(Self.u32(options.payload, 8) == 0, "no random loss beside the model")
        #expect(Self.u32(options.payload, 0) > 0, "latency, in ticks")
        let nested = try #require(Self.attributes(options.payload.dropFirst(24)))
        let loss = try #require(nested.first { $0.type == Self.netemLoss })
        let model = try #require(Self.attributes(loss.payload)?.first { $0.type == Self.lossGilbertElliott })
        #expect(model.payload.count == 16)
        #expect(Self.u32(model.payload, 0) == NetemConfiguration.scaled(0.05), "p")
        #expect(Self.u32(model.payload, 4) == NetemConfiguration.scaled(0.45), "r")
        #expect(Self.u32(model.payload, 8) == 0, "h = 1 - loss in bad: every packet lost in the bad state")
        #expect(Self.u32(model.payload, 12) == NetemConfiguration.scaled(0.01), "k1 = loss in good")
        let seed = try #require(nested.first { $0.type == Self.netemPRNGSeed })
        #expect(Self.u64(seed.payload, 0) == 0x0123_4567_89ab_cdef)
    }

    @Test func netemRandomLossGoesInTheFixedOptions() throws {
        var configuration = NetemConfiguration()
        configuration.loss = .random(probability: 0.1, correlation: 0)
        let message = try NetlinkMessage.netem(configuration, interfaceIndex: 3, handle: QdiscHandle(major: 1, minor: 0), parent: .root, flags: 0)
        let options = try #require(try Self.top(message).attributes.last)
        #expect(Self.u32(options.payload, 8) == NetemConfiguration.scaled(0.1))
        #expect(Self.attributes(options.payload.dropFirst(24))?.contains { $0.type == Self.netemLoss || $0.type == Self.netemPRNGSeed } == false)
    }

    @Test func scaledProbabilitiesSpanTheWholeRange() {
        #expect(NetemConfiguration.scaled(0) == 0)
        #expect(NetemConfiguration.scaled(1) == UInt32.max)
        #expect(NetemConfiguration.scaled(0.5) == UInt32.max / 2 + 1 || NetemConfiguration.scaled(0.5) == UInt32.max / 2)
        #expect(NetemConfiguration.scaled(2) == UInt32.max)
        #expect(NetemConfiguration.scaled(-1) == 0)
    }

    @Test func tokenBucketCarriesRateBucketAndLimit() throws {
        let message = try NetlinkMessage.tokenBucket(TokenBucketConfiguration(rate: 2_500_000, bucket: 10_000, limit: 250_000),
                                                     interfaceIndex: 3, handle: QdiscHandle(major: 2, minor: 0),
                                                     parent: QdiscHandle(major: 1, minor: 1), flags: 0)
        let (header, attributes) = try Self.top(message)
        #expect(Self.u32(header, 28) == 0x0001_0001, "under netem's class 1:1")
        #expect(Array(try #require(attributes.first { $0.type == Self.tcaKind }).payload) == Array("tbf\0".utf8))
        let options = try #require(attributes.first { $0.type == Self.tcaOptions })
        // tc_tbf_qopt: rate (tc_ratespec, 12 bytes: cell_log, linklayer, overhead u16, cell_align i16, mpu u16, rate u32),
        // peakrate (12), limit u32, buffer u32, mtu u32.
        let parameters = try #require(Self.attributes(options.payload)?.first { $0.type == Self.tbfParameters })
        #expect(Self.u32(parameters.payload, 8) == 2_500_000, "rate in bytes per second")
        #expect(Self.u32(parameters.payload, 24) == 250_000, "limit in bytes")
        // As tc sends them: the link layer said (Ethernet, 1), and the bucket in bytes
        // (TCA_TBF_BURST, 6) inside the options, which span the rest of the message. Without
        // them (libnl's request), a tbf whose rate changed every 100 ms passed about a fifth of
        // its rate in the VM's kernel, its queue full (see TraceSteppingTests).
        #expect(parameters.payload[parameters.payload.startIndex + 1] == 1, "linklayer ethernet")
        let inOptions = try #require(Self.attributes(options.payload))
        let burst = try #require(inOptions.first { $0.type == 6 })
        #expect(Self.u32(burst.payload, 0) == 10_000)
        #expect(inOptions.contains { $0.type == 2 }, "the rate table, as before")
        #expect(options.payload.endIndex == message.bytes.count, "the options end the message")
    }

    /// codel and fq_codel under tbf's class (2:1), as `tc qdisc replace ... codel target 5ms
    /// interval 100ms limit 300 noecn` sends them: microseconds, packets, ECN off; fq_codel adds
    /// its flows, quantum and memory limit (linux/pkt_sched.h: TCA_CODEL_TARGET 1, LIMIT 2,
    /// INTERVAL 3, ECN 4; TCA_FQ_CODEL_FLOWS 5, QUANTUM 6, MEMORY_LIMIT 9).
    @Test func coDelAndFqCoDelCarryTheirParametersInTheKernelsUnits() throws {
        func options(_ message: NetlinkMessage, kind: String) throws -> [UInt16: UInt32] {
            let (header, attributes) = try Self.top(message)
            #expect(Self.u32(header, 20) == 9, "tcm_ifindex")
            #expect(Self.u32(header, 24) == 0x0003_0000, "tcm_handle 3:")
            #expect(Self.u32(header, 28) == 0x0002_0001, "tcm_parent 2:1")
            let name = try #require(attributes.first { $0.type == Self.tcaKind })
            #expect(Array(name.payload) == Array(kind.utf8) + [0])
            let nested = try #require(attributes.first { $0.type == Self.tcaOptions })
            let inner = try #require(Self.attributes(nested.payload))
            var values: [UInt16: UInt32] = [:]
            for attribute in inner {
                #expect(attribute.payload.count == 4)
                values[attribute.type] = Self.u32(attribute.payload, 0)
            }
            return values
        }
        let codel = CoDelConfiguration(target: .milliseconds(5), interval: .milliseconds(100), limit: 300)
        let plain = try options(NetlinkMessage.coDel(codel, interfaceIndex: 9, handle: QdiscHandle(major: 3, minor: 0),
                                                     parent: QdiscHandle(major: 2, minor: 1), flags: 0), kind: "codel")
        #expect(plain == [1: 5000, 2: 300, 3: 100_000, 4: 0])
        var fq = CoDelConfiguration(target: .microseconds(2500), interval: .milliseconds(50), limit: 10240, flows: 64, quantum: 300)
        fq.memoryLimit = 1 << 20
        let fair = try options(NetlinkMessage.coDel(fq, interfaceIndex: 9, handle: QdiscHandle(major: 3, minor: 0),
                                                    parent: QdiscHandle(major: 2, minor: 1), flags: 0), kind: "fq_codel")
        #expect(fair == [1: 2500, 2: 10240, 3: 50_000, 4: 0, 5: 64, 6: 300, 9: 1 << 20])
        // A byte FIFO's options are a bare struct tc_fifo_qopt: the limit in bytes.
        let fifo = try Self.top(NetlinkMessage.byteFIFO(limit: 150_000, interfaceIndex: 9, handle: QdiscHandle(major: 3, minor: 0),
                                                        parent: QdiscHandle(major: 2, minor: 1), flags: 0))
        #expect(fifo.attributes.first { $0.type == Self.tcaKind }.map { Array($0.payload) } == Array("bfifo".utf8) + [0])
        #expect(fifo.attributes.first { $0.type == Self.tcaOptions }.map { Array($0.payload) } == [0xf0, 0x49, 0x02, 0x00])
    }
}
