import NIOCore

extension ChannelPipeline.SynchronousOperations {
    /// The channel's path events as an async sequence, for code that reads the channel through
    /// `NIOAsyncChannel` (whose inbound stream carries reads only): adds a handler at the end
    /// of the pipeline that passes ``RoamNetworkEvents`` on to the sequence (and along the
    /// pipeline). The sequence ends when the channel closes; it keeps the newest 256 events
    /// for a reader that falls behind.
    ///
    /// Call it in the channel initializer, before wrapping the channel:
    ///
    /// ```swift
    /// let (client, events) = try await bootstrap.connect(host: "api.example.com", port: 80) { channel in
    ///     channel.eventLoop.makeCompletedFuture {
    ///         let events = try channel.pipeline.syncOperations.roamPathEvents()
    ///         return (try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel), events)
    ///     }
    /// }
    /// for await event in events {
    ///     if case .betterPathAvailable = event { reconnect() }
    /// }
    /// ```
    public func roamPathEvents() throws -> AsyncStream<RoamPathEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: RoamPathEvent.self, bufferingPolicy: .bufferingNewest(256))
        try addHandler(RoamPathEventsHandler(continuation))
        return stream
    }
}

/// Passes the channel's ``RoamNetworkEvents`` to an `AsyncStream`.
final class RoamPathEventsHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let continuation: AsyncStream<RoamPathEvent>.Continuation

    init(_ continuation: AsyncStream<RoamPathEvent>.Continuation) {
        self.continuation = continuation
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let pathEvent = RoamPathEvent(event) { continuation.yield(pathEvent) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        continuation.finish()
    }
}
