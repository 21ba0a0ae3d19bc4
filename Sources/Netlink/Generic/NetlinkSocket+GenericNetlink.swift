import CNetlink
import CRoamLinux
import Glibc

/// Requests to generic netlink families (`mptcp_pm`, `nl80211`): one place that resolves a
/// family, sends a command and collects the kernel's answers, for every family Roam speaks.
extension NetlinkSocket {
    /// The identifier of the generic netlink family `name`, resolved once per socket. `hint`
    /// says what a kernel without the family means for the caller.
    func genericFamily(_ name: String, hint: String) throws(NetlinkError) -> Int32 {
        guard `protocol` == .generic else {
            throw NetlinkError(.errno(EPROTOTYPE), operation: "resolve \(name)", hint: "\(name) needs a generic netlink socket")
        }
        if let known = genericFamilies[name] { return known }
        let family = genl_ctrl_resolve(handle, name)
        if family < 0 {
            throw NetlinkError.libnl(family, "resolve generic netlink family \(name)").withHint(hint)
        }
        genericFamilies[name] = family
        return family
    }

    /// Sends `command` (version `version`) to `family` and collects what the kernel answers
    /// before its acknowledgement or the end of a dump, each message turned into a reply by
    /// `parse` (nil: skipped).
    func genericRequest<Reply>(family: Int32, command: Int, version: Int, _ operation: @autoclosure () -> String, flags: Int32 = 0,
                               build: (OpaquePointer) throws(NetlinkError) -> Void,
                               parse: @escaping (OpaquePointer) -> Reply?) throws(NetlinkError) -> [Reply] {
        guard let message = nlmsg_alloc() else { throw NetlinkError.libnl(NLE_NOMEM, operation()) }
        defer { nlmsg_free(message) }
        guard genlmsg_put(message, UInt32(NL_AUTO_PORT), UInt32(NL_AUTO_SEQ), family, 0, flags, UInt8(command), UInt8(version)) != nil else {
            throw NetlinkError.libnl(NLE_NOMEM, operation())
        }
        try build(message)
        let sent = nl_send_auto(handle, message)
        if sent < 0 { throw NetlinkError.libnl(sent, operation()) }
        var replies: [Reply] = []
        let collector = GenericReplyCollector { message in
            if let reply = parse(message) { replies.append(reply) }
        }
        guard let callbacks = nl_cb_clone(nl_socket_get_cb(handle)) else { throw NetlinkError.libnl(NLE_NOMEM, operation()) }
        defer { nl_cb_put(callbacks) }
        let context = Unmanaged.passRetained(collector)
        defer { context.release() }
        nl_cb_set(callbacks, NL_CB_VALID, NL_CB_CUSTOM, { message, argument in
            guard let message, let argument else { return Int32(NL_SKIP.rawValue) }
            Unmanaged<GenericReplyCollector>.fromOpaque(argument).takeUnretainedValue().receive(message)
            return Int32(NL_OK.rawValue)
        }, context.toOpaque())
        // A dump ends with NLMSG_DONE; a command with its acknowledgement (libnl asks for one).
        let received = nl_recvmsgs(handle, callbacks)
        if received < 0 { throw NetlinkError.libnl(received, operation()) }
        if flags & NLM_F_DUMP == 0 && collector.count > 0 {
            // A reply with data is a datagram of its own, and libnl returns after it: the
            // acknowledgement that follows must be read too, or the next request reads it.
            let acknowledged = nl_wait_for_ack(handle)
            if acknowledged < 0 { throw NetlinkError.libnl(acknowledged, operation()) }
        }
        return replies
    }
}

/// Encodes one attribute, turning libnl's failure into a ``NetlinkError``.
func putAttribute(_ name: String, _ put: () -> Int32) throws(NetlinkError) {
    let result = put()
    if result < 0 { throw NetlinkError.libnl(result, "encode \(name)") }
}

/// Hands each valid message of a reply to the request that asked for it.
private final class GenericReplyCollector {
    private let handle: (OpaquePointer) -> Void
    private(set) var count = 0

    init(_ handle: @escaping (OpaquePointer) -> Void) {
        self.handle = handle
    }

    func receive(_ message: OpaquePointer) {
        count += 1
        handle(message)
    }
}
