import Glibc
import Multipath
import NIOCore
import NIOPosix
import Netlink
import PathMonitor

/// The first handler of every channel ``RoamClientBootstrap`` makes: it follows the path of the
/// channel's namespace and what the channel reads and writes, and fires ``RoamNetworkEvents``
/// into the pipeline as user inbound events. Everything else passes through untouched.
///
/// Driven by events, never by polling: the monitor's path updates, the channel's reads and
/// writes, and one timer at the rules' next deadline (a stall would be due, a probe is due).
/// Probes (a connection attempt over a free interface, to the channel's peer, nothing sent)
/// run on one thread per bootstrap that waits for all of them at once.
///
/// Find it with `channel.pipeline.handler(type: RoamPathHandler.self)` for ``metrics`` and
/// ``interface``.
public final class RoamPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = IOData
    public typealias OutboundOut = IOData

    struct Setup: Sendable {
        var source: PathSource
        var policy: PathPolicy
        var configuration: HandoverStateMachine.Configuration
        var raced: RacedConnection
        var port: UInt16
        var probePort: UInt16?
        var stallEvidence: HandoverSession.StallEvidence
    }

    private let setup: Setup
    private var advisor: PathAdvisor
    private var context: ChannelHandlerContext?
    private var subscription: PathUpdateSubscription?
    private var timer: Scheduled<Void>?
    private var timerDeadline: Duration?
    /// The probe in flight, by its number with the source's ``ProbeWaiter``.
    private var probe: Int?

    /// How the race that made the channel went: each attempt, the winner, whether the
    /// connection is multipath, fell back to TCP, or is plain TCP.
    public var metrics: ConnectionMetrics { setup.raced.metrics }
    /// The interface the channel's connection was made over (its first subflow's, over MPTCP).
    public var interface: String? { setup.raced.metrics.winner?.candidate.route.interface }
    /// Whether the channel is viable now, and the better interface announced, if any.
    public var isViable: Bool { advisor.isViable }
    public var betterInterface: String? { advisor.betterInterface }

    init(_ setup: Setup) {
        self.setup = setup
        // The peer's addresses the race tried, the winner's first: probes go to one of a family
        // the probed interface has.
        var peers: [IPAddress] = setup.raced.metrics.winner.map { [$0.candidate.destination] } ?? []
        for attempt in setup.raced.metrics.attempts where !peers.contains(attempt.candidate.destination) {
            peers.append(attempt.candidate.destination)
        }
        advisor = PathAdvisor(policy: setup.policy, configuration: setup.configuration, peer: peers, port: setup.port,
                              probePort: setup.probePort, stallEvidence: setup.stallEvidence)
    }

    private var peer: IPAddress? { setup.raced.metrics.winner?.candidate.destination }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard subscription == nil else { return }
        let now = PathSource.now()
        if let path = setup.source.monitor.currentPath { _ = advisor.handle(.pathUpdated(path, at: now)) }
        let transport: HandoverStateMachine.Transport = setup.raced.metrics.mode == .multipath ? .mptcp : .tcp
        carryOut(advisor.handle(.connected(interface: interface, transport: transport, family: peer?.family, at: now)), context: context)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        subscription = setup.source.monitor.onUpdate { path in
            eventLoop.execute { handler.value.pathUpdated(path) }
        }
        rescheduleTimer(context: context)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        stop()
        self.context = nil
    }

    private func stop() {
        subscription?.cancel()
        subscription = nil
        timer?.cancel()
        timer = nil
        abandonProbe()
    }

    private func abandonProbe() {
        if let probe { setup.source.probes.abandon(probe) }
        probe = nil
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data).readableBytes
        carryOut(advisor.handle(.received(bytes: bytes, at: PathSource.now())), context: context)
        context.fireChannelRead(data)
        rescheduleTimer(context: context)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = unwrapOutboundIn(data).readableBytes
        carryOut(advisor.handle(.sent(bytes: bytes, at: PathSource.now())), context: context)
        context.write(data, promise: promise)
        rescheduleTimer(context: context)
    }

    private func pathUpdated(_ path: NetworkPath) {
        guard let context, subscription != nil, path != advisor.path else { return }
        shareHoldDowns(at: PathSource.now())
        carryOut(advisor.handle(.pathUpdated(path, at: PathSource.now())), context: context)
        rescheduleTimer(context: context)
    }

    private func tick() {
        guard let context, subscription != nil else { return }
        timer = nil
        timerDeadline = nil
        let now = PathSource.now()
        shareHoldDowns(at: now)
        carryOut(advisor.handle(.sample(at: now, transport: transport(fresh: true))), context: context)
        rescheduleTimer(context: context)
    }

    /// Tells the advisor the interfaces the bootstrap holds down (another channel stalled on
    /// them): no better path points to one of them while the next race would leave it out.
    private func shareHoldDowns(at now: Duration) {
        let names = advisor.path?.availableInterfaces.map(\.name) ?? []
        for (interface, until) in setup.source.holdDowns(of: names, at: now) {
            _ = advisor.handle(.heldDownElsewhere(interface: interface, until: until))
        }
    }

    /// What the kernel says of the connection (`TCP_INFO`: the smoothed round trip, and whether
    /// data the app wrote is unacknowledged), read at most every 100 ms unless `fresh`: reads
    /// and writes come far more often than the estimate moves.
    private func transport(fresh: Bool = false) -> HandoverSession.TransportSample? {
        let now = PathSource.now()
        if !fresh, let cached = sample, now - cached.at < .milliseconds(100) { return cached.value }
        guard context?.channel.isActive ?? false else { return nil }
        let value = HandoverSession.TransportSample.of(setup.raced.socket)
        sample = (value, now)
        return value
    }
    private var sample: (value: HandoverSession.TransportSample?, at: Duration)?

    /// One timer, at the advisor's next deadline.
    private func rescheduleTimer(context: ChannelHandlerContext) {
        guard subscription != nil else { return }
        let deadline = advisor.nextDeadline(transport: transport(), at: PathSource.now())
        guard deadline != timerDeadline else { return }
        timer?.cancel()
        timer = nil
        timerDeadline = deadline
        guard let deadline else { return }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: PathSource.deadline(at: deadline)) { handler.value.tick() }
    }

    private func carryOut(_ actions: [PathAdvisor.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .advise(let advice):
                context.fireUserInboundEventTriggered(Self.event(advice))
            case let .heldDown(interface, _):
                setup.source.markStalled(interface, at: PathSource.now())
            case .startProbe(let interface):
                startProbe(interface, context: context)
            case .abandonProbe:
                abandonProbe()
            }
        }
    }

    static func event(_ advice: PathAdvisor.Advice) -> any RoamNetworkEvent {
        switch advice {
        case .pathChanged(let path): RoamNetworkEvents.PathChanged(newPath: path)
        case let .viability(isViable, reason): RoamNetworkEvents.ViabilityUpdate(isViable: isViable, reason: reason)
        case let .betterPathAvailable(interface, reason): RoamNetworkEvents.BetterPathAvailable(interface: interface, reason: reason)
        case .betterPathUnavailable: RoamNetworkEvents.BetterPathUnavailable()
        }
    }

    /// A connection attempt over `interface` to the channel's peer, nothing sent: whether it
    /// connected within the probe interval. The source's ``ProbeWaiter`` runs it.
    private func startProbe(_ interface: String, context: ChannelHandlerContext) {
        abandonProbe()
        guard let target = advisor.path?.availableInterfaces.first(where: { $0.name == interface }),
              let (destination, port) = advisor.probeTarget(for: interface) else {
            carryOut(advisor.handle(.probeFinished(interface: interface, connected: false, at: PathSource.now())), context: context)
            return
        }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let deadline = NIODeadline.now() + TimeAmount(setup.configuration.probeInterval)
        probe = setup.source.probes.probe(target, to: destination, port: port, deadline: deadline) { id, connected in
            eventLoop.execute { handler.value.probeFinished(interface, id: id, connected: connected) }
        }
    }

    private func probeFinished(_ interface: String, id: Int, connected: Bool) {
        guard let context, subscription != nil, probe == id else { return }
        probe = nil
        carryOut(advisor.handle(.probeFinished(interface: interface, connected: connected, at: PathSource.now())), context: context)
        rescheduleTimer(context: context)
    }
}

@available(*, unavailable)
extension RoamPathHandler: Sendable {}
