import Glibc
import Multipath
import Netlink
import PathMonitor
import Synchronization

/// Where a workload runs and what it can reach: the seam between the runner and each kind of
/// traffic. Plain values, so that drivers never hold the topology itself.
struct WorkloadContext: Sendable {
    var workload: Workload
    /// The workload's position in the scenario; its server listens on ``port``.
    var index: Int
    var runID: String
    /// The namespace of `from` (the server, or where a command runs) and of `to` (the client).
    var serverNamespace: NetworkNamespace
    var clientNamespace: NetworkNamespace?
    /// The server's service address: on its loopback, reachable over every link.
    var serverAddress: IPAddress
    var log: RunLog
    /// Fires at the workload's `stop`, or when the run ends or is cancelled.
    var stop: StopSignal
    var startAt: MonotonicInstant
    var stopAt: MonotonicInstant
    var reportDirectory: String
    /// Environment variables describing the topology, for commands.
    var environment: [String: String]
    /// The client node's path as its monitor last published it (for multipath modes).
    var clientPath: (@Sendable () -> NetworkPath?)?
    /// The client node's MPTCP path manager, when multipath modes use MPTCP (nil: application-
    /// level handover over plain TCP).
    var mptcp: MPTCPPathManager?
    /// Whether the server listens with MPTCP (and so accepts MPTCP and plain TCP alike).
    var serverAcceptsMPTCP = false

    var port: UInt16 { UInt16(20000 + index) }
}

/// One kind of traffic. ``prepare()`` runs before the scenario's time zero (listeners are
/// ready before any client connects); ``run()`` runs on the workload's own thread from its start
/// until it finishes or ``WorkloadContext/stop`` fires; ``sample()`` and ``result()`` may be
/// called from any thread.
protocol WorkloadDriver: AnyObject, Sendable {
    var context: WorkloadContext { get }
    func prepare() throws(SimulatorError)
    func run()
    /// Cumulative counters now.
    func sample() -> WorkloadSample
    /// Statistics once ``run()`` has returned; `end` is when the workload stopped.
    func result(end: Duration) -> WorkloadResult
    /// Ends what ``prepare()`` started (servers). Called after ``run()`` returned.
    func finish()
}

/// Counters a workload has at one moment.
struct WorkloadSample: Sendable {
    var bytesReceived: Int64
    var rtt: Duration?
    /// For streams: seconds of media buffered, and whether playback is stalled.
    var buffered: Duration?
    var isStalled: Bool?
}

/// The client side that every network workload shares: its connection, counters, and the
/// reconnect loop an app without multipath runs.
final class ClientConnection: Sendable {
    private struct State {
        var socket: TCPSocket?
        var bytesReceived: Int64 = 0
        var connections = 0
        var connectFailures = 0
        var lastLocalAddress: String?
        var localAddresses: [String] = []
        var lastProgress: Duration?
        /// The interface the current connection goes out of (multipath modes).
        var interface: String?
        var bytesByInterface: [String: Int64] = [:]
        /// Interfaces whose connection stalled, since when, and how long before they may be
        /// probed again (doubling with each stall, up to 30 s): left out of races until a probe
        /// connects over them.
        var suspects = StalledPaths()
        var probe: (interface: String, descriptor: Int32, started: Duration)?
        var probeStreak = 0
        /// A workload found the path too poor for it (a stream's buffer running low): the flow
        /// moves at the next check.
        var pendingHandover: String?
        /// When the current connection was made.
        var connectedAt: Duration?
        /// The interface the flow was just moved back to, until the next connection says
        /// whether it got there.
        var movingBackTo: String?
        var lastProbe: Duration = .seconds(-100)
        var handovers = 0
        /// The longest time between two arrivals of data, and when it began.
        var longestGap: (start: Duration, length: Duration)?
        /// What the current connection is (MPTCP or not).
        var mode: MPTCP.Mode = .tcp
        var modes: Set<MPTCP.Mode> = []
        /// Each subflow of the current connection: its interface and bytes received so far.
        var subflows: [String: (interface: String, bytes: UInt64)] = [:]
        var subflowsOpened = 0
        var lastSubflowSample: Duration = .seconds(-1)
        /// The interface that last brought data (MPTCP: the subflow whose counter moved).
        var activeInterface: String?
        /// Interfaces the path manager was told are stalled, until their hold-down ends.
        var demoted: Set<String> = []
        var interfaceOfAddress: [IPAddress: String] = [:]
    }
    private let state = Mutex(State())
    let context: WorkloadContext

    init(context: WorkloadContext) {
        self.context = context
    }

    var bytesReceived: Int64 { state.withLock { $0.bytesReceived } }
    var connections: Int { state.withLock { $0.connections } }
    var connectFailures: Int { state.withLock { $0.connectFailures } }
    /// The local addresses connections were made from, in order (the links the app used).
    var localAddresses: [String] { state.withLock { $0.localAddresses } }
    var rtt: Duration? { state.withLock { $0.socket?.smoothedRTT } }

    /// When the last byte arrived, from the start of the run.
    var lastProgress: Duration? { state.withLock { $0.lastProgress } }

    func received(_ count: Int) {
        let now = context.log.elapsed
        let sample = state.withLock { state -> Bool in
            if let last = state.lastProgress, now - last > (state.longestGap?.length ?? .zero) { state.longestGap = (last, now - last) }
            state.bytesReceived += Int64(count)
            state.lastProgress = now
            // Over MPTCP the subflows' own counters say which path carried what.
            if state.mode != .multipath, let interface = state.interface { state.bytesByInterface[interface, default: 0] += Int64(count) }
            return state.mode == .multipath && now - state.lastSubflowSample >= Self.handoverCheckInterval
        }
        if sample { sampleSubflows() }
    }

    /// Whether the workload keeps its flow alive across paths: with MPTCP where the kernel has
    /// it (the path manager moves subflows), by application-level handover otherwise.
    var isMultipath: Bool { context.workload.mode != .none && context.clientPath != nil }

    /// Whether the current connection is an MPTCP one with both ends speaking MPTCP.
    var isMPTCPConnection: Bool { state.withLock { $0.mode == .multipath } }

    /// Reads the current connection's subflows: bytes each carried since the last look go to its
    /// interface, and subflows that came or went are logged.
    func sampleSubflows() {
        guard let descriptor = state.withLock({ $0.mode == .multipath ? $0.socket?.descriptor : nil }) else { return }
        let subflows = MPTCP.subflows(of: descriptor)
        let now = context.log.elapsed
        let path = context.clientPath?()
        var added: [(String, String)] = []
        var closed: [(String, String)] = []
        state.withLock { state in
            state.lastSubflowSample = now
            for interface in path?.availableInterfaces ?? [] {
                for prefix in interface.addresses { state.interfaceOfAddress[prefix.address] = interface.name }
            }
            var seen = Set<String>()
            for subflow in subflows {
                let key = subflow.description
                seen.insert(key)
                let interface = state.interfaceOfAddress[subflow.local] ?? subflow.local.description
                let before = state.subflows[key]?.bytes
                if before == nil {
                    added.append((key, interface))
                    state.subflowsOpened += 1
                }
                let delta = subflow.bytesReceived >= (before ?? 0) ? subflow.bytesReceived - (before ?? 0) : 0
                if delta > 0 {
                    state.bytesByInterface[interface, default: 0] += Int64(delta)
                    // In handover one path carries the data at a time: a change of path is a
                    // handover (in the other modes data takes every path at once).
                    if context.workload.mode == .handover, let previous = state.activeInterface, previous != interface { state.handovers += 1 }
                    state.activeInterface = interface
                }
                state.subflows[key] = (interface, subflow.bytesReceived)
            }
            for (key, entry) in state.subflows where !seen.contains(key) {
                closed.append((key, entry.interface))
                state.subflows[key] = nil
            }
        }
        for (key, interface) in added {
            context.log.record("subflow", [("workload", .string(context.workload.name)), ("event", "added"), ("interface", .string(interface)), ("subflow", .string(key))])
        }
        for (key, interface) in closed {
            context.log.record("subflow", [("workload", .string(context.workload.name)), ("event", "closed"), ("interface", .string(interface)), ("subflow", .string(key))])
        }
    }

    /// Gives a demoted interface its place back once its hold-down has passed and it has
    /// proved itself to probes (MPTCP).
    private func restoreDemoted() {
        guard let manager = context.mptcp, let path = context.clientPath?() else { return }
        let now = context.log.elapsed
        let due = state.withLock { state -> [String] in
            state.demoted.filter { !state.suspects.isHeldDown($0, at: now) }.sorted()
        }
        guard let candidate = due.lazy.compactMap({ name in path.availableInterfaces.first { $0.name == name } }).first,
              probe(candidate, path: path, now: now) else { return }
        state.withLock { _ = $0.demoted.remove(candidate.name) }
        let changes = (try? manager.clearStalled(candidate.name)) ?? []
        context.log.record("path-restored", [("workload", .string(context.workload.name)), ("interface", .string(candidate.name)),
                                             ("changes", .array(changes.map { .string($0.description) }))])
    }

    /// How long without progress, while data is expected, before the path counts as stalled:
    /// four smoothed round trips plus 200 ms, between 300 ms and the workload's timeout.
    var stallThreshold: Duration {
        guard isMultipath else { return context.workload.timeout }
        return StalledPaths.stallThreshold(smoothedRTT: rtt, maximum: context.workload.timeout)
    }

    /// The path to race over: the monitor's, without interfaces held down after a stall (unless
    /// nothing else is left).
    private func racePath(_ path: NetworkPath) -> NetworkPath {
        let now = context.log.elapsed
        return state.withLock { $0.suspects.racePath(path, at: now) }
    }

    /// Connects by racing every permitted interface (multipath modes).
    private func raceConnect(until limit: MonotonicInstant?) -> TCPSocket? {
        guard let namespace = context.clientNamespace, let currentPath = context.clientPath else { return nil }
        var failedSince: Duration?
        while !context.stop.isSignalled {
            if let limit, MonotonicInstant.now >= limit { return nil }
            guard let path = currentPath() else {
                context.stop.wait(for: .milliseconds(50))
                continue
            }
            let deadline = min(context.stopAt, limit ?? context.stopAt)
            let timeout = min(context.workload.timeout, max(.milliseconds(10), deadline - MonotonicInstant.now))
            let serviceType = MultipathServiceType(rawValue: context.workload.mode.rawValue) ?? .handover
            let prohibits = context.workload.prohibits
            let policy = ConnectionPolicy(allowsExpensive: !prohibits.contains(.expensive), allowsConstrained: !prohibits.contains(.constrained),
                                          allowsUltraConstrained: !prohibits.contains(.ultraConstrained), serviceType: serviceType)
            let racer = ConnectionRacer(namespace: namespace, policy: policy, transport: context.mptcp != nil ? .mptcp : .tcp)
            do throws(ConnectionError) {
                let connection = try racer.connect(to: [context.serverAddress], port: context.port, over: racePath(path), timeout: timeout)
                let socket = TCPSocket(adopting: connection.descriptor)
                socket.reapWhenDead(patience: context.workload.timeout)
                let winner = connection.metrics.winner?.candidate
                let interface = winner?.route.interface ?? "?"
                state.withLock { state in
                    // A new connection over another interface: the flow moved.
                    if let previous = state.interface, previous != interface { state.handovers += 1 }
                    // Moved back to an interface that then lost the race: its probes were luck.
                    if let target = state.movingBackTo, target != interface { state.suspects.markStalled(target, at: context.log.elapsed) }
                    state.movingBackTo = nil
                    state.socket = socket
                    state.connections += 1
                    state.connectedAt = context.log.elapsed
                    state.interface = interface
                    state.activeInterface = interface
                    state.lastLocalAddress = winner?.source.description
                    state.localAddresses.append(winner?.source.description ?? "?")
                    state.mode = connection.metrics.mode
                    state.modes.insert(connection.metrics.mode)
                    state.subflows = [:]
                }
                var fields: [(String, JSONValue)] = [
                    ("workload", .string(context.workload.name)), ("local", .string(winner?.source.description ?? "?")),
                    ("remote", .string(context.serverAddress.description)), ("interface", .string(interface)),
                    ("transport", .string(connection.metrics.mode.rawValue)),
                    ("attempts", .array(connection.metrics.attempts.map { attempt in
                        .object([("interface", .string(attempt.candidate.route.interface)), ("startedMs", .milliseconds(attempt.started)),
                                 ("outcome", .string("\(attempt.outcome)"))])
                    })),
                ]
                if let failedSince { fields.append(("retryingForMs", .milliseconds(context.log.elapsed - failedSince))) }
                context.log.record("connect", fields)
                if connection.metrics.mode == .multipath { sampleSubflows() }
                return socket
            } catch {
                state.withLock { $0.connectFailures += 1 }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record("connect-failed", [("workload", .string(context.workload.name)), ("reason", .string(error.description))])
                }
                context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(100), limit ?? context.stopAt))
            }
        }
        return nil
    }

    /// Marks the current connection's interface as stalled: it is left out of races until it
    /// proves itself again.
    func markStalled() {
        let now = context.log.elapsed
        // Over MPTCP the data takes the path manager's preferred path, whichever subflow the
        // connection began on.
        let preferred = context.mptcp?.preferredInterface
        let interface = state.withLock { state -> String? in
            guard let interface = state.mode == .multipath ? preferred ?? state.interface : state.interface else { return nil }
            state.suspects.markStalled(interface, at: now)
            if context.mptcp != nil { state.demoted.insert(interface) }
            return interface
        }
        guard let interface else { return }
        var fields: [(String, JSONValue)] = [("workload", .string(context.workload.name)), ("interface", .string(interface)),
                                             ("thresholdMs", .milliseconds(stallThreshold))]
        if let manager = context.mptcp {
            // Its subflows become backups (in every connection), another path's take over.
            let changes = (try? manager.markStalled(interface)) ?? []
            fields.append(("mptcp", .array(changes.map { .string($0.description) })))
        }
        context.log.record("path-stalled", fields)
    }

    /// Why the flow should move now, if it should (multipath modes): its interface left the
    /// path (carrier lost), or a better one (the path's primary, free where this one costs) is
    /// there and a probe connection over it has just succeeded. An interface that stalled is
    /// probed only once its hold-down has passed, so a poor Wi-Fi does not pull the flow back
    /// and forth.
    func handoverReason() -> String? {
        guard isMultipath, let path = context.clientPath?() else { return nil }
        if let pending = state.withLock({ state -> String? in
            defer { state.pendingHandover = nil }
            return state.pendingHandover
        }) {
            return pending
        }
        if isMPTCPConnection {
            // The path manager moves the connection's subflows as the path changes.
            restoreDemoted()
            sampleSubflows()
            return nil
        }
        let now = context.log.elapsed
        let (current, suspects) = state.withLock { ($0.interface, $0.suspects) }
        guard let current else { return nil }
        if !path.availableInterfaces.contains(where: { $0.name == current }) { return "\(current) left the path" }
        guard let primary = path.availableInterfaces.first, primary.name != current else { return nil }
        let currentInterface = path.availableInterfaces.first { $0.name == current }
        guard (currentInterface?.isExpensive ?? false) && !primary.isExpensive else { return nil }
        if suspects.isHeldDown(primary.name, at: now) { return nil }
        guard probe(primary, path: path, now: now) else { return nil }
        state.withLock { $0.movingBackTo = primary.name }
        return "back to \(primary.name), which answered \(Self.probesToReturn) probes in a row"
    }

    /// Probes an interface that stalled, without blocking: true once it has proved itself, that
    /// is, once ``probesToReturn`` connections in a row have connected over it (one SYN getting
    /// through proves little on a lossy Wi-Fi: at 40% loss each way, three in a row succeed about
    /// 5% of the time, at 5% loss about 74%).
    private func probe(_ interface: NetworkInterface, path: NetworkPath, now: Duration) -> Bool {
        let running = state.withLock { $0.probe }
        if let running {
            var entry = pollfd(fd: running.descriptor, events: Int16(POLLOUT), revents: 0)
            if poll(&entry, 1, 0) > 0 {
                var error: Int32 = 0
                var length = socklen_t(4)
                getsockopt(running.descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
                // A probe only asks whether a connection can be made: reset it, leaving nothing behind.
                ConnectionRacer.abandon(running.descriptor)
                return state.withLock { state in
                    state.probe = nil
                    guard error == 0 else {
                        state.probeStreak = 0
                        return false
                    }
                    state.probeStreak += 1
                    // The next probe of a streak goes soon after; the streak ends it.
                    state.lastProbe = now - Self.probeInterval + Self.probeSpacing
                    guard state.probeStreak >= Self.probesToReturn else { return false }
                    state.probeStreak = 0
                    return true
                }
            }
            if now - running.started > Self.probeInterval {
                ConnectionRacer.abandon(running.descriptor)
                state.withLock { $0.probe = nil; $0.probeStreak = 0 }
            }
            return false
        }
        guard now - state.withLock({ $0.lastProbe }) >= Self.probeInterval, let namespace = context.clientNamespace,
              let route = ConnectionRace.Route.routes(of: [interface]).first, let source = route.ipv4 else { return false }
        let candidate = ConnectionRace.Candidate(route: route, source: source, destination: context.serverAddress)
        let (fd, _) = ConnectionRacer.open(candidate, port: context.port, in: namespace)
        state.withLock { state in
            state.lastProbe = now
            if let fd { state.probe = (interface.name, fd, now) } else { state.probeStreak = 0 }
        }
        return false
    }

    static let probesToReturn = 3
    /// Between probes after a failure, and how long one may take.
    static let probeInterval = Duration.seconds(1)
    /// Between the probes of a streak.
    static let probeSpacing = Duration.milliseconds(200)

    /// Receives on `socket` until the peer closes it, the workload stops, or the connection is
    /// given up: silent for the workload's timeout (or, in multipath modes, for the stall
    /// threshold, which marks its path as stalled), broken, or handed over to a better path.
    /// `wakeBy` adds a time to wake at (a stream's playhead running dry); `onWake` runs on every
    /// wake-up. Returns `.closed` when the peer closed (the socket is still the caller's),
    /// `.stopped`, or the reason it was given up (and closed).
    func pump(_ socket: TCPSocket, wakeBy: () -> MonotonicInstant? = { nil }, onWake: () -> Void = {}) -> TCPSocket.Outcome {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var lastByte = MonotonicInstant.now
        var lastCheck = MonotonicInstant.now
        let multipath = isMultipath
        while true {
            let threshold = stallThreshold
            let watchdog = lastByte + threshold
            var deadline = watchdog
            if let extra = wakeBy() { deadline = min(deadline, max(extra, .now) + .milliseconds(1)) }
            if multipath { deadline = min(deadline, .now + Self.handoverCheckInterval) }
            let (count, outcome) = buffer.withUnsafeMutableBytes { socket.receive(into: $0, stop: context.stop, deadline: deadline) }
            if outcome == .done {
                received(count)
                lastByte = .now
            }
            onWake()
            if multipath, MonotonicInstant.now - lastCheck >= Self.handoverCheckInterval {
                lastCheck = .now
                if let reason = handoverReason() {
                    handOver(socket, reason: reason)
                    return .failed(0)
                }
            }
            switch outcome {
            case .done:
                continue
            case .timedOut:
                if MonotonicInstant.now < watchdog { continue }
                if multipath { markStalled() }
                drop(socket, reason: "no data for \(threshold.roamDescription)")
                return .timedOut
            case .stopped, .closed:
                return outcome
            case .failed:
                drop(socket, reason: outcome.description)
                return outcome
            }
        }
    }

    /// The interface the current connection runs over, when known.
    var currentInterface: String? { state.withLock { $0.interface } }

    /// The current connection's age, if connected.
    var connectionAge: Duration? {
        let now = context.log.elapsed
        return state.withLock { state in state.socket == nil ? nil : state.connectedAt.map { now - $0 } }
    }

    /// Moves the flow off its path at the next check, as a stall does (the path is held down):
    /// for a workload that sees the path fail it while data still trickles in, as a stream whose
    /// buffer runs low on a lossy Wi-Fi.
    func pathTooPoor(_ reason: String) {
        guard isMultipath else { return }
        markStalled()
        state.withLock { $0.pendingHandover = reason }
    }

    /// How often a flow in a multipath mode looks at its path (the monitor's snapshot: a lock
    /// and a comparison), data or not.
    static let handoverCheckInterval = Duration.milliseconds(20)

    /// Gives up the old connection to move the flow; the next connection counts the handover.
    func handOver(_ socket: TCPSocket, reason: String) {
        drop(socket, reason: reason)
    }

    /// Connects to the workload's server, retrying every 250 ms while connecting fails, until
    /// connected, stopped, or `limit` passes. The kernel picks the link from the routes in force,
    /// unless the workload is multipath or prohibits kinds of path: then the racer connects over
    /// the permitted interfaces, and waits while there are none.
    func connect(until limit: MonotonicInstant? = nil) -> TCPSocket? {
        if isMultipath || (!context.workload.prohibits.isEmpty && context.clientPath != nil) { return raceConnect(until: limit) }
        guard let namespace = context.clientNamespace else { return nil }
        var failedSince: Duration?
        while !context.stop.isSignalled {
            var deadline = min(MonotonicInstant.now + context.workload.timeout, context.stopAt)
            if let limit {
                guard MonotonicInstant.now < limit else { return nil }
                deadline = min(deadline, limit)
            }
            switch TCPSocket.connect(in: namespace, to: context.serverAddress, port: context.port, deadline: deadline, stop: context.stop) {
            case .success(let socket):
                socket.reapWhenDead(patience: context.workload.timeout)
                let local = socket.localAddress ?? "?"
                // The link the kernel chose, for the bytes counted per link.
                let interface = IPAddress(local).flatMap { address in
                    context.clientPath?()?.availableInterfaces.first { $0.addresses.contains { $0.address == address } }?.name
                }
                state.withLock { state in
                    state.socket = socket
                    state.interface = interface
                    state.connections += 1
                    state.lastLocalAddress = local
                    state.localAddresses.append(local)
                }
                var fields: [(String, JSONValue)] = [("workload", .string(context.workload.name)), ("local", .string(local)),
                                                     ("remote", .string(context.serverAddress.description))]
                if let failedSince { fields.append(("retryingForMs", .milliseconds(context.log.elapsed - failedSince))) }
                context.log.record("connect", fields)
                return socket
            case .failure(.stopped):
                return nil
            case .failure(let outcome):
                state.withLock { $0.connectFailures += 1 }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record("connect-failed", [("workload", .string(context.workload.name)), ("reason", .string(outcome.description))])
                }
                context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(250), limit ?? context.stopAt))
            }
        }
        return nil
    }

    /// Gives up the current connection (logging why), as an app does on a timeout or an error.
    func drop(_ socket: TCPSocket, reason: String) {
        sampleSubflows()
        state.withLock { if $0.socket === socket { $0.socket = nil; $0.mode = .tcp } }
        // Given up: reset at once rather than leave the kernel retrying over a dead link.
        socket.abort()
        if !context.stop.isSignalled {
            context.log.record("disconnect", [("workload", .string(context.workload.name)), ("reason", .string(reason))])
        }
    }

    /// A result for the workload with what the client counted, active from its start to `end`.
    func result(end: Duration) -> WorkloadResult {
        var result = WorkloadResult(context.workload)
        state.withLock { state in
            result.bytesReceived = state.bytesReceived
            result.connections = state.connections
            result.connectFailures = state.connectFailures
            result.localAddresses = state.localAddresses
            result.bytesByInterface = state.bytesByInterface
            result.handovers = state.handovers
            result.longestGap = state.longestGap
            result.subflowsOpened = state.subflowsOpened
            result.transport = state.modes.contains(.multipath) ? "mptcp" : state.modes.contains(.fallback) ? "tcp (mptcp fallback)" : "tcp"
            if let probe = state.probe { ConnectionRacer.abandon(probe.descriptor) }
            state.probe = nil
        }
        if isMultipath, context.workload.mode != .handover, result.transport != "mptcp" {
            result.note = "multipath mode '\(context.workload.mode.rawValue)' needs MPTCP to use several paths at once; "
                + (context.mptcp == nil ? "without it here" : "the connection fell back to TCP, so") + " it ran as handover (application level)"
        }
        result.activeTime = max(.zero, end - context.workload.start)
        return result
    }

    func close() {
        sampleSubflows()
        let socket = state.withLock { state -> TCPSocket? in
            defer { state.socket = nil }
            return state.socket
        }
        socket?.close()
    }
}

/// A server: accepts on the `from` node's service address and serves each connection on a
/// thread of its own until the peer goes or the workload stops.
///
/// Each workload has one client, so a connection that has said who it is (`claim`, after the
/// hello or the first request) supersedes every older one: those belong to a client that moved
/// or gave up, maybe over a link that is now dead, where no FIN or reset would ever arrive.
/// They are shut down and reset at once. Every connection is closed, and its thread joined, as
/// soon as its handler returns, so that a long run holds only the connections in use.
final class WorkloadServer: Sendable {
    private struct State {
        var listener: TCPSocket?
        var acceptor: PinnedThread?
        var next = 0
        var live: [Int: TCPSocket] = [:]
        var superseded: Set<Int> = []
        /// Handler threads still running, and those that have returned, to join.
        var running: [Int: PinnedThread] = [:]
        var ended: Set<Int> = []
        var toJoin: [PinnedThread] = []
    }
    private let context: WorkloadContext
    private let serve: @Sendable (TCPSocket, _ claim: @Sendable () -> Void) -> Void
    private let state = Mutex(State())

    init(context: WorkloadContext, serve: @escaping @Sendable (TCPSocket, _ claim: @Sendable () -> Void) -> Void) {
        self.context = context
        self.serve = serve
    }

    /// Connections open now (for tests and the soak benchmark).
    var liveConnections: Int { state.withLock { $0.live.count } }

    func start() throws(SimulatorError) {
        let socket = try TCPSocket.listen(in: context.serverNamespace, address: context.serverAddress, port: context.port,
                                          mptcp: context.serverAcceptsMPTCP)
        state.withLock { $0.listener = socket }
        do throws(NetlinkError) {
            let thread = try PinnedThread(name: "roam-server") { [self] in
                while case .success(let connection) = socket.accept(stop: context.stop) {
                    connection.reapWhenDead(patience: context.workload.timeout)
                    accepted(connection)
                    joinEnded()
                }
            }
            state.withLock { $0.acceptor = thread }
        } catch {
            throw SimulatorError("start the server of workload '\(context.workload.name)'", error)
        }
    }

    private func accepted(_ connection: TCPSocket) {
        let id = state.withLock { state -> Int in
            state.next += 1
            state.live[state.next] = connection
            return state.next
        }
        let handler = try? PinnedThread(name: "roam-serve") { [self] in
            serve(connection) { [self] in claim(id) }
            handlerEnded(id)
        }
        state.withLock { state in
            guard let handler else {
                state.live[id] = nil
                return
            }
            // The handler may have ended already.
            if state.ended.remove(id) != nil { state.toJoin.append(handler) } else { state.running[id] = handler }
        }
        if handler == nil { connection.abort() }
    }

    /// Connection `id` has said it is the client's current one: older ones are shut down (their
    /// handlers wake, return, and reset them).
    private func claim(_ id: Int) {
        let older = state.withLock { state -> [TCPSocket] in
            let ids = state.live.keys.filter { $0 < id && !state.superseded.contains($0) }
            state.superseded.formUnion(ids)
            return ids.compactMap { state.live[$0] }
        }
        for socket in older { socket.shutdown() }
    }

    private func handlerEnded(_ id: Int) {
        let (socket, superseded) = state.withLock { state -> (TCPSocket?, Bool) in
            if let thread = state.running.removeValue(forKey: id) { state.toJoin.append(thread) } else { state.ended.insert(id) }
            return (state.live.removeValue(forKey: id), state.superseded.remove(id) != nil)
        }
        // A superseded connection may have data queued for a dead link: reset it. Others end
        // with a FIN after what they sent.
        if superseded { socket?.abort() } else { socket?.close() }
    }

    private func joinEnded() {
        for thread in state.withLock({ state -> [PinnedThread] in defer { state.toJoin = [] }; return state.toJoin }) { thread.join() }
    }

    /// Waits for every server thread; the workload's stop signal must have fired.
    func finish() {
        for connection in state.withLock({ Array($0.live.values) }) { connection.shutdown() }
        if let acceptor = state.withLock({ state -> PinnedThread? in defer { state.acceptor = nil }; return state.acceptor }) { acceptor.join() }
        while let thread = state.withLock({ state -> PinnedThread? in state.running.popFirst()?.value ?? state.toJoin.popLast() }) {
            thread.join()
        }
        joinEnded()
        state.withLock { state in
            state.live = [:]
            state.listener = nil
        }
    }
}

/// Big-endian 64-bit integers on the wire.
enum Wire {
    static func encode(_ values: UInt64...) -> [UInt8] {
        values.flatMap { value in (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) } }
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A byte count or offset a peer sent: anything can connect to a workload's port (a user's
    /// command, a scanner), so a value past `Int64.max` is clamped rather than trapping.
    static func decodeCount(_ bytes: ArraySlice<UInt8>) -> Int64 {
        Int64(clamping: decode(bytes))
    }

    /// A buffer of payload bytes to send from.
    static let payload = [UInt8](repeating: 0x5a, count: 64 * 1024)
}

extension TCPSocket {
    /// Sends `count` payload bytes, or says why not.
    func sendPayload(_ count: Int64, stop: StopSignal) -> Outcome {
        var remaining = count
        while remaining > 0 {
            let chunk = Int(min(Int64(Wire.payload.count), remaining))
            let outcome = Wire.payload.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[..<chunk]), stop: stop, deadline: nil) }
            guard outcome == .done else { return outcome }
            remaining -= Int64(chunk)
        }
        return .done
    }
}

extension WorkloadContext {
    /// Makes the driver for this context's workload.
    func makeDriver() -> any WorkloadDriver {
        switch workload.kind {
        case .bulk(let size): BulkWorkload(context: self, size: size)
        case let .requests(requestSize, responseSize, interval, count):
            RequestsWorkload(context: self, requestSize: requestSize, responseSize: responseSize, interval: interval, count: count)
        case let .stream(bitrate, buffer): StreamWorkload(context: self, bitrate: bitrate, buffer: buffer)
        case let .command(run, environment): CommandWorkload(context: self, arguments: run, environment: environment)
        }
    }
}
