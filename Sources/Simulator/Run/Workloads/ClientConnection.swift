import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// The client side that every network workload shares: its connection, counters, and the
/// reconnect loop an app without multipath runs. In multipath modes it drives Multipath's
/// ``HandoverStateMachine`` (the same rules as ``HandoverConnection``), woken by the client
/// node's path updates, the machine's timers and its probes; it keeps no policy of its own.
final class ClientConnection: Sendable {
    private struct State {
        var socket: TCPSocket?
        var machine: HandoverStateMachine
        var connectFailures = 0
        var localAddresses: [String] = []
        /// The longest time between two arrivals of data, and when it began.
        var longestGap: (start: Duration, length: Duration)?
        /// What the current connection is (MPTCP or not).
        var mode: MPTCP.Mode = .tcp
        var modes: Set<MPTCP.Mode> = []
        /// Each subflow of the current connection: its interface and bytes received so far.
        var subflows: [String: (interface: String, bytes: UInt64)] = [:]
        var subflowsOpened = 0
        var lastSubflowSample: Duration = .seconds(-1)
        var interfaceOfAddress: [IPAddress: String] = [:]
        /// The probe the machine asked for, in flight.
        var probe: PathProbe?
        /// A move the machine asked for, until the flow makes it.
        var pendingMove: HandoverStateMachine.Reason?
        /// Whether connections were raced (multipath modes, or a policy that prohibits paths).
        var raced = false
        /// With subflow control: the current connection's token, each local address's backup
        /// flag as last set, and when a subflow from an interface was last asked for.
        var token: UInt32?
        /// The server address the current connection was made to (its subflows go there too).
        var remote: IPAddress?
        var backupOf: [IPAddress: Bool] = [:]
        var lastSubflowRequest: [String: Duration] = [:]
        /// The identifier each local address has in the current connection (0: its first
        /// subflow's), and the next one to give.
        var localID: [IPAddress: UInt8] = [:]
        var nextLocalID: UInt8 = 1
    }
    private let state: Mutex<State>
    let context: WorkloadContext
    /// Signalled on the client node's path updates (multipath modes).
    private let pathChanged: EventSignal?
    private let subscription: PathUpdateSubscription?

    init(context: WorkloadContext) {
        self.context = context
        var configuration = HandoverStateMachine.Configuration()
        configuration.maximumStall = context.workload.timeout
        configuration.usesPathManager = context.mptcp != nil || context.controlsSubflows
        configuration.controlsSubflows = context.controlsSubflows
        configuration.serviceType = MultipathServiceType(rawValue: context.workload.mode.rawValue) ?? .handover
        if case let .stream(bitrate, buffer) = context.workload.kind {
            configuration.stream = .init(bytesPerSecond: bitrate.bitsPerSecond / 8, buffer: buffer)
        }
        state = Mutex(State(machine: HandoverStateMachine(configuration: configuration)))
        if context.workload.mode != .none, let monitor = context.clientMonitor, let wakeup = try? EventSignal() {
            pathChanged = wakeup
            subscription = monitor.onUpdate { _ in wakeup.signal() }
        } else {
            pathChanged = nil
            subscription = nil
        }
    }

    deinit { subscription?.cancel() }

    var bytesReceived: Int64 { state.withLock { $0.machine.bytesReceived } }
    var connections: Int { state.withLock { $0.machine.connections } }
    var connectFailures: Int { state.withLock { $0.connectFailures } }
    /// The local addresses connections were made from, in order (the links the app used).
    var localAddresses: [String] { state.withLock { $0.localAddresses } }
    var rtt: Duration? { state.withLock { $0.socket?.smoothedRTT } }

    /// When the last byte arrived, from the start of the run.
    var lastProgress: Duration? { state.withLock { $0.machine.lastData } }

    func received(_ count: Int) {
        let now = context.log.elapsed
        let sample = state.withLock { state -> Bool in
            if let last = state.machine.lastData, now - last > (state.longestGap?.length ?? .zero) { state.longestGap = (last, now - last) }
            _ = state.machine.handle(.received(bytes: count, at: now))
            return state.mode == .multipath && now - state.lastSubflowSample >= Self.subflowSampleInterval
        }
        if sample { sampleSubflows() }
    }

    /// Whether the workload keeps its flow alive across paths: with MPTCP where the kernel has
    /// it (the path manager moves subflows), by application-level handover otherwise.
    var isMultipath: Bool { context.workload.mode != .none && context.clientPath != nil }

    /// How often an MPTCP connection's subflows are read while data arrives.
    static let subflowSampleInterval = Duration.milliseconds(20)

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
            var delivered: [String: Int] = [:]
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
                if delta > 0 { delivered[interface, default: 0] += Int(clamping: delta) }
                state.subflows[key] = (interface, subflow.bytesReceived)
            }
            for (_, interface) in added { _ = state.machine.handle(.subflowEstablished(interface: interface, at: now)) }
            if !delivered.isEmpty { _ = state.machine.handle(.subflowsDelivered(delivered, at: now)) }
            for (key, entry) in state.subflows where !seen.contains(key) {
                closed.append((key, entry.interface))
                state.subflows[key] = nil
            }
        }
        for (key, interface) in added {
            context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, event: "added", interface: interface, subflow: key)))
        }
        for (key, interface) in closed {
            context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, event: "closed", interface: interface, subflow: key)))
        }
    }

    /// How long without progress, while data is expected, before the path counts as stalled:
    /// the state machine's threshold in multipath modes, the workload's timeout otherwise.
    var stallThreshold: Duration {
        guard isMultipath else { return context.workload.timeout }
        return state.withLock { $0.machine.stallThreshold(smoothedRTT: $0.socket?.smoothedRTT) }
    }

    /// Hands `event` to the state machine and carries out what it asks.
    private func handle(_ event: HandoverStateMachine.Event) {
        perform(state.withLock { $0.machine.handle(event) })
    }

    private func perform(_ actions: [HandoverStateMachine.Action]) {
        for action in actions {
            switch action {
            case let .markStalled(interface, holdDown):
                // With Roam's path manager, its subflows become backups (in every connection),
                // another path's take over.
                let changes = context.mptcp.map { manager in ((try? manager.markStalled(interface)) ?? []).map(\.description) }
                context.log.record(.pathStalled(RunEvent.PathStalled(workload: context.workload.name, interface: interface,
                                                                     threshold: stallThreshold, holdDown: holdDown, mptcp: changes)))
            case .move(let reason):
                state.withLock { $0.pendingMove = reason }
            case .startProbe(let interface):
                let target = state.withLock { $0.machine.path?.availableInterfaces.first { $0.name == interface } }
                let probe = context.clientNamespace.flatMap { namespace in
                    target.flatMap { interface in
                        context.serverAddresses.lazy.compactMap { PathProbe(interface, to: $0, port: self.context.port, in: namespace) }.first
                    }
                }
                let previous = state.withLock { state -> PathProbe? in
                    defer { state.probe = probe }
                    return state.probe
                }
                previous?.abandon()
                if probe == nil { handle(.probeFinished(interface: interface, connected: false, at: context.log.elapsed)) }
            case .abandonProbe:
                state.withLock { state -> PathProbe? in
                    defer { state.probe = nil }
                    return state.probe
                }?.abandon()
            case let .switchSubflows(interface, reason):
                context.log.record(.subflowSwitch(workload: context.workload.name, to: interface, reason: reason.description))
                // The interface left is withdrawn (the peer told over the subflows left): what
                // was in flight over it is sent again over the others at once, rather than held
                // up behind a lossy or dead subflow. A better path keeps the old one as standby.
                switch reason {
                case .pathLost(let left), .stalled(let left?, _), .tooPoor(let left?, _): withdraw(left)
                default: break
                }
                reconcileSubflows()
            case .restore(let interface):
                if context.controlsSubflows {
                    context.log.record(.pathRestored(workload: context.workload.name, interface: interface, changes: nil))
                    continue
                }
                guard let manager = context.mptcp else { continue }
                let changes = (try? manager.clearStalled(interface)) ?? []
                context.log.record(.pathRestored(workload: context.workload.name, interface: interface, changes: changes.map(\.description)))
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

    /// When the state machine next needs a look, as an instant (nil: only events wake it).
    func stallDeadline(awaitingDataSince since: Duration?) -> MonotonicInstant? { nextDeadline(awaitingDataSince: since) }

    private func nextDeadline(awaitingDataSince since: Duration?) -> MonotonicInstant? {
        state.withLock { $0.machine.nextDeadline(smoothedRTT: $0.socket?.smoothedRTT, awaitingDataSince: since) }.map { context.log.start + $0 }
    }

    /// Lets the state machine look at the flow now (multipath modes): a path the monitor
    /// published since, a probe decided, its timers. Returns why the flow must leave its
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
        let (rtt, sample) = state.withLock { ($0.socket?.smoothedRTT, $0.mode == .multipath && context.log.elapsed - $0.lastSubflowSample >= Self.subflowSampleInterval) }
        if sample { sampleSubflows() }
        if let manager = context.mptcp {
            let preferred = manager.preferredInterface
            state.withLock { _ = $0.machine.handle(.pathManagerPrefers(interface: preferred)) }
        }
        reconcileSubflows()
        handle(.tick(at: context.log.elapsed, smoothedRTT: rtt, awaitingDataSince: since))
        return state.withLock { state in
            defer { state.pendingMove = nil }
            return state.pendingMove
        }
    }

    /// With subflow control (userspace path manager): brings the current MPTCP connection's
    /// subflows in step with the state machine: one from every interface of the path (opened
    /// when missing, at most once a second per interface), the machine's active one carrying the
    /// data and the others backups.
    private func reconcileSubflows() {
        guard context.controlsSubflows, let namespace = context.clientNamespace else { return }
        let now = context.log.elapsed
        let snapshot = state.withLock { state -> (Int32, UInt32, IPAddress, NetworkPath, String?, [IPAddress: Bool], [String: Duration])? in
            guard state.mode == .multipath, let socket = state.socket, let token = state.token, let remote = state.remote,
                  let path = state.machine.path else { return nil }
            return (socket.descriptor, token, remote, path, state.machine.currentInterface, state.backupOf, state.lastSubflowRequest)
        }
        guard let (descriptor, token, server, path, active, applied, requested) = snapshot, let active else { return }
        var ids = state.withLock { ($0.localID, $0.nextLocalID) }
        let live = MPTCP.subflows(of: descriptor)
        // A netlink socket only when there is something to ask of the path manager.
        var socket: NetlinkSocket?
        func pathManager() throws(NetlinkError) -> NetlinkSocket {
            if let socket { return socket }
            let opened = try NetlinkSocket(.generic, in: namespace)
            socket = opened
            return opened
        }
        var backupOf = applied
        var requests = requested
        for interface in path.availableInterfaces where interface.type != .loopback {
            guard let local = interface.addresses.first(where: { $0.address.family == server.family && !$0.address.isLinkLocal })?.address else { continue }
            let backup = interface.name != active
            if live.contains(where: { $0.local == local }) {
                if backupOf[local] ?? false != backup {
                    do throws(NetlinkError) {
                        try pathManager().setMPTCPSubflowBackup(token: token, local: local, remote: server, remotePort: context.port, backup: backup)
                        backupOf[local] = backup
                    } catch {
                        context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, error: "\(error)")))
                        backupOf[local] = backup
                    }
                }
            } else if now - (requests[interface.name] ?? .seconds(-100)) >= Self.subflowRetry {
                requests[interface.name] = now
                let id = ids.0[local] ?? ids.1
                do throws(NetlinkError) {
                    try pathManager().createMPTCPSubflow(token: token, from: MPTCPEndpoint(id: id, address: local, interfaceIndex: interface.index,
                                                                                           flags: backup ? .backup : []),
                                                         to: server, port: context.port)
                    backupOf[local] = backup
                    if ids.0[local] == nil {
                        ids.0[local] = id
                        ids.1 = ids.1 == 255 ? 1 : ids.1 + 1
                    }
                } catch {
                    // The kernel refuses subflows until the connection is fully established
                    // (data went both ways): that first refusal is retried, not reported.
                    let age = state.withLock { state in state.machine.connection.map { now - $0.since } } ?? .zero
                    if age >= .seconds(1) {
                        context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, interface: interface.name, error: "\(error)")))
                    }
                }
            }
        }
        state.withLock { state in
            guard state.token == token else { return }
            state.backupOf = backupOf
            state.lastSubflowRequest = requests
            state.localID = ids.0
            state.nextLocalID = ids.1
        }
    }

    /// With subflow control: withdraws the address of `interface` from the current connection
    /// (REMOVE_ADDR), so that the peer stops sending over it at once rather than after its
    /// retransmission timeouts, and what was in flight over it goes again over the others. A
    /// new standby subflow from it is opened later if it is still in the path.
    private func withdraw(_ interface: String) {
        guard context.controlsSubflows, let namespace = context.clientNamespace else { return }
        let target = state.withLock { state -> (UInt32, UInt8, IPAddress)? in
            guard let token = state.token else { return nil }
            // Its address: the one a subflow of it was made from (the path no longer lists it).
            guard let (address, id) = state.localID.first(where: { state.interfaceOfAddress[$0.key] == interface }) else { return nil }
            return (token, id, address)
        }
        guard let (token, id, address) = target else { return }
        do throws(NetlinkError) {
            try NetlinkSocket(.generic, in: namespace).removeMPTCPAddress(token: token, localID: id)
        } catch {
            context.log.record(.subflow(RunEvent.Subflow(workload: context.workload.name, interface: interface, error: "\(error)")))
        }
        state.withLock { state in
            state.localID[address] = nil
            state.backupOf[address] = nil
        }
    }

    /// Between two requests for a subflow from one interface (the first may come before the
    /// connection is fully established, which the kernel refuses).
    static let subflowRetry = Duration.milliseconds(200)

    /// Feeds the machine the client node's path, if it changed since it last looked.
    private func observePath() {
        guard let path = context.clientPath?() else { return }
        let changed = state.withLock { $0.machine.path != path }
        if changed { handle(.pathUpdated(path, at: context.log.elapsed)) }
    }

    /// Tells the state machine how much media the stream's player holds, while playing.
    func playout(buffered: Duration) {
        guard isMultipath else { return }
        handle(.playout(buffered: buffered, at: context.log.elapsed))
    }

    /// Connects by racing every permitted interface (multipath modes).
    private func raceConnect(until limit: MonotonicInstant?) -> TCPSocket? {
        guard let namespace = context.clientNamespace else { return nil }
        var failedSince: Duration?
        while !context.stop.isSignalled {
            if let limit, MonotonicInstant.now >= limit { return nil }
            observePath()
            guard let path = state.withLock({ $0.machine.racePath(at: context.log.elapsed) }) else {
                context.stop.wait(for: .milliseconds(50))
                continue
            }
            let deadline = min(context.stopAt, limit ?? context.stopAt)
            let timeout = min(context.workload.timeout, max(.milliseconds(10), deadline - MonotonicInstant.now))
            let serviceType = MultipathServiceType(rawValue: context.workload.mode.rawValue) ?? .handover
            let prohibits = context.workload.prohibits
            let policy = ConnectionPolicy(allowsExpensive: !prohibits.contains(.expensive), allowsConstrained: !prohibits.contains(.constrained),
                                          allowsUltraConstrained: !prohibits.contains(.ultraConstrained), serviceType: serviceType)
            let racer = ConnectionRacer(namespace: namespace, policy: policy, transport: context.mptcp != nil || context.controlsSubflows ? .mptcp : .tcp)
            do throws(MultipathError) {
                let connection = try racer.connect(to: context.serverAddresses, port: context.port, over: path, timeout: timeout)
                let socket = TCPSocket(adopting: connection.descriptor)
                socket.reapWhenDead(patience: context.workload.timeout)
                let winner = connection.metrics.winner?.candidate
                let interface = winner?.route.interface ?? "?"
                let actions = state.withLock { state in
                    state.socket = socket
                    state.raced = true
                    state.localAddresses.append(winner?.source.description ?? "?")
                    state.mode = connection.metrics.mode
                    state.modes.insert(connection.metrics.mode)
                    state.subflows = [:]
                    state.pendingMove = nil
                    state.token = connection.metrics.mode == .multipath ? MPTCP.info(of: connection.descriptor)?.mptcpi_token : nil
                    state.remote = winner?.destination
                    state.backupOf = [:]
                    state.lastSubflowRequest = [:]
                    state.localID = winner.map { [$0.source: 0] } ?? [:]
                    state.nextLocalID = 1
                    return state.machine.handle(.connected(interface: interface, transport: connection.metrics.mode == .multipath ? .mptcp : .tcp,
                                                           family: winner?.destination.family, at: context.log.elapsed))
                }
                perform(actions)
                let attempts = connection.metrics.attempts.map { attempt in
                    RunEvent.Connect.Attempt(interface: attempt.candidate.route.interface, started: attempt.started, outcome: "\(attempt.outcome)")
                }
                context.log.record(.connect(RunEvent.Connect(workload: context.workload.name, local: winner?.source.description ?? "?",
                                                             remote: winner?.destination.description ?? context.serverAddress.description,
                                                             interface: interface, transport: connection.metrics.mode.rawValue, attempts: attempts,
                                                             retryingFor: failedSince.map { context.log.elapsed - $0 })))
                if connection.metrics.mode == .multipath { sampleSubflows() }
                reconcileSubflows()
                return socket
            } catch {
                state.withLock { $0.connectFailures += 1 }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record(.connectFailed(workload: context.workload.name, reason: error.description))
                }
                context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(100), limit ?? context.stopAt))
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
    var currentInterface: String? { state.withLock { $0.machine.currentInterface } }

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
                    state.localAddresses.append(local)
                    _ = state.machine.handle(.connected(interface: interface, transport: .tcp, at: context.log.elapsed))
                }
                context.log.record(.connect(RunEvent.Connect(workload: context.workload.name, local: local, remote: context.serverAddress.description,
                                                             retryingFor: failedSince.map { context.log.elapsed - $0 })))
                return socket
            case .failure(.stopped):
                return nil
            case .failure(let outcome):
                state.withLock { $0.connectFailures += 1 }
                if failedSince == nil {
                    failedSince = context.log.elapsed
                    context.log.record(.connectFailed(workload: context.workload.name, reason: outcome.description))
                }
                context.stop.wait(until: min(MonotonicInstant.now + .milliseconds(250), limit ?? context.stopAt))
            }
        }
        return nil
    }

    /// Gives up the current connection (logging why), as an app does on a timeout or an error.
    func drop(_ socket: TCPSocket, reason: String) {
        sampleSubflows()
        state.withLock { state in
            guard state.socket === socket else { return }
            state.socket = nil
            state.mode = .tcp
            _ = state.machine.handle(.connectionEnded(at: context.log.elapsed))
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
            result.bytesReceived = state.machine.bytesReceived
            result.connections = state.machine.connections
            result.connectFailures = state.connectFailures
            result.localAddresses = state.localAddresses
            result.bytesByInterface = state.machine.bytesByInterface
            result.handovers = state.raced ? state.machine.handovers : 0
            result.longestGap = state.longestGap
            result.subflowsOpened = state.subflowsOpened
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
