import Glibc
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// Request/response traffic on a kept-alive connection, as an app polling an API: every
/// `interval` the client sends a request of `requestSize` bytes and the server answers with
/// `responseSize` bytes. Each request's time to first byte and completion time are measured
/// from the moment it was issued (a connection it must make first counts, as it does for an
/// app). A request without its full response within `timeout` fails, and the connection is
/// dropped; the next request connects again.
final class RequestsWorkload: WorkloadDriver {
    let context: WorkloadContext
    private let requestSize: Int64
    private let responseSize: Int64
    private let interval: Duration
    private let count: Int?
    private let client: ClientConnection
    private let server: WorkloadServer
    private let statistics = Mutex(RequestStatistics())

    init(context: WorkloadContext, requestSize: Int64, responseSize: Int64, interval: Duration, count: Int?) {
        self.context = context
        self.requestSize = max(16, requestSize)
        self.responseSize = responseSize
        self.interval = interval
        self.count = count
        client = ClientConnection(context: context)
        let stop = context.stop
        server = WorkloadServer(context: context) { socket, claim in
            var header = [UInt8](repeating: 0, count: 16)
            var body = [UInt8](repeating: 0, count: 64 * 1024)
            var claimed = false
            while header.withUnsafeMutableBytes({ socket.receiveAll(into: $0, stop: stop, deadline: nil) }) == .done {
                if !claimed {
                    claim()
                    claimed = true
                }
                var rest = Wire.decodeCount(header[8...]) - 16
                while rest > 0 {
                    let chunk = Int(min(Int64(body.count), rest))
                    let outcome = body.withUnsafeMutableBytes { socket.receiveAll(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<chunk]), stop: stop, deadline: nil) }
                    guard outcome == .done else { return }
                    rest -= Int64(chunk)
                }
                guard socket.sendPayload(Wire.decodeCount(header[..<8]), stop: stop) == .done else { return }
            }
        }
    }

    func prepare() throws(SimulatorError) { try server.start() }

    func run() {
        var request = Wire.encode(UInt64(responseSize), UInt64(requestSize))
        request += [UInt8](repeating: 0x72, count: Int(requestSize) - 16)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var socket: TCPSocket?
        var number = 0
        while count.map({ number < $0 }) ?? true {
            // Requests go out on the interval's grid; one that ran late starts the next at once.
            guard idle(until: context.startAt + interval * number, socket: &socket) else { break }
            number += 1
            let issued = MonotonicInstant.now
            let deadline = issued + context.workload.timeout
            statistics.withLock { $0.sent += 1 }
            func fail(_ reason: String) {
                if context.stop.isSignalled {
                    statistics.withLock { $0.unfinished += 1 }
                    return
                }
                statistics.withLock { $0.failed += 1 }
                var event = RunEvent.Request(workload: context.workload.name, number: number, outcome: .failed(reason: reason))
                event.lookup = lookup
                context.log.record(.request(event))
                if let current = socket { client.drop(current, reason: reason) }
                socket = nil
            }
            var firstByte: Duration?
            var lookup: Duration?
            var outcome = TCPSocket.Outcome.done
            // In multipath modes a request whose path goes silent for the stall threshold is
            // sent again over another path, within the same timeout (Wi-Fi Assist).
            attempt: while true {
                if let current = socket, let reason = client.check(awaitingDataSince: nil) {
                    client.drop(current, reason: reason.description)
                    socket = nil
                }
                if socket == nil {
                    // Connecting is part of the request's time, bounded by its timeout.
                    socket = client.connect(until: deadline)
                    lookup = client.takeLookupDuration() ?? lookup
                    guard socket != nil else {
                        outcome = context.stop.isSignalled ? .stopped : .timedOut
                        break attempt
                    }
                }
                guard let connection = socket else { break attempt }
                let sent = request.withUnsafeBytes { connection.send($0, stop: context.stop, deadline: deadline) }
                guard sent == .done else {
                    outcome = sent
                    break attempt
                }
                var received: Int64 = 0
                let awaiting = context.log.elapsed
                outcome = .done
                receiving: while received < responseSize {
                    let wanted = Int(min(Int64(buffer.count), responseSize - received))
                    let stallAt = client.isMultipath ? min(deadline, client.stallDeadline(awaitingDataSince: awaiting) ?? deadline) : deadline
                    let (got, result) = buffer.withUnsafeMutableBytes {
                        connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted]), stop: context.stop, deadline: stallAt,
                                           wakingOn: client.wakeDescriptors)
                    }
                    if result == .done {
                        if firstByte == nil { firstByte = MonotonicInstant.now - issued }
                        received += Int64(got)
                        client.received(got)
                    }
                    // In multipath modes a request whose path goes silent for the stall
                    // threshold, or leaves the path, is sent again over another (Wi-Fi Assist).
                    if client.isMultipath, result == .done || result == .timedOut, MonotonicInstant.now < deadline,
                       let reason = client.check(awaitingDataSince: awaiting) {
                        client.drop(connection, reason: "request \(number): \(reason)")
                        socket = nil
                        firstByte = nil
                        continue attempt
                    }
                    switch result {
                    case .done: continue receiving
                    case .timedOut where MonotonicInstant.now < deadline: continue receiving
                    default:
                        outcome = result
                        break receiving
                    }
                }
                break attempt
            }
            guard outcome == .done else {
                switch outcome {
                case .timedOut:
                    if socket == nil && firstByte == nil {
                        fail("no connection and answer within \(context.workload.timeout.roamDescription)" + (client.lastConnectFailure.map { " (\($0))" } ?? ""))
                    } else {
                        fail("no full response within \(context.workload.timeout.roamDescription)")
                    }
                case .stopped: fail("stopped")
                default: fail(outcome.description)
                }
                continue
            }
            let completion = MonotonicInstant.now - issued
            let ttfb = firstByte ?? completion
            statistics.withLock { statistics in
                statistics.succeeded += 1
                statistics.timeToFirstByte.record(ttfb)
                statistics.completion.record(completion)
            }
            var event = RunEvent.Request(workload: context.workload.name, number: number, outcome: .completed(timeToFirstByte: ttfb, completion: completion))
            event.lookup = lookup
            context.log.record(.request(event))
        }
        client.close()
    }

    /// Waits for the next request's time. In multipath modes the state machine keeps watching
    /// meanwhile (path updates, its probes): a move it asks for drops the idle connection, and
    /// the next request connects over the new path. False when stopped.
    private func idle(until due: MonotonicInstant, socket: inout TCPSocket?) -> Bool {
        while true {
            let wake = client.isMultipath ? min(due, client.stallDeadline(awaitingDataSince: nil) ?? due) : due
            guard context.stop.wait(until: wake, wakingOn: client.wakeDescriptors) else { return false }
            if let current = socket, let reason = client.check(awaitingDataSince: nil) {
                client.drop(current, reason: reason.description)
                socket = nil
            }
            if MonotonicInstant.now >= due { return true }
        }
    }

    func sample() -> WorkloadSample {
        WorkloadSample(bytesReceived: client.bytesReceived, rtt: client.rtt)
    }

    func result(end: Duration) -> WorkloadResult {
        var result = client.result(end: end)
        let statistics = statistics.withLock { $0 }
        result.requests = statistics
        result.completed = statistics.failed == 0 && statistics.succeeded > 0
        if statistics.failed > 0 {
            result.incompleteReason = "\(statistics.failed) of \(statistics.sent) requests failed"
        } else if statistics.succeeded == 0 {
            result.incompleteReason = "no request completed"
        }
        return result
    }

    func finish() { server.finish() }
}
