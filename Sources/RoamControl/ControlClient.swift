import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A blocking client of a run's control API (`roam ctl`), on SwiftNIO's HTTP/1 codec: one
/// request per connection, its answer whole, or an event stream handed over as it arrives.
package enum ControlClient {
    /// Where the API is.
    package enum Address: Sendable {
        /// The run's Unix socket.
        case unix(String)
        /// `127.0.0.1:PORT`, with its token.
        case loopback(port: Int, token: String)
    }

    package struct Response: Sendable {
        package var status: Int
        package var body: [UInt8]
    }

    /// Sends one request and waits for its whole answer (at most `maximumBody` bytes are kept).
    package static func request(_ address: Address, method: String, path: String, body: [UInt8]? = nil,
                                timeoutSeconds: Int64 = 60, maximumBody: Int = 16 << 20) throws -> Response {
        let collected = NIOLockedValueBox<[UInt8]>([])
        let status = try exchange(address, method: HTTPMethod(rawValue: method), path: path, body: body, timeout: .seconds(timeoutSeconds)) { chunk in
            collected.withLockedValue { bytes in
                if bytes.count + chunk.count <= maximumBody { bytes += chunk }
            }
            return true
        }
        return Response(status: status, body: collected.withLockedValue { $0 })
    }

    /// Sends one request and hands each piece of the answer's body to `receive` as it arrives
    /// (an event stream), until the server ends it or `receive` returns false. Returns the status.
    package static func stream(_ address: Address, path: String, receive: @escaping @Sendable ([UInt8]) -> Bool) throws -> Int {
        try exchange(address, method: .GET, path: path, body: nil, timeout: nil, receive: receive)
    }

    private static func exchange(_ address: Address, method: HTTPMethod, path: String, body: [UInt8]?, timeout: TimeAmount?,
                                 receive: @escaping @Sendable ([UInt8]) -> Bool) throws -> Int {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let done = group.next().makePromise(of: Int.self)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(Collector(done: done, receive: receive))
                }
            }
        let channel: Channel
        var headers = HTTPHeaders()
        do {
            switch address {
            case .unix(let path):
                channel = try bootstrap.connect(unixDomainSocketPath: path).wait()
                headers.add(name: "Host", value: "roam")
            case .loopback(let port, let token):
                channel = try bootstrap.connect(host: "127.0.0.1", port: port).wait()
                headers.add(name: "Host", value: "127.0.0.1:\(port)")
                headers.add(name: "Authorization", value: "Bearer \(token)")
            }
        } catch {
            // Nothing will answer it: a promise left unanswered traps in debug builds ("leaking
            // promise"), as `roam monitor --daemon` did when the daemon's socket was not there yet.
            done.fail(error)
            throw error
        }
        headers.add(name: "Connection", value: "close")
        if let body {
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(body.count))
        }
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)), promise: nil)
        if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        channel.closeFuture.whenComplete { _ in done.fail(ChannelError.eof) }
        if let timeout {
            let task = channel.eventLoop.scheduleTask(in: timeout) { done.fail(ChannelError.connectTimeout(timeout)) }
            done.futureResult.whenComplete { _ in task.cancel() }
        }
        defer { channel.close(promise: nil) }
        return try done.futureResult.wait()
    }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPClientResponsePart
        let done: EventLoopPromise<Int>
        let receive: @Sendable ([UInt8]) -> Bool
        var status = 0

        init(done: EventLoopPromise<Int>, receive: @escaping @Sendable ([UInt8]) -> Bool) {
            self.done = done
            self.receive = receive
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                status = Int(head.status.code)
            case .body(var buffer):
                if let bytes = buffer.readBytes(length: buffer.readableBytes), !receive(bytes) {
                    done.succeed(status)
                    context.close(promise: nil)
                }
            case .end:
                done.succeed(status)
                context.close(promise: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            done.fail(error)
            context.close(promise: nil)
        }
    }
}
