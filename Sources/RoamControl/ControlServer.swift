import CRoamLinux
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import RoamCore
import RoamSystem
import Synchronization

/// Serves a run's ``ControlAPI`` over HTTP/1.1 on its ``ControlListeners``, with SwiftNIO's HTTP
/// codec: one event-loop thread, and a small thread pool for what blocks (a live change waits
/// for the backend). A request's body holds at most ``ControlAPI/maximumBodySize``; the peer of
/// a Unix connection must be the run's user, and a TCP request must carry the token.
///
/// Each listener has its own connections (``maximumConnections`` each): the loopback port, which
/// any local user can reach, never takes a place from the run's user on the Unix socket. A Unix
/// connection counts once its peer is known to be the run's user. A TCP connection must send a
/// request head carrying the token within ``Timeouts/authentication`` of connecting, or it is
/// closed; the token is checked on the head, before any body is read; when every TCP place is
/// taken, the oldest connection that has not yet shown the token gives its place to the new one.
/// A connection that sits idle between requests for ``Timeouts/idle`` is closed.
package final class ControlServer: Sendable {
    package static let maximumConnections = 64
    /// On a socket every local user may reach (`roam daemon`'s): the most connections one other
    /// user may hold, so that no user can take every place. The server's own user and root are
    /// not counted against anyone and always get a place.
    package static let maximumConnectionsPerUser = 8

    /// How long a connection may wait before it shows the token, and between requests.
    package struct Timeouts: Sendable {
        package var authentication: TimeAmount
        package var idle: TimeAmount
        package init(authentication: TimeAmount = .seconds(3), idle: TimeAmount = .seconds(60)) {
            self.authentication = authentication
            self.idle = idle
        }
    }

    private let api: any HTTPService
    private let group: MultiThreadedEventLoopGroup
    private let pool: NIOThreadPool
    private let timeouts: Timeouts
    private let channels = NIOLockedValueBox<[Channel]>([])
    private let connections = ConnectionTable()

    /// A server of `api` (a run's ``ControlAPI``, or `roam daemon`'s ``PathService``).
    package init(api: any HTTPService, timeouts: Timeouts = Timeouts()) {
        self.api = api
        self.timeouts = timeouts
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
    }

    /// The connections open now, on the Unix socket and on the loopback port (for tests).
    package var openConnections: (unix: Int, tcp: Int) {
        (connections.count(.unix), connections.count(.tcp))
    }

    /// Serves on `listeners` (their descriptors are the server's from now on).
    package func start(_ listeners: ControlListeners) throws {
        let expectedUID = geteuid()
        try serve(descriptor: listeners.unixDescriptor, listener: .unix, token: nil, peerUID: expectedUID)
        if let tcp = listeners.tcp {
            try serve(descriptor: tcp.descriptor, listener: .tcp, token: tcp.token, peerUID: nil)
        }
        if let toxiproxy = listeners.toxiproxy {
            try serve(descriptor: toxiproxy.descriptor, listener: .toxiproxy, token: nil, peerUID: nil, loopback: (toxiproxy.peers, toxiproxy.user))
        }
    }

    /// Serves on a Unix socket listening at `descriptor` (the server's from now on): every
    /// local user may connect, or with `onlyUser` that user alone (and the service learns each
    /// request's peer, `SO_PEERCRED`, to decide what it may change).
    package func serveUnix(descriptor: Int32, onlyUser: uid_t?) throws {
        try serve(descriptor: descriptor, listener: .unix, token: nil, peerUID: onlyUser, anyPeer: onlyUser == nil)
    }

    /// The two ends of a loopback connection, as addresses and ports.
    private static func ends(_ channel: Channel) -> (local: ([UInt8], UInt16), remote: ([UInt8], UInt16))? {
        func end(_ address: SocketAddress?) -> ([UInt8], UInt16)? {
            switch address {
            case .v4(let v4)?:
                let raw = v4.address.sin_addr.s_addr
                return (withUnsafeBytes(of: raw) { Array($0) }, UInt16(bigEndian: v4.address.sin_port))
            case .v6(let v6)?:
                return (withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }, UInt16(bigEndian: v6.address.sin6_port))
            default:
                return nil
            }
        }
        guard let local = end(channel.localAddress), let remote = end(channel.remoteAddress) else { return nil }
        return (local, remote)
    }

    private func serve(descriptor: Int32, listener: ConnectionTable.Listener, token: String?, peerUID: uid_t?,
                       loopback: (peers: LoopbackPeers, user: uid_t)? = nil, anyPeer: Bool = false) throws {
        let api = api
        let pool = pool
        let connections = connections
        let timeouts = timeouts
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { channel in
                let admit: @Sendable (uid_t?) -> EventLoopFuture<Void> = { peer in
                    // Where anyone may connect, each other user has a share of the places.
                    let share = anyPeer ? peer.map { $0 == geteuid() || $0 == 0 ? .exempt : .user($0) } ?? .exempt : ConnectionTable.Share.none
                    switch connections.admit(channel, on: listener, authenticated: token == nil, share: share) {
                    case .refused:
                        return channel.close()
                    case .admitted(let evicted):
                        evicted?.close(promise: nil)
                    }
                    channel.closeFuture.whenComplete { _ in connections.remove(channel) }
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        let handler = ControlHandler(api: api, pool: pool, token: token, idleTimeout: timeouts.idle, toxiproxy: listener == .toxiproxy,
                                                     peerUID: peer) {
                            connections.authenticated(channel)
                        }
                        try channel.pipeline.syncOperations.addHandler(handler)
                        if token != nil {
                            // Unauthenticated connections are short-lived: the token on a head, soon.
                            let deadline = channel.eventLoop.scheduleTask(in: timeouts.authentication) {
                                if !connections.isAuthenticated(channel) { channel.close(promise: nil) }
                            }
                            channel.closeFuture.whenComplete { _ in deadline.cancel() }
                        }
                    }
                }
                if let loopback {
                    // No token on this port: the peer's socket must be the run's user's, or root's.
                    guard let ends = Self.ends(channel), let owner = loopback.peers.owner(local: ends.local, remote: ends.remote),
                          owner == loopback.user || owner == 0 else { return channel.close() }
                    return admit(owner)
                }
                guard peerUID != nil || anyPeer else { return admit(nil) }
                guard let provider = channel as? SocketOptionProvider else { return channel.close() }
                // The peer is checked before the connection takes a place.
                let credentials: EventLoopFuture<roam_ucred> = provider.unsafeGetSocketOption(level: .init(rawValue: SOL_SOCKET),
                                                                                          name: .init(rawValue: SO_PEERCRED))
                return credentials.flatMap { peer in
                    if let peerUID, peer.uid != peerUID { return channel.close() }
                    return admit(peer.uid)
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: false)
        let channel = try bootstrap.withBoundSocket(descriptor).wait()
        channels.withLockedValue { $0.append(channel) }
    }

    /// Stops listening, lets each connection finish what it is answering (an event stream sends
    /// what is left), closes them and stops the threads.
    package func shutdown() {
        let listening = channels.withLockedValue { channels in
            defer { channels = [] }
            return channels
        }
        for channel in listening { try? channel.close().wait() }
        let open = connections.all()
        for channel in open {
            channel.pipeline.handler(type: ControlHandler.self).whenComplete { result in
                switch result {
                case .success(let handler): handler.drain()
                case .failure: channel.close(promise: nil)
                }
            }
        }
        // Bounded: a peer that reads nothing does not hold the run's end.
        let deadline = NIODeadline.now() + .seconds(2)
        for channel in open {
            let closed = channel.closeFuture
            let timeout = channel.eventLoop.scheduleTask(deadline: deadline) { channel.close(promise: nil) }
            try? closed.wait()
            timeout.cancel()
        }
        try? group.syncShutdownGracefully()
        try? pool.syncShutdownGracefully()
    }
}

/// One connection: requests in order, each answered from the thread pool; an event stream
/// holds the connection until the run ends or the client goes.
final class ControlHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let api: any HTTPService
    private let pool: NIOThreadPool
    private let token: String?
    /// The peer's user, where the listener learnt it.
    private let peerUID: uid_t?
    private let idleTimeout: TimeAmount
    /// Toxiproxy's API (its routes), not the control API.
    private let toxiproxy: Bool
    /// Called once, on the first head that carries the token.
    private let onAuthenticated: @Sendable () -> Void

    // Touched on the channel's event loop only.
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// The head did not carry the token: its body is dropped and the answer is 401.
    private var refused = false
    private var busy = false
    private var draining = false
    private var context: ChannelHandlerContext?
    private var stream: EventStream?
    private var idle: Scheduled<Void>?

    /// An event stream in progress.
    private final class EventStream {
        let source: ControlAPI.EventSource
        var next: Int
        var subscription: Int?
        var scheduled = false
        init(source: ControlAPI.EventSource, next: Int) {
            self.source = source
            self.next = next
        }
    }

    init(api: any HTTPService, pool: NIOThreadPool, token: String?, idleTimeout: TimeAmount, toxiproxy: Bool = false, peerUID: uid_t? = nil,
         onAuthenticated: @escaping @Sendable () -> Void) {
        self.api = api
        self.peerUID = peerUID
        self.toxiproxy = toxiproxy
        self.pool = pool
        self.token = token
        self.idleTimeout = idleTimeout
        self.onAuthenticated = onAuthenticated
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        armIdleTimer(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let stream, let subscription = stream.subscription { stream.source.unsubscribe(subscription) }
        stream = nil
        idle?.cancel()
        idle = nil
        self.context = nil
    }

    /// Closes the connection if no request comes within the idle timeout (not while a request
    /// is being read or answered, nor while an event stream runs).
    private func armIdleTimer(context: ChannelHandlerContext) {
        idle?.cancel()
        let channel = context.channel
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idle = context.eventLoop.scheduleTask(in: idleTimeout) {
            let handler = bound.value
            guard handler.head == nil, !handler.busy, handler.stream == nil else { return }
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            idle?.cancel()
            idle = nil
            head = requestHead
            body = []
            tooLarge = false
            refused = false
            if let token {
                if ControlListeners.authorizes(requestHead.headers.first(name: "authorization"), token: token) {
                    onAuthenticated()
                } else {
                    refused = true
                }
            }
        case .body(var buffer):
            guard !tooLarge, !refused else { return }
            if body.count + buffer.readableBytes > ControlAPI.maximumBodySize {
                tooLarge = true
                body = []
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body += bytes
            }
        case .end:
            guard let requestHead = head, !busy, stream == nil else {
                // A request pipelined behind an event stream or an answer in progress.
                context.close(promise: nil)
                return
            }
            head = nil
            if refused {
                // Answered and closed: a connection without the token gets no second try.
                draining = true
                write(.json(status: 401, body: .object([("error", "this port needs Authorization: Bearer TOKEN (the token roam run printed, also in its RUNID.token file)")])),
                      head: requestHead, context: context)
                return
            }
            if tooLarge {
                write(ControlAPI.error(413, "a request's body may hold at most \(ControlAPI.maximumBodySize) bytes"), head: requestHead, context: context)
                return
            }
            busy = true
            let api = api
            let requestBody = body
            body = []
            let loop = context.eventLoop
            let bound = NIOLoopBound(self, eventLoop: loop)
            let lastEventID = requestHead.headers.first(name: "last-event-id")
            let method = requestHead.method.rawValue
            let target = requestHead.uri
            let request = ServiceRequest(method: method, target: target, body: requestBody, lastEventID: lastEventID,
                                         userAgent: requestHead.headers.first(name: "user-agent"), peerUID: peerUID, toxiproxy: toxiproxy)
            pool.submit { _ in
                let respond: @Sendable (ControlAPI.Answer) -> Void = { answer in
                    loop.execute {
                        let handler = bound.value
                        handler.busy = false
                        guard let context = handler.context else { return }
                        handler.write(answer, head: requestHead, context: context)
                    }
                }
                api.handle(request, respond: respond)
            }
        }
    }

    /// The server is shutting down: close once what is being answered is sent.
    func drain() {
        draining = true
        guard let context else { return }
        if let stream {
            pump(stream, context: context)
        } else if !busy {
            context.close(promise: nil)
        }
    }

    private func write(_ answer: ControlAPI.Answer, head request: HTTPRequestHead, context: ChannelHandlerContext) {
        switch answer {
        case .json(let status, let value):
            // 204 has no body at all.
            let bytes = status == 204 ? [] : Array((value.serialized + "\n").utf8)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            if status != 204 { headers.add(name: "Content-Length", value: String(bytes.count)) }
            headers.add(name: "Cache-Control", value: "no-store")
            if status == 405, !toxiproxy, let methods = api.allowedMethods(for: request.uri) {
                headers.add(name: "Allow", value: methods.joined(separator: ", "))
            }
            let keepAlive = request.isKeepAlive && !draining
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: HTTPResponseStatus(statusCode: status), headers: headers))),
                          promise: nil)
            if !bytes.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil) }
            let done = context.writeAndFlushPromise()
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
            if !keepAlive {
                done.futureResult.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
            } else {
                armIdleTimer(context: context)
            }
        case .events(let source, let from):
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Cache-Control", value: "no-store")
            headers.add(name: "Connection", value: "close")
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers))), promise: nil)
            let stream = EventStream(source: source, next: from)
            self.stream = stream
            let loop = context.eventLoop
            let bound = NIOLoopBound(self, eventLoop: loop)
            let scheduled = Atomic<Bool>(false)
            stream.subscription = source.subscribe {
                // Coalesced: one wake-up in flight at a time, however many events arrive.
                guard !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
                loop.execute {
                    scheduled.store(false, ordering: .releasing)
                    let handler = bound.value
                    guard let stream = handler.stream, let context = handler.context else { return }
                    handler.pump(stream, context: context)
                }
            }
            pump(stream, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if let stream, context.channel.isWritable { pump(stream, context: context) }
    }

    /// Sends what the stream has not sent while the channel takes it; ends the stream once the
    /// run has ended and everything is sent (or the server is shutting down).
    private func pump(_ stream: EventStream, context: ChannelHandlerContext) {
        var wrote = false
        while context.channel.isWritable {
            let batch = stream.source.next(stream.next, 256)
            if batch.first > stream.next {
                // Older than what the run holds: say which were skipped, so the reader knows.
                let gap = "event: gap\ndata: {\"from\":\(stream.next),\"to\":\(batch.first)}\n\n"
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: gap)))), promise: nil)
                wrote = true
            }
            if batch.lines.isEmpty {
                stream.next = max(stream.next, batch.first)
                if draining || !stream.source.follow || stream.source.ended() {
                    context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
                    if let subscription = stream.subscription { stream.source.unsubscribe(subscription) }
                    stream.subscription = nil
                    self.stream = nil
                    return
                }
                break
            }
            var buffer = context.channel.allocator.buffer(capacity: batch.lines.reduce(0) { $0 + $1.utf8.count + 48 })
            for (offset, line) in batch.lines.enumerated() {
                buffer.writeString("id: \(batch.first + offset)\nevent: \(api.eventType(of: line))\ndata: ")
                buffer.writeString(line)
                buffer.writeString("\n\n")
            }
            stream.next = batch.first + batch.lines.count
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            wrote = true
        }
        if wrote { context.flush() }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}

extension ChannelHandlerContext {
    fileprivate func writeAndFlushPromise() -> EventLoopPromise<Void> { eventLoop.makePromise() }
}

/// The connections of both listeners, each listener with its own places.
final class ConnectionTable: Sendable {
    enum Listener: Sendable { case unix, tcp, toxiproxy }

    enum Admission {
        case refused
        /// Admitted; `evicted` is an unauthenticated connection that gave its place (to close).
        case admitted(evicted: Channel?)
    }

    /// Whose place a connection takes, on a listener every local user may reach.
    enum Share: Equatable {
        /// The listener is not shared: its places are the listener's.
        case none
        /// The server's user or root: always admitted, counted against no one.
        case exempt
        /// Another user: at most ``ControlServer/maximumConnectionsPerUser`` of its own, within the
        /// listener's places.
        case user(uid_t)
    }

    private struct Entry {
        var channel: Channel
        var listener: Listener
        var share: Share = .none
        var authenticated: Bool
        var order: Int
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var next = 0
    }

    private let state = NIOLockedValueBox(State())

    func admit(_ channel: Channel, on listener: Listener, authenticated: Bool, share: Share = .none) -> Admission {
        state.withLockedValue { state in
            switch share {
            case .none:
                break
            case .exempt:
                state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, listener: listener, share: share, authenticated: authenticated, order: state.next)
                state.next += 1
                return .admitted(evicted: nil)
            case .user:
                let others = state.entries.values.filter { $0.listener == listener && $0.share != .exempt }
                guard others.count < ControlServer.maximumConnections,
                      others.filter({ $0.share == share }).count < ControlServer.maximumConnectionsPerUser else { return .refused }
                state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, listener: listener, share: share, authenticated: authenticated, order: state.next)
                state.next += 1
                return .admitted(evicted: nil)
            }
            let open = state.entries.values.filter { $0.listener == listener }
            var evicted: Channel?
            if open.count >= ControlServer.maximumConnections {
                guard let oldest = open.filter({ !$0.authenticated }).min(by: { $0.order < $1.order }) else { return .refused }
                state.entries[ObjectIdentifier(oldest.channel)] = nil
                evicted = oldest.channel
            }
            state.entries[ObjectIdentifier(channel)] = Entry(channel: channel, listener: listener, authenticated: authenticated, order: state.next)
            state.next += 1
            return .admitted(evicted: evicted)
        }
    }

    func authenticated(_ channel: Channel) {
        state.withLockedValue { $0.entries[ObjectIdentifier(channel)]?.authenticated = true }
    }

    func isAuthenticated(_ channel: Channel) -> Bool {
        state.withLockedValue { $0.entries[ObjectIdentifier(channel)]?.authenticated ?? false }
    }

    func remove(_ channel: Channel) {
        state.withLockedValue { _ = $0.entries.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func count(_ listener: Listener) -> Int {
        state.withLockedValue { $0.entries.values.reduce(0) { $0 + ($1.listener == listener ? 1 : 0) } }
    }

    func all() -> [Channel] {
        state.withLockedValue { $0.entries.values.map(\.channel) }
    }
}
