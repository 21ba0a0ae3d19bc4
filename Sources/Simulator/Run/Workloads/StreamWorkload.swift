import Glibc
import Multipath
import PathMonitor
import RoamReport
import RoamSystem
import ScenarioModel
import Synchronization

/// A constant-bitrate stream into a playout buffer, as a video player does it. The server is a
/// live source with a window behind it: at time t since the start it has `buffer` worth of media
/// plus t × bitrate, and sends what the client has not got yet, as fast as the link takes it
/// (so a client that reconnects after an outage catches up). The client plays once `buffer` of
/// media is buffered; when the playhead reaches the end of what arrived, playback stalls until
/// `buffer` is buffered again. Stalls are counted with their start and length; the time before
/// the first frame is the startup delay, not a stall.
final class StreamWorkload: WorkloadDriver {
    let context: WorkloadContext
    private let client: ClientConnection
    private let server: WorkloadServer
    private let player: Mutex<Playout>

    /// The playout buffer: a state machine advanced with the time and the bytes that arrived.
    /// A stall that ended, as ``Playout/stalls`` keeps it.
    struct EndedStall {
        var start: Duration
        var duration: Duration
    }

    struct Playout {
        enum Phase: Sendable, Equatable {
            case starting
            /// Playing since `since`, from media position `from` (seconds).
            case playing(since: MonotonicInstant, from: Double)
            case stalled(since: MonotonicInstant)
        }
        var phase = Phase.starting
        /// Media played up to the last update (seconds).
        var position = 0.0
        var startup: Duration?
        /// The stalls that ended, spilled out of memory (a stream that lasts a day on a link that
        /// flaps stalls thousands of times).
        let stalls: RecordSpill<EndedStall>
        let bytesPerSecond: Double
        let buffer: Double
        let start: MonotonicInstant
        let origin: MonotonicInstant

        init(bytesPerSecond: Double, buffer: Duration, start: MonotonicInstant, origin: MonotonicInstant,
             stalls: RecordSpill<EndedStall> = RecordSpill(directory: nil)) {
            self.stalls = stalls
            self.bytesPerSecond = bytesPerSecond
            self.buffer = Double(buffer.nanoseconds) / 1e9
            self.start = start
            self.origin = origin
        }

        /// Media seconds in `bytes`.
        func media(_ bytes: Int64) -> Double { Double(bytes) / bytesPerSecond }

        /// Advances to `now` with `bytes` received in all; returns a stall that just ended.
        mutating func update(now: MonotonicInstant, bytes: Int64) -> StreamStatistics.Stall? {
            let received = media(bytes)
            switch phase {
            case .starting:
                if received >= buffer {
                    phase = .playing(since: now, from: 0)
                    startup = now - start
                }
            case .playing(let since, let from):
                let played = from + Double((now - since).nanoseconds) / 1e9
                if played >= received {
                    // The playhead reached the end of the data when the last of it played.
                    let stalledAt = since + .nanoseconds(Int64((received - from) * 1e9))
                    position = received
                    phase = .stalled(since: stalledAt)
                } else {
                    position = played
                }
            case .stalled(let since):
                if received - position >= buffer {
                    phase = .playing(since: now, from: position)
                    let stall = StreamStatistics.Stall(start: since - origin, duration: now - since, ongoing: false)
                    stalls.append(EndedStall(start: stall.start, duration: stall.duration))
                    return stall
                }
            }
            return nil
        }

        /// When the playhead reaches the end of `bytes` if nothing more arrives (nil when not playing).
        func runsDry(bytes: Int64) -> MonotonicInstant? {
            guard case .playing(let since, let from) = phase else { return nil }
            return since + .nanoseconds(Int64(max(0, media(bytes) - from) * 1e9))
        }

        func buffered(now: MonotonicInstant, bytes: Int64) -> Double {
            if case .playing(let since, let from) = phase {
                return max(0, media(bytes) - (from + Double((now - since).nanoseconds) / 1e9))
            }
            return max(0, media(bytes) - position)
        }

        /// The stalls, counting one still going at `end` (and a stream that never started).
        func finalStalls(end: MonotonicInstant) -> [StreamStatistics.Stall] {
            let stalls = stalls.all().map { StreamStatistics.Stall(start: $0.start, duration: $0.duration, ongoing: false) }
            switch phase {
            case .stalled(let since):
                return stalls + [StreamStatistics.Stall(start: since - origin, duration: end - since, ongoing: true)]
            case .starting:
                return stalls + [StreamStatistics.Stall(start: start - origin, duration: end - start, ongoing: true)]
            case .playing:
                return stalls
            }
        }
    }

    init(context: WorkloadContext, bitrate: Rate, buffer: Duration) {
        self.context = context
        let bytesPerSecond = bitrate.bitsPerSecond / 8
        client = ClientConnection(context: context)
        player = Mutex(Playout(bytesPerSecond: bytesPerSecond, buffer: buffer, start: context.startAt, origin: context.log.start,
                                stalls: context.log.spill(of: EndedStall.self)))
        let stop = context.stop
        let start = context.startAt
        let window = Double(buffer.nanoseconds) / 1e9 * bytesPerSecond
        server = WorkloadServer(context: context) { socket, claim in
            var hello = [UInt8](repeating: 0, count: 8)
            guard hello.withUnsafeMutableBytes({ socket.receiveAll(into: $0, stop: stop, deadline: nil) }) == .done else { return }
            claim()
            var offset = Wire.decodeCount(hello[...])
            let tick = Duration.milliseconds(10)
            var next = MonotonicInstant.now
            while true {
                let available = Int64(window + Double((MonotonicInstant.now - start).nanoseconds) / 1e9 * bytesPerSecond)
                if offset < available {
                    guard socket.sendPayload(available - offset, stop: stop) == .done else { return }
                    offset = available
                }
                next = max(next + tick, MonotonicInstant.now)
                guard stop.wait(until: next) else { return }
            }
        }
    }

    /// How often the player reports its buffer in multipath modes (data arriving reports it too).
    static let playerTick = Duration.milliseconds(50)

    func prepare() throws(SimulatorError) { try server.start() }

    private func update() {
        let now = MonotonicInstant.now
        let bytes = client.bytesReceived
        let (ended, buffered, playing) = player.withLock { player in
            let ended = player.update(now: now, bytes: bytes)
            let playing = if case .playing = player.phase { true } else { false }
            return (ended, player.buffered(now: now, bytes: bytes), playing)
        }
        // In multipath modes the handover state machine judges whether the path still serves the
        // stream (StreamPathJudge), and moves the flow off one too poor before playback stalls.
        if playing { client.playout(buffered: .nanoseconds(Int64(buffered * 1e9))) }
        if let ended {
            context.log.record(.stall(workload: context.workload.name, start: ended.start, duration: ended.duration))
        }
    }

    func run() {
        while !context.stop.isSignalled {
            guard let socket = client.connect() else { break }
            update()
            let hello = Wire.encode(UInt64(client.bytesReceived))
            guard hello.withUnsafeBytes({ socket.send($0, stop: context.stop, deadline: .now + context.workload.timeout) }) == .done else {
                client.drop(socket, reason: "could not send the request")
                continue
            }
            // Wake when data arrives, and when the playhead would run dry, to note the stall; in
            // multipath modes also on the player's tick, for the state machine to see the buffer.
            let tick = client.isMultipath ? Self.playerTick : nil
            let outcome = client.pump(socket, wakeBy: {
                let dry = player.withLock { $0.runsDry(bytes: client.bytesReceived) }
                guard let tick else { return dry }
                return min(dry ?? .now + tick, .now + tick)
            }, onWake: update)
            if outcome == .closed { client.drop(socket, reason: "closed by the server") }
        }
        update()
        client.close()
    }

    func sample() -> WorkloadSample {
        let now = MonotonicInstant.now
        let bytes = client.bytesReceived
        let (buffered, stalled) = player.withLock { player -> (Double, Bool) in
            var copy = player
            _ = copy.update(now: now, bytes: bytes)
            if case .stalled = copy.phase { return (copy.buffered(now: now, bytes: bytes), true) }
            return (copy.buffered(now: now, bytes: bytes), false)
        }
        return WorkloadSample(bytesReceived: bytes, rtt: client.rtt, buffered: .nanoseconds(Int64(buffered * 1e9)), isStalled: stalled)
    }

    func result(end: Duration) -> WorkloadResult {
        var result = client.result(end: end)
        let endInstant = context.log.start + end
        let (startup, stalls, phase) = player.withLock { player in
            var copy = player
            _ = copy.update(now: endInstant, bytes: client.bytesReceived)
            return (copy.startup, copy.finalStalls(end: endInstant), copy.phase)
        }
        result.stream = StreamStatistics(startupDelay: startup, stalls: stalls)
        switch phase {
        case .playing: result.completed = true
        case .stalled: result.incompleteReason = "stalled when it ended"
        case .starting: result.incompleteReason = "never started playing"
        }
        return result
    }

    func finish() { server.finish() }
}
