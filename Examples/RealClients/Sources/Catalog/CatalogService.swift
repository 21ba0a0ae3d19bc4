import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix

/// The service: `GET /bytes/N` answers N bytes, and says in `x-client-address` which address
/// the request came from (so a test can tell which of the phone's interfaces carried it).
public enum CatalogService {
    public struct Context: RequestContext, RemoteAddressRequestContext {
        public var coreContext: CoreRequestContextStorage
        public let remoteAddress: SocketAddress?

        public init(source: ApplicationRequestContextSource) {
            coreContext = .init(source: source)
            remoteAddress = source.channel.remoteAddress
        }
    }

    public static func router() -> Router<Context> {
        let router = Router(context: Context.self)
        router.get("bytes/:size") { _, context -> Response in
            let size = min(context.parameters.get("size", as: Int.self) ?? 0, 16 << 20)
            var headers = HTTPFields()
            headers[HTTPField.Name("x-client-address")!] = context.remoteAddress?.ipAddress ?? "unknown"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: size)))
        }
        return router
    }

    /// The application, listening on `host`:`port` with the event loops of `group` (whose
    /// threads must live in the node's namespace: create it in the node's `run`).
    public static func application(host: String, port: Int, group: any EventLoopGroup,
                                   onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }) -> some ApplicationProtocol {
        Application(router: router(), configuration: .init(address: .hostname(host, port: port)),
                    onServerRunning: onServerRunning, eventLoopGroupProvider: .shared(group))
    }
}
