import CRoamLinux
import Glibc
import Netlink
import RoamCore
import RoamSystem
import ScenarioModel
import Synchronization
import SystemPackage

/// The TCP proxies of a run (``ProxySpec``): one thread that accepts, connects upstream and
/// moves every connection's bytes through its toxics (``ToxicChain``), polling its sockets and
/// waking at the next piece due.
///
/// Changes (add, update, remove, toxics, reset) are performed on that thread, one at a time, and
/// each call returns when it is done, with what went wrong (a port taken, a name not found)
/// for the caller to say. What it holds is bounded: ``ProxySpec/maximumProxies`` proxies,
/// ``ProxySpec/maximumConnections`` connections a proxy, ``maximumQueued`` bytes queued a
/// direction and ``maximumQueuedTotal`` over all (past either it reads no more from that side
/// until the queue drains).
package final class ProxyHub: Sendable {
    /// Where a proxy's names lead: the namespaces of the run's nodes, and the address that
    /// reaches each node.
    package struct Places: Sendable {
        package var namespaces: [String: NetworkNamespace]
        package var addresses: [String: IPAddress]
        /// Who connects to a proxy on the host's loopback, and who may: the run's user and root.
        package var peers: LoopbackPeers?
        package var user: uid_t

        package init(namespaces: [String: NetworkNamespace], addresses: [String: IPAddress], peers: LoopbackPeers? = try? LoopbackPeers(),
                     user: uid_t = geteuid()) {
            self.namespaces = namespaces
            self.addresses = addresses
            self.peers = peers
            self.user = user
        }
    }

    /// Why a change was refused: `status` is the HTTP status toxiproxy answers with.
    package struct Refusal: Error, Sendable, CustomStringConvertible {
        package var status: Int
        package var message: String
        package var description: String { message }
        package init(status: Int, message: String) {
            self.status = status
            self.message = message
        }
    }

    package static let maximumQueued = 4 << 20
    /// The most bytes queued over every connection, and the most pieces a direction holds (a
    /// slicer of 1 byte makes a piece of each): past either, no more is read until they drain.
    package static let maximumQueuedTotal = 64 << 20
    package static let maximumPieces = 65_536
    static let readSize = 64 * 1024

    /// Changes waiting for the thread.
    final class Commands: Sendable {
        let pending = Mutex<[@Sendable (inout ProxyLoop) -> Void]>([])
    }

    private let signal: EventSignal
    private let commands = Commands()
    private let thread: PinnedThread
    private let stopped = Atomic<Bool>(false)

    /// Starts the thread, with no proxy yet. `record` is told of each change (for the run's timeline).
    package init(places: Places, seed: UInt64, record: @escaping @Sendable (String) -> Void) throws(SimulatorError) {
        do throws(Errno) {
            signal = try EventSignal()
        } catch {
            throw SimulatorError(.environment, "cannot start the run's proxies: \(error)")
        }
        let signal = signal, commands = commands
        do throws(NetlinkError) {
            thread = try PinnedThread(name: "roam-proxies") {
                var loop = ProxyLoop(places: places, seed: seed, record: record)
                loop.run(signal: signal, commands: commands)
            }
        } catch {
            throw SimulatorError(.environment, "cannot start the run's proxies: \(error)")
        }
    }

    /// Performs `body` on the proxies' thread and returns what it gave.
    private func perform<T: Sendable>(_ body: @escaping @Sendable (inout ProxyLoop) throws(Refusal) -> T) throws(Refusal) -> T {
        guard !stopped.load(ordering: .acquiring) else { throw Refusal(status: 503, message: "the run's proxies have stopped") }
        let reply = Mutex<Result<T, Refusal>?>(nil)
        guard let done = try? EventSignal() else { throw Refusal(status: 500, message: "cannot wait for the run's proxies: \(Errno.current)") }
        commands.pending.withLock { $0.append { loop in
            let result: Result<T, Refusal>
            do throws(Refusal) { result = .success(try body(&loop)) } catch { result = .failure(error) }
            reply.withLock { $0 = result }
            done.signal()
        } }
        signal.signal()
        while true {
            if let result = reply.withLock({ $0 }) { return try result.get() }
            _ = done.wait(until: .now + .seconds(1))
            if stopped.load(ordering: .acquiring), reply.withLock({ $0 }) == nil { throw Refusal(status: 503, message: "the run's proxies have stopped") }
        }
    }

    /// The proxies, in the order they were made.
    package func proxies() -> [ProxySpec] {
        (try? perform { loop in loop.specs }) ?? []
    }

    package func proxy(named name: String) throws(Refusal) -> ProxySpec {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.spec(named: name) }
    }

    /// Makes `spec` (refused with 409 when its name is taken, unless `replacing`).
    @discardableResult
    package func create(_ spec: ProxySpec, replacing: Bool = false) throws(Refusal) -> ProxySpec {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.create(spec, replacing: replacing) }
    }

    /// Makes several at once (toxiproxy's populate: each replaces one of its name); nothing
    /// changes unless all can be made... as far as ports allow: one that cannot listen is
    /// refused and those made before it stay.
    package func populate(_ specs: [ProxySpec]) throws(Refusal) -> [ProxySpec] {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in
            var made: [ProxySpec] = []
            for spec in specs { made.append(try loop.create(spec, replacing: true)) }
            return made
        }
    }

    /// Changes `name`'s listen, upstream or enabled (`spec` carries the new values; its toxics
    /// are the proxy's own and stay).
    package func update(_ name: String, to spec: ProxySpec) throws(Refusal) -> ProxySpec {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.update(name, to: spec) }
    }

    package func remove(_ name: String) throws(Refusal) {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.remove(name) }
    }

    /// Sets `name`'s toxics; its connections' chains follow at once.
    package func setToxics(_ name: String, _ change: @escaping @Sendable ([Toxic]) throws(Refusal) -> [Toxic]) throws(Refusal) -> ProxySpec {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.setToxics(name, change) }
    }

    /// Toxiproxy's reset: every proxy enabled, every toxic removed.
    package func reset() throws(Refusal) {
        try perform { (loop: inout ProxyLoop) throws(Refusal) in try loop.reset() }
    }

    /// Plays `events` (the timeline's, in time order) at their times from `zero`.
    package func schedule(_ events: [ProxyEvent], from zero: MonotonicInstant) {
        guard !events.isEmpty else { return }
        _ = try? perform { loop in
            loop.timeline = events
            loop.timelineZero = zero
            loop.nextEvent = 0
        }
    }

    /// Closes every proxy and connection, and waits for the thread.
    package func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        commands.pending.withLock { $0.append { loop in loop.shutdown() } }
        signal.signal()
        thread.join()
    }
}

/// The proxies' thread: what it holds, and its loop.
package struct ProxyLoop {
    final class Running {
        var spec: ProxySpec
        var listener: Int32 = -1
        init(spec: ProxySpec) { self.spec = spec }
    }

    final class Direction {
        var chain: ToxicChain
        var queue: [ToxicChain.Scheduled] = []
        var head = 0
        /// Bytes of the head already written.
        var written = 0
        var queuedBytes = 0
        var sourceEnded = false
        var endSent = false
        /// The destination would block: wait for it to be writable.
        var blocked = false
        init(chain: ToxicChain) { self.chain = chain }
        var nextDue: MonotonicInstant? { blocked || head >= queue.count ? nil : queue[head].due }
    }

    final class Connection {
        let proxy: String
        let client: Int32
        let upstream: Int32
        var connected = false
        let up: Direction
        let down: Direction
        init(proxy: String, client: Int32, upstream: Int32, toxics: [Toxic], now: MonotonicInstant, seed: UInt64) {
            self.proxy = proxy
            self.client = client
            self.upstream = upstream
            up = Direction(chain: ToxicChain(toxics: toxics, stream: .upstream, now: now, seed: seed))
            down = Direction(chain: ToxicChain(toxics: toxics, stream: .downstream, now: now, seed: seed ^ 0x5DEE_CE66_D1CE_5EED))
        }
        var nextEnding: (at: MonotonicInstant, ending: ToxicChain.Ending)? {
            switch (up.chain.nextEnding, down.chain.nextEnding) {
            case let (a?, b?): a.at <= b.at ? a : b
            case let (a, b): a ?? b
            }
        }
    }

    let places: ProxyHub.Places
    var seed: UInt64
    let record: @Sendable (String) -> Void
    var running: [Running] = []
    var connections: [Int: Connection] = [:]
    var nextConnection = 0
    var finished = false
    /// The timeline's proxy events, from time zero; the next one to play.
    var timeline: [ProxyEvent] = []
    var timelineZero = MonotonicInstant.now
    var nextEvent = 0

    init(places: ProxyHub.Places, seed: UInt64, record: @escaping @Sendable (String) -> Void) {
        self.places = places
        self.seed = seed
        self.record = record
    }

    var specs: [ProxySpec] { running.map(\.spec) }

    func spec(named name: String) throws(ProxyHub.Refusal) -> ProxySpec {
        guard let found = running.first(where: { $0.spec.name == name }) else { throw Self.notFound(name) }
        return found.spec
    }

    static func notFound(_ name: String) -> ProxyHub.Refusal {
        ProxyHub.Refusal(status: 404, message: "proxy not found: \(escapedForMessage(name))")
    }

    // MARK: - Changes

    mutating func create(_ spec: ProxySpec, replacing: Bool) throws(ProxyHub.Refusal) -> ProxySpec {
        if let index = running.firstIndex(where: { $0.spec.name == spec.name }) {
            guard replacing else { throw ProxyHub.Refusal(status: 409, message: "proxy already exists: \(spec.name)") }
            let existing = running[index]
            // Unchanged: kept as it is, with its connections (toxiproxy's populate does the same).
            if existing.spec.listen.host == spec.listen.host, spec.listen.port == 0 || existing.spec.listen.port == spec.listen.port,
               existing.spec.upstream == spec.upstream, existing.spec.enabled == spec.enabled {
                return existing.spec
            }
            stopListening(existing)
            running.remove(at: index)
        }
        guard running.count < ProxySpec.maximumProxies else {
            throw ProxyHub.Refusal(status: 400, message: "a run holds at most \(ProxySpec.maximumProxies) proxies")
        }
        let proxy = Running(spec: spec)
        if spec.enabled { try listen(proxy) }
        running.append(proxy)
        record("proxy \(spec.name) listens on \(proxy.spec.listen) for \(spec.upstream)\(spec.enabled ? "" : " (disabled)")")
        return proxy.spec
    }

    mutating func update(_ name: String, to spec: ProxySpec) throws(ProxyHub.Refusal) -> ProxySpec {
        guard let proxy = running.first(where: { $0.spec.name == name }) else { throw Self.notFound(name) }
        let moved = spec.listen != proxy.spec.listen || spec.upstream != proxy.spec.upstream
        if moved || !spec.enabled { stopListening(proxy) }
        let before = proxy.spec
        proxy.spec.listen = spec.listen
        proxy.spec.upstream = spec.upstream
        proxy.spec.enabled = spec.enabled
        if spec.enabled, proxy.listener < 0 {
            do throws(ProxyHub.Refusal) {
                try listen(proxy)
            } catch {
                proxy.spec = before
                if before.enabled { try? listen(proxy) }
                throw error
            }
        }
        if before.enabled != spec.enabled { record("proxy \(name) \(spec.enabled ? "enabled" : "disabled")") }
        return proxy.spec
    }

    mutating func remove(_ name: String) throws(ProxyHub.Refusal) {
        guard let index = running.firstIndex(where: { $0.spec.name == name }) else { throw Self.notFound(name) }
        stopListening(running[index])
        running.remove(at: index)
        record("proxy \(name) removed")
    }

    mutating func setToxics(_ name: String, _ change: ([Toxic]) throws(ProxyHub.Refusal) -> [Toxic]) throws(ProxyHub.Refusal) -> ProxySpec {
        guard let proxy = running.first(where: { $0.spec.name == name }) else { throw Self.notFound(name) }
        let toxics = try change(proxy.spec.toxics)
        guard toxics.count <= ProxySpec.maximumToxics else {
            throw ProxyHub.Refusal(status: 400, message: "a proxy holds at most \(ProxySpec.maximumToxics) toxics")
        }
        let before = Set(proxy.spec.toxics.map(\.name)), after = Set(toxics.map(\.name))
        proxy.spec.toxics = toxics
        let now = MonotonicInstant.now
        for connection in connections.values where connection.proxy == name {
            connection.up.chain.update(toxics: toxics, now: now)
            connection.down.chain.update(toxics: toxics, now: now)
        }
        for added in toxics where !before.contains(added.name) { record("proxy \(name): toxic \(added.name) added (\(Self.summary(added)))") }
        for removed in before.subtracting(after).sorted() { record("proxy \(name): toxic \(removed) removed") }
        for changed in toxics where before.contains(changed.name) { record("proxy \(name): toxic \(changed.name) set (\(Self.summary(changed)))") }
        return proxy.spec
    }

    static func summary(_ toxic: Toxic) -> String {
        let attributes = toxic.kind.attributes.map { "\($0.0)=\($0.1)" }.joined(separator: " ")
        return "\(toxic.kind.typeName) \(toxic.stream.rawValue) \(attributes)" + (toxic.toxicity < 1 ? " toxicity=\(toxic.toxicity)" : "")
    }

    mutating func reset() throws(ProxyHub.Refusal) {
        for proxy in running {
            _ = try setToxics(proxy.spec.name) { _ in [] }
            if !proxy.spec.enabled {
                var spec = proxy.spec
                spec.enabled = true
                _ = try update(spec.name, to: spec)
            }
        }
    }

    /// Plays the timeline's events that are due.
    mutating func playTimeline(now: MonotonicInstant) {
        while nextEvent < timeline.count, timelineZero + timeline[nextEvent].at <= now {
            let event = timeline[nextEvent]
            nextEvent += 1
            do throws(ProxyHub.Refusal) {
                switch event.action {
                case .addToxic(let toxic):
                    _ = try setToxics(event.proxy) { toxics in
                        var next = toxics.filter { $0.name != toxic.name }
                        next.append(toxic)
                        return next
                    }
                case .removeToxic(let name):
                    _ = try setToxics(event.proxy) { toxics in toxics.filter { $0.name != name } }
                case .enabled(let on):
                    var spec = try spec(named: event.proxy)
                    spec.enabled = on
                    _ = try update(event.proxy, to: spec)
                }
            } catch {
                record("proxy \(event.proxy): the timeline's \(event.summary) at \(event.at) failed: \(error.message)")
            }
        }
    }

    var nextTimelineEvent: MonotonicInstant? { nextEvent < timeline.count ? timelineZero + timeline[nextEvent].at : nil }

    mutating func shutdown() {
        for proxy in running { stopListening(proxy) }
        running = []
        finished = true
    }

    // MARK: - Sockets

    /// Opens `proxy`'s listening socket where its listen names; a port of 0 becomes the one taken.
    private mutating func listen(_ proxy: Running) throws(ProxyHub.Refusal) {
        let endpoint = proxy.spec.listen
        let descriptor: Int32
        do {
            if endpoint.isLoopback {
                descriptor = try Self.listeningSocket(loopback: endpoint)
            } else {
                guard let namespace = places.namespaces[endpoint.host] else {
                    throw ProxyHub.Refusal(status: 400, message: "no node named \(escapedForMessage(endpoint.host)) to listen in")
                }
                descriptor = try namespace.perform { try Self.listeningSocket(anyAddress: endpoint.port) }
            }
        } catch let refusal as ProxyHub.Refusal {
            throw refusal
        } catch {
            throw ProxyHub.Refusal(status: 500, message: "cannot listen on \(endpoint) for proxy \(proxy.spec.name): \(error)")
        }
        proxy.listener = descriptor
        if endpoint.port == 0 {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
            let port = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
            proxy.spec.listen.port = port
        }
    }

    private static func listeningSocket(loopback endpoint: ProxyEndpoint) throws(ProxyHub.Refusal) -> Int32 {
        // The host's loopback only, whatever the host says ("0.0.0.0" too): a run's proxy is
        // never reachable from another machine.
        let address: IPAddress = endpoint.host.contains(":") ? IPAddress("::1")! : (IPAddress(endpoint.host).flatMap { $0.family == .inet && $0.bytes[0] == 127 ? $0 : nil } ?? IPAddress("127.0.0.1")!)
        let fd = socket(address.family == .inet ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw ProxyHub.Refusal(status: 500, message: "cannot open a socket: \(Errno.current)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard address.withSocketAddress(port: endpoint.port, { bind(fd, $0, $1) }) == 0, Glibc.listen(fd, 128) == 0 else {
            let error = Errno.current
            close(fd)
            throw ProxyHub.Refusal(status: error == .addressInUse ? 409 : 500, message: "cannot listen on \(endpoint): \(error)")
        }
        return fd
    }

    /// A dual-stack socket on every address of the namespace it is made in.
    private static func listeningSocket(anyAddress port: UInt16) throws(ProxyHub.Refusal) -> Int32 {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw ProxyHub.Refusal(status: 500, message: "cannot open a socket: \(Errno.current)") }
        var one: Int32 = 1, zero: Int32 = 0
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
        guard IPAddress("::")!.withSocketAddress(port: port, { bind(fd, $0, $1) }) == 0, Glibc.listen(fd, 128) == 0 else {
            let error = Errno.current
            close(fd)
            throw ProxyHub.Refusal(status: error == .addressInUse ? 409 : 500, message: "cannot listen on port \(port): \(error)")
        }
        return fd
    }

    private mutating func stopListening(_ proxy: Running) {
        if proxy.listener >= 0 {
            close(proxy.listener)
            proxy.listener = -1
        }
        for (id, connection) in connections where connection.proxy == proxy.spec.name { end(id, connection, reset: false) }
    }

    /// Where `proxy`'s upstream is reached from, and at which address.
    private func upstreamTarget(_ spec: ProxySpec) -> (NetworkNamespace?, IPAddress)? {
        let listenNamespace = spec.listen.isLoopback ? nil : places.namespaces[spec.listen.host]
        if spec.upstream.isLoopback {
            let address = spec.upstream.host.contains(":") ? IPAddress("::1")! : IPAddress("127.0.0.1")!
            return (listenNamespace, address)
        }
        guard let address = places.addresses[spec.upstream.host] else { return nil }
        return (listenNamespace ?? places.namespaces[spec.upstream.host], address)
    }

    private mutating func accept(_ proxy: Running) {
        for _ in 0..<64 {
            let client = accept4(proxy.listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            guard client >= 0 else { return }
            // On the host's loopback any local user can connect: only the run's user and root
            // are let through (without a way to ask, no one).
            if proxy.spec.listen.isLoopback {
                guard let owner = places.peers?.owner(ofPeerOf: client), owner == places.user || owner == 0 else {
                    close(client)
                    continue
                }
            }
            let open = connections.values.reduce(0) { $0 + ($1.proxy == proxy.spec.name ? 1 : 0) }
            guard open < ProxySpec.maximumConnections, let (namespace, address) = upstreamTarget(proxy.spec) else {
                close(client)
                continue
            }
            let make = { () -> Int32 in
                socket(address.family == .inet ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            }
            let upstream: Int32
            if let namespace { upstream = (try? namespace.perform(make)) ?? -1 } else { upstream = make() }
            guard upstream >= 0 else {
                close(client)
                continue
            }
            let result = address.withSocketAddress(port: proxy.spec.upstream.port) { connect(upstream, $0, $1) }
            guard result == 0 || errno == EINPROGRESS else {
                close(upstream)
                close(client)
                continue
            }
            seed &+= 1
            var state = seed
            let connection = Connection(proxy: proxy.spec.name, client: client, upstream: upstream, toxics: proxy.spec.toxics,
                                        now: .now, seed: splitMix64(&state))
            connection.connected = result == 0
            connections[nextConnection] = connection
            nextConnection += 1
        }
    }

    /// Ends a connection: both sockets closed, with a reset (RST) to each end when `reset`.
    private mutating func end(_ id: Int, _ connection: Connection, reset: Bool) {
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection.client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            setsockopt(connection.upstream, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close(connection.client)
        close(connection.upstream)
        connections[id] = nil
    }

    // MARK: - The loop

    mutating func run(signal: EventSignal, commands: ProxyHub.Commands) {
        var buffer = [UInt8](repeating: 0, count: ProxyHub.readSize)
        var entries: [pollfd] = []
        var owners: [(kind: Int, id: Int)] = []   // kind 0: listener (index), 1: client, 2: upstream
        while !finished {
            signal.reset()
            let pending = commands.pending.withLock { pending in
                defer { pending = [] }
                return pending
            }
            for command in pending { command(&self) }
            if finished { break }
            playTimeline(now: .now)
            let now = MonotonicInstant.now
            var wake: MonotonicInstant?
            func soonest(_ instant: MonotonicInstant?) {
                guard let instant else { return }
                if wake == nil || instant < wake! { wake = instant }
            }
            soonest(nextTimelineEvent)
            for (id, connection) in connections {
                if connection.connected {
                    flush(connection.up, to: connection.upstream, reply: connection.down, now: now)
                    flush(connection.down, to: connection.client, reply: connection.up, now: now)
                }
                // What was due before the end is written first (for a second at most: a peer
                // that reads nothing does not hold it); a reset does not wait.
                if let ending = connection.nextEnding, ending.at <= now {
                    func owes(_ direction: Direction) -> Bool {
                        direction.blocked || (direction.nextDue.map { $0 <= ending.at } ?? false)
                    }
                    let waits = ending.ending == .close && connection.connected && (owes(connection.up) || owes(connection.down))
                    if !waits || now - ending.at > .seconds(1) {
                        end(id, connection, reset: ending.ending == .reset)
                        continue
                    }
                }
                if connection.up.endSent, connection.down.endSent {
                    end(id, connection, reset: false)
                    continue
                }
                soonest(connection.nextEnding?.at)
                soonest(connection.up.nextDue)
                soonest(connection.down.nextDue)
            }
            let totalQueued = connections.values.reduce(0) { $0 + $1.up.queuedBytes + $1.down.queuedBytes }
            entries.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
            entries.append(signal.pollEntry)
            owners.append((-1, 0))
            for (index, proxy) in running.enumerated() where proxy.listener >= 0 {
                entries.append(pollfd(fd: proxy.listener, events: Int16(POLLIN), revents: 0))
                owners.append((0, index))
            }
            for (id, connection) in connections {
                if !connection.connected {
                    entries.append(pollfd(fd: connection.upstream, events: Int16(POLLOUT), revents: 0))
                    owners.append((2, id))
                    continue
                }
                var clientEvents: Int32 = 0, upstreamEvents: Int32 = 0
                func reads(_ direction: Direction) -> Bool {
                    !direction.sourceEnded && direction.queuedBytes < ProxyHub.maximumQueued && totalQueued < ProxyHub.maximumQueuedTotal
                        && direction.queue.count - direction.head < ProxyHub.maximumPieces
                }
                if reads(connection.up) { clientEvents |= Int32(POLLIN) }
                if connection.down.blocked { clientEvents |= Int32(POLLOUT) }
                if reads(connection.down) { upstreamEvents |= Int32(POLLIN) }
                if connection.up.blocked { upstreamEvents |= Int32(POLLOUT) }
                entries.append(pollfd(fd: clientEvents == 0 ? -1 : connection.client, events: Int16(clientEvents), revents: 0))
                owners.append((1, id))
                entries.append(pollfd(fd: upstreamEvents == 0 ? -1 : connection.upstream, events: Int16(upstreamEvents), revents: 0))
                owners.append((2, id))
            }
            _ = try? waitForEvents(&entries, until: wake)
            let after = MonotonicInstant.now
            for (index, entry) in entries.enumerated() where entry.revents != 0 {
                let owner = owners[index]
                switch owner.kind {
                case 0:
                    if owner.id < running.count, running[owner.id].listener == entry.fd { accept(running[owner.id]) }
                case 1, 2:
                    guard let connection = connections[owner.id] else { continue }
                    let isClient = owner.kind == 1
                    if !connection.connected {
                        var failure: Int32 = 0
                        var length = socklen_t(MemoryLayout<Int32>.size)
                        getsockopt(connection.upstream, SOL_SOCKET, SO_ERROR, &failure, &length)
                        if failure != 0 {
                            // Toxiproxy closes the client when its upstream cannot be reached.
                            end(owner.id, connection, reset: false)
                        } else {
                            connection.connected = true
                        }
                        continue
                    }
                    if entry.revents & Int16(POLLOUT) != 0 { (isClient ? connection.down : connection.up).blocked = false }
                    if entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                        let direction = isClient ? connection.up : connection.down
                        guard !direction.sourceEnded else { continue }
                        let count = buffer.withUnsafeMutableBytes { read(isClient ? connection.client : connection.upstream, $0.baseAddress, $0.count) }
                        if count > 0 {
                            enqueue(direction, direction.chain.receive(Array(buffer[..<count]), at: after))
                        } else if count == 0 {
                            direction.sourceEnded = true
                            enqueue(direction, direction.chain.finish(at: after))
                        } else if errno != EAGAIN, errno != EINTR {
                            // A side that failed (reset): the other is reset too, as a peer would see it.
                            end(owner.id, connection, reset: true)
                        }
                    }
                default:
                    break
                }
            }
        }
        for (id, connection) in connections { end(id, connection, reset: false) }
    }

    private func enqueue(_ direction: Direction, _ scheduled: [ToxicChain.Scheduled]) {
        if direction.head > 64, direction.head * 2 > direction.queue.count {
            direction.queue.removeFirst(direction.head)
            direction.head = 0
        }
        for item in scheduled {
            if case .data(let bytes) = item.output { direction.queuedBytes += bytes.count }
            direction.queue.append(item)
        }
    }

    /// Writes what is due of `direction` to `destination`, in order, until it would block. An
    /// answer of the proxy's own goes back the other way (`reply`), and ends both.
    private func flush(_ direction: Direction, to destination: Int32, reply: Direction, now: MonotonicInstant) {
        while !direction.blocked, direction.head < direction.queue.count, direction.queue[direction.head].due <= now {
            switch direction.queue[direction.head].output {
            case .end:
                _ = Glibc.shutdown(destination, Int32(SHUT_WR))
                direction.endSent = true
            case .answer(let bytes):
                // Nothing more goes to the server, nor comes from it: the client gets the
                // proxy's answer after what the server already sent, then the close.
                _ = Glibc.shutdown(destination, Int32(SHUT_WR))
                direction.endSent = true
                direction.sourceEnded = true
                direction.head = direction.queue.count
                direction.queuedBytes = 0
                reply.sourceEnded = true
                enqueue(reply, [.init(due: now, output: .data(bytes)), .init(due: now, output: .end)])
                return
            case .data(let bytes):
                let count = bytes.withUnsafeBytes { raw in
                    send(destination, raw.baseAddress! + direction.written, raw.count - direction.written, Int32(MSG_NOSIGNAL))
                }
                if count < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK {
                        direction.blocked = true
                    } else {
                        // The destination is gone: what is left of this direction goes nowhere.
                        direction.queuedBytes = 0
                        direction.head = direction.queue.count
                        direction.endSent = true
                    }
                    return
                }
                direction.written += count
                guard direction.written == bytes.count else {
                    direction.blocked = true
                    return
                }
                direction.queuedBytes -= bytes.count
                direction.written = 0
            }
            direction.head += 1
        }
    }
}
