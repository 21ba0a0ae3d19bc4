import CNetlink
import CRoamLinux
import Glibc
import RoamSystem

/// `TCA_NETEM_PRNG_SEED` (Linux 6.3), missing from older UAPI headers.
let netemPRNGSeedAttribute: Int32 = 14

extension NetlinkSocket {
    /// Every qdisc of every interface in the socket's namespace.
    public func qdiscs() throws(NetlinkError) -> [Qdisc] {
        try dump("dump qdiscs (RTM_GETQDISC)", allocate: { rtnl_qdisc_alloc_cache($0, $1) }, convert: { Qdisc(libnl: $0) })
    }

    /// Creates a netem qdisc, or changes the one already there with the same handle (its child
    /// stays).
    public func replaceNetem(_ configuration: NetemConfiguration, interfaceIndex: Int32, handle: QdiscHandle,
                             parent: QdiscHandle = .root) throws(NetlinkError) {
        let message = try NetlinkMessage.netem(configuration, interfaceIndex: interfaceIndex, handle: handle, parent: parent,
                                               flags: NLM_F_CREATE | NLM_F_REPLACE)
        try send(message, "set netem on interface \(interfaceIndex) (\(handle))")
    }

    /// Creates a token-bucket qdisc, or changes the one already there with the same handle.
    public func replaceTokenBucket(_ configuration: TokenBucketConfiguration, interfaceIndex: Int32, handle: QdiscHandle,
                                   parent: QdiscHandle) throws(NetlinkError) {
        let message = try NetlinkMessage.tokenBucket(configuration, interfaceIndex: interfaceIndex, handle: handle, parent: parent,
                                                     flags: NLM_F_CREATE | NLM_F_REPLACE)
        try send(message, "set tbf on interface \(interfaceIndex) (\(handle))")
    }

    /// Creates or replaces a CoDel or FQ-CoDel qdisc (`RTM_NEWQDISC`, create | replace).
    public func replaceCoDel(_ configuration: CoDelConfiguration, interfaceIndex: Int32, handle: QdiscHandle,
                             parent: QdiscHandle) throws(NetlinkError) {
        let message = try NetlinkMessage.coDel(configuration, interfaceIndex: interfaceIndex, handle: handle, parent: parent,
                                               flags: NLM_F_CREATE | NLM_F_REPLACE)
        try send(message, "set \(configuration.kind) on interface \(interfaceIndex) (\(handle))")
    }

    /// Creates or replaces a byte FIFO (`bfifo`) of `limit` bytes: what tbf holds its queue in.
    public func replaceByteFIFO(limit: UInt32, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
        let message = try NetlinkMessage.byteFIFO(limit: limit, interfaceIndex: interfaceIndex, handle: handle, parent: parent,
                                                  flags: NLM_F_CREATE | NLM_F_REPLACE)
        try send(message, "set bfifo on interface \(interfaceIndex) (\(handle))")
    }

    /// Deletes the qdisc `handle` under `parent` (and its children).
    public func deleteQdisc(interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle) throws(NetlinkError) {
        let qdisc = rtnl_qdisc_alloc()!
        defer { rtnl_qdisc_put(qdisc) }
        rtnl_tc_set_ifindex(qdisc, interfaceIndex)
        rtnl_tc_set_handle(qdisc, handle.rawValue)
        rtnl_tc_set_parent(qdisc, parent.rawValue)
        try request("delete qdisc \(handle) on interface \(interfaceIndex)") { rtnl_qdisc_delete($0, qdisc) }
    }

    func send(_ message: NetlinkMessage, _ operation: @autoclosure () -> String) throws(NetlinkError) {
        let sent = nl_send_auto(handle, message.handle)
        if sent < 0 { throw NetlinkError.libnl(sent, operation()) }
        let acknowledged = nl_wait_for_ack(handle)
        if acknowledged < 0 { throw NetlinkError.libnl(acknowledged, operation()) }
    }
}

/// A netlink request built but not yet sent, so that its encoding can be checked byte by byte.
public final class NetlinkMessage {
    let handle: OpaquePointer

    init(adopting handle: OpaquePointer) { self.handle = handle }
    deinit { nlmsg_free(handle) }

    /// The message as it goes to the kernel.
    public var bytes: [UInt8] {
        let header = nlmsg_hdr(handle)!
        return Array(UnsafeRawBufferPointer(start: header, count: Int(header.pointee.nlmsg_len)))
    }

    /// An `RTM_NEWQDISC` for netem. Everything libnl's netem API covers goes through it; the
    /// Gilbert-Elliott loss model and the generator seed, which it does not cover, are appended
    /// inside `TCA_OPTIONS` with libnl's attribute API (netem's options are a `tc_netem_qopt`
    /// followed by attributes, and must span the rest of the message).
    public static func netem(_ configuration: NetemConfiguration, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle,
                             flags: Int32) throws(NetlinkError) -> NetlinkMessage {
        let qdisc = try makeQdisc(.netem, interfaceIndex: interfaceIndex, handle: handle, parent: parent)
        defer { rtnl_qdisc_put(qdisc) }
        let delay = configuration.delay.microseconds
        rtnl_netem_set_limit(qdisc, Int32(clamping: configuration.limit))
        rtnl_netem_set_delay(qdisc, Int32(clamping: delay))
        if delay > 0, configuration.jitter > .zero {
            rtnl_netem_set_jitter(qdisc, Int32(clamping: configuration.jitter.microseconds))
            if configuration.delayCorrelation > 0 {
                rtnl_netem_set_delay_correlation(qdisc, probability(configuration.delayCorrelation))
            }
            if let table = configuration.distribution, !table.isEmpty {
                try libnlCall("set netem delay distribution") {
                    table.withUnsafeBufferPointer { rtnl_netem_set_delay_distribution_data(qdisc, $0.baseAddress, $0.count) }
                }
            }
        }
        if case let .random(rate, correlation) = configuration.loss, rate > 0 {
            rtnl_netem_set_loss(qdisc, probability(rate))
            if correlation > 0 { rtnl_netem_set_loss_correlation(qdisc, probability(correlation)) }
        }
        if configuration.duplicate > 0 { rtnl_netem_set_duplicate(qdisc, probability(configuration.duplicate)) }
        if configuration.reorder > 0, delay > 0 {
            rtnl_netem_set_reorder_probability(qdisc, probability(configuration.reorder))
            rtnl_netem_set_gap(qdisc, 1)
        }
        if configuration.corrupt > 0 { rtnl_netem_set_corruption_probability(qdisc, probability(configuration.corrupt)) }

        var built: OpaquePointer?
        try libnlCall("build netem request") { rtnl_qdisc_build_add_request(qdisc, flags, &built) }
        let message = NetlinkMessage(adopting: built!)
        try message.appendNetemExtensions(configuration)
        return message
    }

    private func appendNetemExtensions(_ configuration: NetemConfiguration) throws(NetlinkError) {
        let needsModel: Bool
        if case .gilbertElliott = configuration.loss { needsModel = true } else { needsModel = false }
        guard needsModel || configuration.seed != nil else { return }
        try appendingToOptions(of: "netem") { _ throws(NetlinkError) in
            if case let .gilbertElliott(p, r, bad, good) = configuration.loss {
                var model = tc_netem_gemodel(p: NetemConfiguration.scaled(p), r: NetemConfiguration.scaled(r),
                                             h: NetemConfiguration.scaled(1 - bad), k1: NetemConfiguration.scaled(good))
                guard let nest = nla_nest_start(handle, Int32(TCA_NETEM_LOSS)) else {
                    throw NetlinkError(.libnl(NLE_NOMEM), operation: "nest TCA_NETEM_LOSS")
                }
                try libnlCall("put NETEM_LOSS_GE") { nla_put(handle, Int32(NETEM_LOSS_GE), Int32(MemoryLayout<tc_netem_gemodel>.size), &model) }
                try libnlCall("end TCA_NETEM_LOSS") { nla_nest_end(handle, nest) }
            }
            if let seed = configuration.seed {
                try libnlCall("put TCA_NETEM_PRNG_SEED") { nla_put_u64(handle, netemPRNGSeedAttribute, seed) }
            }
        }
    }

    /// A libnl qdisc object of `kind` at `handle` under `parent`; the caller puts it.
    private static func makeQdisc(_ kind: QdiscKind, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle)
        throws(NetlinkError) -> OpaquePointer {
        let qdisc = rtnl_qdisc_alloc()!
        rtnl_tc_set_ifindex(qdisc, interfaceIndex)
        rtnl_tc_set_handle(qdisc, handle.rawValue)
        rtnl_tc_set_parent(qdisc, parent.rawValue)
        do throws(NetlinkError) {
            try libnlCall("rtnl_tc_set_kind(\(kind))") { rtnl_tc_set_kind(qdisc, kind.rawValue) }
        } catch {
            rtnl_qdisc_put(qdisc)
            throw error
        }
        return qdisc
    }

    /// An `RTM_NEWQDISC` for codel or fq_codel, built attribute by attribute (libnl has no API
    /// for codel, and its fq_codel one would nest options of its own): a `tcmsg`, `TCA_KIND`, and
    /// `TCA_OPTIONS` with the target, interval and limit (microseconds and packets, as
    /// `tc qdisc ... codel target 5ms` sends them), ECN off, and fq_codel's flows, quantum and
    /// memory limit.
    public static func coDel(_ configuration: CoDelConfiguration, interfaceIndex: Int32, handle: QdiscHandle,
                             parent: QdiscHandle, flags: Int32) throws(NetlinkError) -> NetlinkMessage {
        let (message, built) = try qdiscRequest(configuration.kind.rawValue, interfaceIndex: interfaceIndex, handle: handle, parent: parent,
                                                flags: flags)
        guard let options = nla_nest_start(built, Int32(TCA_OPTIONS)) else {
            throw NetlinkError(.libnl(NLE_NOMEM), operation: "nest TCA_OPTIONS")
        }
        let microseconds = { (duration: Duration) in UInt32(clamping: duration.microseconds) }
        if let flows = configuration.flows {
            try libnlCall("put TCA_FQ_CODEL_TARGET") { nla_put_u32(built, Int32(TCA_FQ_CODEL_TARGET), microseconds(configuration.target)) }
            try libnlCall("put TCA_FQ_CODEL_LIMIT") { nla_put_u32(built, Int32(TCA_FQ_CODEL_LIMIT), configuration.limit) }
            try libnlCall("put TCA_FQ_CODEL_INTERVAL") { nla_put_u32(built, Int32(TCA_FQ_CODEL_INTERVAL), microseconds(configuration.interval)) }
            try libnlCall("put TCA_FQ_CODEL_ECN") { nla_put_u32(built, Int32(TCA_FQ_CODEL_ECN), 0) }
            try libnlCall("put TCA_FQ_CODEL_FLOWS") { nla_put_u32(built, Int32(TCA_FQ_CODEL_FLOWS), flows) }
            if let quantum = configuration.quantum {
                try libnlCall("put TCA_FQ_CODEL_QUANTUM") { nla_put_u32(built, Int32(TCA_FQ_CODEL_QUANTUM), quantum) }
            }
            if let memory = configuration.memoryLimit {
                try libnlCall("put TCA_FQ_CODEL_MEMORY_LIMIT") { nla_put_u32(built, Int32(TCA_FQ_CODEL_MEMORY_LIMIT), memory) }
            }
        } else {
            try libnlCall("put TCA_CODEL_TARGET") { nla_put_u32(built, Int32(TCA_CODEL_TARGET), microseconds(configuration.target)) }
            try libnlCall("put TCA_CODEL_LIMIT") { nla_put_u32(built, Int32(TCA_CODEL_LIMIT), configuration.limit) }
            try libnlCall("put TCA_CODEL_INTERVAL") { nla_put_u32(built, Int32(TCA_CODEL_INTERVAL), microseconds(configuration.interval)) }
            try libnlCall("put TCA_CODEL_ECN") { nla_put_u32(built, Int32(TCA_CODEL_ECN), 0) }
        }
        try libnlCall("end TCA_OPTIONS") { nla_nest_end(built, options) }
        return message
    }

    /// An `RTM_NEWQDISC` for a byte FIFO: `TCA_OPTIONS` is a `struct tc_fifo_qopt`, not attributes.
    public static func byteFIFO(limit: UInt32, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle,
                                flags: Int32) throws(NetlinkError) -> NetlinkMessage {
        let (message, built) = try qdiscRequest("bfifo", interfaceIndex: interfaceIndex, handle: handle, parent: parent, flags: flags)
        var options = tc_fifo_qopt(limit: limit)
        try libnlCall("put TCA_OPTIONS") { nla_put(built, Int32(TCA_OPTIONS), Int32(MemoryLayout<tc_fifo_qopt>.size), &options) }
        return message
    }

    /// An `RTM_NEWQDISC` with its `tcmsg` and `TCA_KIND`, to which the caller adds the options.
    private static func qdiscRequest(_ kind: String, interfaceIndex: Int32, handle: QdiscHandle, parent: QdiscHandle,
                                     flags: Int32) throws(NetlinkError) -> (NetlinkMessage, OpaquePointer) {
        guard let built = nlmsg_alloc_simple(Int32(RTM_NEWQDISC), flags) else {
            throw NetlinkError(.libnl(NLE_NOMEM), operation: "allocate a \(kind) request")
        }
        let message = NetlinkMessage(adopting: built)
        var header = tcmsg()
        header.tcm_family = UInt8(AF_UNSPEC)
        header.tcm_ifindex = interfaceIndex
        header.tcm_handle = handle.rawValue
        header.tcm_parent = parent.rawValue
        try libnlCall("append tcmsg") { nlmsg_append(built, &header, MemoryLayout<tcmsg>.size, Int32(NLMSG_ALIGNTO)) }
        try libnlCall("put TCA_KIND") { nla_put_string(built, Int32(TCA_KIND), kind) }
        return (message, built)
    }

    /// An `RTM_NEWQDISC` for tbf.
    public static func tokenBucket(_ configuration: TokenBucketConfiguration, interfaceIndex: Int32, handle: QdiscHandle,
                                   parent: QdiscHandle, flags: Int32) throws(NetlinkError) -> NetlinkMessage {
        let qdisc = try makeQdisc(.tokenBucket, interfaceIndex: interfaceIndex, handle: handle, parent: parent)
        defer { rtnl_qdisc_put(qdisc) }
        rtnl_qdisc_tbf_set_limit(qdisc, Int32(clamping: configuration.limit))
        rtnl_qdisc_tbf_set_rate(qdisc, Int32(clamping: min(configuration.rate, TokenBucketConfiguration.maximumRate)),
                                Int32(clamping: configuration.bucket), 0)
        var built: OpaquePointer?
        try libnlCall("build tbf request") { rtnl_qdisc_build_add_request(qdisc, flags, &built) }
        let message = NetlinkMessage(adopting: built!)
        try message.completeTokenBucket(bucket: configuration.bucket)
        return message
    }

    /// What `tc` sends and libnl does not: the rate's link layer said (Ethernet), and the
    /// bucket in bytes (`TCA_TBF_BURST`), from which the kernel takes the bucket's time exactly
    /// instead of from libnl's ticks.
    private func completeTokenBucket(bucket: UInt32) throws(NetlinkError) {
        try appendingToOptions(of: "tbf") { options throws(NetlinkError) in
            guard let parameters = nla_find(nla_data(options).assumingMemoryBound(to: nlattr.self), nla_len(options), Int32(TCA_TBF_PARMS)),
                  nla_len(parameters) >= Int32(MemoryLayout<tc_tbf_qopt>.size) else {
                throw NetlinkError(.libnl(NLE_MISSING_ATTR), operation: "find TCA_TBF_PARMS in the tbf request")
            }
            nla_data(parameters).assumingMemoryBound(to: tc_tbf_qopt.self).pointee.rate.linklayer = UInt8(TC_LINKLAYER_ETHERNET.rawValue)
            try libnlCall("put TCA_TBF_BURST") { nla_put_u32(handle, Int32(TCA_TBF_BURST), bucket) }
        }
    }

    /// Runs `append` (given the request's `TCA_OPTIONS`, the last attribute libnl wrote), which
    /// appends attributes at the message's end, then stretches the options over them: a
    /// qdisc's options must span the rest of the message.
    private func appendingToOptions(of kind: String, _ append: (UnsafeMutablePointer<nlattr>) throws(NetlinkError) -> Void) throws(NetlinkError) {
        let header = nlmsg_hdr(handle)!
        guard let options = nlmsg_find_attr(header, Int32(MemoryLayout<tcmsg>.size), Int32(TCA_OPTIONS)) else {
            throw NetlinkError(.libnl(NLE_MISSING_ATTR), operation: "find TCA_OPTIONS in the \(kind) request")
        }
        let optionsOffset = UnsafeRawPointer(options) - UnsafeRawPointer(header)
        try append(options)
        // The message may have moved while growing: find the options again by their offset.
        let grown = nlmsg_hdr(handle)!
        let start = UnsafeMutableRawPointer(grown) + optionsOffset
        let end = UnsafeMutableRawPointer(grown) + Int(grown.pointee.nlmsg_len)
        start.assumingMemoryBound(to: nlattr.self).pointee.nla_len = UInt16(end - start)
    }
}

private func probability(_ value: Double) -> Int32 {
    Int32(bitPattern: NetemConfiguration.scaled(value))
}

extension Duration {
    /// Whole microseconds, rounded down.
    public var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
