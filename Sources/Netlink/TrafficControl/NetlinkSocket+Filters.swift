import CNetlink
import Glibc

/// One word a `u32` filter compares: the 32 bits at `offset` bytes from the network header,
/// under `mask`, must equal `value` (both in host order here; big-endian on the wire).
public struct U32Key: Sendable, Hashable, CustomStringConvertible {
    public var value: UInt32
    public var mask: UInt32
    public var offset: Int32

    public init(value: UInt32, mask: UInt32, offset: Int32) {
        self.mask = mask
        self.value = value & mask
        self.offset = offset
    }

    /// As `tc filter show` prints a key: `match 00350000/ffff0000 at 20`.
    public var description: String {
        func hex(_ value: UInt32) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 8 - digits.count) + digits
        }
        return "match \(hex(value))/\(hex(mask)) at \(offset)"
    }
}

/// A `u32` classifier: packets of `protocolNumber` (an EtherType: `0x0800` IPv4, `0x86dd`
/// IPv6) whose every key holds go to `classID`. Filters are tried by `priority`, lowest first.
public struct U32Filter: Sendable, Hashable, CustomStringConvertible {
    public var protocolNumber: UInt16
    public var priority: UInt16
    public var keys: [U32Key]
    public var classID: QdiscHandle

    public init(protocolNumber: UInt16, priority: UInt16, keys: [U32Key], classID: QdiscHandle) {
        self.protocolNumber = protocolNumber
        self.priority = priority
        self.keys = keys
        self.classID = classID
    }

    public static let ipv4: UInt16 = 0x0800
    public static let ipv6: UInt16 = 0x86dd

    /// `prio 2 ip flowid 1:3 match 00000011/00ff0000 at 8 ...`.
    public var description: String {
        let family = protocolNumber == Self.ipv4 ? "ip" : protocolNumber == Self.ipv6 ? "ipv6" : "0x\(String(protocolNumber, radix: 16))"
        return (["prio \(priority) \(family) flowid \(classID)"] + keys.map(\.description)).joined(separator: " ")
    }
}

extension NetlinkSocket {
    /// Creates a `prio` qdisc of `bands` bands whose every priority maps to band 0 (the first):
    /// only filters send packets elsewhere. Replaces one with the same handle.
    public func replacePrio(bands: Int, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle = .root) throws(NetlinkError) {
        let qdisc = rtnl_qdisc_alloc()!
        defer { rtnl_qdisc_put(qdisc) }
        rtnl_tc_set_ifindex(qdisc, interfaceIndex)
        rtnl_tc_set_handle(qdisc, handle.rawValue)
        rtnl_tc_set_parent(qdisc, parent.rawValue)
        try libnlCall("set qdisc kind prio") { rtnl_tc_set_kind(qdisc, "prio") }
        rtnl_qdisc_prio_set_bands(qdisc, Int32(bands))
        var priomap = [UInt8](repeating: 0, count: Int(TC_PRIO_MAX) + 1)
        try libnlCall("set the prio map") { rtnl_qdisc_prio_set_priomap(qdisc, &priomap, Int32(priomap.count)) }
        try request("set prio (\(bands) bands) on interface \(interfaceIndex) (\(handle))") {
            rtnl_qdisc_add($0, qdisc, NLM_F_CREATE | NLM_F_REPLACE)
        }
    }

    /// Adds `filter` under the qdisc `parent`.
    public func addU32Filter(_ filter: U32Filter, interfaceIndex: Int32, parent: QdiscHandle) throws(NetlinkError) {
        let classifier = rtnl_cls_alloc()!
        defer { rtnl_cls_put(classifier) }
        rtnl_tc_set_ifindex(classifier, interfaceIndex)
        rtnl_tc_set_parent(classifier, parent.rawValue)
        try libnlCall("set filter kind u32") { rtnl_tc_set_kind(classifier, "u32") }
        rtnl_cls_set_prio(classifier, filter.priority)
        rtnl_cls_set_protocol(classifier, filter.protocolNumber)
        try libnlCall("set the u32 filter's class") { rtnl_u32_set_classid(classifier, filter.classID.rawValue) }
        try libnlCall("make the u32 filter terminal") { rtnl_u32_set_cls_terminal(classifier) }
        for key in filter.keys {
            try libnlCall("add a u32 key") { rtnl_u32_add_key(classifier, key.value.bigEndian, key.mask.bigEndian, key.offset, 0) }
        }
        try request("add a u32 filter (\(filter)) on interface \(interfaceIndex)") { rtnl_cls_add($0, classifier, NLM_F_CREATE) }
    }

    /// Deletes every filter under the qdisc `parent` (none there is not an error): an
    /// `RTM_DELTFILTER` with priority and protocol 0 flushes them all.
    public func deleteFilters(interfaceIndex: Int32, parent: QdiscHandle) throws(NetlinkError) {
        let classifier = rtnl_cls_alloc()!
        defer { rtnl_cls_put(classifier) }
        rtnl_tc_set_ifindex(classifier, interfaceIndex)
        rtnl_tc_set_parent(classifier, parent.rawValue)
        rtnl_cls_set_prio(classifier, 0)
        rtnl_cls_set_protocol(classifier, 0)
        try request("delete the filters of interface \(interfaceIndex) under \(parent)") { rtnl_cls_delete($0, classifier, 0) }
    }

    /// Deletes the filters at `priority` under the qdisc `parent`, of every protocol (none
    /// there is not an error); `priority` 0 deletes every filter there, as
    /// ``deleteFilters(interfaceIndex:parent:)`` does. With new filters added first at other
    /// priorities, this replaces a set of filters without a moment in which none matches.
    public func deleteFilters(interfaceIndex: Int32, parent: QdiscHandle, priority: UInt16) throws(NetlinkError) {
        guard priority != 0 else { return try deleteFilters(interfaceIndex: interfaceIndex, parent: parent) }
        let classifier = rtnl_cls_alloc()!
        defer { rtnl_cls_put(classifier) }
        rtnl_tc_set_ifindex(classifier, interfaceIndex)
        rtnl_tc_set_parent(classifier, parent.rawValue)
        rtnl_cls_set_prio(classifier, priority)
        rtnl_cls_set_protocol(classifier, 0)
        do throws(NetlinkError) {
            try request("delete the filters at priority \(priority) of interface \(interfaceIndex) under \(parent)") {
                rtnl_cls_delete($0, classifier, 0)
            }
        } catch where error.errno == ENOENT {
            return
        }
    }

    /// The `u32` filters under the qdisc `parent`, as the kernel holds them (its hash-table
    /// entries left out).
    public func u32Filters(interfaceIndex: Int32, parent: QdiscHandle) throws(NetlinkError) -> [U32Filter] {
        try dump("dump filters (RTM_GETTFILTER)", allocate: { rtnl_cls_alloc_cache($0, interfaceIndex, parent.rawValue, $1) }) { object in
            guard libnlString(rtnl_tc_get_kind(object)) == "u32" else { return nil }
            var classID: UInt32 = 0
            guard rtnl_u32_get_classid(object, &classID) == 0 else { return nil }
            var keys: [U32Key] = []
            var index: UInt8 = 0
            var value: UInt32 = 0, mask: UInt32 = 0
            var offset: Int32 = 0, offsetMask: Int32 = 0
            while rtnl_u32_get_key(object, index, &value, &mask, &offset, &offsetMask) == 0 {
                keys.append(U32Key(value: UInt32(bigEndian: value), mask: UInt32(bigEndian: mask), offset: offset))
                index += 1
                if index == 0 { break }
            }
            return U32Filter(protocolNumber: rtnl_cls_get_protocol(object), priority: rtnl_cls_get_prio(object), keys: keys,
                             classID: QdiscHandle(rawValue: classID))
        }
    }
}
