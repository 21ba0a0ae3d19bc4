import AsyncHTTPClient
import Catalog
import Hummingbird
import NIOCore
import NIOPosix
import RoamTesting

/// The service running in the server node, on event loops whose threads live there.
struct RunningService: Sendable {
    let task: Task<Void, any Error>
    let group: MultiThreadedEventLoopGroup
    let base: String

    static func start(in server: NodeHandle, port: Int = 8080) async throws -> RunningService {
        let group = try await server.run { MultiThreadedEventLoopGroup(numberOfThreads: 1) }
        let (running, started) = AsyncStream.makeStream(of: Void.self)
        let app = CatalogService.application(host: server.address, port: port, group: group) { _ in started.yield() }
        // On the node's thread: Hummingbird makes its listening socket on the thread that binds.
        let task = Task {
            defer { started.finish() }
            try await server.run { try await app.runService(gracefulShutdownSignals: []) }
        }
        var iterator = running.makeAsyncIterator()
        guard await iterator.next() != nil else {
            // It ended before it ran: its error says why.
            try await task.value
            throw RoamTestingError("the service stopped before it started")
        }
        return RunningService(task: task, group: group, base: "http://\(server.address):\(port)")
    }

    func stop() async throws {
        task.cancel()
        _ = await task.result
        try await group.shutdownGracefully()
    }
}

/// AsyncHTTPClient in the phone node: its event loops' threads live there, so its connections do.
struct PhoneClient: Sendable {
    let http: HTTPClient
    let group: MultiThreadedEventLoopGroup
    let catalog: CatalogClient

    static func start(in phone: NodeHandle, base: String, configuration: HTTPClient.Configuration) async throws -> PhoneClient {
        let group = try await phone.run { MultiThreadedEventLoopGroup(numberOfThreads: 1) }
        let http = HTTPClient(eventLoopGroup: group, configuration: configuration)
        return PhoneClient(http: http, group: group, catalog: CatalogClient(http: http, base: base))
    }

    func stop() async throws {
        try await http.shutdown()
        try await group.shutdownGracefully()
    }
}

/// Runs `body` on the phone's thread with the service and the client, and stops both whatever
/// `body` did. On the phone's thread: AsyncHTTPClient makes a new connection's socket on the
/// thread whose request needs it, so a request made from elsewhere would leave from elsewhere.
func withServiceAndClient<T: Sendable>(_ network: TestNetwork, configuration: HTTPClient.Configuration,
                                       _ body: @escaping @Sendable (NodeHandle, RunningService, PhoneClient) async throws -> T) async throws -> T {
    let phone = try network.node("phone"), server = try network.node("server")
    let service = try await RunningService.start(in: server)
    let client: PhoneClient
    do {
        client = try await PhoneClient.start(in: phone, base: service.base, configuration: configuration)
    } catch {
        try await service.stop()
        throw error
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await phone.run { try await body(phone, service, client) })
    } catch {
        result = .failure(error)
    }
    try await client.stop()
    try await service.stop()
    return try result.get()
}

/// One request's outcome.
struct Outcome: Sendable, CustomStringConvertible {
    var at: Duration
    var took: Duration
    var reply: CatalogClient.Reply?
    var error: String?

    var succeeded: Bool { reply?.status == .ok }
    var description: String {
        let when = "\(at.components.seconds).\(at.components.attoseconds / 100_000_000_000_000_000)s"
        if let reply { return "\(when): \(reply.status.code) from \(reply.clientAddress ?? "?") in \(took)" }
        return "\(when): \(error ?? "?") after \(took)"
    }
}

extension CatalogClient {
    /// Fetches and records the outcome, never throwing.
    func outcome(_ size: Int, from localAddress: String? = nil, network: TestNetwork) async -> Outcome {
        let start = network.elapsed
        do {
            let reply = try await fetch(size, from: localAddress)
            return Outcome(at: start, took: network.elapsed - start, reply: reply)
        } catch {
            return Outcome(at: start, took: network.elapsed - start, error: "\(error)")
        }
    }
}

/// AsyncHTTPClient's configuration in these tests: 2 s to connect, 2 s for each read.
func clientConfiguration() -> HTTPClient.Configuration {
    var configuration = HTTPClient.Configuration()
    configuration.timeout = .init(connect: .seconds(2), read: .seconds(2))
    return configuration
}
