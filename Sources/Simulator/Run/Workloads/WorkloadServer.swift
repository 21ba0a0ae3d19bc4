import Glibc
import Multipath
import Netlink
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// A server: accepts on the `from` node's service address and serves each connection on a
/// thread of its own until the peer goes or the workload stops.
///
/// Each workload has one client, so a connection that has said who it is (`claim`, after the
/// hello or the first request) supersedes every older one: those belong to a client that moved
/// or gave up, maybe over a link that is now dead, where no FIN or reset would ever arrive.
/// They are shut down and reset at once. Every connection is closed, and its thread joined, as
/// soon as its handler returns, so that a long run holds only the connections in use.
final class WorkloadServer: Sendable {
    private struct State {
        var listener: TCPSocket?
        var acceptor: PinnedThread?
        var next = 0
        var live: [Int: TCPSocket] = [:]
        var superseded: Set<Int> = []
        /// Handler threads still running, and those that have returned, to join.
        var running: [Int: PinnedThread] = [:]
        var ended: Set<Int> = []
        var toJoin: [PinnedThread] = []
    }
    private let context: WorkloadContext
    private let serve: @Sendable (TCPSocket, _ claim: @Sendable () -> Void) -> Void
    private let state = Mutex(State())

    init(context: WorkloadContext, serve: @escaping @Sendable (TCPSocket, _ claim: @Sendable () -> Void) -> Void) {
        self.context = context
        self.serve = serve
    }

    /// Connections open now (for tests and the soak benchmark).
    var liveConnections: Int { state.withLock { $0.live.count } }

    func start() throws(SimulatorError) {
        // For both families, one dual-stack socket on the node's every address.
        let socket = try TCPSocket.listen(in: context.serverNamespace, address: context.serverAddresses.count > 1 ? IPAddress("::")! : context.serverAddress,
                                          port: context.port,
                                          mptcp: context.serverAcceptsMPTCP)
        state.withLock { $0.listener = socket }
        do throws(NetlinkError) {
            let thread = try PinnedThread(name: "roam-server") { [self] in
                while case .success(let connection) = socket.accept(stop: context.stop) {
                    connection.reapWhenDead(patience: context.workload.timeout)
                    accepted(connection)
                    joinEnded()
                }
            }
            state.withLock { $0.acceptor = thread }
        } catch {
            throw SimulatorError("start the server of workload '\(context.workload.name)'", error)
        }
    }

    private func accepted(_ connection: TCPSocket) {
        let id = state.withLock { state -> Int in
            state.next += 1
            state.live[state.next] = connection
            return state.next
        }
        let handler = try? PinnedThread(name: "roam-serve") { [self] in
            serve(connection) { [self] in claim(id) }
            handlerEnded(id)
        }
        state.withLock { state in
            guard let handler else {
                state.live[id] = nil
                return
            }
            // The handler may have ended already.
            if state.ended.remove(id) != nil { state.toJoin.append(handler) } else { state.running[id] = handler }
        }
        if handler == nil { connection.abort() }
    }

    /// Connection `id` has said it is the client's current one: older ones are shut down (their
    /// handlers wake, return, and reset them).
    private func claim(_ id: Int) {
        let older = state.withLock { state -> [TCPSocket] in
            let ids = state.live.keys.filter { $0 < id && !state.superseded.contains($0) }
            state.superseded.formUnion(ids)
            return ids.compactMap { state.live[$0] }
        }
        for socket in older { socket.shutdown() }
    }

    private func handlerEnded(_ id: Int) {
        let (socket, superseded) = state.withLock { state -> (TCPSocket?, Bool) in
            if let thread = state.running.removeValue(forKey: id) { state.toJoin.append(thread) } else { state.ended.insert(id) }
            return (state.live.removeValue(forKey: id), state.superseded.remove(id) != nil)
        }
        // A superseded connection may have data queued for a dead link: reset it. Others end
        // with a FIN after what they sent.
        if superseded { socket?.abort() } else { socket?.close() }
    }

    private func joinEnded() {
        for thread in state.withLock({ state -> [PinnedThread] in defer { state.toJoin = [] }; return state.toJoin }) { thread.join() }
    }

    /// Waits for every server thread; the workload's stop signal must have fired.
    func finish() {
        for connection in state.withLock({ Array($0.live.values) }) { connection.shutdown() }
        if let acceptor = state.withLock({ state -> PinnedThread? in defer { state.acceptor = nil }; return state.acceptor }) { acceptor.join() }
        while let thread = state.withLock({ state -> PinnedThread? in state.running.popFirst()?.value ?? state.toJoin.popLast() }) {
            thread.join()
        }
        joinEnded()
        state.withLock { state in
            state.live = [:]
            state.listener = nil
        }
    }
}

/// Big-endian 64-bit integers on the wire.
enum Wire {
    static func encode(_ values: UInt64...) -> [UInt8] {
        values.flatMap { value in (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) } }
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A byte count or offset a peer sent: anything can connect to a workload's port (a user's
    /// command, a scanner), so a value past `Int64.max` is clamped rather than trapping.
    static func decodeCount(_ bytes: ArraySlice<UInt8>) -> Int64 {
        Int64(clamping: decode(bytes))
    }

    /// A buffer of payload bytes to send from.
    static let payload = [UInt8](repeating: 0x5a, count: 64 * 1024)
}

extension TCPSocket {
    /// Sends `count` payload bytes, or says why not.
    func sendPayload(_ count: Int64, stop: EventSignal) -> Outcome {
        var remaining = count
        while remaining > 0 {
            let chunk = Int(min(Int64(Wire.payload.count), remaining))
            let outcome = Wire.payload.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[..<chunk]), stop: stop, deadline: nil) }
            guard outcome == .done else { return outcome }
            remaining -= Int64(chunk)
        }
        return .done
    }
}
