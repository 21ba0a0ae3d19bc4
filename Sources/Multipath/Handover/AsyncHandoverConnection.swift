import Dispatch
import Netlink
import PathMonitor
import Synchronization

/// ``HandoverConnection`` for async code: connect, receive and send with `await`, handover
/// events as an `AsyncSequence`, and task cancellation that ends a call waiting for data or for
/// a path at once (it throws ``MultipathError/interrupted``).
///
/// The blocking core runs on a serial queue of the connection's own, one call at a time, so the
/// calling task's thread never blocks. The resume hook runs there too, on every connection
/// before any of its reads or writes:
///
/// ```swift
/// let received = Mutex<UInt64>(0)
/// let connection = try AsyncHandoverConnection(racer: ConnectionRacer(namespace: phone), to: [server],
///                                              port: 9000, monitor: monitor) { socket, _ in
///     var offset = received.withLock { $0 }.bigEndian      // "send me everything from here on"
///     guard write(socket.rawValue, &offset, 8) == 8 else { throw ResumeFailed() }
/// }
/// Task {
///     for await event in connection.events { print(event) }  // .connected, .left(interface:reason:)
/// }
/// while true {
///     let bytes = try await connection.receive(upTo: 65536)   // follows the phone from path to path
///     if bytes.isEmpty { break }                              // the peer closed
///     received.withLock { $0 += UInt64(bytes.count) }
/// }
/// ```
public final class AsyncHandoverConnection: Sendable {
    /// The connection's events: each connection made (with how its race went) and each one
    /// given up (with why). Ends when the connection is closed. One consumer.
    public let events: AsyncStream<HandoverConnection.Event>

    private let core: Core
    private let queue = DispatchQueue(label: "roam.handover")
    private let continuation: AsyncStream<HandoverConnection.Event>.Continuation

    /// The blocking connection, touched only on ``queue`` (and ``HandoverConnection/interrupt()``,
    /// which is safe from anywhere).
    private final class Core: @unchecked Sendable {
        let connection: HandoverConnection
        init(_ connection: HandoverConnection) { self.connection = connection }
    }

    /// A connection that follows `monitor` (started, watching the racer's namespace).
    /// Nothing connects until the first ``receive(upTo:)`` or ``send(_:)``.
    ///
    /// - Parameters:
    ///   - racer: Makes each connection (its namespace, policy and transport).
    ///   - addresses: The peer's addresses.
    ///   - port: The peer's port.
    ///   - monitor: The path monitor of the racer's namespace, started.
    ///   - configuration: The handover's settings.
    ///   - resume: Runs on every new connection before data goes over it (see
    ///     <doc:ResumingAnAppsProtocol>).
    /// - Throws: ``MultipathError/system(operation:_:)`` if no wake-up descriptor can be made.
    public init(racer: ConnectionRacer, to addresses: [IPAddress], port: UInt16, monitor: NetworkPathMonitor,
                configuration: HandoverConnection.Configuration = .init(),
                resume: @escaping @Sendable HandoverConnection.ResumeHook) throws(MultipathError) {
        let (events, continuation) = AsyncStream.makeStream(of: HandoverConnection.Event.self, bufferingPolicy: .bufferingNewest(64))
        self.events = events
        self.continuation = continuation
        core = Core(try HandoverConnection(racer: racer, to: addresses, port: port, monitor: monitor, configuration: configuration,
                                           onEvent: { continuation.yield($0) }, resume: resume))
    }

    deinit {
        let core = core
        queue.async { core.connection.close() }
        continuation.finish()
    }

    /// Receives up to `maximum` bytes, waiting for some, across handovers.
    ///
    /// - Parameter maximum: The most bytes to return.
    /// - Returns: The bytes received; empty when the peer closed the connection.
    /// - Throws: A ``MultipathError``: ``MultipathError/Code/interrupted`` when the task is
    ///   cancelled, ``MultipathError/Code/noPermittedPath`` or ``MultipathError/Code/connectFailed``
    ///   when no connection can be made, ``MultipathError/Code/resume`` when the resume hook threw.
    public func receive(upTo maximum: Int) async throws(MultipathError) -> [UInt8] {
        try await run { connection throws(MultipathError) in
            var buffer = [UInt8](repeating: 0, count: max(1, maximum))
            var received: Result<Int, MultipathError> = .success(0)
            buffer.withUnsafeMutableBytes { bytes in
                received = Result { () throws(MultipathError) in try connection.receive(into: bytes) }
            }
            buffer.removeSubrange(try received.get()...)
            return buffer
        }
    }

    /// Sends all of `bytes`, at least once across a handover (see ``HandoverConnection/send(_:)``).
    ///
    /// - Parameter bytes: What to send.
    /// - Throws: A ``MultipathError``, as ``receive(upTo:)`` does.
    public func send(_ bytes: [UInt8]) async throws(MultipathError) {
        try await run { connection throws(MultipathError) in
            var sent: Result<Void, MultipathError> = .success(())
            bytes.withUnsafeBytes { raw in
                sent = Result { () throws(MultipathError) in try connection.send(raw) }
            }
            try sent.get()
        }
    }

    /// Tells the state machine how much media the stream's player holds (see
    /// ``HandoverConnection/reportPlayout(buffered:)``); it takes effect after a call in progress.
    ///
    /// - Parameter buffered: The media the player holds now.
    public func reportPlayout(buffered: Duration) async {
        await run { $0.reportPlayout(buffered: buffered) }
    }

    /// The interface the current connection uses, if connected.
    public var currentInterface: String? {
        get async { await run { $0.currentInterface } }
    }

    /// Every connection's race so far, in order.
    public var connections: [ConnectionMetrics] {
        get async { await run { $0.connections } }
    }

    /// Closes the connection and ends ``events``. A call in progress is interrupted.
    public func close() async {
        core.connection.interrupt()
        await run { $0.close() }
        continuation.finish()
    }

    /// Runs `body` on the queue; cancelling the task interrupts it.
    private func run<T: Sendable>(_ body: @escaping @Sendable (HandoverConnection) throws(MultipathError) -> T) async throws(MultipathError) -> T {
        let core = core
        let queue = queue
        let result: Result<T, MultipathError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Result<T, MultipathError>, Never>) in
                queue.async {
                    done.resume(returning: Result { () throws(MultipathError) in try body(core.connection) })
                }
            }
        } onCancel: {
            core.connection.interrupt()
        }
        return try result.get()
    }

    private func run<T: Sendable>(_ body: @escaping @Sendable (HandoverConnection) -> T) async -> T {
        let core = core
        return await withCheckedContinuation { done in
            queue.async { done.resume(returning: body(core.connection)) }
        }
    }
}
