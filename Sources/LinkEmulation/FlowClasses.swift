import RoamCore
import ScenarioModel

/// A `FlowMatch` with its names resolved to addresses: what the emulator tests each packet
/// against, and what the netem backend's rules say.
public struct FlowSelector: Sendable, Hashable {
    /// IP protocol numbers (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6); empty: any.
    public var protocols: Set<UInt8>
    /// The far end's ports; empty: any.
    public var remotePorts: [PortRange]
    /// The link's first node's own ports; empty: any.
    public var localPorts: [PortRange]
    /// Where the far end's address must be; empty: anywhere.
    public var remotePrefixes: [AddressPrefix]
    /// Named a far end that has no address (a server the run gives none): it selects nothing.
    public var selectsNothing = false

    public init(protocols: Set<UInt8> = [], remotePorts: [PortRange] = [], localPorts: [PortRange] = [], remotePrefixes: [AddressPrefix] = []) {
        self.protocols = protocols
        self.remotePorts = remotePorts
        self.localPorts = localPorts
        self.remotePrefixes = remotePrefixes
    }

    /// `match` resolved: `addresses` gives a server node's addresses, `resolvers` the addresses
    /// of the link's network's resolver (empty where the link is not a network's: any address).
    public init(_ match: FlowMatch, addresses: (String) -> [AddressPrefix], resolvers: [AddressPrefix]) {
        if match.dns {
            self.init(protocols: [6, 17], remotePorts: [PortRange(53)], localPorts: match.localPorts, remotePrefixes: resolvers)
            return
        }
        var protocols: Set<UInt8> = []
        for item in match.protocols {
            switch item {
            case .tcp: protocols.insert(6)
            case .udp: protocols.insert(17)
            case .icmp: protocols.formUnion([1, 58])
            }
        }
        // Ports are TCP's and UDP's: a match on ports alone is one on those two.
        if protocols.isEmpty, !match.ports.isEmpty || !match.localPorts.isEmpty { protocols = [6, 17] }
        self.init(protocols: protocols, remotePorts: match.ports, localPorts: match.localPorts,
                  remotePrefixes: match.prefixes + match.servers.flatMap(addresses))
        // A far end named but without an address is no address, not any address.
        selectsNothing = remotePrefixes.isEmpty && (!match.prefixes.isEmpty || !match.servers.isEmpty)
    }

    /// Whether it names ports (so that only TCP and UDP packets with their headers can match).
    public var needsPorts: Bool { !remotePorts.isEmpty || !localPorts.isEmpty }

    /// Whether `packet` (an IP packet, from its first byte), sent `uplink` (from the link's first
    /// node) or not, is one it selects. A fragment past the first carries no ports, so it
    /// matches only a selector that names none.
    public func matches(_ packet: UnsafeRawBufferPointer, uplink: Bool) -> Bool {
        guard !selectsNothing, let header = PacketHeader(packet) else { return false }
        if !protocols.isEmpty, !protocols.contains(header.protocolNumber) { return false }
        if !remotePrefixes.isEmpty {
            let start = uplink ? header.destinationOffset : header.sourceOffset
            let address = UnsafeRawBufferPointer(rebasing: packet[start..<(start + header.addressLength)])
            let family: IPFamily = header.addressLength == 4 ? .ipv4 : .ipv6
            guard remotePrefixes.contains(where: { $0.family == family && $0.contains(address) }) else { return false }
        }
        if needsPorts {
            guard let transport = header.transportOffset, header.protocolNumber == 6 || header.protocolNumber == 17,
                  transport + 4 <= packet.count else { return false }
            let source = UInt16(packet[transport]) << 8 | UInt16(packet[transport + 1])
            let destination = UInt16(packet[transport + 2]) << 8 | UInt16(packet[transport + 3])
            let (remote, local) = uplink ? (destination, source) : (source, destination)
            if !remotePorts.isEmpty, !remotePorts.contains(where: { $0.contains(remote) }) { return false }
            if !localPorts.isEmpty, !localPorts.contains(where: { $0.contains(local) }) { return false }
        }
        return true
    }

    /// What a classifier needs of an IP header: its protocol (past IPv6's extension headers),
    /// where its addresses are, and where the transport header starts (nil in a fragment past
    /// the first).
    struct PacketHeader {
        var protocolNumber: UInt8
        var sourceOffset: Int
        var destinationOffset: Int
        var addressLength: Int
        var transportOffset: Int?

        init?(_ packet: UnsafeRawBufferPointer) {
            guard let first = packet.first else { return nil }
            switch first >> 4 {
            case 4:
                let length = Int(first & 0x0f) * 4
                guard length >= 20, packet.count >= length else { return nil }
                protocolNumber = packet[9]
                sourceOffset = 12
                destinationOffset = 16
                addressLength = 4
                let fragmentOffset = (UInt16(packet[6] & 0x1f) << 8) | UInt16(packet[7])
                transportOffset = fragmentOffset == 0 ? length : nil
            case 6:
                guard packet.count >= 40 else { return nil }
                sourceOffset = 8
                destinationOffset = 24
                addressLength = 16
                var next = packet[6]
                var offset = 40
                var transport: Int? = nil
                // At most 8 extension headers are walked; a packet with more is classified by
                // where the walk stopped.
                for _ in 0..<8 {
                    switch next {
                    case 0, 43, 60, 51:
                        guard offset + 2 <= packet.count else { protocolNumber = next; transportOffset = nil; return }
                        let following = packet[offset]
                        // Hop-by-hop, routing and destination options count 8-byte units past
                        // the first; an authentication header, 4-byte units past the first two.
                        offset += next == 51 ? (Int(packet[offset + 1]) + 2) * 4 : (Int(packet[offset + 1]) + 1) * 8
                        next = following
                        continue
                    case 44:
                        guard offset + 8 <= packet.count else { protocolNumber = next; transportOffset = nil; return }
                        let following = packet[offset]
                        let fragmentOffset = (UInt16(packet[offset + 2]) << 8 | UInt16(packet[offset + 3])) >> 3
                        offset += 8
                        next = following
                        if fragmentOffset != 0 {
                            protocolNumber = next
                            transportOffset = nil
                            return
                        }
                        continue
                    default:
                        transport = offset
                    }
                    break
                }
                protocolNumber = next
                transportOffset = transport
            default:
                return nil
            }
        }
    }
}

/// What the emulator is told for one flow of a direction: which packets, what they get.
package struct FlowSetup: Sendable {
    package var selector: FlowSelector
    package var conditions: LinkConditions
    package var capacity: LinkCapacity
    package var distribution: [Int16]?

    package init(selector: FlowSelector, conditions: LinkConditions, capacity: LinkCapacity, distribution: [Int16]?) {
        self.selector = selector
        self.conditions = conditions
        self.capacity = capacity
        self.distribution = distribution
    }
}

/// The flows of one direction that get conditions of their own (`match:`): each a
/// ``LinkPipeline`` of its own (its own queue, rate and random draws, seeded from the
/// direction's seed and its place), the first whose selector matches a packet taking it. A flow
/// that goes (`reset`) keeps delivering what it holds, then is dropped; its counts stay.
package struct FlowClasses: Sendable {
    package struct Class: Sendable {
        package var selector: FlowSelector
        package var pipeline: LinkPipeline
        /// Its number in the decision log (`flowN`), from 1, kept while it stays.
        var number: Int
    }

    package private(set) var classes: [Class] = []
    private var retired: [Class] = []
    private var retiredStatistics = LinkPipeline.Statistics()
    /// Decisions of flows dropped since the log was last written.
    private var leftDecisions: [String] = []
    private var numbered = 0
    private let seed: UInt64
    private let logsDecisions: Bool
    /// Record each delivered packet's due time (the emulator measuring its lateness).
    package var recordsDeliveryTimes = false

    package init(seed: UInt64, logsDecisions: Bool) {
        self.seed = seed
        self.logsDecisions = logsDecisions
    }

    /// No flow, and nothing held by one that went.
    package var isEmpty: Bool { classes.isEmpty && retired.isEmpty }

    /// The class of a packet sent `uplink` or not; nil: the link's own.
    package func classify(_ packet: UnsafeRawBufferPointer, uplink: Bool) -> Int? {
        classes.firstIndex { $0.selector.matches(packet, uplink: uplink) }
    }

    /// The flows as they are now: one already there with the same selector keeps its queue.
    package mutating func update(_ setups: [FlowSetup]) {
        var kept: [Class] = []
        for setup in setups {
            if let index = classes.firstIndex(where: { $0.selector == setup.selector }) {
                var existing = classes.remove(at: index)
                existing.pipeline.update(setup.conditions, capacity: setup.capacity, distribution: setup.distribution)
                kept.append(existing)
            } else {
                numbered += 1
                var pipeline = LinkPipeline(conditions: setup.conditions, capacity: setup.capacity, seed: Self.seed(seed, flow: numbered),
                                            distribution: setup.distribution, logsDecisions: logsDecisions)
                pipeline.recordsDeliveryTimes = recordsDeliveryTimes
                kept.append(Class(selector: setup.selector, pipeline: pipeline, number: numbered))
            }
        }
        retired += classes
        classes = kept
    }

    /// The seed of a flow's generator: the direction's, mixed with the flow's number (the
    /// netem backend seeds a flow's band the same way).
    package static func seed(_ seed: UInt64, flow: Int) -> UInt64 {
        var state = seed ^ UInt64(flow)
        return splitMix64(&state)
    }

    package mutating func arrive(_ packet: [UInt8], class index: Int, at now: Int64, enteringAt entry: Int64?) {
        classes[index].pipeline.arrive(packet, at: now, enteringAt: entry)
    }

    package mutating func nextEvent() -> Int64? {
        var next: Int64?
        for index in classes.indices { if let event = classes[index].pipeline.nextEvent() { next = min(next ?? event, event) } }
        for index in retired.indices { if let event = retired[index].pipeline.nextEvent() { next = min(next ?? event, event) } }
        return next
    }

    /// Delivers what is due from every flow, appending each packet's due time to `times` when
    /// the pipelines record them; drops a flow that went once it holds nothing.
    package mutating func release(upTo now: Int64, into output: inout [[UInt8]], times: inout [Int64]) {
        for index in classes.indices {
            classes[index].pipeline.release(upTo: now, into: &output)
            if classes[index].pipeline.recordsDeliveryTimes { times += classes[index].pipeline.deliveryTimes }
        }
        for index in retired.indices {
            retired[index].pipeline.release(upTo: now, into: &output)
            if retired[index].pipeline.recordsDeliveryTimes { times += retired[index].pipeline.deliveryTimes }
        }
        var index = 0
        while index < retired.count {
            guard retired[index].pipeline.queueLength == 0, retired[index].pipeline.inFlight == 0 else {
                index += 1
                continue
            }
            var flow = retired.remove(at: index)
            retiredStatistics.merge(flow.pipeline.statistics)
            // Its last decisions still go to the log.
            if logsDecisions { leftDecisions += flow.pipeline.takeDecisions().map { "flow\(flow.number) \($0)" } }
        }
    }

    /// Every flow's decisions since the last call, each line led by its flow (`flow2 17 1500 deliver 40213`).
    package mutating func takeDecisions() -> [String] {
        var lines = leftDecisions
        leftDecisions = []
        for index in classes.indices {
            for decision in classes[index].pipeline.takeDecisions() { lines.append("flow\(classes[index].number) \(decision)") }
        }
        for index in retired.indices {
            for decision in retired[index].pipeline.takeDecisions() { lines.append("flow\(retired[index].number) \(decision)") }
        }
        return lines
    }

    package mutating func advance(to now: Int64) {
        for index in classes.indices { classes[index].pipeline.advance(to: now) }
    }

    package var queueLength: Int { classes.reduce(0) { $0 + $1.pipeline.queueLength } }
    package var lastTransmission: Int64 { classes.reduce(Int64.min) { max($0, $1.pipeline.lastTransmission) } }

    /// What every flow counted, those that went included.
    package var statistics: LinkPipeline.Statistics {
        var total = retiredStatistics
        for flow in classes + retired { total.merge(flow.pipeline.statistics) }
        return total
    }
}

extension LinkPipeline.Statistics {
    /// Adds `other`'s counts to these.
    public mutating func merge(_ other: Self) {
        arrived += other.arrived
        delivered += other.delivered
        lost += other.lost
        blackholed += other.blackholed
        overflowed += other.overflowed
        corrupted += other.corrupted
        duplicated += other.duplicated
        reordered += other.reordered
        heldForRadio += other.heldForRadio
        promotions += other.promotions
        aqmDropped += other.aqmDropped
        lateness.merge(other.lateness)
        expectedLost += other.expectedLost
    }
}
