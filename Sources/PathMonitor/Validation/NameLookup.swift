import Glibc
import Netlink
import RoamCore
import RoamSystem
import SystemPackage

/// A host name looked up as an app's stub resolver does (glibc's, with its defaults): A and
/// AAAA queries at once over UDP to the first name server of the node's `resolv.conf`, each try
/// waiting up to 5 s, then the next server, twice round; a server that fails (SERVFAIL, REFUSED,
/// unreachable) passes the question on to the next, a "no such name" ends the lookup. Made in the
/// client's namespace, so that it goes where the node's own lookups go: to its network's
/// resolver, through its links; optionally through one interface only (a connectivity probe's).
/// The simulator's clients and the monitor's connectivity probes both look names up with it.
package enum NameLookup {
    /// What a lookup found.
    package struct Answer: Sendable, Hashable {
        /// IPv6 first, then IPv4, each as the server ordered them.
        package var addresses: [IPAddress]
        /// The server that answered.
        package var server: IPAddress
        package var duration: Duration
    }

    /// Why a lookup found nothing.
    package enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The node has no name server (it has joined no network).
        case noResolver
        /// No server answered within the time allowed.
        case timedOut(Duration)
        /// The name does not exist (NXDOMAIN).
        case noSuchName
        /// Every server failed (SERVFAIL), refused, or was unreachable; the last one's.
        case serverFailed(String)
        /// The name exists, with no address of the families asked for.
        case noAddresses
        /// The workload stopped while waiting.
        case stopped

        package var description: String {
            switch self {
            case .noResolver: "no resolver (the node has joined no network)"
            case .timedOut(let duration): "no answer in \(Self.milliseconds(duration))"
            case .noSuchName: "no such name (NXDOMAIN)"
            case .serverFailed(let why): why
            case .noAddresses: "no address of the families asked for"
            case .stopped: "stopped"
            }
        }

        /// `1001ms`, or `5s` for whole seconds.
        static func milliseconds(_ duration: Duration) -> String {
            let (seconds, attoseconds) = duration.components
            if attoseconds == 0 { return "\(seconds)s" }
            return "\((Double(seconds) * 1000 + Double(attoseconds) / 1e15).rounded())ms"
        }
    }

    /// glibc's defaults (`options timeout:5 attempts:2`).
    package static let attemptTimeout = Duration.seconds(5)
    package static let attempts = 2

    /// Looks `name` up for `families` at `servers` (the node's, in order), from `namespace`, until
    /// `deadline` at the latest (or `stop`).
    package static func resolve(_ name: String, families: [AddressFamily], servers: [IPAddress], in namespace: NetworkNamespace,
                                interface: String? = nil, deadline: MonotonicInstant, stop: EventSignal? = nil,
                                tryTimeout: Duration = attemptTimeout) -> Result<Answer, Failure> {
        guard !servers.isEmpty else { return .failure(.noResolver) }
        let began = MonotonicInstant.now
        var lastFailure: Failure?
        for _ in 0..<attempts {
            for server in servers {
                guard MonotonicInstant.now < deadline else { return .failure(lastFailure.flatMap(\.decisive) ?? .timedOut(.now - began)) }
                let tryDeadline = min(deadline, .now + tryTimeout)
                switch ask(server, name: name, families: families, in: namespace, interface: interface, deadline: tryDeadline, stop: stop) {
                case .success(let addresses):
                    if addresses.isEmpty { return .failure(.noAddresses) }
                    return .success(Answer(addresses: addresses, server: server, duration: .now - began))
                case .failure(.noSuchName):
                    return .failure(.noSuchName)
                case .failure(.stopped):
                    return .failure(.stopped)
                case .failure(let failure):
                    lastFailure = failure
                }
            }
        }
        return .failure(lastFailure.flatMap(\.decisive) ?? .timedOut(.now - began))
    }

    /// One try at one server: both queries, until both are answered or `deadline`.
    /// Sends `descriptor`'s traffic out of `interface` only (SO_BINDTODEVICE).
    package static func bind(_ descriptor: Int32, toDevice interface: String) -> Bool {
        var name = Array(interface.utf8CString)
        return setsockopt(descriptor, SOL_SOCKET, SO_BINDTODEVICE, &name, socklen_t(name.count)) == 0
    }

    private static func ask(_ server: IPAddress, name: String, families: [AddressFamily], in namespace: NetworkNamespace,
                            interface: String?, deadline: MonotonicInstant, stop: EventSignal?) -> Result<[IPAddress], Failure> {
        let domain = server.family == .inet ? AF_INET : AF_INET6
        guard let descriptor = try? namespace.perform({ socket(domain, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }),
              descriptor >= 0 else {
            return .failure(.serverFailed("cannot open a socket to \(server): \(Errno.current)"))
        }
        defer { close(descriptor) }
        if let interface, !bind(descriptor, toDevice: interface) {
            return .failure(.serverFailed("cannot bind a socket to \(interface): \(Errno.current)"))
        }
        guard server.withSocketAddress(port: 53, { connect(descriptor, $0, $1) }) == 0 else {
            return .failure(.serverFailed("\(server) is unreachable: \(Errno.current)"))
        }
        var pending: [UInt16: AddressFamily] = [:]
        for family in families {
            var id = UInt16.random(in: 1...UInt16.max)
            while pending[id] != nil { id = UInt16.random(in: 1...UInt16.max) }
            let query = DNSMessage.query(name, id: id, type: family == .inet ? DNSMessage.typeA : DNSMessage.typeAAAA)
            guard query.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, 0) }) == query.count else {
                return .failure(.serverFailed("\(server) is unreachable: \(Errno.current)"))
            }
            pending[id] = family
        }
        var found: [AddressFamily: [IPAddress]] = [:]
        var buffer = [UInt8](repeating: 0, count: 1500)
        while !pending.isEmpty {
            var entries = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)]
            if let stop { entries.append(stop.pollEntry) }
            _ = try? waitForEvents(&entries, until: deadline)
            if entries.count > 1, entries[1].revents != 0 { return .failure(.stopped) }
            guard entries[0].revents != 0 else { break }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                return .failure(.serverFailed("\(server) is unreachable: \(Errno.current)"))
            }
            guard let message = DNSMessage(parsing: buffer[..<count]), let family = pending[message.id] else { continue }
            pending[message.id] = nil
            switch message.responseCode {
            case 0: found[family] = message.addresses.filter { $0.family == family }
            case 3: return .failure(.noSuchName)
            case 2: return .failure(.serverFailed("\(server) failed (SERVFAIL)"))
            case 5: return .failure(.serverFailed("\(server) refused (REFUSED)"))
            default: return .failure(.serverFailed("\(server) answered with response code \(message.responseCode)"))
            }
        }
        // A try that timed out with one family answered gives what it has, as glibc does.
        if found.isEmpty { return .failure(.timedOut(.zero)) }
        return .success((found[.inet6] ?? []) + (found[.inet] ?? []))
    }
}

extension NameLookup.Failure {
    /// A failure worth reporting over a timeout: what a server said.
    fileprivate var decisive: Self? {
        if case .serverFailed = self { return self }
        return nil
    }
}

/// A DNS response: its identifier, response code and the addresses in its answer section.
/// Reads at most what it is given, and refuses what does not parse (a name running past the
/// message, a pointer loop, a record longer than what is left).
package struct DNSMessage: Sendable, Hashable {
    package static let typeA: UInt16 = 1
    package static let typeAAAA: UInt16 = 28

    /// The query for `name` (of `type`, recursion desired) with identifier `id`.
    package static func query(_ name: String, id: UInt16 = 0x526f, type: UInt16 = typeA) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xff), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") {
            bytes.append(UInt8(label.utf8.count))
            bytes += label.utf8
        }
        bytes += [0, UInt8(type >> 8), UInt8(type & 0xff), 0, 1]
        return bytes
    }

    package var id: UInt16
    package var responseCode: UInt8
    package var addresses: [IPAddress]

    package init?(parsing bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count >= 12, bytes[2] & 0x80 != 0 else { return nil }
        func word(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        id = UInt16(word(0))
        responseCode = bytes[3] & 0x0f
        let questions = word(4)
        let answers = word(6)
        var offset = 12
        /// Skips a name: labels up to a zero, or a compression pointer (which ends it).
        func skipName() -> Bool {
            var labels = 0
            while offset < bytes.count, labels < 128 {
                let length = Int(bytes[offset])
                if length == 0 {
                    offset += 1
                    return true
                }
                if length & 0xc0 == 0xc0 {
                    offset += 2
                    return offset <= bytes.count
                }
                guard length & 0xc0 == 0 else { return false }
                offset += 1 + length
                labels += 1
            }
            return false
        }
        for _ in 0..<questions {
            guard skipName(), offset + 4 <= bytes.count else { return nil }
            offset += 4
        }
        var found: [IPAddress] = []
        for _ in 0..<answers {
            guard skipName(), offset + 10 <= bytes.count else { return nil }
            let type = UInt16(word(offset))
            let length = word(offset + 8)
            offset += 10
            guard offset + length <= bytes.count else { return nil }
            if (type == Self.typeA && length == 4) || (type == Self.typeAAAA && length == 16),
               let address = IPAddress(bytes: bytes[offset..<(offset + length)]) {
                found.append(address)
            }
            offset += length
        }
        addresses = found
    }
}
