import CNetlink
import CRoamLinux
import Glibc

/// A netlink protocol. The corresponding C constants are `NETLINK_*`.
public struct NetlinkProtocol: RawRepresentable, Sendable, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    /// `NETLINK_ROUTE`: links, addresses, routes, rules, qdiscs.
    public static let route = NetlinkProtocol(rawValue: NETLINK_ROUTE)
    /// `NETLINK_GENERIC`: generic netlink families such as `mptcp_pm`.
    public static let generic = NetlinkProtocol(rawValue: NETLINK_GENERIC)
}

/// A netlink socket (libnl's `struct nl_sock`) bound to one network namespace.
///
/// A socket belongs to the namespace it was opened in for its whole life, whichever thread
/// later uses it: opening one in another namespace happens on a pinned thread, and the socket
/// then works from anywhere. A socket is not safe to use from two threads at once.
public final class NetlinkSocket {
    let handle: OpaquePointer
    /// The namespace the socket was opened in.
    public let namespace: NetworkNamespace
    /// The protocol the socket speaks.
    public let `protocol`: NetlinkProtocol
    private var receiveBuffer: UnsafeMutableRawBufferPointer?
    /// Generic-netlink family identifiers resolved on this socket, by name (they do not change
    /// while the kernel runs).
    var genericFamilies: [String: Int32] = [:]

    /// Opens and connects a socket in `namespace`.
    public convenience init(_ protocol: NetlinkProtocol = .route, in namespace: NetworkNamespace = .current) throws(NetlinkError) {
        if namespace.isCurrent {
            try self.init(connecting: `protocol`, namespace: namespace)
        } else {
            do {
                let socket = try namespace.perform { () throws(NetlinkError) in
                    UncheckedBox(try NetlinkSocket(connecting: `protocol`, namespace: namespace))
                }
                self.init(adopting: socket.value)
            } catch let error as NetlinkError {
                throw error
            } catch {
                throw NetlinkError(.errno(EIO), operation: "open netlink socket in \(namespace)", hint: "\(error)")
            }
        }
    }

    private init(connecting protocol: NetlinkProtocol, namespace: NetworkNamespace) throws(NetlinkError) {
        guard let handle = nl_socket_alloc() else {
            throw NetlinkError.libnl(NLE_NOMEM, "nl_socket_alloc")
        }
        let result = nl_connect(handle, `protocol`.rawValue)
        if result < 0 {
            nl_socket_free(handle)
            throw NetlinkError.libnl(result, "nl_connect(\(`protocol`.rawValue)) in \(namespace)")
        }
        self.handle = handle
        self.namespace = namespace
        self.protocol = `protocol`
    }

    // Takes over the libnl handle of a socket made on another thread.
    private init(adopting other: NetlinkSocket) {
        self.handle = other.handle
        self.namespace = other.namespace
        self.protocol = other.protocol
        other.isAdopted = true
    }

    private var isAdopted = false

    deinit {
        if !isAdopted { nl_socket_free(handle) }
        receiveBuffer?.deallocate()
    }

    /// The socket's file descriptor, for `poll(2)`. It stays owned by this object.
    public var fileDescriptor: Int32 { nl_socket_get_fd(handle) }

    /// Joins multicast groups, so that the kernel sends their notifications to this socket.
    public func subscribe(to groups: [MulticastGroup]) throws(NetlinkError) {
        nl_socket_disable_seq_check(handle)
        for group in groups {
            try libnlCall("nl_socket_add_membership(\(group.rawValue))") { nl_socket_add_membership(handle, group.rawValue) }
        }
    }

    /// Makes reads return at once when nothing is queued.
    public func setNonBlocking() throws(NetlinkError) {
        try libnlCall("nl_socket_set_nonblocking") { nl_socket_set_nonblocking(handle) }
    }

    /// Sets the kernel receive buffer. As root the limit `net.core.rmem_max` is bypassed
    /// (`SO_RCVBUFFORCE`); otherwise the kernel caps the size there.
    public func setReceiveBufferSize(_ bytes: Int) throws(NetlinkError) {
        var size = Int32(clamping: bytes)
        let fd = fileDescriptor
        if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) == 0 { return }
        try systemCall("setsockopt(SO_RCVBUF, \(bytes))") {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Runs a libnl cache dump and turns its objects into values, retrying when the kernel
    /// reports that the dump was interrupted by a concurrent change.
    func dump<T>(
        _ operation: String,
        attempts: Int = 5,
        allocate: (OpaquePointer, UnsafeMutablePointer<OpaquePointer?>) -> Int32,
        convert: (OpaquePointer) -> T?
    ) throws(NetlinkError) -> [T] {
        var lastError = NetlinkError.libnl(NLE_DUMP_INTR, operation)
        for _ in 0..<attempts {
            var cache: OpaquePointer?
            let result = allocate(handle, &cache)
            if result == -NLE_DUMP_INTR {
                if let cache { nl_cache_free(cache) }
                continue
            }
            if result < 0 {
                lastError = NetlinkError.libnl(result, operation)
                if let cache { nl_cache_free(cache) }
                throw lastError
            }
            guard let cache else { return [] }
            defer { nl_cache_free(cache) }
            var values: [T] = []
            values.reserveCapacity(Int(nl_cache_nitems(cache)))
            var object = nl_cache_get_first(cache)
            while let current = object {
                if let value = convert(current) { values.append(value) }
                object = nl_cache_get_next(current)
            }
            return values
        }
        throw lastError
    }

    /// Sends a request built by libnl and waits for the kernel's answer.
    func request(_ operation: @autoclosure () -> String, _ body: (OpaquePointer) -> Int32) throws(NetlinkError) {
        let result = body(handle)
        if result < 0 { throw NetlinkError.libnl(result, operation()) }
    }

    // MARK: - Receiving notifications

    /// What one call to ``receiveNotifications(_:)`` found.
    public enum ReceiveOutcome: Sendable, Equatable {
        /// Every queued message was read; the socket would block now.
        case drained
        /// The kernel dropped notifications because the receive buffer overflowed (`ENOBUFS`).
        /// Whatever state was built from notifications is stale: dump it again.
        case overrun
    }

    /// Reads every queued notification and hands each one to `handler`, without blocking.
    ///
    /// Call it when ``fileDescriptor`` is readable. On ``ReceiveOutcome/overrun`` the caller must
    /// re-read the state it follows; messages already queued after the overrun are still delivered
    /// by later calls.
    public func receiveNotifications(_ handler: (NetlinkNotification) -> Void) throws(NetlinkError) -> ReceiveOutcome {
        try withoutActuallyEscaping(handler) { handler throws(NetlinkError) -> ReceiveOutcome in
            let context = ParseContext(handler: handler)
            defer { withExtendedLifetime(context) {} }
            let opaque = Unmanaged.passUnretained(context).toOpaque()
            return try drainDatagrams { NetlinkSocket.parse($0, context: opaque) }
        }
    }

    /// How many datagrams one read takes, and the room for each: the kernel's largest netlink
    /// datagram (a dump's, `SKB_WITH_OVERHEAD(32768)` at most) fits.
    package static let datagramsPerRead = 8
    package static let datagramRoom = 32 * 1024

    /// Reads every queued datagram and hands each to `body`, without blocking: up to
    /// ``datagramsPerRead`` a `recvmmsg(2)`, into a buffer the socket keeps, so that a wake-up
    /// for a few notifications is one system call, not one more that finds the queue empty.
    /// A datagram larger than its room (it cannot be from the kernel) is an overrun: the state
    /// built from notifications is to be read again.
    func drainDatagrams(_ body: (UnsafeRawBufferPointer) -> Void) throws(NetlinkError) -> ReceiveOutcome {
        let slots = Self.datagramsPerRead, room = Self.datagramRoom
        let buffer = receiveBuffer ?? {
            let allocated = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * room, alignment: 8)
            receiveBuffer = allocated
            return allocated
        }()
        let fd = fileDescriptor
        return try withUnsafeTemporaryAllocation(of: Int.self, capacity: slots) { lengths throws(NetlinkError) -> ReceiveOutcome in
            while true {
                let count = Int(roam_receive_datagrams(fd, buffer.baseAddress, UInt32(slots), room, lengths.baseAddress))
                if count < 0 {
                    switch errno {
                    case EINTR: continue
                    case EAGAIN: return .drained
                    case ENOBUFS: return .overrun
                    case let code: throw NetlinkError.posix("recvmmsg(netlink)", errno: code)
                    }
                }
                for slot in 0..<count {
                    guard lengths[slot] >= 0 else { return .overrun }
                    body(UnsafeRawBufferPointer(start: buffer.baseAddress! + slot * room, count: lengths[slot]))
                }
                // Fewer than asked for: the queue was empty (an error after them, an overrun,
                // waits on the socket and wakes its poll).
                if count < slots { return .drained }
            }
        }
    }

    private final class ParseContext {
        let handler: (NetlinkNotification) -> Void
        init(handler: @escaping (NetlinkNotification) -> Void) { self.handler = handler }
    }

    /// Walks the netlink messages in one datagram: each one's type, where it starts, and its
    /// payload after the header. Stops at a malformed length.
    static func forEachMessage(in datagram: UnsafeRawBufferPointer, _ body: (_ type: Int32, _ offset: Int, _ payload: UnsafeRawBufferPointer) -> Void) {
        let headerSize = MemoryLayout<nlmsghdr>.size
        var offset = 0
        while offset + headerSize <= datagram.count {
            let header = datagram.loadUnaligned(fromByteOffset: offset, as: nlmsghdr.self)
            let length = Int(header.nlmsg_len)
            guard length >= headerSize, offset + length <= datagram.count else { return }
            body(Int32(header.nlmsg_type), offset, UnsafeRawBufferPointer(rebasing: datagram[(offset + headerSize)..<(offset + length)]))
            offset += (length + 3) & ~3
        }
    }

    /// Hands the rtnetlink objects in one datagram to the handler: links read directly
    /// (``Link/init(rtnetlink:)``: the most frequent notifications, and libnl's parser costs a
    /// copy and every attribute), addresses and routes through libnl's parser.
    private static func parse(_ datagram: UnsafeRawBufferPointer, context: UnsafeMutableRawPointer) {
        forEachMessage(in: datagram) { type, offset, payload in
            switch type {
            case Int32(RTM_NEWLINK), Int32(RTM_DELLINK):
                guard let link = Link(rtnetlink: payload) else { return }
                let context = Unmanaged<ParseContext>.fromOpaque(context).takeUnretainedValue()
                context.handler(type == Int32(RTM_DELLINK) ? .deletedLink(link) : .newLink(link))
            case Int32(RTM_NEWADDR), Int32(RTM_DELADDR), Int32(RTM_NEWROUTE), Int32(RTM_DELROUTE):
                let pointer = UnsafeMutableRawPointer(mutating: datagram.baseAddress! + offset)
                if let message = nlmsg_convert(pointer.assumingMemoryBound(to: nlmsghdr.self)) {
                    // libnl picks its parser by protocol and type; a converted message has no protocol yet.
                    nlmsg_set_proto(message, NETLINK_ROUTE)
                    _ = nl_msg_parse(message, { object, argument in
                        guard let object, let argument else { return }
                        let context = Unmanaged<ParseContext>.fromOpaque(argument).takeUnretainedValue()
                        if let notification = NetlinkNotification(libnl: object) { context.handler(notification) }
                    }, context)
                    nlmsg_free(message)
                }
            default:
                break
            }
        }
    }
    /// Each link message in `datagram` read both ways, directly and by libnl's parser (for the
    /// test that holds them equal).
    static func linksReadBothWays(in datagram: UnsafeRawBufferPointer) -> [(direct: Link?, libnl: Link?)] {
        var result: [(direct: Link?, libnl: Link?)] = []
        forEachMessage(in: datagram) { type, offset, payload in
            guard type == Int32(RTM_NEWLINK) || type == Int32(RTM_DELLINK) else { return }
            var parsed: Link?
            let pointer = UnsafeMutableRawPointer(mutating: datagram.baseAddress! + offset)
            if let message = nlmsg_convert(pointer.assumingMemoryBound(to: nlmsghdr.self)) {
                nlmsg_set_proto(message, NETLINK_ROUTE)
                withUnsafeMutablePointer(to: &parsed) { target in
                    _ = nl_msg_parse(message, { object, argument in
                        guard let object, let argument else { return }
                        argument.assumingMemoryBound(to: Link?.self).pointee = Link(libnl: object)
                    }, target)
                }
                nlmsg_free(message)
            }
            result.append((Link(rtnetlink: payload), parsed))
        }
        return result
    }
}

/// An rtnetlink notification: an object appeared, changed or went away.
public enum NetlinkNotification: Sendable, Hashable {
    case newLink(Link)
    case deletedLink(Link)
    case newAddress(InterfaceAddress)
    case deletedAddress(InterfaceAddress)
    case newRoute(Route)
    case deletedRoute(Route)

    init?(libnl object: OpaquePointer) {
        let type = libnlString(nl_object_get_type(object))
        let messageType = nl_object_get_msgtype(object)
        switch type {
        case "route/link":
            let link = Link(libnl: object)
            self = messageType == RTM_DELLINK ? .deletedLink(link) : .newLink(link)
        case "route/addr":
            guard let address = InterfaceAddress(libnl: object) else { return nil }
            self = messageType == RTM_DELADDR ? .deletedAddress(address) : .newAddress(address)
        case "route/route":
            guard let route = Route(libnl: object) else { return nil }
            self = messageType == RTM_DELROUTE ? .deletedRoute(route) : .newRoute(route)
        default:
            return nil
        }
    }
}
