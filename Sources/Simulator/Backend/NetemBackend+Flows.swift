import LinkEmulation
import Netlink
import ScenarioModel

// Flow-scoped impairments on the netem backend: a `prio` qdisc at the root whose band 0 holds
// the link's own netem (and tbf, and CoDel), one band per flow with its own, and `u32` filters
// that send each flow's packets to its band.
extension NetemBackend {
    /// The root of a direction with flows: `prio` with a band for the link and one per flow.
    package static let prioHandle = QdiscHandle(major: 1, minor: 0)
    package static let prioBands = ScenarioLimits.maximumFlows + 1
    /// The most `u32` filters one direction's flows may need (a filter per combination of
    /// family, protocol, address and port block).
    package static let maximumFilters = 256
    /// Where a direction's second set of filter priorities begins: a change of its flows adds
    /// the new filters at the set the old ones do not use, then deletes the old (their base
    /// priorities are 1 to 2 × ``ScenarioLimits/maximumFlows``).
    package static let filterGenerationOffset: UInt16 = 0x100

    /// The qdiscs of band `band` (0: the link's own packets) under the `prio` root.
    package static func bandHandles(_ band: Int) -> (netem: QdiscHandle, netemParent: QdiscHandle, tokenBucket: QdiscHandle,
                                                     tokenBucketParent: QdiscHandle, managedQueue: QdiscHandle, managedQueueParent: QdiscHandle) {
        let offset = UInt16(band)
        return (QdiscHandle(major: 0x10 + offset, minor: 0), QdiscHandle(major: 1, minor: 1 + offset),
                QdiscHandle(major: 0x20 + offset, minor: 0), QdiscHandle(major: 0x10 + offset, minor: 1),
                QdiscHandle(major: 0x30 + offset, minor: 0), QdiscHandle(major: 0x20 + offset, minor: 1))
    }

    /// Every handle a direction's qdiscs may have: without flows and with them.
    package static var ownHandles: Set<QdiscHandle> {
        var handles: Set<QdiscHandle> = [netemHandle, tokenBucketHandle, managedQueueHandle, prioHandle]
        for band in 0..<prioBands {
            let qdiscs = bandHandles(band)
            handles.formUnion([qdiscs.netem, qdiscs.tokenBucket, qdiscs.managedQueue])
        }
        return handles
    }

    /// The seed of band `band` of a direction whose own seed is `seed`: band 0 is the link's,
    /// a flow's mixed as the emulator mixes a flow's.
    static func seed(_ seed: UInt64, band: Int) -> UInt64 {
        band == 0 ? seed : FlowClasses.seed(seed, flow: band)
    }
}

extension FlowSelector {
    /// The `u32` filters that send what this selector matches, sent `uplink` (from the link's
    /// first node) or not, to `classID`: IPv4's at `priority`, IPv6's at the next (the kernel
    /// keeps one protocol to a priority). Like `tc`'s `match ip dport`, a port is
    /// read at a fixed offset: IPv4 packets with options and IPv6 packets with extension headers
    /// never match a protocol or a port (they keep the link's own conditions), and neither does
    /// an IPv4 fragment past the first. Throws when more than `limit` filters are needed.
    package func u32Filters(uplink: Bool, priority: UInt16, classID: QdiscHandle, limit: Int) throws(SimulatorError) -> [U32Filter] {
        var filters: [U32Filter] = []
        guard !selectsNothing else { return [] }
        let families: [IPFamily] = remotePrefixes.isEmpty ? [.ipv4, .ipv6] : IPFamily.allCases.filter { family in
            remotePrefixes.contains { $0.family == family }
        }
        for family in families {
            let ipv4 = family == .ipv4
            var protocolNumbers: [UInt8?] = protocols.isEmpty ? [nil] : protocols.sorted().filter { number in
                ipv4 ? number != 58 : number != 1
            }
            if protocolNumbers.isEmpty { continue }
            if needsPorts { protocolNumbers = protocolNumbers.filter { $0 == 6 || $0 == 17 } }
            let prefixes: [AddressPrefix?] = remotePrefixes.isEmpty ? [nil] : remotePrefixes.filter { $0.family == family }
            let remoteBlocks: [(UInt16, UInt16)?] = remotePorts.isEmpty ? [nil] : remotePorts.flatMap { Self.blocks($0) }
            let localBlocks: [(UInt16, UInt16)?] = localPorts.isEmpty ? [nil] : localPorts.flatMap { Self.blocks($0) }
            let count = protocolNumbers.count * prefixes.count * remoteBlocks.count * localBlocks.count
            if filters.count + count > limit {
                throw SimulatorError(.invalidScenario, "this match needs more than \(limit) u32 filters on the netem backend (one per address, "
                    + "protocol and aligned block of ports): name fewer servers, addresses or port ranges, or use --backend userspace")
            }
            for number in protocolNumbers {
                for prefix in prefixes {
                    for remote in remoteBlocks {
                        for local in localBlocks {
                            var keys: [U32Key] = []
                            if ipv4, remote != nil || local != nil {
                                // A header of 20 bytes (so that the ports are where they are
                                // read), and no fragment past the first.
                                keys.append(U32Key(value: 0x4500_0000, mask: 0xff00_0000, offset: 0))
                                keys.append(U32Key(value: 0, mask: 0x0000_1fff, offset: 4))
                            }
                            if let number {
                                keys.append(ipv4 ? U32Key(value: UInt32(number) << 16, mask: 0x00ff_0000, offset: 8)
                                                 : U32Key(value: UInt32(number) << 8, mask: 0x0000_ff00, offset: 4))
                            }
                            if let prefix {
                                let start: Int32 = ipv4 ? (uplink ? 16 : 12) : (uplink ? 24 : 8)
                                keys += Self.addressKeys(prefix, at: start)
                            }
                            let portOffset: Int32 = ipv4 ? 20 : 40
                            // The far end's port is the destination going up, the source coming down.
                            var value: UInt32 = 0, mask: UInt32 = 0
                            for (block, isRemote) in [(remote, true), (local, false)] {
                                guard let (port, portMask) = block else { continue }
                                let isDestination = isRemote == uplink
                                let shift: UInt32 = isDestination ? 0 : 16
                                value |= UInt32(port) << shift
                                mask |= UInt32(portMask) << shift
                            }
                            if mask != 0 { keys.append(U32Key(value: value, mask: mask, offset: portOffset)) }
                            filters.append(U32Filter(protocolNumber: ipv4 ? U32Filter.ipv4 : U32Filter.ipv6,
                                                     priority: ipv4 ? priority : priority + 1, keys: keys, classID: classID))
                        }
                    }
                }
            }
        }
        return filters
    }

    /// The address's significant words, each masked to the prefix.
    static func addressKeys(_ prefix: AddressPrefix, at start: Int32) -> [U32Key] {
        var keys: [U32Key] = []
        var remaining = prefix.length
        for word in 0..<(prefix.bytes.count / 4) where remaining > 0 {
            let bits = min(32, remaining)
            let mask: UInt32 = bits == 32 ? .max : ~(UInt32.max >> UInt32(bits))
            let bytes = prefix.bytes[(word * 4)..<(word * 4 + 4)]
            let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            keys.append(U32Key(value: value, mask: mask, offset: start + Int32(word * 4)))
            remaining -= bits
        }
        return keys
    }

    /// A port range as aligned blocks (value, mask): 8000-8100 is 8000/0xffe0, 8032/0xffe0, ...
    static func blocks(_ range: PortRange) -> [(UInt16, UInt16)] {
        var blocks: [(UInt16, UInt16)] = []
        var low = Int(range.lower)
        let high = Int(range.upper)
        while low <= high {
            var size = 1
            while low % (size * 2) == 0, low + size * 2 - 1 <= high, size < 65536 { size *= 2 }
            blocks.append((UInt16(low), UInt16(truncatingIfNeeded: ~(size - 1))))
            low += size
        }
        return blocks
    }
}
