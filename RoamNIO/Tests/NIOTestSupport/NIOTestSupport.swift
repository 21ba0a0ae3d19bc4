import Multipath
import NIOCore
import NIOHTTP1
import NIOPosix
import RoamNIO
import RoamTesting
import ScenarioModel
import Synchronization

/// A phone with Wi-Fi (`wifi`, 2 ms each way) and LTE (`cell`, about 55 ms round trip) to a
/// server, and `timeline` on top.
public func phoneAndServer(_ name: String, timeline: String = "", wifi: String = "profile: wifi") throws -> Scenario {
    try Scenario.parse(yaml: """
        name: \(name)
        seed: 5
        duration: 60s
        nodes:
          phone: {}
          server: {}
        links:
          - { name: wifi, between: [phone, server], \(wifi) }
          - { name: cell, between: [phone, server], profile: lte }
        \(timeline.isEmpty ? "" : "timeline:\n" + timeline)
        """)
}

/// An HTTP/1.1 server on swift-nio's own codec, in the node it is started from: `GET /N`
/// answers N bytes.
public final class HTTPServer: Sendable {
    public let channel: any Channel
    public let port: Int

    /// Binds in the calling thread's namespace (call it from the server node's `run`).
    public init(group: any EventLoopGroup, mptcp: Bool = false) throws {
        let counter = Box()
        channel = try ServerBootstrap(group: group)
            .enableMPTCP(mptcp)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(Responder(counter: counter))
                }
            }
            .bind(host: "0.0.0.0", port: 0).wait()
        port = channel.localAddress!.port!
        box = counter
    }

    private let box: Box
    final class Box: Sendable { let count = Mutex(0) }
    /// Responses sent so far.
    public var requestsServed: Int { box.count.withLock { $0 } }

    public func close() { try? channel.close().wait() }

    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let counter: Box
        var size = 0
        /// The server's think time before it answers (`/SIZE?delay=MS`).
        var delay = 0
        init(counter: Box) { self.counter = counter }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                let parts = head.uri.dropFirst().split(separator: "?", maxSplits: 1)
                size = parts.first.flatMap { Int($0) } ?? 0
                delay = parts.count > 1 && parts[1].hasPrefix("delay=") ? Int(parts[1].dropFirst(6)) ?? 0 : 0
            case .body:
                break
            case .end:
                counter.count.withLock { $0 += 1 }
                let size = size
                guard delay > 0 else {
                    respond(size, context: context)
                    return
                }
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(delay))) { bound.value.0.respond(size, context: bound.value.1) }
            }
        }

        private func respond(_ size: Int, context: ChannelHandlerContext) {
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "\(size)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: UInt8(ascii: "x"), count: size)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

/// The path events a channel fired, each with the run's clock when it came; waits for one.
public actor EventLog {
    public private(set) var entries: [(at: Duration, event: RoamPathEvent)] = []
    private var waiters: [(id: Int, match: @Sendable (RoamPathEvent) -> Bool, continuation: CheckedContinuation<Duration?, Never>)] = []
    private var nextWaiter = 0

    /// Reads `events` until they end, stamping each with `clock`.
    public init() {}

    public nonisolated func follow(_ events: AsyncStream<RoamPathEvent>, clock: @escaping @Sendable () -> Duration) {
        Task {
            for await event in events { await self.append(event, at: clock()) }
        }
    }

    func append(_ event: RoamPathEvent, at time: Duration) {
        entries.append((time, event))
        let (ready, waiting) = (waiters.filter { $0.match(event) }, waiters.filter { !$0.match(event) })
        waiters = waiting
        for waiter in ready { waiter.continuation.resume(returning: time) }
    }

    /// When the first event `match` accepts came (already, or within `timeout`); nil if none did.
    public func first(within timeout: Duration, where match: @escaping @Sendable (RoamPathEvent) -> Bool) async -> Duration? {
        if let found = entries.first(where: { match($0.event) }) { return found.at }
        let id = nextWaiter
        nextWaiter += 1
        return await withCheckedContinuation { continuation in
            waiters.append((id, match, continuation))
            Task {
                try? await Task.sleep(for: timeout)
                self.expire(id)
            }
        }
    }

    private func expire(_ id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: nil)
    }

    /// The events other than path changes: what the app is advised.
    public var advice: [RoamPathEvent] {
        entries.map(\.event).filter { if case .pathChanged = $0 { false } else { true } }
    }
}

extension RoamPathEvent {
    public var isUnviable: Bool { if case .viabilityUpdate(let update) = self { !update.isViable } else { false } }
    public var isViable: Bool { if case .viabilityUpdate(let update) = self { update.isViable } else { false } }
    public var betterInterface: String? { if case .betterPathAvailable(let event) = self { event.interface } else { nil } }
    public var isBetterPathUnavailable: Bool { self == .betterPathUnavailable }
}

/// An HTTP/1.1 client connection (swift-nio's codec) made by a Roam bootstrap, with its path
/// events and the race's metrics.
public struct HTTPConnection: Sendable {
    public let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
    public let events: EventLog
    public let metrics: ConnectionMetrics
    public let interface: String?

    public static func connect(_ bootstrap: RoamClientBootstrap, to host: String, port: Int, clock: @escaping @Sendable () -> Duration) async throws -> HTTPConnection {
        let log = EventLog()
        let (channel, events, metrics, interface) = try await bootstrap.connect(host: host, port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                let events = try channel.pipeline.syncOperations.roamPathEvents()
                let roam = try channel.pipeline.syncOperations.handler(type: RoamPathHandler.self)
                let wrapped = try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                return (wrapped, events, roam.metrics, roam.interface)
            }
        }
        log.follow(events, clock: clock)
        return HTTPConnection(channel: channel, events: log, metrics: metrics, interface: interface)
    }

    /// Runs `body`, then closes the connection, whether `body` threw or not (an
    /// `NIOAsyncChannel` must be finished): for a test that makes no exchange.
    public func closing<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await channel.executeThenClose { _, _ in try await body() }
    }
}

/// One request at a time over a connection's inbound and outbound halves.
public struct HTTPExchange: ~Copyable {
    var inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
    let outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>
    let host: String

    public init(inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator,
                outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>, host: String) {
        self.inbound = inbound
        self.outbound = outbound
        self.host = host
    }

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// `GET /size`: the status and the body's length; with `serverDelay`, the server thinks
    /// that long before it answers.
    public mutating func get(_ size: Int, serverDelay: Duration = .zero) async throws -> (status: HTTPResponseStatus, bytes: Int) {
        let delay = serverDelay.components.seconds * 1000 + serverDelay.components.attoseconds / 1_000_000_000_000_000
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: delay > 0 ? "/\(size)?delay=\(delay)" : "/\(size)")
        head.headers.add(name: "host", value: host)
        try await outbound.write(contentsOf: [.head(head), .end(nil)])
        var status: HTTPResponseStatus?
        var bytes = 0
        while let part = try await inbound.next() {
            switch part {
            case .head(let response): status = response.status
            case .body(let buffer): bytes += buffer.readableBytes
            case .end: return (status ?? .internalServerError, bytes)
            }
        }
        throw Failure(description: "the connection closed before the response ended")
    }
}

/// A phone and a server playing a scenario, with an HTTP server running in the server's node
/// and a Roam bootstrap following the phone's monitor.
public struct Scene: Sendable {
    public let network: TestNetwork
    public let phone: NodeHandle
    public let server: NodeHandle
    public let http: HTTPServer
    public let bootstrap: RoamClientBootstrap

    /// A connection from the phone to the HTTP server, made by `bootstrap` (the scene's by default).
    public func connect(with bootstrap: RoamClientBootstrap? = nil) async throws -> HTTPConnection {
        let bootstrap = bootstrap ?? self.bootstrap
        let (network, host, port) = (network, server.address, http.port)
        return try await phone.run { try await HTTPConnection.connect(bootstrap, to: host, port: port, clock: { network.elapsed }) }
    }
}

/// Plays ``phoneAndServer(_:timeline:wifi:)`` with `body`, the HTTP server (speaking MPTCP when
/// asked) started before it and closed after.
public func playScene(_ name: String, timeline: String = "", wifi: String = "profile: wifi", mptcpServer: Bool = false,
                      _ body: @escaping @Sendable (Scene) async throws -> Void) async throws -> ScenarioRun<Void> {
    try await playScene(try phoneAndServer(name, timeline: timeline, wifi: wifi), mptcpServer: mptcpServer, body)
}

/// Plays `scenario` (with nodes `phone` and `server`) the same way.
public func playScene(_ scenario: Scenario, mptcpServer: Bool = false,
                      _ body: @escaping @Sendable (Scene) async throws -> Void) async throws -> ScenarioRun<Void> {
    let group = MultiThreadedEventLoopGroup.singleton
    return try await scenario.run { network in
        let phone = try network.node("phone"), server = try network.node("server")
        let http = try await server.run { try HTTPServer(group: group, mptcp: mptcpServer) }
        defer { http.close() }
        guard let monitor = phone.monitor else { throw RoamTestingError("the phone has no path monitor") }
        let bootstrap = try RoamClientBootstrap(group: group, monitor: monitor)
        try await body(Scene(network: network, phone: phone, server: server, http: http, bootstrap: bootstrap))
    }
}
