import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// The app's client of the service, on AsyncHTTPClient.
public struct CatalogClient: Sendable {
    public let http: HTTPClient
    public let base: String

    public struct Reply: Sendable {
        public var status: HTTPResponseStatus
        public var bytes: Int
        /// The address the service saw the request come from.
        public var clientAddress: String?
    }

    public init(http: HTTPClient, base: String) {
        self.http = http
        self.base = base
    }

    /// `GET /bytes/size`, from `localAddress` when given (AsyncHTTPClient binds the connection to it).
    public func fetch(_ size: Int, from localAddress: String? = nil, timeout: TimeAmount = .seconds(5)) async throws -> Reply {
        var request = HTTPClientRequest(url: "\(base)/bytes/\(size)")
        request.localAddress = localAddress
        let response = try await http.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 32 << 20)
        return Reply(status: response.status, bytes: body.readableBytes, clientAddress: response.headers.first(name: "x-client-address"))
    }
}
