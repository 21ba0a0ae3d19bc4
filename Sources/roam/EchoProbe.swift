import Glibc
import Netlink
import RoamCore
import RoamSystem

/// ICMP echoes (ping) to one target through one interface, for `roam record`: each sent with
/// its sequence number, each answer matched to it and timed on the monotonic clock.
///
/// An unprivileged ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP` or `IPPROTO_ICMPV6`: the kernel
/// keeps the identifier and hands the socket only its own answers) where
/// `net.ipv4.ping_group_range` lets the caller have one; a raw ICMP socket otherwise (root, or
/// `CAP_NET_RAW` in a user namespace), which sees every echo answer of the namespace, so
/// answers are matched by identifier and source too. Either is bound to the interface
/// (`SO_BINDTODEVICE`), so that the echoes leave through it whatever the routes prefer.
final class EchoProbe {
    let target: IPAddress
    let interface: String
    private let descriptor: OwnedFileDescriptor
    private let raw: Bool
    private let identifier: UInt16
    private var sequence: UInt16 = 0
    /// Echoes sent and not answered yet: sequence number, when sent.
    private var outstanding: [UInt16: MonotonicInstant] = [:]

    /// The descriptor to poll for answers.
    var pollEntry: pollfd { pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0) }

    /// A probe of `target` through `interface`.
    ///
    /// - Throws: A sentence saying why no ICMP socket could be had, or bound to the interface.
    init(target: IPAddress, interface: String, identifier: UInt16) throws(RecordError) {
        self.target = target
        self.interface = interface
        self.identifier = identifier
        let (domain, proto) = target.family == .inet ? (AF_INET, Int32(IPPROTO_ICMP)) : (AF_INET6, Int32(IPPROTO_ICMPV6))
        let flags = Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        var fd = socket(domain, Int32(SOCK_DGRAM.rawValue) | flags, proto)
        var raw = false
        if fd < 0 {
            let pingError = errno
            fd = socket(domain, Int32(SOCK_RAW.rawValue) | flags, proto)
            guard fd >= 0 else {
                throw RecordError("cannot open an ICMP socket for \(interface): \(String(cString: strerror(pingError))) (a ping socket: net.ipv4.ping_group_range does not hold this user's group) and \(String(cString: strerror(errno))) (a raw one needs root or CAP_NET_RAW)")
            }
            raw = true
        }
        descriptor = OwnedFileDescriptor(owning: fd)
        self.raw = raw
        var name = Array(interface.utf8CString)
        guard setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, &name, socklen_t(name.count)) == 0 else {
            throw RecordError("cannot send through \(interface) alone (SO_BINDTODEVICE): \(String(cString: strerror(errno)))")
        }
        if raw, target.family == .inet6 {
            // Only echo replies reach the socket (ICMP6_FILTER): not every neighbour discovery
            // message of the namespace.
            var filter = [UInt32](repeating: 0xffff_ffff, count: 8)
            filter[Int(129 >> 5)] &= ~(UInt32(1) << (129 & 31))
            _ = setsockopt(fd, Int32(IPPROTO_ICMPV6), 1, &filter, socklen_t(32))
        }
    }

    /// Sends one echo. A send the kernel refuses (no route through the interface, its carrier
    /// down) counts as an echo sent and lost, as on the air.
    func send(at now: MonotonicInstant) {
        sequence &+= 1
        var packet = [UInt8](repeating: 0, count: 24)
        packet[0] = target.family == .inet ? 8 : 128
        packet[4] = UInt8(identifier >> 8)
        packet[5] = UInt8(identifier & 0xff)
        packet[6] = UInt8(sequence >> 8)
        packet[7] = UInt8(sequence & 0xff)
        for (index, byte) in Array("roam record".utf8).enumerated() { packet[8 + index] = byte }
        if raw, target.family == .inet {
            // ICMPv4 on a raw socket carries its own checksum (ping sockets and ICMPv6 have the
            // kernel's).
            let sum = Self.checksum(packet)
            packet[2] = UInt8(sum >> 8)
            packet[3] = UInt8(sum & 0xff)
        }
        outstanding[sequence] = now
        _ = target.withSocketAddress(port: 0) { address, length in
            packet.withUnsafeBytes { sendto(descriptor.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT), address, length) }
        }
    }

    /// The most datagrams one call reads: a raw socket sees every echo answer of the namespace,
    /// and a flood of them must not keep the recorder from ending its interval.
    static let maximumReads = 256

    /// Reads the answers queued (at most ``maximumReads``): the round trip of each that answers
    /// an echo still outstanding.
    func receive(at now: MonotonicInstant) -> [Duration] {
        var roundTrips: [Duration] = []
        var buffer = [UInt8](repeating: 0, count: 1500)
        for _ in 0..<Self.maximumReads {
            var source = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { bytes in
                withUnsafeMutablePointer(to: &source) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(descriptor.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, &length)
                    }
                }
            }
            guard count > 0 else { break }
            var message = buffer[0..<count]
            if raw, target.family == .inet {
                // A raw IPv4 socket reads the IP header too.
                guard let first = message.first else { continue }
                let headerLength = Int(first & 0x0f) * 4
                guard message.count >= headerLength + 8 else { continue }
                message = message.dropFirst(headerLength)
            }
            guard message.count >= 8 else { continue }
            let start = message.startIndex
            let reply: UInt8 = target.family == .inet ? 0 : 129
            guard message[start] == reply else { continue }
            if raw {
                // A raw socket sees every answer of the namespace: only this probe's, from the target.
                let identifier = UInt16(message[start + 4]) << 8 | UInt16(message[start + 5])
                guard identifier == self.identifier, IPAddress(socketAddress: source) == target else { continue }
            }
            let sequence = UInt16(message[start + 6]) << 8 | UInt16(message[start + 7])
            if let sent = outstanding.removeValue(forKey: sequence) { roundTrips.append(now - sent) }
        }
        return roundTrips
    }

    /// Forgets the echoes still outstanding: an answer after its interval counts as lost.
    func forgetOutstanding() {
        outstanding.removeAll(keepingCapacity: true)
    }

    /// The Internet checksum (RFC 1071).
    static func checksum(_ bytes: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        var index = 0
        while index + 1 < bytes.count {
            sum += UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
            index += 2
        }
        if index < bytes.count { sum += UInt32(bytes[index]) << 8 }
        while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
        return ~UInt16(sum)
    }
}

/// Why `roam record` cannot go on: a sentence for its user.
struct RecordError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
