import CRoamLinux
import Glibc
import Netlink
import RoamSystem
import Synchronization
import SystemPackage

/// Stands between a network's phones and its resolver while a `dns:` fault that unbound cannot
/// make itself is on: `delay` (each query waits, then goes on to the resolver, whose answer comes
/// straight back) and `servfail` (each query is answered with SERVFAIL at once). The gateway's
/// nftables hand it the phones' UDP queries to the resolver's addresses (``ruleset(port:gateway:)``,
/// a DNAT to its port on the same address, so that its answers leave from the address the phone
/// asked); queries over TCP are left to the resolver.
///
/// One thread, polling its sockets and a stop signal; what it holds is bounded
/// (``maximumPending`` queries; more are dropped, as a resolver under load drops them).
final class DNSFaultRelay: Sendable {
    enum Mode: Sendable, Equatable {
        case delay(Duration)
        case servfail
        /// A captive portal's: every A or AAAA question is answered with these addresses (the
        /// gateway's), TTL 0, whatever the name; other types get an empty answer.
        case hijack(ipv4: IPAddress?, ipv6: IPAddress?)
    }

    /// Where the relay listens in the gateway, on each of its resolver's addresses.
    static let port: UInt16 = 5300
    /// Where a captive portal's hijacking relay listens.
    static let hijackPort: UInt16 = 5301
    static let maximumPending = 1024

    private let stopSignal: EventSignal
    private let thread: PinnedThread
    /// Queries dropped because too many were held.
    private let dropped = DropCount()

    /// Starts relaying in `namespace` (the gateway's) for the resolver at `resolvers` (its
    /// addresses on the network: the relay listens on each, at ``port``).
    init(mode: Mode, resolvers: [IPAddress], in namespace: NetworkNamespace, port: UInt16 = DNSFaultRelay.port) throws(SimulatorError) {
        var listeners: [Int32] = []
        var upstreams: [IPAddress: Int32] = [:]
        func closeAll() {
            for descriptor in listeners + Array(upstreams.values) { close(descriptor) }
        }
        do {
            try namespace.perform {
                for address in resolvers {
                    listeners.append(try Self.socket(bound: address, port: port))
                    // Queries go on to the resolver from a socket of the relay's own.
                    let upstream = try Self.socket(bound: nil, family: address.family)
                    guard address.withSocketAddress(port: 53, { connect(upstream, $0, $1) }) == 0 else {
                        close(upstream)
                        throw SimulatorError(.environment, "cannot reach the resolver at \(address) for a dns fault: \(Errno.current)")
                    }
                    upstreams[address] = upstream
                }
            }
            stopSignal = try EventSignal()
        } catch let error as SimulatorError {
            closeAll()
            throw error
        } catch {
            closeAll()
            throw SimulatorError(.environment, "cannot relay a network's dns fault: \(error)")
        }
        let stop = stopSignal, counter = dropped
        let owned = (listeners, resolvers.map { upstreams[$0]! })
        do throws(NetlinkError) {
            thread = try PinnedThread(name: "roam-dns-relay") {
                var loop = RelayLoop(mode: mode, listeners: owned.0, upstreams: owned.1, stop: stop, dropped: counter)
                loop.run()
                for descriptor in owned.0 + owned.1 { close(descriptor) }
            }
        } catch {
            closeAll()
            throw SimulatorError(.environment, "cannot start a dns relay thread: \(error)")
        }
    }

    /// Stops relaying and waits for the thread: what a delay still holds goes on at once, and
    /// the resolver's answers to it are passed back for up to half a second (the loop's `drainTime`).
    func stop() {
        stopSignal.signal()
        thread.join()
    }

    var droppedQueries: Int { dropped.count.load(ordering: .relaxed) }

    /// The nftables table that hands the phones' UDP queries for `gateway`'s resolver addresses to
    /// the relay (and only those: the gateway's own queries are not routed through prerouting).
    static func ruleset(resolvers: [IPAddress]) -> String {
        var rules = ""
        for address in resolvers {
            let family = address.family == .inet ? "ip" : "ip6"
            let target = address.family == .inet ? "\(address):\(port)" : "[\(address)]:\(port)"
            rules += "    \(family) daddr \(address) udp dport 53 dnat \(family) to \(target)\n"
        }
        return """
            table inet roam-dns-relay {
              chain prerouting {
                type nat hook prerouting priority dstnat; policy accept;
            \(rules)  }
            }

            """
    }

    private static func socket(bound address: IPAddress?, port: UInt16 = 0, family: AddressFamily? = nil) throws(SimulatorError) -> Int32 {
        let family = address?.family ?? family ?? .inet
        let descriptor = Glibc.socket(family == .inet ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw SimulatorError(.environment, "cannot open a socket for a dns relay: \(Errno.current)") }
        if let address {
            guard address.withSocketAddress(port: port, { bind(descriptor, $0, $1) }) == 0 else {
                let error = Errno.current
                close(descriptor)
                throw SimulatorError(.environment, "cannot listen at \(address) port \(port) for a dns relay: \(error)")
            }
        }
        return descriptor
    }
}

/// How many queries a relay dropped, shared with its thread.
final class DropCount: Sendable {
    let count = Atomic<Int>(0)
}

/// The relay's thread: what it holds, and its loop.
private struct RelayLoop {
    struct Held {
        var due: MonotonicInstant
        var query: [UInt8]
        var listener: Int
        var client: sockaddr_storage
        var clientLength: socklen_t
    }

    let mode: DNSFaultRelay.Mode
    let listeners: [Int32]
    /// The resolver's socket for each listener, at the same place.
    let upstreams: [Int32]
    let stop: EventSignal
    let dropped: DropCount
    /// Queries waiting out their delay, oldest first (every one waits the same).
    var held: [Held] = []
    var first = 0
    /// Queries sent on, by the identifier the relay gave them: the client's own, and where to answer.
    var forwarded: [UInt16: Held] = [:]
    var nextID: UInt16 = 1

    init(mode: DNSFaultRelay.Mode, listeners: [Int32], upstreams: [Int32], stop: EventSignal, dropped: DropCount) {
        self.mode = mode
        self.listeners = listeners
        self.upstreams = upstreams
        self.stop = stop
        self.dropped = dropped
    }

    /// How long a stopped relay still passes answers back for the queries it sent on (a delay
    /// that ends lets what it held go at once, as a resolver that is fast again answers).
    static let drainTime = Duration.milliseconds(500)

    mutating func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var draining: MonotonicInstant?
        while true {
            if let draining, forwarded.isEmpty || MonotonicInstant.now >= draining { return }
            var entries = [draining == nil ? stop.pollEntry : pollfd(fd: -1, events: 0, revents: 0)]
                + (listeners + upstreams).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let wake = draining ?? (first < held.count ? held[first].due : MonotonicInstant.now + .seconds(3600))
            _ = try? waitForEvents(&entries, until: wake)
            if draining == nil, entries[0].revents != 0 {
                draining = .now + Self.drainTime
                for index in first..<held.count { held[index].due = .now }
                releaseDue()
                continue
            }
            for (index, listener) in listeners.enumerated() where entries[1 + index].revents != 0 {
                receiveQueries(on: index, listener, &buffer)
            }
            for (index, upstream) in upstreams.enumerated() where entries[1 + listeners.count + index].revents != 0 {
                receiveAnswers(on: upstream, &buffer)
            }
            releaseDue()
        }
    }

    private mutating func receiveQueries(on index: Int, _ listener: Int32, _ buffer: inout [UInt8]) {
        for _ in 0..<64 {
            var client = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { bytes in
                withUnsafeMutablePointer(to: &client) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(listener, bytes.baseAddress, bytes.count, 0, $0, &length) }
                }
            }
            guard count >= 0 else { return }
            // A query: 12 bytes of header at least, the response bit clear.
            guard count >= 12, buffer[2] & 0x80 == 0 else { continue }
            let query = Array(buffer[..<count])
            switch mode {
            case .servfail:
                var answer = Self.questionOnly(query)
                answer[2] = 0x80 | (query[2] & 0x01)   // a response, keeping "recursion desired"
                answer[3] = 0x80 | 2                    // recursion available, SERVFAIL
                _ = answer.withUnsafeBytes { bytes in
                    withUnsafePointer(to: &client) { pointer in
                        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(listener, bytes.baseAddress, bytes.count, 0, $0, length) }
                    }
                }
            case let .hijack(ipv4, ipv6):
                let answer = Self.hijacked(query, ipv4: ipv4, ipv6: ipv6)
                _ = answer.withUnsafeBytes { bytes in
                    withUnsafePointer(to: &client) { pointer in
                        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(listener, bytes.baseAddress, bytes.count, 0, $0, length) }
                    }
                }
            case .delay(let delay):
                guard held.count - first + forwarded.count < DNSFaultRelay.maximumPending else {
                    dropped.count.add(1, ordering: .relaxed)
                    continue
                }
                held.append(Held(due: .now + delay, query: query, listener: index, client: client, clientLength: length))
            }
        }
    }

    /// A portal's answer to `query`: for one A (or AAAA) question, `ipv4` (or `ipv6`) as its
    /// answer with TTL 0; for anything else, no answer (NOERROR).
    static func hijacked(_ query: [UInt8], ipv4: IPAddress?, ipv6: IPAddress?) -> [UInt8] {
        var answer = questionOnly(query)
        answer[2] = 0x80 | 0x04 | (query[2] & 0x01)   // a response, authoritative, keeping "recursion desired"
        answer[3] = 0x80                              // recursion available, NOERROR
        // One whole question: its type is the two bytes before its class.
        guard answer.count >= 17, answer[5] == 1, answer[4] == 0 else { return answer }
        let type = UInt16(answer[answer.count - 4]) << 8 | UInt16(answer[answer.count - 3])
        let address = type == 1 ? ipv4 : type == 28 ? ipv6 : nil
        guard let address, (type == 1) == (address.family == .inet) else { return answer }
        answer[7] = 1
        let data = address.bytes
        answer += [0xc0, 0x0c, UInt8(type >> 8), UInt8(type & 0xff), 0, 1, 0, 0, 0, 0, 0, UInt8(data.count)] + data
        return answer
    }

    /// The query's header and question only (no additional records), every count but the
    /// question's zero: the body of a SERVFAIL answer.
    static func questionOnly(_ query: [UInt8]) -> [UInt8] {
        var end = 12
        if query[4] == 0, query[5] == 1 {
            var labels = 0
            while end < query.count, query[end] != 0, query[end] & 0xc0 == 0, labels < 128 {
                end += 1 + Int(query[end])
                labels += 1
            }
            end = min(query.count, end + 1 + 4)
        }
        var answer = Array(query[..<min(end, query.count)])
        for index in 6..<12 { answer[index] = 0 }
        if end == 12 { answer[4] = 0; answer[5] = 0 }
        return answer
    }

    /// Sends on the queries whose delay is over, each under an identifier of the relay's.
    private mutating func releaseDue() {
        let now = MonotonicInstant.now
        while first < held.count, held[first].due <= now {
            var query = held[first].query
            while forwarded[nextID] != nil { nextID &+= 1 }
            let id = nextID
            nextID &+= 1
            let original = held[first]
            query[0] = UInt8(id >> 8)
            query[1] = UInt8(id & 0xff)
            forwarded[id] = original
            _ = query.withUnsafeBytes { send(upstreams[original.listener], $0.baseAddress, $0.count, 0) }
            first += 1
        }
        if first > 256, first * 2 > held.count {
            held.removeFirst(first)
            first = 0
        }
        // What the resolver never answered is forgotten after a while (a stub gave up long before).
        if forwarded.count > DNSFaultRelay.maximumPending / 2 {
            forwarded = forwarded.filter { now - $0.value.due < .seconds(30) }
        }
    }

    /// Passes the resolver's answers back to whoever asked, under their own identifier.
    private mutating func receiveAnswers(on upstream: Int32, _ buffer: inout [UInt8]) {
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { recv(upstream, $0.baseAddress, $0.count, 0) }
            guard count >= 0 else { return }
            guard count >= 12 else { continue }
            let id = UInt16(buffer[0]) << 8 | UInt16(buffer[1])
            guard var asker = forwarded.removeValue(forKey: id) else { continue }
            buffer[0] = asker.query[0]
            buffer[1] = asker.query[1]
            let listener = listeners[asker.listener]
            _ = buffer.withUnsafeBytes { bytes in
                withUnsafePointer(to: &asker.client) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(listener, bytes.baseAddress, count, 0, $0, asker.clientLength) }
                }
            }
        }
    }
}
