import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// The client side that every network workload shares: its connection, counters, and the
/// reconnect loop an app without multipath runs. In multipath modes it carries out Multipath's
/// ``HandoverSession`` (the same plans as ``HandoverConnection``: races and retries, probes,
/// moves, MPTCP subflows), woken by the client node's path updates, the session's timers and its
/// probes; it keeps no policy of its own, and only adds the run's log.
package final class ClientConnection: Sendable {
    private struct State {
        var socket: TCPSocket?
        var session: HandoverSession
        var connectFailures = 0
        /// The local address of each connection, in order: numbers of the distinct ones (a run
        /// that lasts a day reconnects from the same few addresses), spilled out of memory.
        var localAddresses: RecordSpill<Int32>
        var distinctAddresses = Interned<String>()
        /// The longest time between two arrivals of data, and when it began.
        var longestGap: (start: Duration, length: Duration)?
        /// Every gap of at least ``ClientConnection/recordedGap`` (the first ``maximumGaps``),
        /// spilled out of memory.
        var gaps: RecordSpill<Gap>
        /// What the current connection is (MPTCP or not).
        var mode: MPTCP.Mode = .tcp
        var modes: Set<MPTCP.Mode> = []
        var subflowsOpened = 0
        var lastSubflowSample: Duration = .seconds(-1)
        /// The probe the session asked for, in flight.
        var probe: PathProbe?
        /// A move the session asked for, until the flow makes it.
        var pendingMove: HandoverStateMachine.Reason?
        /// Whether connections were raced (multipath modes, or a policy that prohibits paths).
        var raced = false
        /// By name: the lookups so far, the one the next connection uses, and why the last
        /// attempt to connect failed.
        var lookups: LookupStatistics?
        var lookup: RunEvent.Connect.Lookup?
        var lastFailure: String?

        mutating func connected(from address: String) {
            localAddresses.append(distinctAddresses.index(of: address))
        }
        /// The local address of each connection, in order.
        var addresses: [String] { localAddresses.all().map { distinctAddresses.values[Int($0)] } }
    }
    /// A gap in the data, as ``State/gaps`` keeps it.
    struct Gap {
        var start: Duration
        var length: Duration
    }
    private let state: Mutex<State>
    let context: WorkloadContext
    /// Signalled on the client node's path updates.
    private let pathChanged: EventSignal?
    private let subscription: PathUpdateSubscription?
    /// Carries out the session's subflow plans (subflow control).
    private let subflows: MPTCPSubflowController?

    /// The session a workload's flow runs: its scenario settings as the session's rules and
    /// policy (the one `PathPolicy` of every driver).
    ///
    /// - Parameters:
    ///   - workload: The scenario's workload.
    ///   - usesPathManager: Whether MPTCP subflows are managed (the kernel's path manager or Roam's).
    ///   - controlsSubflows: Whether the flow opens and switches its own subflows.
    /// - Returns: What ``HandoverSession`` is given.
    package static func sessionConfiguration(for workload: Workload, usesPathManager: Bool, controlsSubflows: Bool) -> HandoverSession.Configuration {
        var configuration = HandoverSession.Configuration()
        configuration.rules.maximumStall = workload.timeout
        configuration.rules.usesPathManager = usesPathManager || controlsSubflows
        configuration.rules.controlsSubflows = controlsSubflows
        configuration.rules.serviceType = MultipathServiceType(rawValue: workload.mode.rawValue) ?? .handover
        if case let .stream(bitrate, buffer) = workload.kind {
            configuration.rules.stream = .init(bytesPerSecond: bitrate.bitsPerSecond / 8, buffer: buffer)
        }
        configuration.policy = workload.pathPolicy
        return configuration
    }

    init(context: WorkloadContext) {
        self.context = context
        let configuration = Self.sessionConfiguration(for: context.workload, usesPathManager: context.mptcp != nil,
                                                      controlsSubflows: context.controlsSubflows)
        var initial = State(session: HandoverSession(to: context.serverAddresses, port: context.port, configuration: configuration),
                            localAddresses: context.log.spill(of: Int32.self), gaps: context.log.spill(of: Gap.self))
        initial.lookups = context.workload.host.map { LookupStatistics(name: $0) }
        state = Mutex(initial)
        subflows = context.controlsSubflows ? context.clientNamespace.map { MPTCPSubflowController(namespace: $0) } : nil
        // Woken by path updates whenever it races (a policy that prohibits paths races too).
        if let monitor = context.clientMonitor, let wakeup = try? EventSignal() {
            pathChanged = wakeup
            subscription = monitor.onUpdate { _ in wakeup.signal() }
        } else {
            pathChanged = nil
            subscription = nil
        }
    }

    deinit { subscription?.cancel() }

    var bytesReceived: Int64 { state.withLock { $0.session.machine.bytesReceived } }
    var connections: Int { state.withLock { $0.session.machine.connections } }
    var connectFailures: Int { state.withLock { $0.connectFailures } }
    var rtt: Duration? { state.withLock { $0.socket?.smoothedRTT } }

    /// When the last byte arrived, from the start of the run.
    var lastProgress: Duration? { state.withLock { $0.session.machine.lastData } }

    func received(_ count: Int) {
        let now = context.log.elapsed
        let (requests, sample) = state.withLock { state -> ([HandoverSession.Request], Bool) in
            if let last = state.session.machine.lastData {
                if now - last > (state.longestGap?.length ?? .zero) { state.longestGap = (last, now - last) }
                if now - last >= Self.recordedGap, state.gaps.count < Self.maximumGaps { state.gaps.append(Gap(start: last, length: now - last)) }
            }
            let requests = state.session.handle(.received(bytes: count, at: now))
            return (requests, state.mode == .multipath && now - state.lastSubflowSample >= Self.subflowSampleInterval)
        }
        perform(requests)
        if sample { sampleSubflows() }
    }

    /// Whether the workload keeps its flow alive across paths: with MPTCP where the kernel has
    /// it (the path manager moves subflows), by application-level handover otherwise.
    var isMultipath: Bool { context.workload.mode != .none && context.clientPath != nil }

    /// The gaps in data a result lists (``WorkloadResult/gaps``): long enough to be a break in
    /// the flow rather than its pacing, and at most this many.
    static let recordedGap = Duration.milliseconds(20)
    static let maximumGaps = 4096

    /// How often an MPTCP connection's subflows are read while data arrives.
    static let subflowSampleInterval = Duration.milliseconds(20)

    /// Reads the current connection's subflows: the session counts what each carried since the
    /// last look for its interface, notes those that came or went, and plans the subflows.
    func sampleSubflows() {
        guard let descriptor = state.withLock({ $0.mode == .multipath ? $0.socket?.descriptor : nil }) else { return }
        let subflows = MPTCP.subflows(of: descriptor)
        let now = context.log.elapsed
        let requests = state.withLock { state in
            state.lastSubflowSample = now
            return state.session.handle(.subflowsSampled(subflows, at: now))
        }
        perform(requests)
    }

    /// How long without progress, while data is expected, before the path counts as stalled:
    /// the state machine's threshold in multipath modes, the workload's timeout otherwise.
    var stallThreshold: Duration {
        guard isMultipath else { return context.workload.timeout }
        return state.withLock { $0.session.stallThreshold(smoothedRTT: $0.socket?.smoothedRTT) }
    }

    /// Hands `event` to the session and carries out what it asks.
    private func handle(_ event: HandoverSession.Event) {
        perform(state.withLock { $0.session.handle(event) })
    }

    private func perform(_ requests: [HandoverSession.Request]) {
        let name = context.workload.name
        for request in requests {
            switch request {
            case let .holdDown(interface, holdDown):
                // With Roam's path manager, its subflows become backups (in every connection),
                // another path's take over.
                let changes = context.mptcp.map { manager in ((try? manager.markStalled(interface)) ?? []).map(\.description) }
                context.log.record(.pathStalled(RunEvent.PathStalled(workload: name, interface: interface, threshold: stallThreshold,
                                                                     holdDown: holdDown, mptcp: changes)))
            case .leave(let reason):
                state.withLock { $0.pendingMove = reason }
            case let .probe(interface, destination, port):
                let probe = context.clientNamespace.flatMap { PathProbe(interface, to: destination, port: port, in: $0) }
                let previous = state.withLock { state -> PathProbe? in
                    defer { state.probe = probe }
                    return state.probe
                }
                previous?.abandon()
                if probe == nil { handle(.probeFinished(interface: interface.name, connected: false, at: context.log.elapsed)) }
            case .abandonProbe:
                state.withLock { state -> PathProbe? in
                    defer { state.probe = nil }
                    return state.probe
                }?.abandon()
            case let .switchedSubflows(interface, reason):
                context.log.record(.subflowSwitch(workload: name, to: interface, reason: reason.description))
            case .subflow(let plan):
                do throws(MultipathError) {
                    try subflows?.perform(plan)
                } catch {
                    // The kernel refuses subflows until the connection is fully established (data
                    // went both ways): that first refusal is retried, not reported.
                    if case .open(_, _, let interface, _, _, _, _, _) = plan {
                        let age = state.withLock { $0.session.connectionAge(at: context.log.elapsed) } ?? .zero
                        if age >= .seconds(1) { context.log.record(.subflow(RunEvent.Subflow(workload: name, interface: interface, error: "\(error)"))) }
                    } else if case .withdraw(_, _, let interface) = plan {
                        context.log.record(.subflow(RunEvent.Subflow(workload: name, interface: interface, error: "\(error)")))
                    } else {
                        context.log.record(.subflow(RunEvent.Subflow(workload: name, error: "\(error)")))
                    }
                }
            case .restore(let interface):
                if context.controlsSubflows {
                    context.log.record(.pathRestored(workload: name, interface: interface, changes: nil))
                    continue
                }
                guard let manager = context.mptcp else { continue }
                let changes = (try? manager.clearStalled(interface)) ?? []
                context.log.record(.pathRestored(workload: name, interface: interface, changes: changes.map(\.description)))
            case let .subflowOpened(key, interface):
                state.withLock { $0.subflowsOpened += 1 }
                context.log.record(.subflow(RunEvent.Subflow(workload: name, event: "added", interface: interface, subflow: key)))
            case let .subflowClosed(key, interface):
                context.log.record(.subflow(RunEvent.Subflow(workload: name, event: "closed", interface: interface, subflow: key)))
            case .advise:
                break
            }
        }
    }

    /// Descriptors whose readiness should wake a flow waiting for data (multipath modes): path
    /// updates, the probe.
    var wakeDescriptors: [pollfd] {
        var entries: [pollfd] = []
        guard isMultipath else { return entries }
        if let pathChanged { entries.append(pollfd(fd: pathChanged.descriptor.rawValue, events: Int16(POLLIN), revents: 0)) }
        if let fd = state.withLock({ $0.probe?.descriptor }), fd >= 0 { entries.append(pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)) }
        return entries
    }

    /// When the session next needs a look, as an instant (nil: only events wake it).
    func stallDeadline(awaitingDataSince since: Duration?) -> MonotonicInstant? { nextDeadline(awaitingDataSince: since) }

    private func nextDeadline(awaitingDataSince since: Duration?) -> MonotonicInstant? {
        let now = context.log.elapsed
        return state.withLock { state in
            state.session.nextDeadline(transport: state.socket.map { .init(smoothedRTT: $0.smoothedRTT, unacknowledged: 1) }, awaitingDataSince: since, at: now)
        }.map { context.log.start + $0 }
    }

    /// Lets the session look at the flow now (multipath modes): a path the monitor published
    /// since, a probe decided, the subflows, its timers. Returns why the flow must leave its
    /// connection, if it must; `awaitingDataSince` is when the flow began waiting for data it
    /// expects (nil: it expects none).
    func check(awaitingDataSince since: Duration?) -> HandoverStateMachine.Reason? {
        guard isMultipath else { return nil }
        pathChanged?.reset()
        observePath()
        if let probe = state.withLock({ $0.probe }), let connected = probe.poll() {
            state.withLock { state in if state.probe === probe { state.probe = nil } }
            handle(.probeFinished(interface: probe.interface, connected: connected, at: context.log.elapsed))
        }
        // With subflow control the plan needs the subflows as they are; otherwise a sample every
        // 20 ms counts what each carried.
        let (rtt, sample) = state.withLock {
            ($0.socket?.smoothedRTT, $0.mode == .multipath && (context.controlsSubflows || context.log.elapsed - $0.lastSubflowSample >= Self.subflowSampleInterval))
        }
        if sample { sampleSubflows() }
        if let manager = context.mptcp {
            let preferred = manager.preferredInterface
            state.withLock { _ = $0.session.handle(.pathManagerPrefers(interface: preferred)) }
        }
        handle(.tick(at: context.log.elapsed, transport: .init(smoothedRTT: rtt, unacknowledged: 1), awaitingDataSince: since))
        return state.withLock { state in
            defer { state.pendingMove = nil }
            return state.pendingMove
        }
    }

    /// Feeds the session the client node's path, if it changed since it last looked.
    private func observePath() {
        guard let path = context.clientPath?() else { return }
        let changed = state.withLock { $0.session.path != path }
        if changed { handle(.pathUpdated(path, at: context.log.elapsed)) }
    }

    /// Tells the state machine how much media the stream's player holds, while playing.
    func playout(buffered: Duration) {
        guard isMultipath else { return }
        handle(.playout(buffered: buffered, at: context.log.elapsed))
    }

    /// Connects by racing every permitted interface (multipath modes), as the session plans:
    /// over the path without the interfaces held down, waiting for a path, or backing off after
    /// a failed race (racing at once when the path changes).
    private func raceConnect(until limit: MonotonicInstant?) -> TCPSocket? {
        guard let namespace = context.clientNamespace else { return nil }
        var failedSince: Duration?
        let racer = ConnectionRacer(namespace: namespace, policy: state.withLock { $0.session.configuration.policy },
                                    transport: context.mptcp != nil || context.controlsSubflows ? .mptcp : .tcp)
        while !context.stop.isSignalled {
            if let limit, MonotonicInstant.now >= limit { return nil }
            pathChanged?.reset()
            observePath()
            let plan = state.withLock { $0.session.connectPlan(at: context.log.elapsed) }
            let path: NetworkPath
            switch plan {
            case .giveUp:
                return nil
            case .wait(let until):
                // Waiting because the policy permits nothing of the path (only a satellite left,
                // say): logged once, as a failed connect, so that the report says why.
                if failedSince == nil, let current = state.withLock({ $0.session.path }),
                   case .failure(let refusal) = racer.policy.permittedInterfaces(of: current) {
                    failedSince = context.log.elapsed
                    state.withLock { $0.connectFailures += 1 }
                    context.log.record(.connectFailed(workload: context.workload.name, reason: MultipathError.noPermittedPath(refusal).description))
                }
                var wake = min(limit ?? context.stopAt, context.stopAt)
                if let until { wake = min(wake, context.log.start + until) }
                // Without path updates to wake it, it looks at the path every 50 ms.
                if pathChanged == nil { wake = min(wake, MonotonicInstant.now + .milliseconds(50)) }
                _ = context.stop.wait(until: wake, wakingOn: pathChanged.map { [$0.pollEntry] } ?? [])
                continue
            case .race(let over):
                path = over
            }
            guard let addresses = destinations(until: limit, failedSince: &failedSince) else { continue }
            let deadline = min(context.stopAt, limit ?? context.stopAt)
            let timeout = min(context.workload.timeout, max(.milliseconds(10), deadline - MonotonicInstant.now))
            do throws(MultipathError) {
                let connection = try racer.connect(to: addresses, port: context.port, over: path, timeout: timeout)
                let socket = TCPSocket(adopting: connection.descriptor)
                socket.reapWhenDead(patience: context.workload.timeout)
                let winner = connection.metrics.winner?.candidate
                let interface = winner?.route.interface ?? "?"
                let multipath = connection.metrics.mode == .multipath
                let made = HandoverSession.Connection(interface: interface, transport: multipath ? .mptcp : .tcp, local: winner?.source,
                                                      remote: winner?.destination,
                                                      token: multipath ? MPTCP.token(of: connection.descriptor) : nil)
                let (requests, lookup) = state.withLock { state in
                    state.socket = socket
                    state.raced = true
                    state.lastFailure = nil
                    state.connected(from: winner?.source.description ?? "?")
                    state.mode = connection.metrics.mode
                    state.modes.insert(connection.metrics.mode)
                    state.pendingMove = nil
                    return (state.session.handle(.connected(made, at: context.log.elapsed)), state.lookup)
                }
                perform(requests)
                let attempts = connection.metrics.attempts.map { attempt in
                    RunEvent.Connect.Attempt(interface: attempt.candidate.route.interface, started: attempt.started, outcome: "\(attempt.outcome)")
                }
                var event = RunEvent.Connect(workload: context.workload.name, local: winner?.source.description ?? "?",
                                             remote: winner?.destination.description ?? addresses[0].description,
                                             interface: interface, transport: connection.metrics.mode.rawValue, attempts: attempts,
                                             retryingFor: failedSince.map { context.log.elapsed - $0 })
                event.lookup = lookup
                context.log.record(.connect(event))
                if multipath { sampleSubflows() }
                return socket
            } catch {
                state.withLock { state in
                    state.connectFailures += 1
                    state.lastFailure = error.description
                    _ = state.session.handle(.raceFailed(at: context.log.elapsed))
                }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record(.connectFailed(workload: context.workload.name, reason: error.description))
                }
            }
        }
        return nil
    }

    /// Receives on `socket` until the peer closes it, the workload stops, or the connection is
    /// given up: silent for the workload's timeout, broken, or (multipath modes) left because
    /// the state machine said so. `wakeBy` adds a time to wake at (a stream's playhead running
    /// dry); `onWake` runs on every wake-up. Returns `.closed` when the peer closed (the socket
    /// is still the caller's), `.stopped`, or the reason it was given up (and closed):
    /// `.timedOut` for a stall, `.failed(0)` for another move.
    func pump(_ socket: TCPSocket, wakeBy: () -> MonotonicInstant? = { nil }, onWake: () -> Void = {}) -> TCPSocket.Outcome {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var lastByte = MonotonicInstant.now
        let since = context.log.elapsed
        let multipath = isMultipath
        while true {
            var deadline = multipath ? nextDeadline(awaitingDataSince: since) ?? context.stopAt : lastByte + context.workload.timeout
            if let extra = wakeBy() { deadline = min(deadline, max(extra, .now) + .milliseconds(1)) }
            let (count, outcome) = buffer.withUnsafeMutableBytes {
                socket.receive(into: $0, stop: context.stop, deadline: deadline, wakingOn: wakeDescriptors)
            }
            if outcome == .done {
                received(count)
                lastByte = .now
            }
            onWake()
            if multipath, outcome != .stopped, let reason = check(awaitingDataSince: since) {
                drop(socket, reason: reason.description)
                if case .stalled = reason { return .timedOut }
                return .failed(0)
            }
            switch outcome {
            case .done:
                continue
            case .timedOut:
                if multipath || MonotonicInstant.now < lastByte + context.workload.timeout { continue }
                drop(socket, reason: "no data for \(context.workload.timeout.roamDescription)")
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
    var currentInterface: String? { state.withLock { $0.session.currentInterface } }

    /// Connects to the workload's server, retrying every 250 ms while connecting fails, until
    /// connected, stopped, or `limit` passes. The kernel picks the link from the routes in force,
    /// unless the workload is multipath or prohibits kinds of path: then the racer connects over
    /// the permitted interfaces, and waits while there are none.
    func connect(until limit: MonotonicInstant? = nil) -> TCPSocket? {
        // Both families: Happy Eyeballs, as an app given a name with A and AAAA records.
        if isMultipath || (!context.workload.prohibits.isEmpty || context.serverAddresses.count > 1) && context.clientPath != nil {
            return raceConnect(until: limit)
        }
        guard let namespace = context.clientNamespace else { return nil }
        var failedSince: Duration?
        while !context.stop.isSignalled {
            if let limit, MonotonicInstant.now >= limit { return nil }
            guard let addresses = destinations(until: limit, failedSince: &failedSince) else { continue }
            var deadline = min(MonotonicInstant.now + context.workload.timeout, context.stopAt)
            if let limit {
                guard MonotonicInstant.now < limit else { return nil }
                deadline = min(deadline, limit)
            }
            switch TCPSocket.connect(in: namespace, to: addresses[0], port: context.port, deadline: deadline, stop: context.stop) {
            case .success(let socket):
                socket.reapWhenDead(patience: context.workload.timeout)
                let local = socket.localAddress ?? "?"
                // The link the kernel chose, for the bytes counted per link.
                let interface = IPAddress(local).flatMap { address in
                    context.clientPath?()?.availableInterfaces.first { $0.addresses.contains { $0.address == address } }?.name
                }
                let lookup = state.withLock { state in
                    state.socket = socket
                    state.connected(from: local)
                    state.lastFailure = nil
                    _ = state.session.handle(.connected(.init(interface: interface, transport: .tcp, local: IPAddress(local),
                                                              remote: addresses[0]), at: context.log.elapsed))
                    return state.lookup
                }
                var event = RunEvent.Connect(workload: context.workload.name, local: local, remote: addresses[0].description,
                                             retryingFor: failedSince.map { context.log.elapsed - $0 })
                event.lookup = lookup
                context.log.record(.connect(event))
                return socket
            case .failure(.stopped):
                return nil
            case .failure(let outcome):
                state.withLock { state in
                    state.connectFailures += 1
                    state.lastFailure = outcome.description
                }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record(.connectFailed(workload: context.workload.name, reason: outcome.description))
                }
                context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(250), limit ?? context.stopAt))
            }
        }
        return nil
    }

    /// The addresses to connect to now: the server's, or, for a client that connects by name,
    /// what a lookup through the client node's resolver gives (bounded by `limit` and the
    /// workload's timeout, as an app's connect timeout covers its lookup). Nil when the lookup
    /// failed: counted, logged at the first failure since `failedSince`, and retried after a
    /// pause (a failure that came at once, such as a name that does not exist).
    private func destinations(until limit: MonotonicInstant?, failedSince: inout Duration?) -> [IPAddress]? {
        guard let host = context.workload.host, let namespace = context.clientNamespace else { return context.serverAddresses }
        let deadline = min(MonotonicInstant.now + context.workload.timeout, limit ?? context.stopAt, context.stopAt)
        let servers = context.nameServers?() ?? []
        let families = context.workload.family.families.map { $0 == .ipv4 ? AddressFamily.inet : .inet6 }
        switch NameLookup.resolve(host, families: families, servers: servers, in: namespace, deadline: deadline, stop: context.stop) {
        case .success(let answer):
            state.withLock { state in
                state.lookups?.duration.record(answer.duration)
                state.lookup = RunEvent.Connect.Lookup(name: host, server: answer.server.description, duration: answer.duration,
                                                       addresses: answer.addresses.map(\.description))
                state.session.retarget(to: answer.addresses)
            }
            return answer.addresses
        case .failure(.stopped):
            return nil
        case .failure(let failure):
            let reason = "looking up \(host): \(failure)"
            state.withLock { state in
                state.lookups?.failed += 1
                state.lookups?.lastFailure = failure.description
                state.lookup = nil
                state.lastFailure = reason
            }
            if failedSince == nil {
                failedSince = context.log.elapsed
                context.log.record(.connectFailed(workload: context.workload.name, reason: reason))
            }
            context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(250), limit ?? context.stopAt, context.stopAt))
            return nil
        }
    }

    /// Why the last attempt to connect failed (a lookup's failure says so), if the last did.
    var lastConnectFailure: String? { state.withLock { $0.lastFailure } }

    /// How long the lookup for the current connection took, once (nil: none, or asked already).
    func takeLookupDuration() -> Duration? {
        state.withLock { state in
            defer { state.lookup = nil }
            return state.lookup?.duration
        }
    }

    /// Gives up the current connection (logging why), as an app does on a timeout or an error.
    func drop(_ socket: TCPSocket, reason: String) {
        sampleSubflows()
        state.withLock { state in
            guard state.socket === socket else { return }
            state.socket = nil
            state.mode = .tcp
            _ = state.session.handle(.connectionEnded(at: context.log.elapsed))
        }
        // Given up: reset at once rather than leave the kernel retrying over a dead link.
        socket.abort()
        if !context.stop.isSignalled {
            context.log.record(.disconnect(workload: context.workload.name, reason: reason))
        }
    }

    /// A result for the workload with what the client counted, active from its start to `end`.
    func result(end: Duration) -> WorkloadResult {
        var result = WorkloadResult(context.workload)
        let probe = state.withLock { state -> PathProbe? in
            result.bytesReceived = state.session.machine.bytesReceived
            result.connections = state.session.machine.connections
            result.connectFailures = state.connectFailures
            result.localAddresses = state.addresses
            result.bytesByInterface = state.session.machine.bytesByInterface
            result.handovers = state.raced ? state.session.machine.handovers : 0
            result.longestGap = state.longestGap
            result.gaps = state.gaps.all().map { ($0.start, $0.length) }
            // A flow that never resumed: its last gap runs to the end.
            if let last = state.session.machine.lastData, end - last >= Self.recordedGap, state.gaps.count < Self.maximumGaps {
                result.gaps.append((last, end - last))
            }
            result.subflowsOpened = state.subflowsOpened
            result.lookups = state.lookups
            result.transport = state.modes.contains(.multipath) ? "mptcp" : state.modes.contains(.fallback) ? "tcp (mptcp fallback)" : "tcp"
            defer { state.probe = nil }
            return state.probe
        }
        probe?.abandon()
        if isMultipath, context.workload.mode != .handover, result.transport != "mptcp" {
            result.note = "multipath mode '\(context.workload.mode.rawValue)' needs MPTCP to use several paths at once; "
                + (context.mptcp == nil ? "without it here" : "the connection fell back to TCP, so") + " it ran as handover (application level)"
        }
        result.activeTime = max(.zero, end - context.workload.start)
        return result
    }

    func close() {
        sampleSubflows()
        let (socket, probe) = state.withLock { state -> (TCPSocket?, PathProbe?) in
            defer {
                state.socket = nil
                state.probe = nil
            }
            return (state.socket, state.probe)
        }
        probe?.abandon()
        socket?.close()
    }
}

extension Workload {
    /// What the workload's flow may use (`prohibit:`), as the one `PathPolicy` its races,
    /// moves and MPTCP subflows follow; the connectivity rule is the default's (`.prefer`).
    package var pathPolicy: PathPolicy {
        PathPolicy(allowsExpensive: !prohibits.contains(.expensive), allowsConstrained: !prohibits.contains(.constrained),
                   allowsUltraConstrained: !prohibits.contains(.ultraConstrained))
    }
}
