import Glibc
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// One long TCP transfer from `from` to `to`: the client asks for the bytes still missing, the
/// server sends them as fast as the link takes them. With no progress for the workload's
/// `timeout`, or when the connection breaks, the client connects again and asks for the rest.
final class BulkWorkload: WorkloadDriver {
    let context: WorkloadContext
    private let size: Int64?
    private let client: ClientConnection
    private let server: WorkloadServer
    private let completion = Mutex<Duration?>(nil)

    init(context: WorkloadContext, size: Int64?) {
        self.context = context
        self.size = size
        client = ClientConnection(context: context)
        let stop = context.stop
        server = WorkloadServer(context: context) { socket, claim in
            var hello = [UInt8](repeating: 0, count: 8)
            guard hello.withUnsafeMutableBytes({ socket.receiveAll(into: $0, stop: stop, deadline: nil) }) == .done else { return }
            claim()
            guard socket.sendPayload(Wire.decodeCount(hello[...]), stop: stop) == .done else { return }
            socket.shutdown()
        }
    }

    func prepare() throws(SimulatorError) { try server.start() }

    func run() {
        while !context.stop.isSignalled {
            guard let socket = client.connect() else { break }
            let remaining = size.map { UInt64(max(0, $0 - client.bytesReceived)) } ?? UInt64.max
            let hello = Wire.encode(remaining)
            guard hello.withUnsafeBytes({ socket.send($0, stop: context.stop, deadline: .now + context.workload.timeout) }) == .done else {
                client.drop(socket, reason: "could not send the request")
                continue
            }
            guard client.pump(socket) == .closed else { continue }
            if let size, client.bytesReceived >= size {
                completion.withLock { $0 = context.log.elapsed - context.workload.start }
                context.log.record(.complete(workload: context.workload.name, bytes: client.bytesReceived))
                client.close()
                return
            }
            client.drop(socket, reason: "closed by the server")
        }
        client.close()
    }

    func sample() -> WorkloadSample {
        WorkloadSample(bytesReceived: client.bytesReceived, rtt: client.rtt)
    }

    func result(end: Duration) -> WorkloadResult {
        var result = client.result(end: end)
        let completionTime = completion.withLock { $0 }
        result.completionTime = completionTime
        if let completionTime { result.activeTime = completionTime }
        if let size {
            result.completed = completionTime != nil
            if !result.completed { result.incompleteReason = "\(result.bytesReceived) of \(size) bytes arrived" }
        } else {
            // An open-ended transfer completes when it was still moving data at its end.
            if let last = client.lastProgress, end - last <= context.workload.timeout {
                result.completed = true
            } else {
                result.incompleteReason = client.lastProgress.map { "no data in the last \((end - $0).roamDescription)" } ?? "no byte arrived"
            }
        }
        return result
    }

    func finish() { server.finish() }
}
